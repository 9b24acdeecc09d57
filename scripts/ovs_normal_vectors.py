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
import random

from ovs_oracle import Ovs, options, write

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
    a = options(__doc__, cases=40, packets=20)
    r = random.Random(a.seed)
    ovs = Ovs(a.ovs_bin)
    cases = []
    for _ in range(a.cases):
        fs = flows(r)
        ovs.ofctl("del-flows", "br0")
        ovs.appctl("fdb/flush", "br0")
        ovs.load("add-flows", fs)
        traced = [ovs.trace(packet(r), generate=True) for _ in range(a.packets)]
        fdb = ovs.appctl("fdb/show", "br0").splitlines()[1:]
        cases.append({"flows": fs, "packets": traced, "fdb": fdb})
    write(a, ovs, "ovs_normal_vectors.py", cases, "; datapath ports: p1..p5 = 1..5, LOCAL = 100")


if __name__ == "__main__":
    main()
