#!/usr/bin/env python3
"""Select groups on Open vSwitch's default `dp_hash` method, from Open vSwitch itself, for
crates/hyflow/tests/data.

Random select groups without a selection method (weights random, some 0, some too uneven for
256 hash values, where OVS falls back to its default hash in one pass), reached directly or
through resubmits, with actions before and after the group in every action list, in some
pipelines after a `ct(table=1)` pass. Loaded into
a running ovs-vswitchd (dummy datapath, bridge br0, ports p1..p4 as OpenFlow and datapath
ports 1..4), each random packet (TCP, UDP, ICMP, IPv6, ARP, some VLAN-tagged) is *received*
on its port (`netdev-dummy/receive`), so that the userspace datapath itself hashes it
(`hash(sym_l4(0))`) and recirculates it. The datapath flows it installed give each pass's
actions, and the `dp_hash` the datapath computed; the second pass is then traced with
`ofproto/trace recirc_id=..,dp_hash=..` for its megaflow. Build and start Open vSwitch
yourself (userspace, --enable-dummy); nothing of it is in this repository.

Usage: ovs_dp_hash_vectors.py --ovs-bin DIR --out FILE [--cases N] [--packets N] [--seed S]
(OVS_RUNDIR must point at the switch's run directory.)
"""
import random
import re
import time

from ovs_oracle import Ovs, options, write

PORTS = [1, 2, 3, 4]


def group(r, gid):
    buckets = []
    for b in range(r.randint(1, 5)):
        w = r.choice([1, 10, 50, 100, 100, 0]) if r.random() < 0.9 else r.choice([1, 255, 1000])
        act = r.choice([f"output:{r.choice(PORTS)}",
                        f"set_field:00:00:00:00:0{b}:0{gid}->dl_dst,output:{r.choice(PORTS)}",
                        "resubmit(,2)", f"load:{b + 1}->NXM_NX_REG1[],resubmit(,2)"])
        buckets.append(f"bucket=bucket_id:{b},weight:{w},actions={act}")
    return f"group_id={gid},type=select," + ",".join(buckets)


def pipeline(r, n_groups, conntrack):
    g = lambda: f"group:{r.randint(1, n_groups)}"
    pre = lambda ip=True: r.choice(["", "load:0x5->NXM_NX_REG3[],", "set_field:0x1->metadata,"]
                                   + (["mod_nw_tos:32,"] if ip else []))
    post = lambda: r.choice(["", f",output:{r.choice(PORTS)}", ",mod_dl_src:00:00:00:00:00:77," f"output:{r.choice(PORTS)}"])
    flows = [
        f"table=0,priority=20,tcp actions={pre()}resubmit(,1){post()}",
        f"table=0,priority=15,udp actions={pre()}{g()}{post()}",
        f"table=0,priority=10,ip actions={pre()}resubmit(,1){post()}",
        f"table=0,priority=5 actions={g()}{post()}",
        f"table=1,priority=10,ip,nw_src=10.0.0.0/25 actions={g()}{post()}",
        f"table=1,priority=5 actions={pre(ip=False)}resubmit(,3),{g()}",
        "table=2,priority=10,reg1=2 actions=output:4",
        "table=2,priority=5,ip actions=mod_nw_ttl:9,output:3",
        "table=2,priority=1 actions=output:3",
        f"table=3,priority=5 actions=output:{r.choice(PORTS)}",
    ]
    if conntrack:
        # IP goes through the connection tracker first: the group's pass follows a ct pass.
        flows.append("table=0,priority=30,ip,ct_state=-trk actions=ct(table=1,zone=1)")
    return flows


def mac(r):
    return "00:00:00:00:%02x:%02x" % (r.randint(0, 255), r.randint(0, 255))


