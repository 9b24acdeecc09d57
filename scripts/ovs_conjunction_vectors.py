#!/usr/bin/env python3
"""Conjunctive-match vectors from Open vSwitch itself, for crates/hyflow/tests/data.

Random single-table pipelines of conjunctive matches (clauses at shared priorities,
`conj_id` rules, some ids without one) and ordinary rules, loaded into a running
ovs-vswitchd (dummy datapath, bridge br0 with ports p1..p3 as OpenFlow and datapath ports
1..3), and random packets traced with `ovs-appctl ofproto/trace`: each packet's datapath
actions and megaflow. Build and start Open vSwitch yourself (userspace, --enable-dummy);
nothing of it is in this repository.

Usage: ovs_conjunction_vectors.py --ovs-bin DIR --out FILE [--cases N] [--packets N] [--seed S]
(OVS_RUNDIR must point at the switch's run directory.)
"""
import random

from ovs_oracle import Ovs, options, write

BROAD = ["", "ip", "tcp", "udp", "in_port=1", "in_port=2", "ip,nw_src=10.0.0.0/8", "ip,nw_dst=10.0.0.0/8",
         "ip,nw_src=10.1.0.0/16", "ip,nw_dst=192.168.1.0/24", "tcp,tp_dst=80", "tcp,tp_dst=443",
         "udp,udp_dst=53", "ip,nw_src=10.1.2.0/24"]
CLAUSES = {1: 2, 2: 3, 3: 2}
ID_PRIORITY = {1: 100, 2: 200, 3: 100}


def rules(r):
    out = []
    for _ in range(r.randint(2, 10)):
        cid = r.randint(1, 3)
        prio = ID_PRIORITY[cid] if r.random() < 0.85 else r.choice([10, 100, 200])
        acts = [f"conjunction({cid},{r.randint(1, CLAUSES[cid])}/{CLAUSES[cid]})"]
        if r.random() < 0.2:
            other = r.choice([i for i in CLAUSES if i != cid])
            acts.append(f"conjunction({other},{r.randint(1, CLAUSES[other])}/{CLAUSES[other]})")
        m = r.choice(BROAD)
        out.append(f"priority={prio}{',' if m else ''}{m} actions={','.join(acts)}")
    for cid in CLAUSES:
        if r.random() < 0.75:
            out.append(f"priority={r.choice([10, 100, 300])},conj_id={cid} actions=output:{r.randint(1, 3)}")
    for _ in range(r.randint(0, 4)):
        m = r.choice(BROAD)
        out.append(f"priority={r.choice([1, 10, 100, 150, 200])}{',' if m else ''}{m} actions=output:{r.randint(1, 3)}")
    return out


def packet(r):
    proto = r.choice(["tcp", "tcp", "udp", "ip"])
    fields = [f"in_port={r.randint(1, 3)}", proto,
              f"nw_src={r.choice(['10.1.2.3', '10.0.0.1', '10.1.9.9', '172.16.0.1'])}",
              f"nw_dst={r.choice(['10.0.0.2', '192.168.1.7', '8.8.8.8'])}"]
    if proto in ("tcp", "udp"):
        fields.append(f"{proto}_src=1234,{proto}_dst={r.choice([80, 443, 53, 22])}")
    return ",".join(fields)


def main():
    a = options(__doc__, cases=60, packets=12)
    r = random.Random(a.seed)
    ovs = Ovs(a.ovs_bin)
    cases = []
    for _ in range(a.cases):
        flows = rules(r)
        ovs.ofctl("del-flows", "br0")
        ovs.load("add-flows", flows)
        cases.append({"flows": flows, "packets": [ovs.trace(packet(r)) for _ in range(a.packets)]})
    write(a, ovs, "ovs_conjunction_vectors.py", cases)


if __name__ == "__main__":
    main()
