#!/usr/bin/env python3
"""Elixir's headline results (BENCHMARKS.md) for elixir, tfo, lfp, ovs-rebalance, offload-all, psf.

Usage: scripts/elixir_bench.py [--quick | --full] [--seconds S] [--threads N] [--plots DIR] [--churn S]
                               [--backend local|ray] [--ray-address ADDRESS] [--write | --check]

Workload: `--trace gen:gateway` (hyflow's model of Elixir's cloud-gateway traces) through
examples/gateway.flows.

--full is the paper's setup: 500,000 steady flows and 300 bursty ones at 56 Mpps, Elixir's
parameters (areas 50,000 + 100, r = 0.2, L = 30 s, T = 10 s, 1 s burst windows, 65,536-packet
rings, K from the headroom rule), the built-in cost model, the NIC's update and counter-read
budgets (2,000 and 20,000 per second). It takes hours on two cores.

--quick (the default) is the same experiment scaled down 100x in packets: a host 100 times
slower (every cost x100), 560 kpps, 5,000 steady flows (so that each flow, and each sampled
flow, sends as many packets per window as at full scale: the sampling statistics Elixir's
large-flow identification rests on are kept), areas of 500 + 100 entries (the bursty area
holds concurrent bursts, which do not scale with flows), rings of 655 packets (the same
queueing time at 100x the service time) and K from the headroom rule with a NIC rate 100x
lower: K = 110, not 551 (655 x 55,092 / 65,536) — the identification time is host work, 100x
longer on the slower host, so it takes about as many packets of headroom as at full scale (445; 473 there) in
a ring 100x smaller; the update latency, a hardware time, takes 100x fewer. Time constants stay:
Elixir's windows, the bursts' durations, and the NIC's update latency, update rate and read
rate (hardware, not host, properties — so updates are 100x less scarce per flow than at full
scale). It runs in about 15 minutes on two cores.

Each run simulates a warm-up (30 s quick, 40 s full: the NIC filled at its update rate and a
whole identification window L seen) before the measured --seconds.

Prints, per policy: the highest lossless rate on 2 cores (Table 2), the fewest cores from which
every larger count is lossless at the fixed rate and the fewest within --loss-tolerance's
default, counting measurement work, with each count's loss (Fig. 13), and latency, ring occupancy and
loss at the fixed rate on Elixir's core count and at Elixir's highest rate on 2 cores
(Table 1); how the generated bursts fared at the fixed rate (in the NIC already, moved in
during the burst, filling their core's ring to K); and Elixir's detection time by peak rate
(Fig. 11). --plots DIR writes each policy's software and hardware rate over time at the fixed
rate (Fig. 12). --backend ray runs the searches' probes as Ray tasks (`sim --backend ray`: the
same answers; --threads of them at once, by default the cluster's CPUs), on the cluster at
--ray-address or a local one: the way to spread --full's searches over several machines. --write puts the tables in BENCHMARKS.md's block (elixir-quick, or
elixir-quick-churnS with --churn); --check (in the test command) re-runs Elixir at the fixed
rate on its committed core count and fails if that row's fixed-rate cells moved. Build first:
cargo build --release (or set HYFLOW to a binary).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import benchdoc

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
HYFLOW = os.environ.get("HYFLOW", os.path.join(ROOT, "target", "release", "hyflow"))
POLICIES = ["elixir", "tfo", "lfp", "ovs-rebalance", "offload-all", "psf"]
#: Rows beside the policies' own: (label, policy, extra options), at --quick only: Elixir with
#: K scaled from other rings instead of the headroom rule on the quick host (110, see the
#: docstring) — from the rule at full scale (55,092 of 65,536: 551) and from the paper's K for
#: its switch forwarder (28k of 64k: 280; 51k for the NIC forwarder).
QUICK_VARIANTS = [
    ("elixir-k551", "elixir", ["--queue-threshold", "551"]),
    ("elixir-k280", "elixir", ["--queue-threshold", "280"]),
]
BUILTIN_COSTS = {"rx_ns": 92.6, "microflow_hit_ns": 36.1, "megaflow_hit_ns": 73.3,
                 "upcall_ns": 781.4, "sample_ns": 27.4, "gigaflow_install_ns": 960.0}
# 100 GbE of 64-byte frames (Elixir's K rule), packets/s.
NIC_RATE = 100e9 / (84 * 8)


def setup(quick, seconds, tmp, churn):
    """(fixed rate, trace, options for every policy, exact-match table options, megaflow
    table options, warm-up seconds)."""
    model = "" if churn is None else f",churn={churn:g}"
    if quick:
        costs = os.path.join(tmp, "slow-host.json")
        with open(costs, "w") as f:
            json.dump({k: v * 100 for k, v in BUILTIN_COSTS.items()}, f)
        rate, warmup = 560e3, 30
        trace = f"gen:gateway,preset=elixir,flows=5000,rate={rate:.0f},duration={seconds + warmup}{model}"
        common = ["--costs", costs, "--ring", "655", "--warmup", str(warmup)]
        exact = ["--large-entries", "500", "--bursty-entries", "100", "--nic-rate", f"{NIC_RATE / 100:.0f}"]
        return rate, trace, common, exact, ["--nic-entries", "600"], warmup
    rate, warmup = 56e6, 40
    trace = f"gen:gateway,preset=elixir,duration={seconds + warmup}{model}"
    return rate, trace, ["--warmup", str(warmup)], [], ["--nic-entries", "50100"], warmup


def sim(trace, args):
    out = subprocess.run([HYFLOW, "sim", "--trace", trace, "--json", "-", *args],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def policy_args(p, exact, megaflow):
    """The options of policy `p`: the exact-match policies share the table sizes; Elixir's
    own (K's NIC rate, the heap rebuild) go to elixir only."""
    if p == "offload-all":
        return ["--policy", p] + megaflow
    if p == "psf":
        return ["--policy", p]
    own = {"--nic-rate", "--heap-rebuild"}
    pairs = list(zip(exact[::2], exact[1::2]))
    return ["--policy", p] + [x for k, v in pairs if p == "elixir" or k not in own for x in (k, v)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", default=True)
    g.add_argument("--full", action="store_true")
    ap.add_argument("--seconds", type=float, default=None, help="measured seconds (20 quick, 60 full)")
    ap.add_argument("--threads", type=int, default=None, help="probes a search runs at once")
    ap.add_argument("--backend", choices=["local", "ray"], default="local", help="where searches run their probes")
    ap.add_argument("--ray-address", default=None, help="the Ray cluster for --backend ray (default: a local one)")
    ap.add_argument("--plots", default=None, help="directory for the Fig. 12 rate plots")
    ap.add_argument("--churn", type=float, default=None,
                    help="seconds over which 20%% of the large flows change (the model's default: 10)")
    ap.add_argument("--only", default=None,
                    help="comma-separated rows to run (policies, or elixir-k551), with --at CORES,RATE for the "
                         "fixed-rate columns when elixir is not among them")
    ap.add_argument("--at", default=None, help="CORES,RATE: Elixir's min cores and 2-core max rate, for --only")
    ap.add_argument("--write", action="store_true", help="replace the block in BENCHMARKS.md")
    ap.add_argument("--check", action="store_true",
                    help="quick: Elixir's fixed-rate run on its committed core count, against BENCHMARKS.md")
    a = ap.parse_args()
    if not os.access(HYFLOW, os.X_OK):
        sys.exit("build first: cargo build --release")
    quick = not a.full
    threads = ["--search-threads", str(a.threads)] if a.threads else []
    if a.backend == "ray":
        threads += ["--backend", "ray"] + (["--ray-address", a.ray_address] if a.ray_address else [])
    seconds = a.seconds or (20.0 if quick else 60.0)
    block = "elixir-quick" if a.churn is None else f"elixir-quick-churn{a.churn:g}"
    if (a.write or a.check) and (not quick or a.only or a.seconds or a.plots and a.check):
        sys.exit("--write and --check are for the quick scale's full table")
    if a.check:
        check(block, seconds, a.churn)
        return
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        rate, trace, common, exact, megaflow, warmup = setup(quick, seconds, tmp, a.churn)
        out.append(f"`{trace}`, warm-up {warmup} s, fixed rate {rate:,.0f} pkt/s:")
        out.append("")
        rows = {}
        variants = {label: (policy, extra) for label, policy, extra in (QUICK_VARIANTS if quick else [])}
        labels = POLICIES[:1] + list(variants) + POLICIES[1:]
        if a.only:
            labels = [p for p in labels if p in a.only.split(",")]
        def options(label):
            policy, extra = variants.get(label, (label, []))
            return common + policy_args(policy, exact, megaflow) + extra
        for p in labels:
            args = options(p) + threads
            two = sim(trace, args + ["--cores", "2", "--find", "max-rate"])
            fewest = sim(trace, args + ["--rate", str(rate), "--find", "min-cores", "--max-cores", "32"])
            rows[p] = (two, fewest)
            print(f"{p}: max rate on 2 cores {two.get('max_rate_pps', two.get('error'))}, "
                  f"min cores at {rate:.0f} {fewest.get('min_cores', fewest.get('error'))}", file=sys.stderr,
                  flush=True)
        if "elixir" in rows:
            cores = rows["elixir"][1].get("min_cores", 2)
            top = rows["elixir"][0].get("max_rate_pps")
        elif a.at:
            cores, top = int(a.at.split(",")[0]), float(a.at.split(",")[1])
        else:
            sys.exit("--only without elixir needs --at CORES,RATE")
        tolerance = rows["elixir"][1].get("loss_tolerance", 0.001) if "elixir" in rows else 0.001
        out.append(f"| policy | max lossless rate, 2 cores (pkt/s) | min cores at the fixed rate, no loss "
                   f"| min cores, loss ≤ {tolerance * 100:g}% "
                   f"| fixed rate on {cores} cores: latency mean / p99 (µs) | ring mean / p99 | loss / hw share "
                   f"| Elixir's max rate on 2 cores: latency mean / p99 (µs) | ring mean / p99 | loss / hw share |")
        out.append("|---|---|---|---|---|---|---|---|---|---|")
        fates = {}
        for p in labels:
            args = options(p)
            plot = ["--plot", os.path.join(a.plots, f"elixir-{p}")] if a.plots else []
            fixed = sim(trace, args + ["--rate", str(rate), "--cores", str(cores), *plot])
            at_top = sim(trace, args + ["--rate", str(top), "--cores", "2"]) if top else {}
            two, fewest = rows[p]
            out.append(f"| {p} | {num(two.get('max_rate_pps'))} | {fewest.get('min_cores', '> 32')} "
                       f"| {fewest.get('min_cores_within_tolerance', '> 32')} | {cell(fixed)} | {cell(at_top)} |")
            print(out[-1], file=sys.stderr, flush=True)
            fates[p] = fixed.get("bursts")
        out += loss_table(labels, {p: rows[p][1] for p in labels})
        out += ["", "Bursts at the fixed rate (the generator's log is the ground truth; bursts that started "
                "and ended while measuring):", ""]
        out.append("| policy | bursts | in the NIC at their start | moved in during the burst | mean time to "
                   "offload (ms) | filled their core's ring to K | of those, moved in |")
        out.append("|---|---|---|---|---|---|---|")
        for p in labels:
            b = fates.get(p)
            if not b:
                out.append(f"| {p} | — | | | | | |")
                continue
            out.append(f"| {p} | {b['bursts']} | {b['held_at_start']} | {b['offloaded']} "
                       f"| {fmt(b.get('offload_ms_mean'))} | {b.get('overloaded', '—')} "
                       f"| {b.get('overloaded_offloaded', '—')} |")
        out += detection_table(fates.get("elixir"))
    body = "\n".join(out)
    print(body)
    if a.write:
        command = "python3 scripts/elixir_bench.py" + ("" if a.churn is None else f" --churn {a.churn:g}")
        benchdoc.write_block(block, body, command)


def check(block, seconds, churn):
    """Elixir's fixed-rate run on the committed core count, compared with the block's row."""
    title, header, _ = next(t for t in benchdoc.tables(benchdoc.committed_block(block)) if t[1][0] == "policy")
    at = next(i for i, h in enumerate(header) if h.startswith("fixed rate on "))
    cores = int(header[at].split()[3])
    with tempfile.TemporaryDirectory() as tmp:
        rate, trace, common, exact, megaflow, _ = setup(True, seconds, tmp, churn)
        m = sim(trace, common + policy_args("elixir", exact, megaflow) + ["--rate", str(rate), "--cores", str(cores)])
    columns = ["policy"] + header[at:at + 3]
    fresh = "\n".join([title, "", "| " + " | ".join(columns) + " |", "|---" * len(columns) + "|",
                        "| elixir | " + cell(m) + " |"])
    benchdoc.finish_check([benchdoc.check_tables(block, fresh)])


#: The core counts of the loss-against-cores table (Fig. 13's axis, to --max-cores).
LOSS_CORES = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24, 32]


def loss_table(labels, searches):
    """Fig. 13: each policy's loss at the fixed rate against cores, from the min-cores search's
    direct sweep (every count run)."""
    out = ["", "Loss at the fixed rate against cores (Fig. 13; the min-cores search's sweep, every count run):",
           "", "| policy | " + " | ".join(str(c) for c in LOSS_CORES) + " |", "|---" * (len(LOSS_CORES) + 1) + "|"]
    for p in labels:
        by = {r["cores"]: r for r in searches[p].get("loss_by_cores", [])}
        cells = []
        for c in LOSS_CORES:
            r = by.get(c)
            cells.append("—" if r is None else "0" if r["lost"] == 0 else f"{r['loss_rate'] * 100:.3g}%")
        out.append(f"| {p} | " + " | ".join(cells) + " |")
    return out


def fmt(v):
    return "—" if v is None else f"{v:.1f}"


def num(v):
    """A figure as the tables print it: thousands separated, one decimal below 100."""
    if v is None:
        return "—"
    return f"{v:.1f}" if abs(v) < 100 else f"{v:,.0f}"


def detection_table(bursts):
    """Fig. 11: Elixir's detection time (burst start to its core's ring reaching K) by peak
    rate, over the bursts that filled their core's ring to K."""
    if not bursts:
        return []
    rows = [b for b in bursts["list"] if b.get("detected_ms") is not None]
    if not rows:
        return ["", "No burst filled its core's ring to K: no detection times (Fig. 11)."]
    lo = min(b["peak_pps"] for b in rows)
    hi = max(b["peak_pps"] for b in rows)
    edges = [lo * (hi / lo) ** (i / 4) for i in range(5)] if hi > lo else [lo, hi]
    out = ["", "Elixir's burst detection time by peak rate (Fig. 11):", "",
           "| peak rate (pkt/s) | bursts | detection mean (ms) | median (ms) | moved into the NIC |",
           "|---|---|---|---|---|"]
    for a, b in zip(edges, edges[1:]):
        sel = [r for r in rows if a <= r["peak_pps"] <= b and (r["peak_pps"] < b or b == edges[-1])]
        if not sel:
            continue
        d = sorted(r["detected_ms"] for r in sel)
        moved = sum(1 for r in sel if r.get("offloaded_ms") is not None and not r["held_at_start"])
        out.append(f"| {a:,.0f}–{b:,.0f} | {len(sel)} | {sum(d) / len(d):.1f} | {d[len(d) // 2]:.1f} | {moved} |")
    return out


def cell(m):
    """Latency, ring and loss columns of one run (hardware share too if asked)."""
    if not m or "error" in m:
        return "— | — | —" if not m else f"{m['error']} | | "
    lat, ring = m.get("latency_us", {}), m.get("ring", {})
    return (f"{num(lat.get('mean'))} / {num(lat.get('p99'))} | {num(ring.get('mean'))} / {num(ring.get('p99'))} "
            f"| {m.get('loss_rate', 0) * 100:.2f}% / {m.get('hw_share', 0) * 100:.1f}% hw")

if __name__ == "__main__":
    main()
