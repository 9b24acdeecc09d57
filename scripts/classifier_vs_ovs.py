#!/usr/bin/env python3
"""hyflow's classifier against Open vSwitch's on OVS's own benchmark (BENCHMARKS.md, "Against
Open vSwitch on its own benchmark").

Usage: scripts/classifier_vs_ovs.py --ovstest PATH [--subtables 1,8,32,64] [--runs R] [--write]

Runs `ovstest test-classifier benchmark RULES 100 N 1 LOOKUPS` (10,000 rules, 100 priorities,
N subtables, one thread) and hyflow's rebuild of it (`crates/hyflow/benches/classifier_ovs.rs`:
the same generator, the same pseudo-random sequence, so the same rules and the same lookups),
alternately R times each (3 by default), and reports each side's median lookups/s without and
with wildcard tracking, and their ratio. Both must report the same number of rules, hits and
misses in every run, or the script stops: the check that they ran the same workload.

Open vSwitch is built on the developer's machine from its source, never kept here, with three
changes to `benchmark()` and `make_rule()` in its `tests/test-classifier.c`:
1. `make_rule()` sets every field's mask whatever subset it is given, so every rule is exact on
   all 13 fields and the classifier has one subtable whatever N is: make it skip the fields
   outside `wc_fields` (`if (!(wc_fields & (1u << f_idx))) { continue; }` first in its loop).
2. The classifier draws from the same pseudo-random sequence as the generator (its hash tables
   pick random bases as they grow), so the rules after the first depend on the classifier's
   internals: draw every rule's priority, subset and values first, into an array, then insert.
3. After the insertions, print `rules: %d` with `classifier_count(&cls)`.
Then `./boot.sh && ./configure && make tests/ovstest` (if the target alone misses generated
headers, build `$(BUILT_SOURCES)` first).

--write puts the table in BENCHMARKS.md's block classifier-vs-ovs.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

import benchdoc

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
RULES = 10_000
PRIORITIES = 100


def lookups_for(subtables):
    """Enough lookups for about a second a run on either side (OVS times in milliseconds)."""
    return max(1_000_000, 16_000_000 // subtables)


def build_hyflow():
    out = subprocess.run(
        ["cargo", "bench", "-p", "hyflow", "--bench", "classifier_ovs", "--no-run", "--message-format=json"],
        cwd=ROOT, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == "classifier_ovs" \
                and msg.get("executable"):
            return msg["executable"]
    sys.exit("cargo did not report the classifier_ovs bench executable")


def run_ovs(ovstest, subtables, lookups):
    """{wildcards: (hits, misses, lookups/s)} from one OVS run."""
    out = subprocess.run([ovstest, "test-classifier", "benchmark", str(RULES), str(PRIORITIES),
                          str(subtables), "1", str(lookups)],
                         check=True, capture_output=True, text=True).stdout
    rules = re.findall(r"^rules: (\d+)$", out, re.M)
    counts = re.findall(r"hits: (\d+), misses: (\d+)", out)
    rates = re.findall(r"classifier lookups:\s+\d+ ms, (\d+) lookups/sec", out)
    if len(rules) != 2 or len(counts) != 2 or len(rates) != 2:
        sys.exit("unexpected output from %s (are its changes made, see --help?):\n%s" % (ovstest, out))
    return {wc: (int(n), int(h), int(m), float(r))
            for wc, n, (h, m), r in zip((False, True), rules, counts, rates)}


def run_hyflow(bench, subtables, lookups):
    out = subprocess.run([bench, str(RULES), str(PRIORITIES), str(subtables), str(lookups)],
                         check=True, capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {r["wildcards"]: (r["rules"], r["hits"], r["misses"], r["lookups_per_sec"]) for r in rows}, \
        rows[0]["subtables"]


def fmt_rate(r):
    return "%.2f M/s" % (r / 1e6)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ovstest", required=True, help="path to a built tests/ovstest (see above)")
    ap.add_argument("--subtables", default="1,8,32,64")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    if not os.access(args.ovstest, os.X_OK):
        sys.exit("%s: not an executable ovstest" % args.ovstest)
    bench = build_hyflow()
    rows = []
    for n in [int(x) for x in args.subtables.split(",")]:
        lookups = lookups_for(n)
        ovs_rates = {False: [], True: []}
        hy_rates = {False: [], True: []}
        for _ in range(args.runs):
            ovs = run_ovs(args.ovstest, n, lookups)
            hy, hy_subtables = run_hyflow(bench, n, lookups)
            for wc in (False, True):
                if ovs[wc][:3] != hy[wc][:3]:
                    sys.exit("%d subtables, wildcards %s: OVS rules/hits/misses %s, hyflow %s — not the "
                             "same workload (are OVS's changes made, see --help?)" % (n, wc, ovs[wc][:3], hy[wc][:3]))
                ovs_rates[wc].append(ovs[wc][3])
                hy_rates[wc].append(hy[wc][3])
        row = [str(n), str(hy_subtables), str(hy[False][0]), "%.1f%%" % (100 * hy[False][1] / lookups)]
        for wc in (False, True):
            o, h = statistics.median(ovs_rates[wc]), statistics.median(hy_rates[wc])
            row += [fmt_rate(o), fmt_rate(h), "**%.2f×**" % (h / o)]
        rows.append(row)
        print(" | ".join(row), flush=True)
    header = ["subtables asked", "subtables", "rules", "hits", "OVS", "hyflow", "hyflow ÷ OVS",
              "OVS (wildcards)", "hyflow (wildcards)", "hyflow ÷ OVS (wildcards)"]
    body = "| %s |\n|%s\n" % (" | ".join(header), "---|" * len(header))
    body += "".join("| %s |\n" % " | ".join(r) for r in rows)
    body += ("\n%d rules, %d priorities, one lookup thread; medians of %d alternating runs of each.\n"
             % (RULES, PRIORITIES, args.runs))
    print(body)
    if args.write:
        command = "python3 scripts/classifier_vs_ovs.py --ovstest OVS/tests/ovstest --runs %d" % args.runs
        benchdoc.write_block("classifier-vs-ovs", body, command)


if __name__ == "__main__":
    main()
