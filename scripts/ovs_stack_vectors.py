#!/usr/bin/env python3
"""`push`/`pop` vectors from Open vSwitch itself, for crates/hyflow/tests/data.

Random pipelines that push fields and subfields (registers, MACs, IP addresses, the input
port) onto the translation's stack and pop them into registers and headers (so that lookups
after, outputs to a register and datapath rewrites depend on them), across resubmits and
across `ct(table=1)` recirculations (OVS freezes the stack with the pipeline). Loaded into a
running ovs-vswitchd (dummy datapath, bridge br0, ports p1..p4 as OpenFlow and datapath
ports 1..4), random packets are traced with `ovs-appctl ofproto/trace` (`--ct-next` where
they recirculate): per pass, its megaflow and datapath actions. Build and start Open vSwitch
yourself (userspace, --enable-dummy); nothing of it is in this repository.

Usage: ovs_stack_vectors.py --ovs-bin DIR --out FILE [--cases N] [--packets N] [--seed S]
(OVS_RUNDIR must point at the switch's run directory.)
"""
import random

from ovs_oracle import Ovs, options, random_tables, small_packet, traced_cases, write

PORTS = [1, 2, 3, 4]
PUSH = ["push:NXM_NX_REG0[]", "push:NXM_OF_ETH_SRC[]", "push:NXM_NX_REG1[0..15]", "push:NXM_OF_IN_PORT[]",
        "push:NXM_NX_REG3[8..11]"]
PUSH_IP = ["push:NXM_OF_IP_DST[]", "push:NXM_OF_IP_SRC[24..31]"]
POP = ["pop:NXM_NX_REG2[]", "pop:NXM_OF_ETH_DST[]", "pop:NXM_NX_REG0[0..7]", "pop:NXM_NX_REG2[0..15]"]
POP_IP = ["pop:NXM_OF_IP_SRC[]"]
SET = ["load:0x5->NXM_NX_REG0[]", "set_field:0x3->reg1", "load:0xa->NXM_NX_REG3[8..11]", "load:2->NXM_NX_REG2[]"]


def actions(r, ip, table, last, allow_ct):
    out = []
    for _ in range(r.randint(1, 5)):
        c = r.random()
        if c < 0.3:
            out.append(r.choice(PUSH + (PUSH_IP if ip else [])))
        elif c < 0.55:
            out.append(r.choice(POP + (POP_IP if ip else [])))
        elif c < 0.7:
            out.append(r.choice(SET))
        elif c < 0.85 and table < last and ip and allow_ct:
            out.append(f"ct(table={table + 1})")
        elif c < 0.85 and table < last:
            out.append(f"resubmit(,{table + 1})")
        elif c < 0.9:
            out.append("output:NXM_NX_REG2[0..15]")
        else:
            out.append(f"output:{r.choice(PORTS)}")
    return out


def flows(r):
    return random_tables(r, ["reg2=2", "reg0=5", "reg2=3", "reg1=3,ip"],
                         lambda r, ip, t, last: actions(r, ip, t, last, allow_ct=(t == 0)))


def main():
    a = options(__doc__, cases=40, packets=10)
    r = random.Random(a.seed)
    ovs = Ovs(a.ovs_bin)
    cases = traced_cases(a, ovs, r, flows, lambda r: small_packet(r), ["trk,new", "trk,est"], 1)
    write(a, ovs, "ovs_stack_vectors.py", cases, "; datapath ports: p1..p4 = 1..4")


if __name__ == "__main__":
    main()
