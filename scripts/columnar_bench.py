#!/usr/bin/env python3
"""Reading a `.hyf` columnar trace against reading its capture (BENCHMARKS.md, "Columnar traces").

Usage: scripts/columnar_bench.py [--seconds S] [--runs R] [--write]

Writes gateway traffic (`hyflow gen gateway`, the default laptop preset scaled to S seconds,
4 by default: about 2 M packets) as a pcap (128-byte snapshot, as `gen gateway` writes it) and
converts that pcap to a `.hyf` (`hyflow convert`); then times, fastest of R runs (3 by
default), commands that read the trace end to end: `topk` (the lightest per-packet work) and
`sim` through examples/gateway.flows with Elixir on 2 cores. Both reads give the same packets
(the test suite checks the outputs are identical), so the difference is the reading: frames
parsed per packet against columns and a key per flow. --write puts the table in the block
columnar-read.

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
FLOWS = os.path.join(ROOT, "examples", "gateway.flows")


def run(args):
    """(wall seconds, standard output) of one run."""
    start = time.perf_counter()
    out = subprocess.run([HYFLOW, *args], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if out.returncode != 0:
        sys.exit(f"hyflow {' '.join(args)} failed: {out.stderr.strip()}")
    return seconds, out.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--write", action="store_true", help="replace the block columnar-read in BENCHMARKS.md")
    a = ap.parse_args()
    if not os.access(HYFLOW, os.X_OK):
        sys.exit("build first: cargo build --release")
    with tempfile.TemporaryDirectory() as tmp:
        pcap, hyf = os.path.join(tmp, "gateway.pcap"), os.path.join(tmp, "gateway.hyf")
        run(["gen", "gateway", "--out", pcap, "--duration", str(a.seconds)])
        convert, said = run(["convert", pcap, hyf])
        packets = int(said.split()[1])  # "wrote N packets of ..."
        sizes = {t: os.path.getsize(p) for t, p in (("pcap", pcap), ("hyf", hyf))}
        commands = [
            ("topk (fastkeeper-bitmap)", ["topk", "--trace"], []),
            ("sim (Elixir, 2 cores)", ["sim", "--flows", FLOWS, "--trace"],
             ["--policy", "elixir", "--cores", "2", "--json", os.devnull]),
        ]
        rows = []
        for label, head, tail in commands:
            best = {}
            for _ in range(a.runs):
                for kind, path in (("pcap", pcap), ("hyf", hyf)):  # interleaved: same host load
                    s, _ = run(head + [path] + tail)
                    best[kind] = min(best.get(kind, float("inf")), s)
            rows.append((label, best["pcap"], best["hyf"]))
    out = [f"{packets:,} packets of `hyflow gen gateway --duration {a.seconds:g}` (pcap {sizes['pcap'] / 1e6:.0f} MB, "
           f".hyf {sizes['hyf'] / 1e6:.0f} MB; `hyflow convert` took {convert:.2f} s), fastest of {a.runs} runs:", "",
           "| command | from the pcap (s) | from the .hyf (s) | pcap ÷ .hyf | packets/s from the .hyf |",
           "|---|---|---|---|---|"]
    for label, p, h in rows:
        out.append(f"| {label} | {p:.2f} | {h:.2f} | {p / h:.2f}× | {packets / h / 1e6:.1f} M |")
    text = "\n".join(out)
    print(text)
    if a.write:
        benchdoc.write_block("columnar-read", text, "python3 scripts/columnar_bench.py --write")


if __name__ == "__main__":
    main()
