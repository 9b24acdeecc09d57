#!/usr/bin/env python3
"""`NORMAL` vectors from Open vSwitch itself, for crates/hyflow/tests/data.

Random pipelines around `NORMAL` (VLAN rewrites, source MAC rewrites, outputs before it),
loaded into a running ovs-vswitchd (dummy datapath, bridge br0 with ports p1..p5 as OpenFlow
and datapath ports 1..5, LOCAL as datapath port 100), and sequences of packets from small
pools of MACs (with broadcast, multicast and reserved destinations, VLANs, ARP) traced with
`ovs-appctl ofproto/trace ... -generate`, which learns MACs before the next is traced: per
packet, the datapath actions and the megaflow. The MAC table is flushed between cases. Build and start Open
vSwitch yourself (userspace, --enable-dummy); nothing of it is in this repository.

Usage: ovs_normal_vectors.py --ovs-bin DIR --out FILE [--cases N] [--packets N] [--seed S]
(OVS_RUNDIR must point at the switch's run directory.)
"""
import argparse
import json
import os
import random
import subprocess
import tempfile

MACS = ["00:00:00:00:00:0%d" % i for i in range(1, 7)] + ["ff:ff:ff:ff:ff:ff", "01:00:5e:00:00:01",
                                                         "01:80:c2:00:00:00"]


def flows(r):
    out = ["table=0,priority=0 actions=NORMAL"]
    for _ in range(r.randint(0, 3)):
        c = r.random()
        m = r.choice(["in_port=1", "in_port=2", "dl_dst=00:00:00:00:00:03", "ip", "dl_vlan=7"])
        if c < 0.3:
            acts = "mod_vlan_vid:9,NORMAL"
        elif c < 0.5:
            acts = "strip_vlan,NORMAL"
        elif c < 0.7:
            acts = f"output:{r.randint(1, 5)},NORMAL"
        elif c < 0.85:
            acts = "mod_dl_src:00:00:00:00:00:06,NORMAL"
        else:
            acts = "drop"
        out.append(f"table=0,priority={r.randint(1, 9) * 10},{m} actions={acts}")
    return out


def packet(r):
    fields = [f"in_port={r.choice(['1', '2', '3', '4', '5', 'LOCAL'])}",
              f"dl_src={r.choice(MACS[:6] + MACS[6:7])}", f"dl_dst={r.choice(MACS)}"]
    if r.random() < 0.25:
        fields.append(f"dl_vlan={r.choice([5, 7])}")
    proto = r.choice(["ip", "arp", ""])
    if proto == "arp":
        fields.insert(0, "arp")
        fields += [f"arp_op={r.choice([1, 2])}", f"arp_spa=10.0.0.{r.randint(1, 2)}", f"arp_tpa=10.0.0.{r.randint(1, 2)}"]
    elif proto:
        fields.insert(0, proto)
        fields += [f"nw_src=10.0.0.{r.randint(1, 4)}", f"nw_dst=10.0.0.{r.randint(1, 4)}"]
    return ",".join(fields)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ovs-bin", required=True, help="directory with ovs-ofctl and ovs-appctl")
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", type=int, default=40)
    ap.add_argument("--packets", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    r = random.Random(a.seed)
    ofctl, appctl = os.path.join(a.ovs_bin, "ovs-ofctl"), os.path.join(a.ovs_bin, "ovs-appctl")
    cases = []
    for _ in range(a.cases):
        fs = flows(r)
        subprocess.run([ofctl, "del-flows", "br0"], check=True)
        subprocess.run([appctl, "fdb/flush", "br0"], check=True, capture_output=True)
        with tempfile.NamedTemporaryFile("w", suffix=".flows", delete=False) as f:
            f.write("\n".join(fs) + "\n")
        subprocess.run([ofctl, "add-flows", "br0", f.name], check=True)
        os.unlink(f.name)
        traced = []
        for _ in range(a.packets):
            p = packet(r)
            out = subprocess.run([appctl, "ofproto/trace", "br0", p, "-generate"], check=True,
                                 capture_output=True, text=True).stdout
            line = lambda prefix: next(l for l in out.splitlines() if l.startswith(prefix))[len(prefix):].strip()
            traced.append({"packet": p, "megaflow": line("Megaflow:"), "dp_actions": line("Datapath actions:")})
        fdb = subprocess.run([appctl, "fdb/show", "br0"], check=True, capture_output=True, text=True).stdout
        cases.append({"flows": fs, "packets": traced, "fdb": fdb.splitlines()[1:]})
    about = ("Open vSwitch " + subprocess.run([ofctl, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
             + f"; scripts/ovs_normal_vectors.py --seed {a.seed} --cases {a.cases} --packets {a.packets}")
    with open(a.out, "w") as f:
        json.dump({"about": about, "cases": cases}, f, indent=1)
    print(f"wrote {len(cases)} cases of {a.packets} packets to {a.out}")


if __name__ == "__main__":
    main()
