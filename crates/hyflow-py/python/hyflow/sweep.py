"""Parameter sweeps: the cross product of a grid of options (or an explicit list of configs),
each run once, into one DataFrame with a row per run.

Runs are deterministic, so a sweep gives the same table on any backend and any number of
workers. ``backend="local"`` runs them on threads of this process (the engine releases the
GIL, so each thread has a core); ``backend="ray"`` submits each run as a Ray task, to a
running cluster (``address=``) or a local one, with input files read from a shared path or,
with ``ship_files=True``, sent through Ray's object store.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

import pandas as pd

from . import _hyflow, _options

#: The commands a sweep can run, and the options whose values are input files.
COMMANDS = ("replay", "sim", "topk")
_FILE_OPTIONS = ("flows", "trace", "updates", "costs")
#: The summary key of figures that depend on the host running the sweep (wall-clock
#: timings), left out so that tables are comparable.
_WALL_CLOCK_KEY = _hyflow.REPLAY_WALL_CLOCK_KEY


def configs(grid: dict | None = None, runs: list[dict] | None = None, base: dict | None = None) -> list[dict]:
    """The configs a sweep runs: every combination of ``grid``'s values (keys in the order
    given, the last varying fastest), or ``runs`` as given, each over ``base``."""
    if (grid is None) == (runs is None):
        raise TypeError("sweep(): give grid= (values to combine) or runs= (a list of configs), not both")
    base = dict(base or {})
    if runs is not None:
        return [{**base, **r} for r in runs]
    for key, values in grid.items():
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise TypeError(f"sweep(): grid['{key}'] must be a list of values, not {values!r}")
    keys = list(grid)
    return [{**base, **dict(zip(keys, combo))} for combo in itertools.product(*(list(grid[k]) for k in keys))]


def _flatten(prefix: str, value, out: dict) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else k, v, out)
    else:
        out[prefix] = value


def run_one(command: str, config: dict) -> dict:
    """One run's row: ``config.<option>`` for every option of the command (the given value or
    the CLI's default; ``None`` where the engine picks by context), then every summary figure
    under its ``--json`` key (nested keys joined by ``.``)."""
    import hyflow

    if command not in COMMANDS:
        raise ValueError(f"sweep(): command must be one of {', '.join(COMMANDS)}, not {command!r}")
    # The sweep reports its own progress, run by run; a run's own bar would only clutter it.
    result = getattr(hyflow, command)(progress=False, **config)
    summary = result.summary
    row = {}
    for name, opt in _options.options(command).items():
        if name in _options.CLI_OUTPUTS.get(command, {}) or name == "plot":
            continue
        value = config.get(name, opt.typed_default())
        row[f"config.{name}"] = os.fspath(value) if isinstance(value, os.PathLike) else value
    figures: dict = {}
    _flatten("", {k: v for k, v in summary.items() if k != _WALL_CLOCK_KEY}, figures)
    row.update(figures)
    if command == "topk":
        row.update(_topk_accuracy(row))
    return row


def _topk_accuracy(row: dict) -> dict:
    """A top-k run's precision and average relative error against the exact top-k of the
    same capture (its ground truth, ``hyflow eval topk`` with the run's settings)."""
    import hyflow

    settings = {name: row[f"config.{name}"] for name in ("trace", "strict", "window", "block", "sample", "key", "seed", "memory", "k")}
    settings = {k: v for k, v in settings.items() if v is not None}
    (accuracy,) = hyflow.eval_topk(algos=row["config.algo"], progress=False, **settings).to_dict("records")
    return {"precision": accuracy["precision"], "are": accuracy["are"]}


class _Progress:
    """``sweep: 3/8 runs, 12.5 s`` on standard error as runs complete: one line redrawn on a
    terminal, a line per tenth of the runs in a log."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.done, self.enabled, self.start = total, 0, enabled, time.monotonic()
        self.terminal = enabled and sys.stderr.isatty()
        self.shown = 0

    def step(self) -> None:
        self.done += 1
        if not self.enabled:
            return
        line = f"sweep: {self.done}/{self.total} runs, {time.monotonic() - self.start:.1f} s"
        if self.terminal:
            sys.stderr.write(f"\r{line}" + ("\n" if self.done == self.total else ""))
        elif self.done * 10 // self.total > self.shown or self.done == self.total:
            self.shown = self.done * 10 // self.total
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _failed(index: int, config: dict, error: Exception) -> Exception:
    """A run's error, naming the run: the message of the engine's error, then which config."""
    from ._hyflow import HyflowError

    kind = type(error) if isinstance(error, (HyflowError, TypeError, ValueError)) else HyflowError
    return kind(f"{error} (sweep run {index}: {config})")


def _local(command: str, todo: list[dict], workers: int, progress: _Progress) -> list[dict]:
    rows: list[dict | None] = [None] * len(todo)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(run_one, command, c): i for i, c in enumerate(todo)}
        for future in as_completed(futures):
            i = futures[future]
            try:
                rows[i] = future.result()
            except Exception as e:
                for f in futures:
                    f.cancel()
                raise _failed(i, todo[i], e) from e
            progress.step()
    return rows  # type: ignore[return-value]


def _ship(config: dict, shipped: dict) -> dict:
    """The input files ``config`` names, put in Ray's object store once per path (``shipped``
    remembers them across configs): ``{option: (digest, ref, basename)}`` for
    :func:`_materialise` on the workers."""
    import ray

    files = {}
    for name in _FILE_OPTIONS:
        value = config.get(name)
        if value is None or not os.path.isfile(os.fspath(value)):
            continue
        path = os.fspath(value)
        if path not in shipped:
            with open(path, "rb") as f:
                data = f.read()
            shipped[path] = (hashlib.sha256(data).hexdigest()[:16], ray.put(data), os.path.basename(path))
        files[name] = shipped[path]
    return files


def _materialise(files: dict, config: dict) -> dict:
    """On a Ray worker: the shipped files written once per content to a local directory."""
    import ray

    out = dict(config)
    root = os.path.join(tempfile.gettempdir(), "hyflow-sweep-files")
    os.makedirs(root, exist_ok=True)
    for name, (digest, ref, basename) in files.items():
        path = os.path.join(root, f"{digest}-{basename}")
        if not os.path.exists(path):
            data = ray.get(ref)
            partial = f"{path}.{os.getpid()}.part"
            with open(partial, "wb") as f:
                f.write(data)
            os.replace(partial, path)
        out[name] = path
    return out


def _ray(command: str, todo: list[dict], workers: int | None, address: str | None, ship_files: bool, progress: _Progress) -> list[dict]:
    import ray

    if not ray.is_initialized():
        ray.init(address=address, num_cpus=workers if address is None else None, log_to_driver=False)

    shipped: dict[str, tuple] = {}

    @ray.remote(num_cpus=1)
    def task(files: dict, config: dict) -> dict:
        return run_one(command, _materialise(files, config) if files else config)

    refs = [task.remote(_ship(config, shipped) if ship_files else {}, config) for config in todo]
    index = {ref: i for i, ref in enumerate(refs)}
    rows: list[dict | None] = [None] * len(refs)
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        for ref in ready:
            try:
                rows[index[ref]] = ray.get(ref)
            except ray.exceptions.RayTaskError as e:
                for other in pending:
                    ray.cancel(other)
                cause = e.cause if isinstance(e.cause, Exception) else e
                raise _failed(index[ref], todo[index[ref]], cause) from e
            progress.step()
    return rows  # type: ignore[return-value]


def sweep(
    command: str = "replay",
    grid: dict | None = None,
    *,
    runs: list[dict] | None = None,
    backend: str = "local",
    workers: int | None = None,
    address: str | None = None,
    ship_files: bool = False,
    out=None,
    parquet=None,
    progress: bool = True,
    **base,
) -> pd.DataFrame:
    """Runs ``command`` (replay, sim or topk) for every config of ``grid`` (or ``runs``) over
    the ``base`` keywords (default: the built-in workload) and returns one DataFrame, one row
    per run in config order: ``config.<option>`` columns for every option, then every summary
    figure under its ``--json`` key (nested keys joined by ``.``). Host wall-clock figures
    (replay's ``wall_clock``) are left out, so that the table is the same on any backend.

    backend: ``"local"`` (threads of this process; ``workers`` defaults to the machine's
    cores) or ``"ray"`` (a task per run, on the cluster at ``address`` or a local one with
    ``workers`` CPUs; ``ship_files=True`` sends input files through the object store instead
    of reading them from a shared path). ``out``: also write the table there, as CSV (``.csv``)
or Parquet (``.parquet``), by the file's extension; ``parquet``: the same, always Parquet.
``topk`` rows carry ``precision`` and ``are`` against the capture's exact top-k.
    ``sim`` runs in a sweep search with one thread each unless ``search_threads`` is given:
    the sweep already keeps every core busy.
    """
    if backend not in ("local", "ray"):
        raise ValueError(f"sweep(): backend must be 'local' or 'ray', not {backend!r}")
    if workers is not None and workers < 1:
        raise ValueError(f"sweep(): workers must be at least 1, not {workers}")
    if out is not None:
        _table_format(out)  # before the runs, not after them
    todo = configs(grid, runs, base)
    if command == "sim":
        todo = [{"search_threads": 1, **c} for c in todo]
    bar = _Progress(len(todo), progress)
    if backend == "local":
        rows = _local(command, todo, workers or os.cpu_count() or 1, bar)
    else:
        rows = _ray(command, todo, workers, address, ship_files, bar)
    frame = pd.DataFrame(rows)
    if parquet is not None:
        frame.to_parquet(parquet, index=False)
    if out is not None:
        write_table(frame, out)
    return frame


#: Table formats by file extension.
TABLE_FORMATS = {".csv": "CSV", ".parquet": "Parquet", ".pq": "Parquet"}


def _table_format(path) -> str:
    suffix = os.path.splitext(os.fspath(path))[1].lower()
    if suffix not in TABLE_FORMATS:
        known = ", ".join(f"{ext} ({name})" for ext, name in TABLE_FORMATS.items())
        raise ValueError(f"{os.fspath(path)}: cannot tell the table's format from its extension (one of {known})")
    return TABLE_FORMATS[suffix]


def write_table(frame: pd.DataFrame, path) -> None:
    """Writes ``frame`` to ``path`` in the format its extension names (``TABLE_FORMATS``)."""
    if _table_format(path) == "CSV":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False)
