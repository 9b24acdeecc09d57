#!/usr/bin/env python3
"""What the XDP NIC tier saves (root): CPU per forwarded frame with `hyflow switch --nic xdp`
against the software path alone (`--nic none`), on the same veths, pipeline and frames.

Topology and traffic are scripts/live_bench.py's: namespace `hynb-sw` holds ports p1..p4,
`hynb-h` their peers; the built-in pipeline (examples/l2l3acl.flows) routes 1,000 UDP flows of
64 bytes from port 1 to port 3 (MACs rewritten, TTL decremented). The generator (`hyflow send`,
AF_XDP) is pinned to CPU 0, the switch to CPU 1.

A veth runs the receive side of a frame (and so the XDP program) on the sending CPU, so the
NIC tier's work lands on the generator's CPU, not the switch's. CPU per frame is therefore
the sum of two parts: CPU 0's busy time (/proc/stat: user, system, softirq) beyond what
sending alone costs — a first run sends the same frames into p1 with no switch, where the
namespace's stack drops them — which holds the XDP program (the NIC tier's lookup, rewrite
and redirect into p3, and h3's receive; or the redirect to the switch's socket), and the
switch's cores' processing time (`show`'s cores: rounds that received frames, their sends and
the receive on h3 they cause included, idle polling left out).

With --ovs, Open vSwitch's userspace datapath (Debian's openvswitch-switch, ports type=afxdp,
native XDP, its PMD on CPU 1) runs the same frames, counted the same way: CPU 0 beyond
sending, plus its PMD's processing cycles.

Prints a Markdown table for BENCHMARKS.md. Usage: scripts/nic_tier_bench.py [--hyflow BIN]
[--frames N] [--ovs] [--steer]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import live_bench
from live_netns import make, remove, sh, write_pcap
from live_bench import Ovs, frame, sent

SW, HOST = "hynb-sw", "hynb-h"
PORTS = 4
FLOWS = "examples/l2l3acl.flows"


def busy_ns(cpu):
    """Busy time of CPU `cpu` so far (ns): everything but idle and iowait."""
    for line in open("/proc/stat"):
        if line.startswith("cpu%d " % cpu):
            f = line.split()[1:]
            return sum(int(x) for i, x in enumerate(f[:8]) if i not in (3, 4)) * 1e9 / os.sysconf("SC_CLK_TCK")
    raise RuntimeError("no cpu%d in /proc/stat" % cpu)


def counters(binary, sock):
    """The switch's frames decided by its NIC tier, its cores' processing time (ns), and the
    tier's install latencies."""
    show = json.loads(sh(binary, "ctl", sock, "show", "--json"))
    latency = (show.get("nic_tier") or {}).get("install_latency")
    return show.get("nic_hits", 0), sum(c["processing_ns"] for c in show["cores"]), latency


def rx(iface):
    return json.loads(sh("ip", "-n", HOST, "-s", "-j", "link", "show", iface))[0]["stats64"]["rx"]["packets"]


def send(binary, pcap, loops, rate=None):
    return sent(live_bench.send(binary, pcap, loops, rate, host=HOST))


