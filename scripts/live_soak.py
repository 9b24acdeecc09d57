#!/usr/bin/env python3
"""A soak of `hyflow switch` (root): steady traffic for a while, a rule update every second,
the switch's memory sampled.

Namespace `hyls-sw` holds ports p1, p2 (veth), namespace `hyls-h` their peers h1, h2. The
pipeline forwards p1 → p2; `hyflow send` offers --rate frames/s of 1,000 flows from h1 for
--minutes; every second `hyflow ctl` adds, modifies or deletes one of 50 rules in a second
table that every frame visits (each update revalidates cached decisions). Every 10 s the
switch's resident memory (VmRSS) is read. At the end: frames sent, forwarded (h2's receive
counter), lost (and where: the kernel's receive ring, the switch's drops), updates applied,
and RSS first, last and largest.

Usage: scripts/live_soak.py [--hyflow BIN] [--minutes M] [--rate PPS] [--io afxdp|afpacket] [--cores N]
Exit 0 when nothing was lost and the last RSS is within 10% (+1 MiB) of the first after
warm-up.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

from live_netns import make, remove, sh, write_pcap

SW, HOST = "hyls-sw", "hyls-h"




def frames(flows):
    """Minimum-size UDP frames from host 1 to host 2, one per flow."""
    out = []
    for i in range(flows):
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 46, 0, 0, 64, 17, 0, bytes([10, 1, i >> 8, i & 255]),
                         bytes([10, 2, 0, 1]))
        udp = struct.pack("!HHHH", 10000 + i % 50, 53, 26, 0) + bytes(18)
        out.append(bytes.fromhex("020000000002020000000001") + b"\x08\x00" + ip + udp)
    return out


def rss_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hyflow", default="target/release/hyflow")
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--rate", type=int, default=100000)
    ap.add_argument("--io", default="afxdp")
    ap.add_argument("--cores", default="1", help="the switch's --cores (2: one core per port, "
                    "so every frame is received on one core and sent on the port the other polls)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    flows, ports, pcap, sock = (os.path.join(tmp, n) for n in ("flows.txt", "ports.txt", "t.pcap", "ctl.sock"))
    open(flows, "w").write("table=0,priority=1,in_port=1,actions=resubmit(,1)\n"
                           "table=1,priority=0,actions=output:2\n")
    open(ports, "w").write("p1=1\np2=2\n")
    write_pcap(pcap, frames(1000))
    make(SW, HOST, 2)
    switch = sender = None
    try:
        switch = subprocess.Popen(["ip", "netns", "exec", SW, a.hyflow, "switch", "--flows", flows, "--ports", ports,
                                   "--ctl", sock, "--io", a.io, "--cores", a.cores], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        assert "ready" in switch.stdout.readline()
        seconds = a.minutes * 60
        loops = max(1, int(a.rate * seconds / 1000))
        sender = subprocess.Popen(["ip", "netns", "exec", HOST, a.hyflow, "send", "--iface", "h1", "--trace", pcap,
                                   "--rate", str(a.rate), "--loop", str(loops)], stdout=subprocess.PIPE, text=True)
        samples, updates, t0 = [], 0, time.time()
        while sender.poll() is None:
            n = updates % 150
            rule = "table=1,priority=%d,udp,tp_src=%d" % (10 + n % 50, 10000 + n % 50)
            if n < 50:
                cmd = ["add-flow", rule + ",actions=output:2"]
            elif n < 100:
                cmd = ["mod-flows", "--strict", rule + ",actions=output:2"]
            else:
                cmd = ["del-flows", "--strict", rule]
            sh(a.hyflow, "ctl", sock, *cmd)
            updates += 1
            if updates % 10 == 1:
                samples.append((round(time.time() - t0), rss_kib(switch.pid)))
            time.sleep(1)
        sent = sender.stdout.read().strip()
        time.sleep(0.5)
        show = json.loads(sh(a.hyflow, "ctl", sock, "show", "--json"))
        rx = json.loads(sh("ip", "-n", HOST, "-s", "-j", "link", "show", "h2"))[0]["stats64"]["rx"]["packets"]
        offered = int(sent.split()[1])
        kernel = sum(i["rx_dropped"] for i in show["interfaces"])
        drops = show["live_drops"]
        warm = samples[min(1, len(samples) - 1)][1]
        last, peak = samples[-1][1], max(s for _, s in samples)
        print(sent)
        print("soak: %.1f min, %d updates; offered %d, forwarded %d, lost %d (kernel receive ring %d, switch %s); "
              "RSS KiB at %s s: %d, last %d, largest %d" % (
                  a.minutes, updates, offered, rx, offered - rx, kernel, drops, samples[1][0] if len(samples) > 1 else 0,
                  warm, last, peak))
        print("RSS samples (s, KiB): %s" % samples)
        ok = offered == rx and last <= warm * 1.1 + 1024
        return 0 if ok else 1
    finally:
        for p in (sender, switch):
            if p and p.poll() is None:
                p.terminate()
                p.wait(10)
        remove(SW, HOST)


if __name__ == "__main__":
    sys.exit(main())
