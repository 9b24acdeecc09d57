#!/usr/bin/env python3
"""FlexKVS live (root): `hyflow kvs` with flow steering, key steering and key steering with the
NIC's hash, on 1 and 2 cores, side by side in one run (FlexNIC §3.3, Figure 4 and Table 2).

Namespace `hykb-s` holds the server's veth end `kv0` (10.95.0.1); its peer `hykbc`
(10.95.0.2) stays here. For each configuration, two server runs:
  * closed loop: `hyflow kvs-load` (kernel UDP sockets, 16 clients, 4 requests outstanding
    each, the paper's workload after every key is SET once) for --seconds: requests/s and
    latency as a memcached client sees them, and the server's cycles per request;
  * saturation: the same workload as request frames (`kvs-load --frames`), put on the veth by
    `hyflow send` (AF_XDP) as fast as it goes, --loops times 200,000 frames: requests the
    server answered per second of sending, the frames the kernel dropped because the server's
    rings were full, and its cycles per request under that load.
Cycles per request are the server's own (`rdtsc` from the request's frame in a core's hands
to its reply's frames written: FlexNIC's Table 2 span, less the batch's hand-off to the
transmit ring), so they do not depend on the generator. Throughput does: this host has 2 CPUs, which the generator, the veth's receive
path (where the XDP program runs: on the sending CPU) and the server's cores share; the
sender is pinned to CPU 1, the server's cores to CPUs 0 and 1.

With --save DIR, each saturated run's server report is kept there (STEERING-CORES.json, the
last run's), and DIR/live_points.json lists the live points `hyflow kvs-sim --live` draws:
per configuration, the requests answered per second, and the capacity the cores' busy time
implies (the sum over cores of requests over busy time: what they would answer fully busy).
`hyflow calibrate --kvs DIR/key-1.json` takes its costs from the one-core run.

Prints a Markdown table for BENCHMARKS.md. Usage: scripts/kvs_bench.py [--hyflow BIN]
[--seconds S] [--loops N] [--runs R] [--save DIR]
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

NS, HOST_IF, SERVER, CLIENT = "hykb-s", "hykbc", "10.95.0.1", "10.95.0.2"
CONFIGS = [("flow", []), ("key", []), ("key + NIC hash", ["--nic-hash"])]


def setup():
    make_app(NS, HOST_IF, "kv0", SERVER + "/24", CLIENT + "/24")


def teardown():
    remove_app(NS, HOST_IF)


class Server:
    def __init__(self, binary, steer, extra, cores):
        args = ["ip", "netns", "exec", NS, binary, "kvs", "--iface", "kv0", "--cores", str(cores),
                "--steer", steer.split()[0], "--json"] + extra
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        if "ready" not in line:
            raise RuntimeError("server: %s %s" % (line, self.p.stderr.read()))

    def stop(self):
        self.p.terminate()
        out, err = self.p.communicate(timeout=30)
        if self.p.returncode != 0:
            raise RuntimeError("server: " + err)
        return json.loads(out.strip().splitlines()[-1])


def populate(binary, keys):
    sh(binary, "kvs-load", "--server", SERVER, "--keys", str(keys), "--populate", "--duration", "0.1",
       "--warmup", "0", "--json")


def closed_loop(binary, steer, extra, cores, seconds, keys):
    s = Server(binary, steer, extra, cores)
    try:
        populate(binary, keys)
        load = json.loads(sh(binary, "kvs-load", "--server", SERVER, "--keys", str(keys), "--duration",
                             str(seconds), "--warmup", "1", "--json"))
    finally:
        report = s.stop()
    return load, report


def saturation(binary, steer, extra, cores, frames, loops, keys):
    s = Server(binary, steer, extra, cores)
    try:
        populate(binary, keys)
        out = sh("taskset", "-c", "1", binary, "send", "--iface", HOST_IF, "--trace", frames, "--loop",
                 str(loops))
        # "sent N packets (...) on IF in S s: ..."
        words = out.split()
        sent, secs = int(words[1]), float(words[words.index("in") + 1])
        time.sleep(0.5)
    finally:
        report = s.stop()
    served = report["service"]["requests"] - keys
    return sent, secs, served, report


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hyflow", default="target/release/hyflow")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--loops", type=int, default=10)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--keys", type=int, default=100000)
    ap.add_argument("--save", help="directory for the server reports and live points")
    a = ap.parse_args()
    live_points = []
    if os.geteuid() != 0:
        sys.exit("kvs_bench.py needs root (namespaces, XDP)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        frames = os.path.join(tmp, "requests.pcap")
        setup()
        try:
            sh(a.hyflow, "kvs-load", "--server", SERVER, "--keys", str(a.keys), "--frames", frames, "--count",
               "200000", "--frames-source", "10.95.0.3")
            for cores in (1, 2):
                for name, extra in CONFIGS:
                    runs = []
                    for _ in range(a.runs):
                        load, closed = closed_loop(a.hyflow, name, extra, cores, a.seconds, a.keys)
                        sent, secs, served, sat = saturation(a.hyflow, name, extra, cores, frames, a.loops, a.keys)
                        runs.append((load, closed, sent, secs, served, sat))
                        print("%s, %d core(s): closed loop %.0f req/s; saturation %.0f sent/s, %.0f served/s, "
                              "%d dropped; cycles %d/%d" % (name, cores, load["throughput"], sent / secs,
                                                           served / secs, sat["rx_dropped"], sat["cycles"]["p50"],
                                                           sat["cycles"]["p90"]), file=sys.stderr)
                    med = lambda f: statistics.median(f(r) for r in runs)
                    steer = name.replace(" + NIC hash", "+nic")
                    capacity = lambda r: sum(c["service"]["requests"] / c["busy_ns"] * 1e9
                                             for c in r[5]["cores"] if c["busy_ns"] > 0)
                    live_points.append({"steering": name, "cores": cores, "kind": "answered",
                                        "throughput": med(lambda r: r[4] / r[3])})
                    live_points.append({"steering": name, "cores": cores, "kind": "capacity from busy time",
                                        "throughput": med(capacity)})
                    if a.save:
                        os.makedirs(a.save, exist_ok=True)
                        with open(os.path.join(a.save, "%s-%d.json" % (steer, cores)), "w") as f:
                            json.dump(runs[-1][5], f)
                    rows.append((name, cores,
                                 med(lambda r: r[0]["throughput"]), med(lambda r: r[0]["latency_us"][0]),
                                 med(lambda r: r[0]["latency_us"][2]),
                                 med(lambda r: r[1]["cycles"]["p50"]), med(lambda r: r[1]["cycles"]["p90"]),
                                 med(lambda r: r[2] / r[3]), med(lambda r: r[4] / r[3]),
                                 med(lambda r: r[5]["rx_dropped"] / max(r[2], 1)),
                                 med(lambda r: r[5]["cycles"]["p50"]), med(lambda r: r[5]["cycles"]["p90"])))
        finally:
            teardown()
    if a.save:
        with open(os.path.join(a.save, "live_points.json"), "w") as f:
            json.dump(live_points, f, indent=1)
    print("| steering | cores | closed loop req/s | p50 / p99 µs | cycles/request p50 / p90 (closed loop) "
          "| offered frames/s | answered req/s | dropped | cycles/request p50 / p90 (saturated) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %d | %.0f | %.0f / %.0f | %d / %d | %.0f | %.0f | %.1f%% | %d / %d |" % (
            r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], 100 * r[9], r[10], r[11]))


if __name__ == "__main__":
    main()
