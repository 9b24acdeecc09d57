"""hyflow from Python: a virtual switch split between a SmartNIC model and host software.

Every run takes the ``hyflow`` command line's long options as keyword arguments (``-`` as
``_``): ``hyflow.replay(microflow_entries=1024)`` is ``hyflow replay --microflow-entries 1024``,
with the same defaults, ranges and error messages. With no arguments each runs the built-in
workload, as the CLI does. Runs release the GIL, so threads run them in parallel.

Results: summaries as dicts with the CLI's ``--json`` keys; per-packet decisions, time series,
latency histograms, top-k reports and rule counters as pandas DataFrames over the engine's
NumPy and Arrow arrays. Errors: :class:`HyflowError` with the CLI's message; a misspelt keyword
is a ``TypeError``.

``hyflow.sweep`` runs a grid of configs locally or on a Ray cluster into one DataFrame.
"""

from __future__ import annotations

import json

import pandas as pd

from . import _options, _results, gen
from ._hyflow import HyflowError, __version__
from . import _hyflow
from ._results import ReplayResult, SimResult, TopkResult, Trace
from .sweep import sweep

# Tracebacks and pickles (Ray ships errors between processes) name it where users import it.
HyflowError.__module__ = "hyflow"

__all__ = [
    "HyflowError",
    "ReplayResult",
    "SimResult",
    "TopkResult",
    "Trace",
    "__version__",
    "eval_topk",
    "gen",
    "load_flows",
    "load_trace",
    "load_updates",
    "options",
    "replay",
    "report",
    "sim",
    "sweep",
    "topk",
    "trace",
]


