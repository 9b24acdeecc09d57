#!/usr/bin/env python3
"""`learn` vectors from Open vSwitch itself, for crates/hyflow/tests/data.

Random pipelines whose first table learns flows (MAC learning, learned loads of registers and
constants, learned matches on IP fields with their prerequisites, learned outputs) into later
tables, loaded into a running ovs-vswitchd (dummy datapath, bridge br0 with ports p1..p5 as
OpenFlow and datapath ports 1..5), and sequences of packets from small pools traced with
`ovs-appctl ofproto/trace ... -generate`, which installs what each packet learns before the
next is traced: per packet, the datapath actions and the megaflow. Build and start Open
vSwitch yourself (userspace, --enable-dummy); nothing of it is in this repository.

Usage: ovs_learn_vectors.py --ovs-bin DIR --out FILE [--cases N] [--packets N] [--seed S]
(OVS_RUNDIR must point at the switch's run directory.)
"""
import random

from ovs_oracle import Ovs, options, write

MACS = ["00:00:00:00:00:0%d" % i for i in range(1, 6)]
LEARNS = [
    "learn(table=1,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[])",
    "learn(table=1,priority=200,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15],"
    "output:NXM_OF_IN_PORT[])",
    "learn(table=2,idle_timeout=30,eth_type=0x800,NXM_OF_IP_DST[]=NXM_OF_IP_SRC[],load:5->NXM_NX_REG1[],"
    "output:NXM_OF_IN_PORT[])",
    "learn(table=1,cookie=0x7,eth_type=0x800,nw_proto=6,NXM_OF_TCP_DST[]=NXM_OF_TCP_SRC[],"
    "NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[])",
    "learn(table=1,NXM_OF_ETH_SRC[0..23]=NXM_OF_ETH_DST[0..23],load:0x3->NXM_NX_REG2[0..1],output:NXM_OF_IN_PORT[])",
]


def flows(r):
    out = []
    learns = r.sample(LEARNS, r.randint(1, 2))
    for i, l in enumerate(learns):
        # A learn reading IP or TCP fields needs a match that guarantees them.
        need = "tcp" if "TCP" in l else "ip" if "IP_" in l else ""
        m = need or (r.choice(["", "in_port=1", "in_port=2"]) if i else "")
        prio = 100 + 10 * i
        out.append(f"table=0,priority={prio}{',' if m else ''}{m} actions={l},resubmit(,1),resubmit(,2)")
    out.append(f"table=1,priority=0 actions=output:{r.randint(1, 5)}")
    out.append("table=1,priority=300,reg0=3 actions=output:4")
    out.append(f"table=2,priority=0,reg1=5 actions=output:{r.randint(1, 5)}")
    return out


def packet(r):
    proto = r.choice(["tcp", "tcp", "ip", ""])
    fields = [f"in_port={r.randint(1, 4)}", f"dl_src={r.choice(MACS)}", f"dl_dst={r.choice(MACS)}"]
    if r.random() < 0.2:
        fields.append(f"dl_vlan={r.choice([5, 7])}")
    if proto:
        fields.insert(0, proto)
        fields += [f"nw_src=10.0.0.{r.randint(1, 4)}", f"nw_dst=10.0.0.{r.randint(1, 4)}"]
        if proto == "tcp":
            fields += [f"tcp_src={r.choice([80, 443, 1000])}", f"tcp_dst={r.choice([80, 443, 1000])}"]
    return ",".join(fields)


def main():
    a = options(__doc__, cases=40, packets=20)
    r = random.Random(a.seed)
    ovs = Ovs(a.ovs_bin)
    cases = []
    for _ in range(a.cases):
        fs = flows(r)
        ovs.ofctl("del-flows", "br0")
        ovs.load("add-flows", fs)
        traced = [ovs.trace(packet(r), generate=True) for _ in range(a.packets)]
        final = [l.strip() for l in ovs.ofctl("dump-flows", "--no-stats", "br0").splitlines() if "actions=" in l]
        cases.append({"flows": fs, "packets": traced, "final_flows": final})
    write(a, ovs, "ovs_learn_vectors.py", cases)


if __name__ == "__main__":
    main()
