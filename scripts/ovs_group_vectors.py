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
import argparse
import json
import os
import random
import subprocess
import tempfile

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
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ovs-bin", required=True, help="directory with ovs-ofctl and ovs-appctl")
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", type=int, default=60)
    ap.add_argument("--packets", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    r = random.Random(a.seed)
    ofctl, appctl = os.path.join(a.ovs_bin, "ovs-ofctl"), os.path.join(a.ovs_bin, "ovs-appctl")
    of15 = [ofctl, "-O", "OpenFlow15"]
    cases = []
    for _ in range(a.cases):
        down = sorted(r.sample(PORTS, r.randint(0, 2)))
        for p in PORTS:
            state = "down" if p in down else "up"
            subprocess.run([appctl, "netdev-dummy/set-admin-state", f"p{p}", state], capture_output=True)
        gs = groups(r)
        fs = flows(r, len(gs))
        subprocess.run(of15 + ["del-flows", "br0"], check=True)
        subprocess.run(of15 + ["del-groups", "br0"], check=True)
        with tempfile.NamedTemporaryFile("w", suffix=".groups", delete=False) as f:
            f.write("\n".join(gs) + "\n")
        subprocess.run(of15 + ["add-groups", "br0", f.name], check=True)
        os.unlink(f.name)
        with tempfile.NamedTemporaryFile("w", suffix=".flows", delete=False) as f:
            f.write("\n".join(fs) + "\n")
        subprocess.run([ofctl, "add-flows", "br0", f.name], check=True)
        os.unlink(f.name)
        traced = []
        for _ in range(a.packets):
            p = packet(r)
            out = subprocess.run([appctl, "ofproto/trace", "br0", p], check=True, capture_output=True, text=True).stdout
            line = lambda prefix: next(l for l in out.splitlines() if l.startswith(prefix))[len(prefix):].strip()
            traced.append({"packet": p, "megaflow": line("Megaflow:"), "dp_actions": line("Datapath actions:")})
        cases.append({"groups": gs, "flows": fs, "ports_down": down, "packets": traced})
    for p in PORTS:
        subprocess.run([appctl, "netdev-dummy/set-admin-state", f"p{p}", "up"], capture_output=True)
    about = ("Open vSwitch " + subprocess.run([ofctl, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
             + f"; scripts/ovs_group_vectors.py --seed {a.seed} --cases {a.cases} --packets {a.packets}"
             + "; datapath ports: p1..p5 = 1..5, LOCAL = 100")
    with open(a.out, "w") as f:
        json.dump({"about": about, "cases": cases}, f, indent=1)
    print(f"wrote {len(cases)} cases of {a.packets} packets to {a.out}")


if __name__ == "__main__":
    main()