def _watch(progress, label: str):
    """The progress callback a run gets, and what closes it after the run. ``progress``:
    ``False`` for none, a callable for ``progress(packets, read, total)`` every half second,
    ``None`` for a tqdm bar when tqdm is installed (shown once a run lasts half a second)."""
    if progress is False:
        return None, lambda: None
    if callable(progress):
        return progress, lambda: None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None, lambda: None
    import time

    bar = None
    started = time.monotonic()

    def update(packets: int, read: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            if time.monotonic() - started < 0.5:
                return  # a short run shows no bar, not even at its end
            bar = tqdm(total=total or None, desc=f"hyflow {label}", unit="")
        bar.n = read
        bar.set_postfix(packets=packets, refresh=False)
        bar.refresh()

    def close() -> None:
        if bar is not None:
            bar.close()

    return update, close


def _watched(run, progress, label: str):
    callback, close = _watch(progress, label)
    try:
        return run(callback)
    finally:
        close()


def replay(*, decisions: bool = False, progress=None, **options) -> ReplayResult:
    argv = _options.argv("replay", options)
    result = _watched(lambda cb: _hyflow.replay(argv, decisions, cb), progress, "replay")
    return ReplayResult(
        summary=json.loads(result["report"]),
        text=result["text"],
        rules=_results.rules_frame(result["rules"], counters=True),
        decisions=_results.decisions_frame(result["decisions"]) if decisions else None,
        record=result["record"],
    )


def sim(*, decisions: bool = False, plot=None, progress=None, ship_files: bool = False, **options) -> SimResult:
    argv = _options.argv("sim", options)
    plot = None if plot is None else str(plot)
    probes = None
    if options.get("backend") == "ray" and options.get("find") is not None:
        from ._ray_search import RayProbes

        probes = RayProbes(options, options.get("ray_address"), options.get("search_threads"), ship_files)
    try:
        result = _watched(lambda cb: _hyflow.sim(argv, decisions, plot, cb, probes), progress, "sim")
    finally:
        if probes is not None:
            probes.close()
    return SimResult(
        summary=json.loads(result["summary"]),
        text=result["text"],
        series=_results.series_frame(result["series"]),
        latency=_results.latency_frame(result["latency_ns"]),
        decisions=_results.decisions_frame(result["decisions"]) if decisions else None,
        record=result["record"],
    )


def report(*results, out=None) -> str:
    """The HTML report of one or more results of :func:`replay` or :func:`sim` (several: a
    side-by-side comparison first), as ``hyflow report`` writes it: one self-contained page.
    ``out``: also write it there. Each result also shows as its report in Jupyter."""
    if not results:
        raise TypeError("report() needs at least one result of replay() or sim()")
    page = _hyflow.report_html([r.record for r in results])
    if out is not None:
        with open(out, "w", encoding="utf-8") as f:
            f.write(page)
    return page


def topk(trace=None, *, progress=None, **options) -> TopkResult:
    if trace is not None:
        options["trace"] = trace
    argv = _options.argv("topk", options)
    return _results.topk_result(_watched(lambda cb: _hyflow.topk(argv, cb), progress, "topk"))


def eval_topk(trace=None, *, progress=None, **options) -> pd.DataFrame:
    if trace is not None:
        options["trace"] = trace
    argv = _options.argv("eval_topk", options)
    rows = [json.loads(r) for r in _watched(lambda cb: _hyflow.eval_topk(argv, cb), progress, "eval topk")]
    return pd.DataFrame(rows)


def trace(flows=None, packet=None, **options) -> Trace | list[Trace]:
    if isinstance(packet, (list, tuple)):
        # One trace per packet, in order.
        return [trace(flows, p, **options) for p in packet]
    options.update({k: v for k, v in (("flows", flows), ("packet", packet)) if v is not None})
    traces = [Trace(json.loads(r), t) for r, t in _hyflow.trace(_options.argv("trace", options))]
    return traces[0] if packet is not None or "pcap" in options else traces


def load_flows(path, ports=None, tables=None, groups=None) -> pd.DataFrame:
    """The rules of a flow file in ``ovs-ofctl add-flows`` syntax or as ``ovs-ofctl
    dump-flows`` prints them, in file order; ``ports``, ``tables`` and ``groups`` name files of
    port and table names and of the switch's groups (the CLI's
    ``--ports``/``--tables``/``--groups``). A malformed line raises :class:`HyflowError` with
    file, line, column and token."""
    as_str = lambda p: None if p is None else str(p)
    d = _hyflow.load_flows(str(path), as_str(ports), as_str(tables), as_str(groups))
    return _results.rules_frame(d, counters=False)


def load_updates(path) -> pd.DataFrame:
    """An updates file as ``hyflow replay --updates`` reads it: when each applies (``at_ns``
    after the first packet, or ``before_packet``; -1 in the other column), the command and
    the rule."""
    d = _hyflow.load_updates(str(path))
    return pd.DataFrame(
        {
            "at_ns": d["at_ns"],
            "before_packet": d["before_packet"],
            "command": _results.strings(d["command"]),
            "rule": _results.strings(d["rule"]),
        },
        copy=False,
    )


def load_trace(path, in_port: int | None = None) -> pd.DataFrame:
    """A capture's packets as hyflow reads them: time (ns), wire length, the flow in
    ``ovs-ofctl`` notation (Open vSwitch's flow extraction), the malformed reason (empty if
    none), then one column per field of those flows (``protocol`` for the leading ``tcp``,
    ``arp``, ...; ``in_port``, ``dl_src``, ``nw_src``, ``tp_dst``, ...): numbers where every value is a plain decimal, text otherwise, missing
    (``<NA>``) where a packet lacks the field. ``in_port`` is the port packets are read as
    arriving on (``in_port``, or pcapng interface i + 1; the ``flow`` text says ``ANY``, as
    ``ovs-ofctl parse-pcap`` does)."""
    d = _hyflow.load_trace(str(path), in_port)
    columns = {
        "ts_ns": d["ts_ns"],
        "bytes": d["bytes"],
        "flow": _results.strings(d["flow"]),
        "malformed": _results.strings(d["malformed"]),
    }
    for name, col in d["fields"].items():
        columns[name] = _results.field_column(col)
    return pd.DataFrame(columns, copy=False)


def options(command: str) -> pd.DataFrame:
    """The keywords of ``command`` (replay, sim, topk, eval_topk, trace, gen_traffic,
    gen_updates, gen_dynamic, gen_pipeline, gen_gateway, gen_conversations) with type, default and
    help."""
    return pd.DataFrame(
        [
            {"keyword": o.name, "type": o.python_type, "default": o.typed_default(), "choices": list(o.choices), "help": o.help}
            for o in _options.options(command).values()
        ]
    )


replay.__doc__ = _options.document(
    "replay",
    """Replays a trace through NIC, microflow cache, megaflow cache and slow path
(``hyflow replay``); with no files, the built-in workload. ``decisions=True`` also returns
every packet's layer and outputs.""",
)
sim.__doc__ = _options.document(
    "sim",
    """Simulates NIC, host rings and cores over trace time (``hyflow sim``), or searches for
the fewest cores or the highest rate without loss (``find``). ``decisions=True`` also returns
every packet's fate (one run only); ``plot=DIR`` writes the CLI's plots. A search with
``backend="ray"`` runs its probes as Ray tasks (the answer is the same): on the cluster this
process joined with ``ray.init``, at ``ray_address``, or on a local one of ``search_threads``
CPUs; ``ship_files=True`` sends the input files to the workers through the object store once,
instead of their reading them at the same paths.""",
)
topk.__doc__ = _options.document("topk", "Real-time top-k flows of a trace at every block boundary (``hyflow topk``).")
eval_topk.__doc__ = _options.document(
    "eval_topk", "Precision and relative error of detectors against the exact top-k (``hyflow eval topk``)."
)
trace.__doc__ = _options.document(
    "trace",
    """Traces packets through a pipeline as ``ofproto/trace`` does (``hyflow trace``): one
:class:`Trace` for ``packet`` or ``pcap``, a list for a ``packets`` file.""",
)