def packet(r):
    """One packet as an OpenFlow flow (hyflow and ofproto/trace) and as a datapath flow
    (netdev-dummy/receive)."""
    in_port = r.choice(PORTS)
    src, dst = mac(r), mac(r)
    vlan = r.random() < 0.2
    kind = r.choice(["tcp", "tcp", "udp", "icmp", "tcp6", "udp6", "arp"])
    of = [f"in_port={in_port}", f"dl_src={src}", f"dl_dst={dst}"]
    dp = [f"in_port({in_port})", f"eth(src={src},dst={dst})"]
    if vlan:
        vid = r.randint(1, 100)
        of.append(f"dl_vlan={vid}")
        dp.append(f"eth_type(0x8100),vlan(vid={vid},pcp=0),encap(")
    sp, dpt = r.randint(1, 65535), r.choice([80, 53, 443, r.randint(1, 65535)])
    if kind in ("tcp", "udp", "icmp"):
        s, d = f"10.0.0.{r.randint(0, 255)}", f"10.1.{r.randint(0, 3)}.{r.randint(0, 255)}"
        proto = {"tcp": 6, "udp": 17, "icmp": 1}[kind]
        of += [kind, f"nw_src={s}", f"nw_dst={d}", "nw_ttl=64"]
        dp.append(f"eth_type(0x0800),ipv4(src={s},dst={d},proto={proto},tos=0,ttl=64,frag=no)")
        if kind == "icmp":
            of += ["icmp_type=8", "icmp_code=0"]
            dp.append("icmp(type=8,code=0)")
        else:
            of += [f"{kind}_src={sp}", f"{kind}_dst={dpt}"]
            dp.append(f"{kind}(src={sp},dst={dpt})")
    elif kind in ("tcp6", "udp6"):
        s, d = f"2001:db8::{r.randint(1, 0xffff):x}", f"2001:db8:{r.randint(1, 9)}::{r.randint(1, 0xffff):x}"
        proto = 6 if kind == "tcp6" else 17
        of += [kind, f"ipv6_src={s}", f"ipv6_dst={d}", "nw_ttl=64", f"{kind[:3]}_src={sp}", f"{kind[:3]}_dst={dpt}"]
        dp.append(f"eth_type(0x86dd),ipv6(src={s},dst={d},label=0,proto={proto},tclass=0,hlimit=64,frag=no)")
        dp.append(f"{kind[:3]}(src={sp},dst={dpt})")
    else:
        s, d = f"10.0.0.{r.randint(0, 255)}", f"10.0.0.{r.randint(0, 255)}"
        of += ["arp", f"arp_spa={s}", f"arp_tpa={d}", "arp_op=1"]
        dp.append(f"eth_type(0x0806),arp(sip={s},tip={d},op=1,sha=00:00:00:00:00:00,tha=00:00:00:00:00:00)")
    if vlan:
        dp[-1] += ")"
    return ",".join(of), ",".join(dp)


DP_FLOW = re.compile(r"recirc_id\((0x[0-9a-f]+|\d+)\),(?:dp_hash\((0x[0-9a-f]+)/(0x[0-9a-f]+)\),)?.*actions:(.*)$")
RECIRC = re.compile(r"recirc\((0x[0-9a-f]+)\)$")


def datapath_flows(ovs):
    """The datapath flows installed so far: recirc_id -> (dp_hash, dp_hash mask, actions)."""
    flows = {}
    for line in ovs.appctl("dpctl/dump-flows").splitlines():
        m = DP_FLOW.search(line)
        if m:
            rid = int(m.group(1), 0)
            flows[rid] = (m.group(2) and int(m.group(2), 16), m.group(3) and int(m.group(3), 16), m.group(4))
    return flows


def chain(flows):
    """The passes a packet took, following each pass's recirculation from recirc_id 0; None
    while a pass it recirculates to is not installed yet."""
    passes, rid = [], 0
    while True:
        if rid not in flows:
            return None
        passes.append((rid,) + flows[rid])
        m = RECIRC.search(flows[rid][2])
        if not m:
            return passes
        rid = int(m.group(1), 16)


def receive(ovs, of, dp):
    """The passes of one received packet: per pass, its datapath actions; after a hash, the
    dp_hash the datapath computed and, after the datapath's hash alone (no ct before it),
    the pass's megaflow as ofproto/trace gives it."""
    # Purged with their ukeys, so that the packet is upcalled and its flows installed anew;
    # the connection tracker flushed, so that every packet starts a connection.
    ovs.appctl("revalidator/purge")
    ovs.appctl("dpctl/flush-conntrack")
    ovs.appctl("netdev-dummy/receive", f"p{of.split(',')[0].split('=')[1]}", dp)
    for _ in range(100):
        passes = chain(datapath_flows(ovs))
        if passes:
            break
        time.sleep(0.05)
    else:
        raise RuntimeError(f"no datapath flows for {dp}")
    out = []
    for i, (rid, dp_hash, mask, actions) in enumerate(passes):
        p = {"dp_actions": actions}
        if dp_hash is not None:
            p.update({"dp_hash": dp_hash, "dp_hash_mask": mask})
            if i == 1:
                traced = ovs.trace(f"recirc_id={rid:#x},dp_hash={dp_hash:#x},{of}")
                p.update({"megaflow": traced["megaflow"], "trace_dp_actions": traced["dp_actions"]})
        out.append(p)
    return {"packet": of, "passes": out}


def main():
    args = options(__doc__, cases=20, packets=12)
    r = random.Random(args.seed)
    ovs = Ovs(args.ovs_bin)
    cases = []
    for _ in range(args.cases):
        n_groups = r.randint(1, 3)
        groups = [group(r, g) for g in range(1, n_groups + 1)]
        flows = pipeline(r, n_groups, conntrack=r.random() < 0.4)
        ovs.ofctl("del-flows", "br0")
        ovs.ofctl("del-groups", "br0", of15=True)
        ovs.load("add-groups", groups, of15=True)
        ovs.load("add-flows", flows)
        packets = [receive(ovs, *packet(r)) for _ in range(args.packets)]
        cases.append({"groups": groups, "flows": flows, "packets": packets})
    write(args, ovs, "ovs_dp_hash_vectors.py", cases)


if __name__ == "__main__":
    main()
