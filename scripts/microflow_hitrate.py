#!/usr/bin/env python3
"""Microflow cache hit rate vs cache size and bucket size (FlowShadow Fig. 10), and vs the
consistency mechanism under rule updates, as markdown tables, by running `hyflow replay
--no-nic` for each configuration on one trace.

Usage: scripts/microflow_hitrate.py [--flows F --trace T]
Without arguments a trace is generated for examples/l2l3acl.flows: 200,000 Zipf(1.0) flows,
2,000,000 packets at 100,000 packets/s (seed 1). Update streams are generated for the flow
file with `hyflow gen updates`. Build first: cargo build --release.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
HYFLOW = os.path.join(ROOT, "target", "release", "hyflow")
SIZES = [1024, 4096, 16384, 65536, 262144, 1048576]
WAYS = [1, 2, 4]


UPDATE_RATES = [0.01, 0.1, 1.0]
MODES = ["signature", "cookie", "action"]


def replay(flows, trace, entries, ways, extra=()):
    out = subprocess.run(
        [HYFLOW, "replay", "--flows", flows, "--trace", trace, "--no-nic",
         "--microflow-entries", str(entries), "--microflow-ways", str(ways), "--json", "-", *extra],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flows")
    ap.add_argument("--trace")
    a = ap.parse_args()
    if not os.access(HYFLOW, os.X_OK):
        sys.exit("build first: cargo build --release")
    with tempfile.TemporaryDirectory() as tmp:
        flows, trace = a.flows, a.trace
        if not (flows and trace):
            flows = os.path.join(ROOT, "examples", "l2l3acl.flows")
            trace = os.path.join(tmp, "trace.pcap")
            subprocess.run([HYFLOW, "gen", "traffic", "--flows", flows, "--out", trace,
                            "--flows-count", "200000", "--packets", "2000000", "--zipf", "1.0",
                            "--seed", "1"], check=True, capture_output=True)
        rows = {}
        for n in SIZES:
            rows[n] = [replay(flows, trace, n, w)["microflow_hit_rate"] * 100 for w in WAYS]
        print("| entries | 1-entry buckets (direct) | 2-entry (PLRU) | 4-entry (PLRU) | 4-way − direct |")
        print("|---|---|---|---|---|")
        for n, r in rows.items():
            print("| %s | %.2f%% | %.2f%% | %.2f%% | %+.2f points |" % (
                f"{n:,}", r[0], r[1], r[2], r[2] - r[0]))
        seconds = replay(flows, trace, 1024, 1)["trace_seconds"]
        print()
        print("| rules updated per second | updates | " + " | ".join(
            f"{m}: hit rate, entries dropped" for m in MODES) + " |")
        print("|---|---|" + "---|" * len(MODES))
        for rate in UPDATE_RATES:
            ups = os.path.join(tmp, f"updates-{rate}.txt")
            subprocess.run([HYFLOW, "gen", "updates", "--flows", flows, "--out", ups, "--rate", str(rate),
                            "--seconds", str(seconds), "--seed", "1"], check=True, capture_output=True)
            cells, n = [], 0
            for m in MODES:
                d = replay(flows, trace, 65536, 1, ("--updates", ups, "--consistency", m))
                n = d["updates"]
                cells.append("%.2f%%, %d" % (d["microflow_hit_rate"] * 100, d["microflow_invalidated"]))
            print("| %g%% | %d | %s |" % (rate * 100, n, " | ".join(cells)))


if __name__ == "__main__":
    main()
