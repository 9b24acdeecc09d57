"""``sim(find=..., backend="ray")``: a capacity search whose probes run as Ray tasks.

The search itself runs in the engine, which decides every probe (a sweep of core counts, or a
bisection of rates that speculates on as many probes at a time as there are workers) and hands
each batch to :class:`RayProbes`. A task runs one probe with the engine's own probe function
(``_hyflow.sim_probe``) on the search's options, so its outcome is the run the local search
makes, and the answer is the same as ``backend="local"``'s.
"""

from __future__ import annotations

import logging
import os

from . import _hyflow, _options
from .sweep import _materialise, _ship


def _probe(files: dict, options: dict, cores: int, rate: float | None) -> dict:
    """On a worker: one probe, with shipped input files written locally first."""
    if files:
        options = _materialise(files, options)
    try:
        return dict(_hyflow.sim_probe(_options.argv("sim", options), cores, rate))
    except _hyflow.HyflowError as e:
        return {"error": str(e)}


class RayProbes:
    """Runs batches of probes as Ray tasks, one per probe: on the cluster at ``address``, on
    the one this process already joined, or on a local one of ``workers`` CPUs started here
    (and stopped by :meth:`close`). ``width`` is how many run at once. With ``ship_files``,
    the input files go to the workers through the object store, once; otherwise the workers
    read them at the same paths (shared storage)."""

    def __init__(self, options: dict, address: str | None, workers: int | None, ship_files: bool):
        import ray

        self._started = not ray.is_initialized()
        if self._started:
            ray.init(
                address=address,
                num_cpus=workers if address is None else None,
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
        self.width = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._options = {k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in options.items()}
        self._files = _ship(self._options, {}) if ship_files else {}
        self._task = ray.remote(num_cpus=1)(_probe)

    def __call__(self, probes: list[tuple[int, float | None]]) -> list[dict]:
        import ray

        refs = [self._task.remote(self._files, self._options, cores, rate) for cores, rate in probes]
        out = []
        for ref in refs:
            try:
                out.append(ray.get(ref))
            except ray.exceptions.RayError as e:
                out.append({"error": f"the Ray task failed: {e}"})
        return out

    def close(self) -> None:
        """Stops the local cluster if this started it."""
        import ray

        if self._started:
            ray.shutdown()
