#!/usr/bin/env python3
"""Costs of the Python layer, for BENCHMARKS.md "Python package".

1. The same run through the CLI (a process, `--json` to /dev/null) and through the package
   in a warm interpreter (`hyflow.replay()` / `hyflow.sim()`), alternating, medians of
   --repeat: the built-in workload (200,000 packets) and a 2 M-packet capture of the example
   pipeline (`gen traffic`), where the engine's time dominates.
2. The wrapper alone: `hyflow.replay()` against the extension's raw call (`_hyflow.replay`,
   which returns NumPy columns and JSON text) on the built-in workload.
3. A sweep of 8 replays of the 2 M-packet capture on 1 and 2 local threads, and on a local Ray
   cluster of 2 CPUs (cluster start-up timed apart).

Wall-clock figures: run on an idle host. Build first: cargo build --release -p hyflow-cli and
pip install .
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import hyflow
from hyflow import _hyflow

ROOT = Path(__file__).resolve().parent.parent
FLOWS = ROOT / "examples" / "l2l3acl.flows"


def timed(f) -> float:
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def compare(name: str, cli_args: list[str], py, repeat: int) -> None:
    cli = lambda: subprocess.run(cli_args + ["--json", "/dev/null"], check=True, capture_output=True)
    cli(), py()
    c, p = [], []
    for _ in range(repeat):
        c.append(timed(cli))
        p.append(timed(py))
    mc, mp = statistics.median(c), statistics.median(p)
    print(f"| {name} | {mc * 1e3:.1f} ms | {mp * 1e3:.1f} ms | {mp / mc:.3f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--cli", default=str(ROOT / "target" / "release" / "hyflow"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "traffic.pcap"
        hyflow.gen.traffic(flows=FLOWS, out=trace, packets=2_000_000, flows_count=20_000, rate=1_000_000)
        files = {"flows": FLOWS, "trace": trace}
        print("| run | CLI (process) | Python (warm interpreter) | Python / CLI |")
        print("|---|---|---|---|")
        compare("replay, built-in workload", [a.cli, "replay"], lambda: hyflow.replay(), a.repeat)
        compare("replay, 2 M packets", [a.cli, "replay", "--flows", str(FLOWS), "--trace", str(trace)],
                lambda: hyflow.replay(**files), a.repeat)
        compare("sim, built-in workload", [a.cli, "sim"], lambda: hyflow.sim(), a.repeat)
        compare("sim, 2 M packets", [a.cli, "sim", "--flows", str(FLOWS), "--trace", str(trace)],
                lambda: hyflow.sim(**files), a.repeat)
        raw = [timed(lambda: _hyflow.replay([], False)) for _ in range(a.repeat)]
        wrapped = [timed(lambda: hyflow.replay()) for _ in range(a.repeat)]
        print(f"\nwrapper: hyflow.replay() {statistics.median(wrapped) * 1e3:.1f} ms against the raw extension call "
              f"{statistics.median(raw) * 1e3:.1f} ms (built-in workload, medians of {a.repeat})")
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import hyflow"], check=True)
        print(f"python -c 'import hyflow' (interpreter, numpy, pandas, pyarrow): {(time.perf_counter() - start) * 1e3:.0f} ms")

        grid = {"microflow_entries": [1024, 65536], "consistency": ["signature", "action"],
                "nic": ["megaflow", "gigaflow"]}
        one = timed(lambda: hyflow.sweep("replay", grid, workers=1, progress=False, **files))
        two = timed(lambda: hyflow.sweep("replay", grid, workers=2, progress=False, **files))
        print(f"\nsweep of 8 replays of 2 M packets: 1 thread {one:.2f} s, 2 threads {two:.2f} s "
              f"(speed-up {one / two:.2f}x)")
        import ray

        start = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        up = time.perf_counter() - start
        on_ray = timed(lambda: hyflow.sweep("replay", grid, backend="ray", progress=False, **files))
        shipped = timed(lambda: hyflow.sweep("replay", grid, backend="ray", ship_files=True, progress=False, **files))
        ray.shutdown()
        print(f"the same on a local Ray cluster of 2 CPUs: {on_ray:.2f} s (files from the shared path), "
              f"{shipped:.2f} s (files shipped through the object store); cluster start {up:.1f} s, apart")
    return 0


if __name__ == "__main__":
    sys.exit(main())