def run(binary, tmp, pcap, loops, switch_args, gro=False, ovs=None, ghz=1.0):
    """One measured run: the switch `switch_args` (None: no switch), or Open vSwitch (`ovs`)."""
    make(SW, HOST, PORTS)
    if gro:
        # A frame redirected into a veth in native mode is received by the peer's NAPI,
        # which a veth runs only with XDP or GRO on.
        for i in range(1, PORTS + 1):
            sh("ip", "netns", "exec", HOST, "ethtool", "-K", "h%d" % i, "gro", "on")
    proc = None
    try:
        if ovs is not None:
            ovs.start()
            send(binary, pcap, 20, rate=20000)
            time.sleep(1.2)
        elif switch_args is not None:
            ports = os.path.join(tmp, "ports.txt")
            open(ports, "w").write("".join("p%d=%d\n" % (i, i) for i in range(1, PORTS + 1)))
            sock = os.path.join(tmp, "nb.sock")
            proc = subprocess.Popen(
                ["ip", "netns", "exec", SW, "taskset", "-c", "1", binary, "switch", "--flows", FLOWS, "--ports",
                 ports, "--ctl", sock] + switch_args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if "ready" not in proc.stdout.readline():
                raise RuntimeError("hyflow switch: %s" % proc.stderr.read())
            send(binary, pcap, 20, rate=20000)  # warm the caches (and the NIC tier)
            time.sleep(1.2)
        n0, p0, _ = counters(binary, sock) if proc else (0, 0, None)
        o0 = ovs.counters()[1] if ovs else 0
        b0, f0 = busy_ns(0), rx("h3")
        offered, secs = send(binary, pcap, loops)
        time.sleep(0.5)
        b1, f1 = busy_ns(0), rx("h3")
        n1, p1, latency = counters(binary, sock) if proc else (0, 0, None)
        if ovs:
            # Its PMD's processing cycles (idle polling left out), as ns.
            p0, p1 = 0, (ovs.counters()[1] - o0) / ghz
        return dict(offered=offered, secs=secs, forwarded=f1 - f0, cpu0=b1 - b0, nic=n1 - n0, processing=p1 - p0,
                    latency=latency)
    finally:
        if proc:
            proc.terminate()
            proc.wait(10)
        if ovs:
            ovs.stop()
        remove(SW, HOST)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hyflow", default="target/release/hyflow")
    ap.add_argument("--frames", type=int, default=3000000)
    ap.add_argument("--ovs", action="store_true", help="also Open vSwitch's userspace datapath (type=afxdp ports)")
    ap.add_argument("--steer", action="store_true",
                    help="also the software path on two cores steered by the 5-tuple (both on CPU 1, the "
                         "generator needing CPU 0 of two: the cost of steering per frame, not its scaling)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("nic_tier_bench.py needs root (namespaces, XDP)")
    ghz = float([l for l in open("/proc/cpuinfo") if l.startswith("cpu MHz")][0].split(":")[1]) / 1000
    tmp = tempfile.mkdtemp()
    pcap = os.path.join(tmp, "t.pcap")
    write_pcap(pcap, [frame(i, 64) for i in range(1000)])
    loops = max(1, a.frames // 1000)
    base = run(a.hyflow, tmp, pcap, loops, None)
    per_sent = base["cpu0"] / base["offered"]
    rows = []

    def row(name, r):
        fwd = max(1, r["forwarded"])
        # CPU 0 beyond sending (the veth receive: the redirect to the switch's socket, or the
        # NIC tier), and the switch's processing time on CPU 1 (idle polling left out).
        kernel = (r["cpu0"] - per_sent * r["offered"]) / fwd
        return (name, r, kernel, r["processing"] / fwd)

    for name, args, gro in (
            ("software path (`--nic none`)", ["--nic", "none"], False),
            ("XDP tier (`--nic xdp`: generic XDP on veth)", ["--nic", "xdp"], False),
            ("XDP tier (`--nic xdp --xdp-mode native`, GRO on the peers)", ["--nic", "xdp", "--xdp-mode", "native"], True)):
        r = run(a.hyflow, tmp, pcap, loops, args, gro)
        rows.append(row(name, r))
    if a.steer:
        steered = ["--nic", "none", "--cores", "2", "--steer", "nw_src,nw_dst,nw_proto,tp_src,tp_dst"]
        r = run(a.hyflow, tmp, pcap, loops, steered)
        rows.append(row("software path, 2 cores steered by the 5-tuple (both on CPU 1)", r))
    if a.ovs:
        r = run(a.hyflow, tmp, pcap, loops, None, ovs=Ovs(tmp, SW), ghz=ghz)
        rows.append(row("Open vSwitch 3.1 (userspace, type=afxdp, native XDP)", r))
    print("CPU: %.2f GHz; generator on CPU 0, switch on CPU 1; %d frames of 64 B, 1,000 flows\n" % (ghz, base["offered"]))
    print("sending alone (no switch): %.0f frames/s offered, %.0f ns of CPU 0 per frame sent\n"
          % (base["offered"] / base["secs"], per_sent))
    print("| switch | offered pps | forwarded | by the NIC tier | CPU 0 beyond sending, ns/frame | switch cores' (OVS: PMD's) processing, ns/frame | total ns/frame | cycles/frame | vs software |")
    print("|---|---|---|---|---|---|---|---|---|")
    soft = rows[0][2] + rows[0][3]
    for name, r, kernel, cores in rows:
        total = kernel + cores
        print("| %s | %.0f | %d | %d | %.0f | %.0f | %.0f | %.0f | %.2f× |" % (
            name, r["offered"] / r["secs"], r["forwarded"], r["nic"], kernel, cores, total, total * ghz,
            soft / total if total > 0 else 0))
    for name, r, _, _ in rows:
        lat = r.get("latency")
        if lat and lat["installs"]:
            print("\n%s: %d install(s), decision -> kernel p50/p99/max %.1f/%.1f/%.1f µs; %d first hit(s), "
                  "kernel -> first hit %.1f/%.1f/%.1f µs" % (name, lat["installs"], *lat["to_kernel_us"],
                                                             lat["first_hits"], *lat["to_first_hit_us"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
