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
import argparse
import json
import os
import random
import subprocess
import tempfile

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
        learned = subprocess.run([ofctl, "dump-flows", "--no-stats", "br0"], check=True, capture_output=True,
                                 text=True).stdout.splitlines()
        cases.append({"flows": fs, "packets": traced, "final_flows": [l.strip() for l in learned if "actions=" in l]})
    about = ("Open vSwitch " + subprocess.run([ofctl, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
             + f"; scripts/ovs_learn_vectors.py --seed {a.seed} --cases {a.cases} --packets {a.packets}")
    with open(a.out, "w") as f:
        json.dump({"about": about, "cases": cases}, f, indent=1)
    print(f"wrote {len(cases)} cases of {a.packets} packets to {a.out}")


if __name__ == "__main__":
    main()
