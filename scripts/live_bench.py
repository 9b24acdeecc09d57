#!/usr/bin/env python3
"""hyflow switch against Open vSwitch on the same veths, pipeline and frames (root).

Topology: namespace `hylb-sw` holds the switch's ports p1..p4 (veth), namespace `hylb-h`
their peers h1..h4 (no addresses: frames only cross these veths). The pipeline is the
built-in one (examples/l2l3acl.flows, 7 tables); the frames are routed UDP from port 1 through
the gateway MAC to 10.2.0.0/24 (MACs rewritten, VLAN pushed and popped, TTL decremented, out
on port 3), 1,000 flows, 64 or 1514 bytes.

For each switch — Open vSwitch's userspace datapath (Debian's openvswitch-switch, ports
type=afxdp, native XDP in copy mode: veth refuses zero-copy), hyflow switch on AF_XDP and on
AF_PACKET — pinned to CPU 1 with the generator (`hyflow send`, AF_XDP) on CPU 0:
  1. the same 300 frames at 1,000/s, every frame leaving on every port captured (VLAN tags
     read back with PACKET_AUXDATA) and compared byte for byte across switches;
  2. packets/s forwarded when the generator sends as fast as it can, for 64 and 1514 bytes;
  3. one-way latency p50/p99 of 2,000 probes (1 ms apart) under a background load of
     500,000 frames/s;
  4. CPU per packet: Open vSwitch's PMD processing cycles (pmd-stats-show), hyflow's cores'
     processing time (`show`'s cores) — both count the iterations that received frames, the
     kernel's work inside their sends included, and leave idle polling out — in ns and in
     cycles at the CPU's clock; for hyflow also the part spent in the engine (under its lock:
     the part a second core cannot share).
Prints a Markdown table for BENCHMARKS.md. Usage: scripts/live_bench.py [--hyflow BIN]
[--seconds S]. Needs openvswitch-switch installed (apt-get install openvswitch-switch).
"""
import argparse
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

from live_netns import make, remove, sh, write_pcap

SW, HOST = "hylb-sw", "hylb-h"
PORTS = 4
FLOWS = "examples/l2l3acl.flows"
# Background load while latency is probed: about half of what either switch forwards.
LATENCY_LOAD = 500000



