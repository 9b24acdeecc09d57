#!/usr/bin/env python3
"""Memory per rule and load time of a large flow table (BENCHMARKS.md, "Memory per rule").

Usage: scripts/rule_memory.py [--rules N] [--runs R] [--baseline BIN] [--write]

Writes a flow file of N rules (1,000,000 by default: `ip,nw_dst=` exact on distinct
addresses, 1,000 priorities, four output actions — a routing table's shape), then loads it
with `hyflow trace --flows FILE in_port=1,ip,nw_dst=10.1.2.3` R times (3 by default) and
reports the fastest wall time and the peak resident memory (the kernel's maximum RSS of the
child), per rule. --baseline BIN measures another hyflow binary (an older build, say) on the
same file in the same run, so the ratio holds on a busy host. --write puts the table in
BENCHMARKS.md's block rule-memory (1,000,000 rules only).

Build first: cargo build --release (or set HYFLOW to a binary).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import benchdoc

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
HYFLOW = os.environ.get("HYFLOW", os.path.join(ROOT, "target", "release", "hyflow"))


def write_flows(path, n):
    with open(path, "w") as f:
        for i in range(n):
            # 7,919 is odd: i * 7919 mod 2^24 is a different address for every i < 2^24.
            a = 0x0A000000 + (i * 7919) % (1 << 24)
            f.write(f"table=0,priority={i % 1000 + 1},ip,nw_dst={a >> 24}.{(a >> 16) & 255}."
                    f"{(a >> 8) & 255}.{a & 255},actions=output:{i % 4 + 2}\n")


def load(binary, flows):
    """(seconds, peak RSS in bytes) of one load and trace."""
    start = time.perf_counter()
    proc = subprocess.Popen([binary, "trace", "--flows", flows, "in_port=1,ip,nw_dst=10.1.2.3"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    if status != 0:
        sys.exit(f"{binary} failed: {proc.stderr.read().decode().strip()}")
    return seconds, usage.ru_maxrss * 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rules", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--baseline", metavar="BIN", help="another hyflow binary measured in the same run")
    ap.add_argument("--write", action="store_true", help="replace the block rule-memory in BENCHMARKS.md")
    a = ap.parse_args()
    if not os.access(HYFLOW, os.X_OK):
        sys.exit("build first: cargo build --release")
    if a.write and a.rules != 1_000_000:
        sys.exit("--write is for 1,000,000 rules")
    binaries = [("hyflow", HYFLOW)] + ([("baseline", a.baseline)] if a.baseline else [])
    with tempfile.TemporaryDirectory() as tmp:
        flows = os.path.join(tmp, "big.flows")
        write_flows(flows, a.rules)
        size = os.path.getsize(flows)
        measured = {}
        for _ in range(a.runs):
            for label, binary in binaries:  # interleaved: both see the same host load
                s, rss = load(binary, flows)
                best_s, best_rss = measured.get(label, (float("inf"), 0))
                measured[label] = (min(best_s, s), max(best_rss, rss))
    out = [f"{a.rules:,} rules ({size / 1e6:.0f} MB flow file), `hyflow trace --flows FILE "
           f"in_port=1,ip,nw_dst=10.1.2.3`, fastest of {a.runs} runs:", "",
           "| binary | load and trace (s) | peak RSS (MB) | per rule (bytes) | ÷ baseline (time / memory) |",
           "|---|---|---|---|---|"]
    base = measured.get("baseline")
    for label, binary in binaries:
        s, rss = measured[label]
        ratio = f"{s / base[0]:.2f}× / {rss / base[1]:.2f}×" if base else "—"
        name = label if label == "hyflow" else f"baseline (`{os.path.basename(binary)}`)"
        out.append(f"| {name} | {s:.2f} | {rss / 1e6:.0f} | {rss / a.rules:.0f} | {ratio} |")
    body = "\n".join(out)
    print(body)
    if a.write:
        command = "python3 scripts/rule_memory.py" + (" --baseline BIN" if a.baseline else "")
        benchdoc.write_block("rule-memory", body, command)


if __name__ == "__main__":
    main()
