#!/usr/bin/env python3
"""Group-table vectors from Open vSwitch itself, for crates/hyflow/tests/data.

Random group tables (all, indirect, fast_failover watching ports and groups, select with
selection_method=hash over random fields, masks, weights and basis; buckets with several
outputs, rewrites, resubmits and chained groups) and two-table pipelines using them, loaded
into a running ovs-vswitchd (dummy datapath, bridge br0 with ports p1..p5 as OpenFlow and
datapath ports 1..5, LOCAL as datapath port 100), with some ports' links down; random packets
traced with `ovs-appctl ofproto/trace`: each packet's datapath actions and megaflow. Build and
start Open vSwitch yourself (userspace, --enable-dummy); nothing of it is in this repository.

Usage: ovs_group_vectors.py --ovs-bin DIR --out FILE [--cases N] [--packets N] [--seed S]
(OVS_RUNDIR must point at the switch's run directory.)
"""
import random

from ovs_oracle import Ovs, options, write

PORTS = [1, 2, 3, 4, 5]
HASH_FIELDS = ["ip_src", "ip_dst", "tcp_src", "tcp_dst", "udp_src", "udp_dst", "eth_src", "eth_dst",
               "nw_proto", "in_port", "ip_src=255.255.255.0", "ip_dst=255.255.0.0", "eth_type"]


def bucket_actions(r, gid):
    acts = []
    for _ in range(r.randint(1, 3)):
        c = r.random()
        if c < 0.45:
            acts.append(f"output:{r.choice(PORTS)}")
        elif c < 0.55:
            acts.append(f"mod_nw_src:10.9.{r.randint(0, 3)}.{r.randint(1, 9)}")
        elif c < 0.62:
            acts.append(f"mod_dl_dst:00:00:00:00:00:0{r.randint(1, 9)}")
        elif c < 0.7:
            acts.append(f"set_field:{r.randint(1, 9)}->reg0")
        elif c < 0.78:
            acts.append("resubmit(,1)")
        elif c < 0.85 and gid > 1:
            acts.append(f"group:{r.randint(1, gid - 1)}")
        elif c < 0.92:
            acts.append(f"mod_vlan_vid:{r.randint(1, 20)}")
        else:
            acts.append("dec_ttl")
    return ",".join(acts)


def groups(r):
    out = []
    for gid in range(1, r.randint(2, 5) + 1):
        kind = r.choice(["all", "indirect", "ff", "select", "select"])
        n = 1 if kind == "indirect" else r.randint(1, 4)
        head = f"group_id={gid},type={kind}"
        if kind == "select":
            fields = r.sample(HASH_FIELDS, r.randint(1, 4))
            names = [f.split("=")[0] for f in fields]
            fields = [f for i, f in enumerate(fields) if names.index(names[i]) == i]
            head += ",selection_method=hash,fields(" + ",".join(fields) + ")"
            if r.random() < 0.5:
                head += f",selection_method_param={r.randint(1, 1 << 20)}"
        buckets = []
        for b in range(n):
            props = []
            if r.random() < 0.3:
                props.append(f"bucket_id:{b * 3 + 7}")
            if kind == "select":
                props.append(f"weight:{r.choice([0, 1, 10, 50, 100, 100])}")
            if kind == "ff" or (kind == "select" and r.random() < 0.3):
                if gid > 1 and r.random() < 0.3:
                    props.append(f"watch_group:{r.randint(1, gid - 1)}")
                else:
                    props.append(f"watch_port:{r.choice(PORTS + [6])}")
            buckets.append("bucket=" + ",".join(props + ["actions=" + bucket_actions(r, gid)]))
        out.append(head + "," + ",".join(buckets))
    return out


def flows(r, n_groups):
    out = []
    for _ in range(r.randint(2, 6)):
        m = r.choice(["", "ip", "tcp", "udp", "in_port=1", "in_port=2", "ip,nw_dst=10.0.0.0/8"])
        acts = []
        for _ in range(r.randint(1, 2)):
            c = r.random()
            if c < 0.6:
                acts.append(f"group:{r.randint(1, n_groups)}")
            elif c < 0.8:
                acts.append(f"output:{r.choice(PORTS)}")
            elif m.startswith(("ip", "tcp", "udp")):
                acts.append(f"mod_nw_dst:10.8.0.{r.randint(1, 9)}")
            else:
                acts.append("resubmit(,1)")
        out.append(f"table=0,priority={r.randint(1, 9) * 10}{',' if m else ''}{m} actions={','.join(acts)}")
    out.append(f"table=1,priority=5,reg0=3 actions=output:{r.choice(PORTS)}")
    out.append(f"table=1,priority=1 actions=mod_nw_tos:8,output:{r.choice(PORTS)}")
    return out


def packet(r):
    proto = r.choice(["tcp", "tcp", "udp", "ip", "arp"])
    fields = [f"in_port={r.randint(1, 5)}", proto,
              f"dl_src=00:00:00:00:01:0{r.randint(1, 9)}", f"dl_dst=00:00:00:00:02:0{r.randint(1, 9)}"]
    if proto == "arp":
        return ",".join(fields)
    fields += [f"nw_src=10.{r.randint(0, 2)}.{r.randint(0, 255)}.{r.randint(1, 254)}",
               f"nw_dst={r.choice(['10.0.0.2', '192.168.1.7', '10.1.2.3'])}", f"nw_ttl={r.choice([1, 64])}"]
    if proto in ("tcp", "udp"):
        fields.append(f"{proto}_src={r.randint(1024, 65535)},{proto}_dst={r.choice([80, 443, 53, 22])}")
    return ",".join(fields)


def main():
    a = options(__doc__, cases=60, packets=12)
    r = random.Random(a.seed)
    ovs = Ovs(a.ovs_bin)
    cases = []
    for _ in range(a.cases):
        down = sorted(r.sample(PORTS, r.randint(0, 2)))
        for p in PORTS:
            ovs.appctl("netdev-dummy/set-admin-state", f"p{p}", "down" if p in down else "up", check=False)
        gs = groups(r)
        fs = flows(r, len(gs))
        ovs.ofctl("del-flows", "br0", of15=True)
        ovs.ofctl("del-groups", "br0", of15=True)
        ovs.load("add-groups", gs, of15=True)
        ovs.load("add-flows", fs)
        traced = [ovs.trace(packet(r)) for _ in range(a.packets)]
        cases.append({"groups": gs, "flows": fs, "ports_down": down, "packets": traced})
    for p in PORTS:
        ovs.appctl("netdev-dummy/set-admin-state", f"p{p}", "up", check=False)
    write(a, ovs, "ovs_group_vectors.py", cases, "; datapath ports: p1..p5 = 1..5, LOCAL = 100")


if __name__ == "__main__":
    main()