def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(flow, size):
    """Routed UDP from port 1's host to the gateway MAC, flow `flow`, `size` bytes."""
    src, dst = bytes([10, 1, 0, 1 + flow % 200]), bytes([10, 2, 0, 1 + flow // 200 % 200])
    payload = bytes(max(0, size - 14 - 20 - 8))
    udp = struct.pack("!HHHH", 10000 + flow, 53, 8 + len(payload), 0) + payload
    pseudo = src + dst + struct.pack("!BBH", 0, 17, len(udp))
    udp = udp[:6] + struct.pack("!H", csum(pseudo + udp) or 0xFFFF) + udp[8:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), flow & 0xFFFF, 0, 64, 17, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    eth = bytes.fromhex("0200000000fe") + bytes.fromhex("000000000001") + b"\x08\x00"
    return eth + ip + udp




def host_rx():
    """Packets each host interface received."""
    out = json.loads(sh("ip", "-n", HOST, "-s", "-j", "link", "show"))
    return {l["ifname"]: l["stats64"]["rx"]["packets"] for l in out if l["ifname"].startswith("h")}


CAPTURE = r'''
import socket, struct, sys, time, json, select
socks = {}
for i in range(2, 5):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind(("h%d" % i, 0)); s.setsockopt(263, 8, 1); s.setblocking(False); socks[i] = s
print("ready", flush=True)
got, end = [], time.time() + float(sys.argv[1])
while time.time() < end:
    r, _, _ = select.select(list(socks.values()), [], [], 0.1)
    for port, s in socks.items():
        if s not in r: continue
        while True:
            try: data, anc, _, addr = s.recvmsg(65535, socket.CMSG_SPACE(20))
            except BlockingIOError: break
            if addr[2] == 4: continue
            for lvl, typ, cd in anc:
                if lvl == 263 and typ == 8:
                    st, _, _, _, _, tci, tpid = struct.unpack("IIIHHHH", cd[:20])
                    if st & 0x10:
                        data = data[:12] + struct.pack("!HH", tpid if st & 0x40 else 0x8100, tci) + data[12:]
            got.append((port, data.hex()))
print(json.dumps(sorted(got)))
'''


PROBE = r'''
import socket, struct, sys, time, json, select
n, gap = int(sys.argv[1]), float(sys.argv[2])
tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)); tx.bind(("h1", 0))
rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)); rx.bind(("h3", 0)); rx.setblocking(False)
base = bytes.fromhex(sys.argv[3])
sent, lat = {}, []
def drain(until):
    while True:
        left = until - time.perf_counter()
        r, _, _ = select.select([rx], [], [], max(0, left))
        if not r:
            return
        while True:
            try:
                data, addr = rx.recvfrom(2048)
            except BlockingIOError:
                break
            t = time.perf_counter_ns()
            i = data.find(b"HYLP")
            if addr[2] != 4 and i >= 0:
                k = struct.unpack("!I", data[i + 4:i + 8])[0]
                if k in sent:
                    lat.append(t - sent.pop(k))
for k in range(n):
    f = base[:-8] + b"HYLP" + struct.pack("!I", k)
    sent[k] = time.perf_counter_ns()
    tx.send(f)
    drain(time.perf_counter() + gap)
drain(time.perf_counter() + 0.2)
print(json.dumps(sorted(lat)))
'''


def latency(binary, tmp, background_pps):
    """One-way latency percentiles (µs) of 2,000 probe frames, 1 ms apart, from h1 to h3
    through the switch, while `hyflow send` offers `background_pps` of the same traffic.
    Both ends are raw sockets of one process on one clock; the Python around them adds the
    same tens of microseconds to every switch."""
    pcap = os.path.join(tmp, "bg.pcap")
    write_pcap(pcap, [frame(i, 64) for i in range(1000)])
    bg = subprocess.Popen(["ip", "netns", "exec", HOST, "taskset", "-c", "0", binary, "send", "--iface", "h1",
                           "--trace", pcap, "--loop", "100000", "--rate", str(background_pps)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        probe = frame(4242, 64 + 8)
        out = sh("ip", "netns", "exec", HOST, "taskset", "-c", "0", sys.executable, "-c", PROBE, "2000", "0.001",
                 probe.hex())
    finally:
        bg.terminate()
        bg.wait()
    lat = json.loads(out)
    if not lat:
        return None
    pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] / 1000
    return dict(p50=pick(0.5), p99=pick(0.99), received=len(lat))


class Ovs:
    name = "Open vSwitch 3.1 (userspace, type=afxdp)"

    def __init__(self, tmp, sw=SW):
        # The namespace whose ports p1..pN it takes.
        self.sw = sw
        self.dir = os.path.join(tmp, "ovs")
        os.makedirs(self.dir, exist_ok=True)
        self.env = dict(os.environ, OVS_RUNDIR=self.dir, OVS_LOGDIR=self.dir, OVS_DBDIR=self.dir)

    def start(self):
        db = os.path.join(self.dir, "conf.db")
        sh("ovsdb-tool", "create", db, "/usr/share/openvswitch/vswitch.ovsschema", env=self.env)
        sh("ovsdb-server", db, "--remote=punix:%s/db.sock" % self.dir, "--pidfile", "--detach", "--log-file", env=self.env)
        sh("ovs-vsctl", "--no-wait", "init", env=self.env)
        sh("ovs-vsctl", "--no-wait", "set", "Open_vSwitch", ".", "other_config:pmd-cpu-mask=0x2", env=self.env)
        sh("ip", "netns", "exec", self.sw, "ovs-vswitchd", "--pidfile", "--detach", "--log-file", env=self.env)
        sh("ovs-vsctl", "add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev",
           "protocols=OpenFlow10,OpenFlow13", env=self.env)
        for i in range(1, PORTS + 1):
            sh("ovs-vsctl", "add-port", "br0", "p%d" % i, "--", "set", "interface", "p%d" % i, "type=afxdp",
               "options:xdp-mode=native", "ofport_request=%d" % i, env=self.env)
        sh("ovs-ofctl", "-O", "OpenFlow13", "del-flows", "br0", env=self.env)
        # No one OpenFlow version carries every rule (push_vlan is 1.1+, pop_vlan with no VLAN
        # in the match only 1.0's strip_vlan): each rule goes in OpenFlow 1.0 (with Nicira
        # extensions), and only one 1.0 cannot carry in 1.3 — whose encoding of `mod_vlan_vid`
        # is push_vlan plus set_field, a second tag where 1.0's rewrites the one there.
        for line in open(FLOWS):
            line = line.split("#")[0].strip()
            if not line:
                continue
            r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow10", "add-flow", "br0", line], capture_output=True, env=self.env)
            if r.returncode != 0:
                sh("ovs-ofctl", "-O", "OpenFlow13", "add-flow", "br0", line, env=self.env)
        time.sleep(2)

    def stop(self):
        # By pid file: a left-over PMD thread would busy-poll the switch's CPU for the next run.
        for d in ("ovs-vswitchd", "ovsdb-server"):
            try:
                pid = int(open(os.path.join(self.dir, d + ".pid")).read())
            except (OSError, ValueError):
                continue
            os.kill(pid, signal.SIGTERM)
            for _ in range(100):
                if not os.path.exists("/proc/%d" % pid):
                    break
                time.sleep(0.05)
            else:
                os.kill(pid, signal.SIGKILL)

    def counters(self):
        out = sh("ovs-appctl", "dpif-netdev/pmd-stats-show", env=self.env)
        packets = cycles = 0
        for line in out.splitlines():
            line = line.strip()
            if line.startswith("packets received:"):
                packets += int(line.split(":")[1])
            elif line.startswith("processing cycles:"):
                cycles += int(line.split(":")[1].split()[0])
        return packets, cycles, None


class Hyflow:
    def __init__(self, binary, io, tmp):
        self.binary, self.io, self.tmp = binary, io, tmp
        self.name = "hyflow switch (--io %s)" % io
        self.proc = None

    def start(self):
        ports = os.path.join(self.tmp, "ports.txt")
        open(ports, "w").write("".join("p%d=%d\n" % (i, i) for i in range(1, PORTS + 1)))
        self.sock = os.path.join(self.tmp, "hy.sock")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", SW, "taskset", "-c", "1", self.binary, "switch", "--flows", FLOWS,
             "--ports", ports, "--io", self.io, "--ctl", self.sock],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if "ready" not in line:
            raise RuntimeError("hyflow switch: %s" % self.proc.stderr.read())

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(10)

    def counters(self):
        # The cores' processing time: rounds that received frames, from the end of the round
        # before to the end of theirs, the kernel's work inside the sends included (the peer's
        # receive softirq runs in them), idle polling left out: what Open vSwitch's
        # "processing cycles" count for the same work.
        show = json.loads(sh(self.binary, "ctl", self.sock, "show", "--json"))
        cores = show["cores"]
        return (show["packets"], sum(c["processing_ns"] for c in cores), sum(c["engine_ns"] for c in cores))


def send(binary, trace, loops=1, rate=None, host=HOST):
    """`hyflow send` of `trace` (a capture or gen:...) `loops` times on h1 of namespace `host`,
    from CPU 0, at `rate` (or as fast as it goes): its last line."""
    cmd = ["ip", "netns", "exec", host, "taskset", "-c", "0", binary, "send", "--iface", "h1", "--trace", trace,
           "--loop", str(loops), "--io", "afxdp"]
    if rate:
        cmd += ["--rate", str(rate)]
    return sh(*cmd).strip().splitlines()[-1]


def sent(line):
    """(frames sent, seconds) from `hyflow send`'s line."""
    return int(line.split()[1]), float(line.split(" in ")[1].split(" s")[0])


def measure(sw, binary, tmp, seconds, ghz):
    sw.start()
    try:
        small = os.path.join(tmp, "correct.pcap")
        write_pcap(small, [frame(i, 64 + (i % 3) * 700) for i in range(300)])
        cap = subprocess.Popen(["ip", "netns", "exec", HOST, sys.executable, "-c", CAPTURE, "3"],
                               stdout=subprocess.PIPE, text=True)
        cap.stdout.readline()
        send(binary, small, 1, rate=1000)
        frames = json.loads(cap.stdout.read())
        rows = {}
        for size in (64, 1514):
            pcap = os.path.join(tmp, "t%d.pcap" % size)
            write_pcap(pcap, [frame(i, size) for i in range(1000)])
            send(binary, pcap, 20, rate=20000)  # warm the caches
            loops = max(1, int(seconds * 1.2e6 / 1000)) if size == 64 else max(1, int(seconds * 3e5 / 1000))
            rx0, (p0, c0, e0), t0 = host_rx(), sw.counters(), time.time()
            offered, secs = sent(send(binary, pcap, loops))
            time.sleep(0.5)
            rx1, (p1, c1, e1), t1 = host_rx(), sw.counters(), time.time()
            fwd = rx1["h3"] - rx0["h3"]
            busy = c1 - c0
            # Open vSwitch counts cycles, hyflow CPU nanoseconds.
            ns = busy / ghz if isinstance(sw, Ovs) else busy
            engine = None if e0 is None else (e1 - e0) / max(1, p1 - p0)
            rows[size] = dict(offered=offered, offered_pps=offered / secs, forwarded=fwd,
                              pps=fwd / secs, ns_per_pkt=ns / max(1, p1 - p0), received=p1 - p0,
                              engine_ns=engine)
        rows["latency"] = latency(binary, tmp, LATENCY_LOAD)
        return frames, rows
    finally:
        sw.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hyflow", default="target/release/hyflow")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--skip-ovs", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("live_bench.py needs root (namespaces, XDP)")
    ghz = float([l for l in open("/proc/cpuinfo") if l.startswith("cpu MHz")][0].split(":")[1]) / 1000
    tmp = tempfile.mkdtemp()
    switches = [Hyflow(a.hyflow, "afxdp", tmp), Hyflow(a.hyflow, "afpacket", tmp)]
    if not a.skip_ovs:
        if not shutil.which("ovs-vswitchd"):
            sys.exit("no ovs-vswitchd: apt-get install openvswitch-switch")
        switches.insert(0, Ovs(tmp))
    results = []
    try:
        for sw in switches:
            make(SW, HOST, PORTS)
            results.append((sw.name, *measure(sw, a.hyflow, tmp, a.seconds, ghz)))
            remove(SW, HOST)
    finally:
        remove(SW, HOST)
        shutil.rmtree(tmp, ignore_errors=True)
    ref = results[0][1]
    print("CPU: %s, %.2f GHz; 2 cores: generator on CPU 0, switch on CPU 1\n" % (
        [l for l in open("/proc/cpuinfo") if l.startswith("model name")][0].split(":")[1].strip(), ghz))
    print("| switch | frames out (300 in) | same bytes as %s | 64 B: offered pps | forwarded pps | ns CPU/pkt | cycles/pkt | of which engine | 1514 B: offered pps | forwarded pps | ns CPU/pkt | latency p50 / p99 µs at %d pps |" % (results[0][0], LATENCY_LOAD))
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, frames, rows in results:
        r64, r1514, lat = rows[64], rows[1514], rows["latency"]
        lat_text = "%.0f / %.0f (%d of 2000)" % (lat["p50"], lat["p99"], lat["received"]) if lat else "none arrived"
        engine = "–" if r64["engine_ns"] is None else "%.0f ns" % r64["engine_ns"]
        print("| %s | %d | %s | %.0f | %.0f | %.0f | %.0f | %s | %.0f | %.0f | %.0f | %s |" % (
            name, len(frames), "yes" if frames == ref else "NO", r64["offered_pps"], r64["pps"], r64["ns_per_pkt"],
            r64["ns_per_pkt"] * ghz, engine, r1514["offered_pps"], r1514["pps"], r1514["ns_per_pkt"], lat_text))
    for name, frames, _ in results[1:]:
        if frames != ref:
            a, b = set(map(tuple, ref)), set(map(tuple, frames))
            for x, y in list(zip(sorted(a - b), sorted(b - a)))[:3]:
                print("differs: %s sent port %d %s\n         %s sent port %d %s" % (results[0][0], x[0], x[1], name, y[0], y[1]))
    return 0 if all(f == ref for _, f, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
