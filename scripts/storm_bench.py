#!/usr/bin/env python3
"""FlexStorm live (root): `hyflow storm` with the software demultiplexer (the paper's baseline)
and with the XDP program demultiplexing and acknowledging tuples (FlexNIC §4.1), side by side
in one run (FlexNIC §4.2, Figure 8 and Table 3).

Namespace `hysb-s` holds the server's veth end `st0` (10.93.0.1); its peer `hysbc` stays here.
`hyflow storm-load` writes 200,000 tuples of a tweet-like stream (Zipf user names over
100,000 users, dealt to the workers by name); `hyflow send` (AF_XDP, pinned to CPU 1) puts them
on the veth --loops times:
  * as fast as it goes: tuples the workers counted per second (between the first tuple's
    reception and the last one's), and the share lost (sent, not counted);
  * at --rate tuples/s, a load both handle: input queueing (reception by the XDP program to
    the worker taking the tuple), each worker's processing time per tuple, the software
    demultiplexer thread's time per tuple, and the XDP program's run time per frame (the
    kernel's BPF statistics, `--xdp-stats`): what demultiplexing costs a core in software,
    against what it costs the NIC.
The server's demultiplexer thread runs on CPU 0, worker w on CPU (w + 1) mod 2: on this 2-CPU
host the generator, the veth's receive path (where the XDP program runs: on the sending CPU)
and the server's threads share the CPUs, which the paper's testbed did not.

Prints a Markdown table for BENCHMARKS.md. Usage: scripts/storm_bench.py [--hyflow BIN]
[--loops N] [--rate R] [--runs N]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from live_netns import make_app, remove_app, sh

NS, HOST_IF, SERVER = "hysb-s", "hysbc", "10.93.0.1"


def setup():
    make_app(NS, HOST_IF, "st0", SERVER + "/24")


def teardown():
    remove_app(NS, HOST_IF)


def run(binary, demux, workers, frames, loops, rate=None):
    extra = ["--xdp-stats"] if rate else []
    p = subprocess.Popen(["ip", "netns", "exec", NS, binary, "storm", "--iface", "st0", "--workers", str(workers),
                          "--demux", demux, "--json"] + extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        line = p.stdout.readline()
        if "ready" not in line:
            raise RuntimeError("server: %s %s" % (line, p.stderr.read()))
        cmd = ["taskset", "-c", "1", binary, "send", "--iface", HOST_IF, "--trace", frames, "--loop", str(loops)]
        if rate:
            cmd += ["--rate", str(rate)]
        words = sh(*cmd).split()
        sent = int(words[1])
        time.sleep(0.5)
    finally:
        p.terminate()
        out, err = p.communicate(timeout=30)
    if p.returncode != 0:
        raise RuntimeError("server: " + err)
    return sent, json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hyflow", default="target/release/hyflow")
    ap.add_argument("--loops", type=int, default=10)
    ap.add_argument("--rate", type=int, default=200000)
    ap.add_argument("--runs", type=int, default=1)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("storm_bench.py needs root (namespaces, XDP)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        setup()
        try:
            for workers in (1, 2):
                frames = os.path.join(tmp, "tuples%d.pcap" % workers)
                sh(a.hyflow, "storm-load", "--frames", frames, "--count", "200000", "--server", SERVER, "--workers",
                   str(workers))
                for demux in ("software", "nic"):
                    runs = []
                    for _ in range(a.runs):
                        sent, fast = run(a.hyflow, demux, workers, frames, a.loops)
                        _, paced = run(a.hyflow, demux, workers, frames, 1, a.rate)
                        runs.append((sent, fast, paced))
                        print("%s, %d worker(s): %.0f tuples/s, %.1f%% lost; at %d/s input p50 %.1f µs p99 %.1f" % (
                            demux, workers, fast["tuples_per_second"], 100 * (1 - fast["tuples"] / sent), a.rate,
                            paced["input_us"]["p50"], paced["input_us"]["p99"]), file=sys.stderr)
                    med = lambda f: statistics.median(f(r) for r in runs)
                    rows.append((demux, workers, med(lambda r: r[1]["tuples_per_second"]),
                                 med(lambda r: 1 - r[1]["tuples"] / r[0]),
                                 med(lambda r: r[2]["input_us"]["p50"]), med(lambda r: r[2]["input_us"]["p99"]),
                                 med(lambda r: statistics.mean(w["processing_ns"] for w in r[2]["workers"])),
                                 med(lambda r: r[2]["xdp"]["acked"] + r[2]["demux_thread"]["acks"]),
                                 med(lambda r: r[2]["demux_thread"]["ns_per_frame"]),
                                 med(lambda r: r[2]["xdp"]["runs"]["ns_per_run"])))
        finally:
            teardown()
    print("| demultiplexing | workers | tuples/s (as fast as sent) | lost | input queueing p50 / p99 µs (at %d/s) "
          "| worker ns/tuple | ACKs (at %d/s) | demultiplexer thread ns/tuple | XDP program ns/frame |" % (a.rate, a.rate))
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %d | %.0f | %.1f%% | %.1f / %.1f | %.0f | %d | %s | %.0f |" % (
            r[0], r[1], r[2], 100 * r[3], r[4], r[5], r[6], r[7], "%.0f" % r[8] if r[8] else "—", r[9]))


if __name__ == "__main__":
    main()
