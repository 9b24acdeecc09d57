#!/usr/bin/env python3
"""`clone(...)` vectors from Open vSwitch itself, for crates/hyflow/tests/data.

Random pipelines whose flows run `clone(...)` bodies — header rewrites, register loads,
outputs, resubmits, pushes and pops, nested clones, and the connection tracker (`ct`,
`ct(table=N)`, `ct_clear`), which the datapath cannot undo — with actions after the clone or
none. OVS keeps a body inline when what follows can undo it, and wraps it in the datapath's
`clone(...)` otherwise. Loaded into a running ovs-vswitchd (dummy datapath, bridge br0, ports
p1..p4 as OpenFlow and datapath ports 1..4), random packets are traced with `ovs-appctl
ofproto/trace` (`--ct-next` where they recirculate): per pass, its megaflow and datapath
actions. Build and start Open vSwitch yourself (userspace, --enable-dummy); nothing of it is
in this repository.

Usage: ovs_clone_vectors.py --ovs-bin DIR --out FILE [--cases N] [--packets N] [--seed S]
(OVS_RUNDIR must point at the switch's run directory.)
"""
import random

from ovs_oracle import Ovs, options, random_tables, small_packet, traced_cases, write

PORTS = [1, 2, 3, 4]


def body(r, ip, table, last, depth):
    acts = []
    for _ in range(r.randint(1, 4)):
        c = r.random()
        if c < 0.2:
            acts.append(r.choice(["mod_dl_dst:00:00:00:00:00:09", "mod_dl_src:00:00:00:00:00:08", "load:0x7->NXM_NX_REG0[]"]
                                 + (["mod_nw_dst:10.9.9.9", "mod_nw_tos:32", "dec_ttl"] if ip else [])))
        elif c < 0.45:
            acts.append(f"output:{r.choice(PORTS)}")
        elif c < 0.55 and table < last:
            acts.append(f"resubmit(,{table + 1})")
        elif c < 0.65 and ip:
            acts.append(r.choice(["ct(zone=1)", "ct(commit,zone=2)", "ct_clear"] + ([f"ct(table={table + 1})"] if table < last else [])))
        elif c < 0.75:
            acts.append(r.choice(["push:NXM_NX_REG0[]", "pop:NXM_NX_REG1[]"]))
        elif c < 0.82 and depth < 2:
            acts.append("clone(" + ",".join(body(r, ip, table, last, depth + 1)) + ")")
        else:
            acts.append(r.choice(["load:0x3->NXM_NX_REG1[]", f"output:{r.choice(PORTS)}"]))
    return acts


def rule_actions(r, ip, t, last):
    acts = []
    if r.random() < 0.5:
        acts.append(r.choice(["mod_dl_src:00:00:00:00:00:07", "load:0x3->NXM_NX_REG1[]"] + (["mod_nw_src:10.8.8.8"] if ip else [])))
    acts.append("clone(" + ",".join(body(r, ip, t, last, 0)) + ")")
    for _ in range(r.choice([0, 0, 1, 2])):
        acts.append(r.choice([f"output:{r.choice(PORTS)}", "mod_dl_dst:00:00:00:00:00:0a"]
                             + ([f"resubmit(,{t + 1})"] if t < last else [])))
    return acts


def flows(r):
    return random_tables(r, ["reg0=7,ip", "reg1=3"], rule_actions)


def main():
    a = options(__doc__, cases=40, packets=10)
    r = random.Random(a.seed)
    ovs = Ovs(a.ovs_bin)
    cases = traced_cases(a, ovs, r, flows, lambda r: small_packet(r, ttl=True), ["trk,new", "trk,est"], 1)
    write(a, ovs, "ovs_clone_vectors.py", cases, "; datapath ports: p1..p4 = 1..4")


if __name__ == "__main__":
    main()
