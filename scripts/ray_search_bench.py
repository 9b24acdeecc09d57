#!/usr/bin/env python3
"""A min-cores search on Ray against the same search on threads (BENCHMARKS.md, "Searches on Ray").

Usage: scripts/ray_search_bench.py [--seconds S] [--max-cores N] [--write]

Runs Elixir's quick-scale min-cores search (the setup of `scripts/elixir_bench.py`: gateway
traffic at 560 kpps on a host 100× slower, S measured seconds after 30 s of warm-up; 5 by
default) over every count up to N (4 by default), four ways: on 1 and 2 threads of one
process, and with `--backend ray` on a local Ray cluster of 1 and 2 workers. It fails unless
all four print the same summary, and reports each one's wall time (the Ray ones include
starting and stopping the cluster). --write puts the table in the block ray-search.

Build first: cargo build --release (or set HYFLOW to a binary); needs `pip install ray`.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import benchdoc
import elixir_bench

HYFLOW = elixir_bench.HYFLOW


def search(trace, args):
    """(wall seconds, summary) of one search."""
    start = time.perf_counter()
    out = subprocess.run([HYFLOW, "sim", "--trace", trace, "--json", "-", *args], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if out.returncode != 0:
        sys.exit(f"hyflow sim {' '.join(args)} failed: {out.stderr.strip()}")
    return seconds, json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--max-cores", type=int, default=4)
    ap.add_argument("--write", action="store_true", help="replace the block ray-search in BENCHMARKS.md")
    a = ap.parse_args()
    if not os.access(HYFLOW, os.X_OK):
        sys.exit("build first: cargo build --release")
    with tempfile.TemporaryDirectory() as tmp:
        rate, trace, common, exact, _, warmup = elixir_bench.setup(True, a.seconds, tmp, None)
        base = [*common, *elixir_bench.policy_args("elixir", exact, []), "--rate", f"{rate:.0f}",
                "--find", "min-cores", "--max-cores", str(a.max_cores)]
        ways = [
            ("threads", 1, []),
            ("threads", 2, []),
            ("Ray, local cluster", 1, ["--backend", "ray"]),
            ("Ray, local cluster", 2, ["--backend", "ray"]),
        ]
        runs = [(label, n, *search(trace, [*base, "--search-threads", str(n), *extra])) for label, n, extra in ways]
    answer = runs[0][3]
    for label, n, _, summary in runs[1:]:
        if summary != answer:
            sys.exit(f"{label} with {n}: another summary than one thread's")
    losses = ", ".join(f"{l['cores']}: {l['lost']:,}" for l in answer["loss_by_cores"])
    out = [f"Elixir's min-cores search at the quick scale (`{trace}`, warm-up {warmup} s, {rate:,.0f} pkt/s, "
           f"every count up to {a.max_cores}): answer **{answer['min_cores']} cores** on every backend, the "
           f"same summary (lost by cores: {losses}).", "",
           "| probes run on | at once | wall time (s) | speed-up over 1 at once |", "|---|---|---|---|"]
    single = {}
    for label, n, seconds, _ in runs:
        single.setdefault(label, seconds)
        out.append(f"| {label} | {n} | {seconds:.1f} | {single[label] / seconds:.2f}× |")
    text = "\n".join(out)
    print(text)
    if a.write:
        benchdoc.write_block("ray-search", text, "python3 scripts/ray_search_bench.py --write")


if __name__ == "__main__":
    main()
