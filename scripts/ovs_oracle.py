"""What the scripts/ovs_*_vectors.py generators share: their options, the tools of a running
Open vSwitch (userspace, dummy datapath, bridge br0), loading flow and group files into br0,
tracing a packet, and writing the vectors with how they were made.

Build and start Open vSwitch yourself; nothing of it is in this repository. OVS_RUNDIR must
point at the switch's run directory.
"""
import argparse
import json
import os
import subprocess
import tempfile


def options(doc, cases, packets):
    """The generators' command line: --ovs-bin, --out, --cases, --packets, --seed."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ovs-bin", required=True, help="directory with ovs-ofctl and ovs-appctl")
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", type=int, default=cases)
    ap.add_argument("--packets", type=int, default=packets)
    ap.add_argument("--seed", type=int, default=1)
    return ap.parse_args()


class Ovs:
    """ovs-ofctl and ovs-appctl of one installation, on bridge br0."""

    def __init__(self, ovs_bin):
        self.ofctl_bin = os.path.join(ovs_bin, "ovs-ofctl")
        self.appctl_bin = os.path.join(ovs_bin, "ovs-appctl")

    def ofctl(self, *args, of15=False):
        """Runs ovs-ofctl (OpenFlow 1.5 when `of15`, for groups) and returns its output."""
        cmd = [self.ofctl_bin] + (["-O", "OpenFlow15"] if of15 else []) + list(args)
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout

    def appctl(self, *args, check=True):
        """Runs ovs-appctl and returns its output."""
        return subprocess.run([self.appctl_bin] + list(args), check=check, capture_output=True, text=True).stdout

    def load(self, command, lines, of15=False):
        """`ovs-ofctl COMMAND br0 FILE` (add-flows, add-groups) with `lines` as the file."""
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("\n".join(lines) + "\n")
        try:
            self.ofctl(command, "br0", f.name, of15=of15)
        finally:
            os.unlink(f.name)

    def trace(self, packet, generate=False):
        """`ofproto/trace` of one packet (`-generate`: with its side effects, as learning):
        the packet, its megaflow and datapath actions."""
        out = self.appctl("ofproto/trace", "br0", packet, *(["-generate"] if generate else []))
        line = lambda prefix: next(l for l in out.splitlines() if l.startswith(prefix))[len(prefix):].strip()
        return {"packet": packet, "megaflow": line("Megaflow:"), "dp_actions": line("Datapath actions:")}

    def trace_passes(self, packet, ct_next=()):
        """`ofproto/trace` of one packet with `--ct-next` states: every pass (the first, then each
        recirculation, in order) as its resume state, megaflow and datapath actions."""
        args = ["ofproto/trace", "br0", packet]
        for s in ct_next:
            args += ["--ct-next", s]
        out = self.appctl(*args)
        passes = []
        for section in out.split("\nrecirc(")[0:]:
            lines = section.splitlines()
            find = lambda prefix: next(l for l in lines if l.startswith(prefix))[len(prefix):].strip()
            passes.append({"megaflow": find("Megaflow:"), "dp_actions": find("Datapath actions:")})
        return {"packet": packet, "ct_next": list(ct_next), "passes": passes}

    def version(self):
        return subprocess.run([self.ofctl_bin, "--version"], capture_output=True, text=True).stdout.splitlines()[0]


def traced_cases(args, ovs, r, flows, packet, ct_next, most_next):
    """`args.cases` random pipelines (`flows(r)`, drawn again while OVS refuses one, as for a
    prerequisite a random match lacks), each with `args.packets` packets (`packet(r)`) traced
    through every pass with up to `most_next` `--ct-next` states drawn from `ct_next`."""
    cases = []
    while len(cases) < args.cases:
        fs = flows(r)
        ovs.ofctl("del-flows", "br0")
        try:
            ovs.load("add-flows", fs)
        except subprocess.CalledProcessError as e:
            print("refused:", e.stderr.strip().splitlines()[-1])
            continue
        traced = [ovs.trace_passes(packet(r), r.sample(ct_next, r.randint(0, most_next)))
                  for _ in range(args.packets)]
        cases.append({"flows": fs, "packets": traced})
    return cases


def random_tables(r, later_matches, actions):
    """Flows for 2 or 3 tables: in each, 1 to 4 flows at distinct priorities (OVS leaves ties
    between overlapping flows undefined) matching IP, TCP, UDP, ARP or the input port (and, in
    later tables, one of `later_matches`), with `actions(r, ip, table, last)`; then a catch-all
    resubmitting to the next table, or output in the last."""
    last = r.randint(1, 2)
    out = []
    for t in range(last + 1):
        for prio in r.sample(range(1, 10), r.randint(1, 4)):
            m = r.choice(["ip", "tcp", "udp", "arp", "in_port=1"] + (later_matches if t else []))
            ip = any(p in m for p in ("ip", "tcp", "udp"))
            out.append(f"table={t},priority={prio * 10},{m} actions={','.join(actions(r, ip, t, last))}")
        out.append(f"table={t},priority=0 actions=" + (f"resubmit(,{t + 1})" if t < last else f"output:{r.randint(1, 4)}"))
    return out


def small_packet(r, ttl=False):
    """A TCP, UDP, ICMP or ARP packet from a few ports, MACs and addresses (`nw_ttl=64` with
    `ttl`)."""
    proto = r.choice(["tcp", "udp", "icmp", "arp"])
    fields = [f"in_port={r.randint(1, 4)}", f"dl_src=00:00:00:00:00:0{r.randint(1, 3)}", proto]
    if proto == "arp":
        return ",".join(fields)
    fields += [f"nw_src=10.0.{r.randint(0, 3)}.{r.randint(1, 9)}", f"nw_dst=10.0.0.{r.randint(1, 3)}"]
    if ttl:
        fields.append("nw_ttl=64")
    if proto in ("tcp", "udp"):
        fields.append(f"{proto}_src={r.randint(1024, 1030)},{proto}_dst={r.choice([80, 53])}")
    return ",".join(fields)


def write(args, ovs, script, cases, note=""):
    """Writes the vectors with a line saying which OVS and which command made them."""
    about = (f"Open vSwitch {ovs.version()}; scripts/{script} --seed {args.seed} --cases {args.cases} "
             f"--packets {args.packets}{note}")
    with open(args.out, "w") as f:
        json.dump({"about": about, "cases": cases}, f, indent=1)
    print(f"wrote {len(cases)} cases of {args.packets} packets to {args.out}")
