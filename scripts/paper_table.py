#!/usr/bin/env python3
"""The papers' headlines against hyflow's figures, as one table for BENCHMARKS.md.

Usage: scripts/paper_table.py [--write | --check]
Every hyflow figure is read from a generated block of BENCHMARKS.md (each made, with its
commit, command and host, by the script the row names, and re-checked by that script's
--check), so this table cannot say what those blocks do not. --write replaces the
`paper-vs-hyflow` block; --check (in the test command) fails if the committed table differs
from what the committed blocks give.
"""
import argparse
import sys

import benchdoc


def table(block, title_start, nth=1):
    """(header, rows by first cell) of the nth table of `block` whose title starts with
    `title_start`."""
    found = [t for t in benchdoc.tables(benchdoc.committed_block(block)) if t[0].startswith(title_start)]
    if len(found) < nth:
        raise SystemExit("block %s has no table titled %r..." % (block, title_start))
    _, header, rows = found[nth - 1]
    return header, {r[0]: dict(zip(header, r)) for r in rows}


def fastkeeper():
    _, mem = table("topk-dyntrace-777", "Precision vs memory")
    _, ks = table("topk-dyntrace-777", "Precision vs k")
    _, gen = table("topk-dynamic", "Precision vs memory")
    cmd = "`python3 scripts/topk_bench.py --trace dyntrace-777.pcap`"
    return [
        ("FastKeeper", "precision at 30 KB, k = 100 (FastKeeper with bitmap voting)", "98%",
         "%s as published, %s with hyflow's extensions (checker's trace, seed 777); %s / %s on "
         "`gen dynamic`" % (mem["fastkeeper-paper"]["30 KB"], mem["fastkeeper-bitmap"]["30 KB"],
                            gen["fastkeeper-paper"]["30 KB"], gen["fastkeeper-bitmap"]["30 KB"]), cmd),
        ("FastKeeper", "precision at k = 1,000 (100 KB)", "above 92%",
         "%s as published, %s with the extensions" % (ks["fastkeeper-paper"]["1000"],
                                                      ks["fastkeeper-bitmap"]["1000"]), cmd),
    ]


def flowshadow():
    # The block's second table: the paper's points against the trace's.
    _, rows = table("microflow-backbone", "", 2)
    cmd = "`python3 scripts/microflow_hitrate.py`"
    return [
        ("FlowShadow", "hit rate at 100K entries, direct replacement vs 4-entry PLRU (Backbone-1)",
         "%s vs %s" % (rows["100K entries, direct"]["paper"], rows["100K entries, PLRU"]["paper"]),
         "%s vs %s (a trace fitted to the paper's four points)" % (
             rows["100K entries, direct"]["here (log-linear between the sizes around it)"],
             rows["100K entries, PLRU"]["here (log-linear between the sizes around it)"]), cmd),
    ]


def high_mean_gain(block):
    """The high-locality mean gain of a Gigaflow setup's block (the two mean rows share their
    first cell)."""
    _, header, rows = benchdoc.tables(benchdoc.committed_block(block))[0]
    high = [r for r in rows if r[0] == "**mean**" and r[1] == "high"][0]
    return high[header.index("gain (points)")].strip("*")


def gigaflow():
    _, header, all_rows = benchdoc.tables(benchdoc.committed_block("gigaflow-artifact"))[0]
    gain = high_mean_gain("gigaflow-artifact")
    ratio = {r[0]: r[header.index("estimate ÷ Megaflow's entries")] for r in all_rows if r[1] == "high"
             and r[0] != "**mean**"}
    cmd = "`python3 scripts/gigaflow_bench.py`"
    return [
        ("Gigaflow", "hit rate over Megaflow, artifact setup, high locality (mean of 5 pipelines)",
         "25% (text); +19.0 points read from Fig. 8",
         "%s points (prefix tries off, `--prefixes none`: %s)" % (gain, high_mean_gain("gigaflow-artifact-no-prefix-tries")),
         cmd),
        ("Gigaflow", "rule-space coverage ÷ Megaflow's, artifact's estimator (Table 2: OFD, PSC, OLS, ANT, OTL)",
         "459×, 156×, 337×, 40×, 1.5×", ", ".join("%s×" % ratio[k] for k in ("OFD", "PSC", "OLS", "ANT", "OTL")),
         cmd),
    ]


def elixir():
    """Elixir's Table 2, Fig. 13 and Table 1 at the quick scale (100x fewer packets)."""
    _, header, rows = next(t for t in benchdoc.tables(benchdoc.committed_block("elixir-quick")) if t[1][0] == "policy")
    by = {r[0]: dict(zip(header, r)) for r in rows}
    rate, cores, tolerated = header[1], header[2], header[3]
    fixed = next(h for h in header if h.startswith("fixed rate on "))
    number = lambda text: float(text.replace(",", ""))
    p99 = lambda policy: number(by[policy][fixed].split("/")[1])
    cmd = "`python3 scripts/elixir_bench.py` (quick: 100x fewer packets, a 100x slower host)"
    return [
        ("Elixir", "fewest cores without loss (Elixir, TFO, LFP, PSF; Fig. 13)", "2, 4, 4, 11",
         "%s, %s, %s, %s (K = 110; K = 551: %s); %s: %s, %s, %s, %s" % (
             by["elixir"][cores], by["tfo"][cores], by["lfp"][cores], by["psf"][cores], by["elixir-k551"][cores],
             tolerated.replace("min cores, ", ""), by["elixir"][tolerated], by["tfo"][tolerated],
             by["lfp"][tolerated], by["psf"][tolerated]), cmd),
        ("Elixir", "highest lossless rate on 2 cores, Elixir ÷ TFO (Table 2)", "2.1× (56.2 vs 26.4 Mpps)",
         "%.2f× (K = 551: %.2f×)" % (number(by["elixir"][rate]) / number(by["tfo"][rate]),
                                    number(by["elixir-k551"][rate]) / number(by["tfo"][rate])), cmd),
        ("Elixir", "p99 latency against TFO's at Elixir's core count (Table 1)", "97.6% lower",
         "%.1f%% lower (%s: %s against %s µs)" % (100 * (1 - p99("elixir") / p99("tfo")), fixed.split(":")[0],
                                                   by["elixir"][fixed].split("/")[1].strip(),
                                                   by["tfo"][fixed].split("/")[1].strip()), cmd),
    ]


def build():
    rows = fastkeeper() + flowshadow() + gigaflow()
    # Elixir's rows come with its generated block (`elixir_bench.py --write`).
    if "<!-- generated: elixir-quick -->" in open(benchdoc.BENCHMARKS).read():
        rows += elixir()
    out = ["| paper | headline | paper | hyflow | reproduced by |", "|---|---|---|---|---|"]
    out += ["| %s | %s | %s | %s | %s |" % r for r in rows]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="replace the paper-vs-hyflow block")
    ap.add_argument("--check", action="store_true", help="fail if the committed table differs from the blocks'")
    a = ap.parse_args()
    body = build()
    if a.check:
        committed = benchdoc.committed_block("paper-vs-hyflow")
        fresh_lines = [l for l in body.splitlines()]
        old_lines = [l for l in committed.strip().splitlines() if l.startswith("|")]
        if fresh_lines != old_lines:
            sys.exit("the paper-vs-hyflow table is stale: regenerate it with scripts/paper_table.py --write")
        print("paper-vs-hyflow: %d rows agree with the blocks they come from" % (len(fresh_lines) - 2))
        return
    print(body)
    if a.write:
        benchdoc.write_block("paper-vs-hyflow", body, "python3 scripts/paper_table.py")


if __name__ == "__main__":
    main()
