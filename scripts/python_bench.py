#!/usr/bin/env python3
"""Costs of the Python layer (BENCHMARKS.md "Python package"): the built-in replay through the
CLI and through `hyflow.replay()` (medians of --repeat runs, each alternating), and a sweep's
wall time on 1 and 2 local threads and on a local Ray cluster of 2 CPUs. Run on an idle host;
the figures are wall-clock."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import hyflow

ROOT = Path(__file__).resolve().parent.parent


def timed(f) -> float:
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--cli", default=str(ROOT / "target" / "release" / "hyflow"))
    args = parser.parse_args()

    cli = lambda: subprocess.run([args.cli, "replay", "--json", "/dev/null"], check=True, capture_output=True)
    py = lambda: hyflow.replay()
    cli(), py()  # warm caches
    cli_s, py_s = [], []
    for _ in range(args.repeat):
        cli_s.append(timed(cli))
        py_s.append(timed(py))
    c, p = statistics.median(cli_s), statistics.median(py_s)
    print(f"built-in replay: CLI process {c * 1e3:.1f} ms, hyflow.replay() {p * 1e3:.1f} ms "
          f"(ratio {p / c:.3f}); medians of {args.repeat}")
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import hyflow"], check=True)
    print(f"python -c 'import hyflow' (interpreter, numpy, pandas, pyarrow): {(time.perf_counter() - start) * 1e3:.0f} ms")

    grid = {"microflow_entries": [1024, 65536], "consistency": ["signature", "action"], "nic": ["megaflow", "gigaflow"]}
    base = {"policy": ["psf", "offload-all"], "cores": [1, 2]}
    sim_grid = {**base, "rate": [100_000, 200_000]}
    for name, command, g in (("replay", "replay", grid), ("sim", "sim", sim_grid)):
        one = timed(lambda: hyflow.sweep(command, g, workers=1, progress=False))
        two = timed(lambda: hyflow.sweep(command, g, workers=2, progress=False))
        print(f"sweep of 8 {name} runs (built-in workload): 1 thread {one:.2f} s, 2 threads {two:.2f} s "
              f"(speed-up {one / two:.2f}x)")
    import ray

    start = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    up = time.perf_counter() - start
    for name, command, g in (("replay", "replay", grid), ("sim", "sim", sim_grid)):
        on_ray = timed(lambda: hyflow.sweep(command, g, backend="ray", progress=False))
        print(f"sweep of 8 {name} runs on a local Ray cluster (2 CPUs): {on_ray:.2f} s (cluster start {up:.1f} s, apart)")
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
