#!/usr/bin/env python3
"""Microflow cache hit rate vs cache size and bucket size (FlowShadow Fig. 10), on a Zipf
trace and on a trace shaped as the paper's backbone trace, and vs the consistency mechanism
under rule updates, as markdown tables, by running `hyflow replay --no-nic` for each
configuration.

Usage: scripts/microflow_hitrate.py [--flows F --trace T] [--write | --check]
Traces for examples/l2l3acl.flows (seed 1):
- zipf: 200,000 Zipf(1.0) flows, 2,000,000 packets at 100,000 packets/s (`gen traffic`);
- backbone: `gen traffic --timing backbone`, FlowShadow's Backbone-1 (2,921,223 flows and,
  inferred from its 97.22% at 10M entries, about 105 M packets in 300 s) scaled down 25 times
  in flows and packets over the same 300 s; a cache of n entries here stands for one of
  n x (2,921,223 / the flows that appear) entries there.
With --flows and --trace, the Zipf and update tables are computed on that trace instead.
--write puts the tables in BENCHMARKS.md's blocks; --check (in the test command) recomputes
one row of each and fails if it moved. Update streams: `hyflow gen updates`. Build first:
cargo build --release.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

import benchdoc

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
HYFLOW = os.environ.get("HYFLOW", os.path.join(ROOT, "target", "release", "hyflow"))
SIZES = [1024, 4096, 16384, 65536, 262144, 1048576]
BACKBONE_SIZES = [32, 64, 128, 1024, 4096, 8192, 65536, 524288]
WAYS = [1, 2, 4]
UPDATE_RATES = [0.01, 0.1, 1.0]
MODES = ["signature", "cookie", "action"]
#: Backbone-1 (FlowShadow §II-A, §IV-C1, §VI): flows, and the hit rates the text gives.
PAPER_FLOWS = 2_921_223
PAPER_POINTS = [("1K entries, direct", 1_000, 1, 67.59), ("100K entries, direct", 100_000, 1, 94.22),
                ("100K entries, PLRU", 100_000, 4, 95.9), ("10M entries", 10_000_000, 1, 97.22)]
BACKBONE_SCALE = 25


def replay(flows, trace, entries, ways, extra=()):
    out = subprocess.run(
        [HYFLOW, "replay", "--flows", flows, "--trace", trace, "--no-nic",
         "--microflow-entries", str(entries), "--microflow-ways", str(ways), "--json", "-", *extra],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def gen(args):
    return subprocess.run([HYFLOW, "gen", "traffic", *args], check=True, capture_output=True, text=True)


def size_table(flows, trace, sizes, label=None):
    """Hit rate per size and bucket size; `label(n)` adds a column."""
    rows = {n: [replay(flows, trace, n, w)["microflow_hit_rate"] * 100 for w in WAYS] for n in sizes}
    extra = " | paper equivalent" if label else ""
    out = ["| entries%s | 1-entry buckets (direct) | 2-entry (PLRU) | 4-entry (PLRU) | 4-way − direct |" % extra,
           "|---|---|---|---|---|" + ("---|" if label else "")]
    for n, r in rows.items():
        out.append("| %s%s | %.2f%% | %.2f%% | %.2f%% | %+.2f points |" % (
            f"{n:,}", " | " + label(n) if label else "", r[0], r[1], r[2], r[2] - r[0]))
    return rows, out


def zipf_block(flows, trace, quick):
    return "\n".join(size_table(flows, trace, [65536] if quick else SIZES)[1])


def updates_block(flows, trace, tmp, quick):
    seconds = replay(flows, trace, 1024, 1)["trace_seconds"]
    out = ["| rules updated per second | updates | " + " | ".join(
        f"{m}: hit rate, entries dropped" for m in MODES) + " |", "|---|---|" + "---|" * len(MODES)]
    for rate in [0.1] if quick else UPDATE_RATES:
        ups = os.path.join(tmp, f"updates-{rate}.txt")
        subprocess.run([HYFLOW, "gen", "updates", "--flows", flows, "--out", ups, "--rate", str(rate),
                        "--seconds", str(seconds), "--seed", "1"], check=True, capture_output=True)
        cells, n = [], 0
        for m in MODES:
            d = replay(flows, trace, 65536, 1, ("--updates", ups, "--consistency", m))
            n = d["updates"]
            cells.append("%.2f%%, %d" % (d["microflow_hit_rate"] * 100, d["microflow_invalidated"]))
        out.append("| %g%% | %d | %s |" % (rate * 100, n, " | ".join(cells)))
    return "\n".join(out)


def interpolate(rows, entries, ways):
    """The hit rate at `entries` (log-linear between the measured sizes around it)."""
    sizes = sorted(rows)
    column = WAYS.index(ways)
    if entries >= sizes[-1]:
        return rows[sizes[-1]][column]
    lo = max(n for n in sizes if n <= entries)
    hi = min(n for n in sizes if n >= entries)
    if lo == hi:
        return rows[lo][column]
    f = math.log(entries / lo) / math.log(hi / lo)
    return rows[lo][column] + f * (rows[hi][column] - rows[lo][column])


def backbone_block(flows, tmp, quick):
    trace = os.path.join(tmp, "backbone.pcap")
    packets = 105_000_000 // BACKBONE_SCALE
    # Flows counted as starting over the trace; more appear (flows already running at 0).
    starting = 104_000
    made = gen(["--flows", flows, "--out", trace, "--timing", "backbone", "--flows-count", str(starting),
                "--packets", str(packets), "--rate", str(packets / 300), "--seed", "1"]).stdout
    seen = int(re.search(r"of (\d+) flows", made).group(1))
    scale = PAPER_FLOWS / seen
    rows, table = size_table(flows, trace, [4096] if quick else BACKBONE_SIZES,
                             lambda n: "%s" % human(n * scale))
    out = ["{:,} packets, {:,} flows".format(packets, seen) + " (%.2f%% of the packets first of their flow; "
           "Backbone-1 about %.2f%%): a cache of n entries stands for one of %.1f n there." % (
               100 * seen / packets, 100 * PAPER_FLOWS / 105e6, scale), ""] + table
    if not quick:
        out += ["", "| Backbone-1 | paper | here (log-linear between the sizes around it) |", "|---|---|---|"]
        for name, entries, ways, paper in PAPER_POINTS:
            out.append("| %s | %.2f%% | %.2f%% |" % (name, paper, interpolate(rows, entries / scale, ways)))
    return "\n".join(out)


def human(n):
    for unit, div in (("M", 1e6), ("K", 1e3)):
        if n >= div:
            return "%.3g%s" % (n / div, unit)
    return "%.0f" % n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flows")
    ap.add_argument("--trace")
    ap.add_argument("--write", action="store_true", help="replace the blocks in BENCHMARKS.md")
    ap.add_argument("--check", action="store_true",
                    help="quick: recompute a row of each table and fail if it differs from BENCHMARKS.md")
    a = ap.parse_args()
    if not os.access(HYFLOW, os.X_OK):
        sys.exit("build first: cargo build --release")
    if (a.write or a.check) and (a.flows or a.trace):
        sys.exit("--write and --check are for the built-in traces")
    command = "python3 scripts/microflow_hitrate.py"
    with tempfile.TemporaryDirectory() as tmp:
        flows, trace = a.flows, a.trace
        if not (flows and trace):
            flows = os.path.join(ROOT, "examples", "l2l3acl.flows")
            trace = os.path.join(tmp, "trace.pcap")
            gen(["--flows", flows, "--out", trace, "--flows-count", "200000", "--packets", "2000000",
                 "--zipf", "1.0", "--seed", "1"])
        blocks = [("microflow-zipf", zipf_block(flows, trace, a.check)),
                  ("microflow-updates", updates_block(flows, trace, tmp, a.check))]
        if not a.trace:
            blocks.append(("microflow-backbone", backbone_block(flows, tmp, a.check)))
        if a.check:
            benchdoc.finish_check([benchdoc.check_tables(b, body) for b, body in blocks])
            return
        for block_id, body in blocks:
            print("\n<!-- %s -->\n%s" % (block_id, body))
            if a.write:
                benchdoc.write_block(block_id, body, command)


if __name__ == "__main__":
    main()
