#!/usr/bin/env python3
"""Connection-tracking vectors from Open vSwitch itself, for crates/hyflow/tests/data.

Random pipelines on conntrack: table 0 sends IP through `ct(table=N)` in a zone (a constant
or a register's bits), after rewrites and register loads, or clears it; later tables match
`ct_state` flag combinations, `ct_zone`, `ct_mark`, `ct_label` and the original tuple
(`ct_nw_dst`, `ct_tp_dst`, with their prerequisite), and commit (with `force`, `exec` setting
mark and label, `nat(src|dst=range)`), recirculate again, output or resubmit. Loaded into a
running ovs-vswitchd (dummy datapath, bridge br0, ports p1..p4 as OpenFlow and datapath ports
1..4), random packets are traced with `ovs-appctl ofproto/trace --ct-next STATE...`: for each
pass (the first, then every recirculation in order), its megaflow and datapath actions. Build
and start Open vSwitch yourself (userspace, --enable-dummy); nothing of it is in this repository.

Usage: ovs_ct_vectors.py --ovs-bin DIR --out FILE [--cases N] [--packets N] [--seed S]
(OVS_RUNDIR must point at the switch's run directory.)
"""
import random

from ovs_oracle import Ovs, options, traced_cases, write

PORTS = [1, 2, 3, 4]
STATES = ["+trk+new", "+trk+est", "+trk+est+rpl", "+trk+rel", "+trk+inv", "-trk", "+trk-new",
          "+trk+new-rpl", "+trk+est-rel+dnat", "+trk+snat", "+trk-inv"]
NEXT = ["trk,new", "trk,est", "trk,est,rpl", "trk,rel", "trk,inv", "trk,new,dnat", "trk,est,snat,rpl"]


def ct(r, table=None, commit=False):
    parts = []
    if commit:
        parts.append("commit")
        if r.random() < 0.15:
            parts.append("force")
    if table is not None:
        parts.append(f"table={table}")
    z = r.random()
    if z < 0.5:
        parts.append(f"zone={r.randint(1, 9)}")
    elif z < 0.65:
        parts.append("zone=NXM_NX_REG0[0..15]")
    if commit:
        if r.random() < 0.4:
            kind = r.choice(["src", "dst"])
            rng = r.choice(["10.9.0.1", "10.9.0.1-10.9.0.9", "10.9.0.5:8080", "10.9.0.1-10.9.0.3:1000-1999", ""])
            flags = r.choice(["", ",persistent", ",random", ",hash"]) if rng else ""
            parts.append(f"nat({kind}{'=' + rng if rng else ''}{flags})")
        elif r.random() < 0.2:
            parts.append("nat")
        ex = []
        if r.random() < 0.5:
            ex.append(r.choice([f"set_field:{r.randint(1, 99)}->ct_mark", f"load:{r.randint(1, 15)}->NXM_NX_CT_MARK[0..3]",
                                "move:NXM_NX_REG1[]->NXM_NX_CT_MARK[]"]))
        if r.random() < 0.3:
            ex.append(r.choice([f"set_field:{r.randint(1, 9)}->ct_label", "set_field:0x1/0x1->ct_label"]))
        if ex:
            parts.append("exec(" + ",".join(ex) + ")")
    return "ct(" + ",".join(parts) + ")"


def later_table(r, t, last):
    out = []
    for _ in range(r.randint(2, 5)):
        m = ["ct_state=" + r.choice(STATES)]
        if r.random() < 0.3:
            m.append(f"ct_zone={r.randint(0, 9)}")
        if r.random() < 0.2:
            m.append(f"ct_mark={r.randint(0, 9)}")
        if r.random() < 0.1:
            m.append("ct_label=0x1/0x1")
        if "+trk+est" in m[0] and r.random() < 0.3:
            m.append(r.choice(["ct_nw_dst=10.0.0.2", "ct_nw_proto=6", "ct_nw_proto=6,ct_tp_dst=80"]))
        m.append(r.choice(["ip", "tcp", "udp", "ip,nw_dst=10.0.0.2", "tcp,tp_dst=80"]))
        acts = []
        for _ in range(r.randint(1, 2)):
            c = r.random()
            if c < 0.35:
                acts.append(ct(r, commit=True))
            elif c < 0.5 and t < last:
                acts.append(ct(r, table=t + 1))
            elif c < 0.6 and t < last:
                acts.append(f"resubmit(,{t + 1})")
            elif c < 0.65:
                acts.append("ct_clear")
            else:
                acts.append(f"output:{r.choice(PORTS)}")
        out.append(f"table={t},priority={r.randint(1, 9) * 10},{','.join(m)} actions={','.join(acts)}")
    out.append(f"table={t},priority=0 actions=output:{r.choice(PORTS)}")
    return out


def flows(r):
    last = r.randint(1, 3)
    out = []
    for _ in range(r.randint(1, 3)):
        pre = r.choice(["", "set_field:3->reg0,", "mod_nw_dst:10.0.0.2,", "set_field:7->reg1,", "mod_tp_dst:80,"])
        m = r.choice(["ip", "tcp", "udp", "ip,in_port=1", "ip,nw_src=10.1.0.0/16", "ip,ct_state=-trk"])
        if "tp_dst" in pre and m.startswith("ip"):
            m = "tcp" + m[2:]
        out.append(f"table=0,priority={r.randint(2, 9) * 10},{m} actions={pre}{ct(r, table=1)}"
                   + (f",output:{r.choice(PORTS)}" if r.random() < 0.2 else ""))
    out.append("table=0,priority=1,arp actions=output:2")
    for t in range(1, last + 1):
        out.extend(later_table(r, t, last))
    return out


def packet(r):
    proto = r.choice(["tcp", "tcp", "udp", "icmp", "arp"])
    fields = [f"in_port={r.randint(1, 4)}", proto]
    if proto == "arp":
        return ",".join(fields)
    fields += [f"nw_src=10.{r.randint(0, 1)}.{r.randint(0, 3)}.{r.randint(1, 9)}",
               f"nw_dst={r.choice(['10.0.0.2', '192.168.1.7'])}"]
    if proto in ("tcp", "udp"):
        fields.append(f"{proto}_src={r.randint(1024, 1030)},{proto}_dst={r.choice([80, 443, 53])}")
    return ",".join(fields)


def main():
    a = options(__doc__, cases=50, packets=10)
    r = random.Random(a.seed)
    ovs = Ovs(a.ovs_bin)
    cases = traced_cases(a, ovs, r, flows, packet, NEXT, 2)
    write(a, ovs, "ovs_ct_vectors.py", cases, "; datapath ports: p1..p4 = 1..4")


if __name__ == "__main__":
    main()
