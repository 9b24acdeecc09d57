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
import argparse
import json
import os
import random
import subprocess
import tempfile

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
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ovs-bin", required=True, help="directory with ovs-ofctl and ovs-appctl")
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", type=int, default=60)
    ap.add_argument("--packets", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    r = random.Random(a.seed)
    ofctl, appctl = os.path.join(a.ovs_bin, "ovs-ofctl"), os.path.join(a.ovs_bin, "ovs-appctl")
    cases = []
    for _ in range(a.cases):
        flows = rules(r)
        with tempfile.NamedTemporaryFile("w", suffix=".flows", delete=False) as f:
            f.write("\n".join(flows) + "\n")
        subprocess.run([ofctl, "del-flows", "br0"], check=True)
        subprocess.run([ofctl, "add-flows", "br0", f.name], check=True)
        os.unlink(f.name)
        traced = []
        for _ in range(a.packets):
            p = packet(r)
            out = subprocess.run([appctl, "ofproto/trace", "br0", p], check=True, capture_output=True, text=True).stdout
            line = lambda prefix: next(l for l in out.splitlines() if l.startswith(prefix))[len(prefix):].strip()
            traced.append({"packet": p, "megaflow": line("Megaflow:"), "dp_actions": line("Datapath actions:")})
        cases.append({"flows": flows, "packets": traced})
    about = ("Open vSwitch " + subprocess.run([ofctl, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
             + f"; scripts/ovs_conjunction_vectors.py --seed {a.seed} --cases {a.cases} --packets {a.packets}")
    with open(a.out, "w") as f:
        json.dump({"about": about, "cases": cases}, f, indent=1)
    print(f"wrote {len(cases)} cases of {a.packets} packets to {a.out}")


if __name__ == "__main__":
    main()
