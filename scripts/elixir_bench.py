#!/usr/bin/env python3
"""Elixir's headline results (BENCHMARKS.md) for elixir, tfo, lfp, ovs-rebalance, offload-all, psf.

Usage: scripts/elixir_bench.py [--quick | --full] [--seconds S] [--threads N]

Workload: `--trace gen:gateway` (hyflow's model of Elixir's cloud-gateway traces) through
examples/gateway.flows, at Elixir's fixed rate of 56 Mpps.

--full is the paper's setup: 500,000 steady flows, 500 bursty ones, 56 Mpps for at least 60 s,
Elixir's parameters (areas 50,000 + 100, r = 0.2, L = 30 s, T = 10 s, 1 s burst windows,
65,536-packet rings), the built-in cost model. It takes hours on two cores.

--quick (the default) is the same experiment on a host 1,000 times slower: traffic at 56
kpps, every cost 1,000x larger (a costs file derived from the built-in one, so Elixir's heap
rebuild, derived from it, too); 5x fewer flows (100,000 + 100 bursty), so areas of 10,000 +
20 entries hold about the same top share (fewer flows would make the top flow alone, under
Zipf, too large for one core: RSS pins a flow to a core). Rings, the queue threshold, windows and the NIC's
update and counter-read budgets stay as in the paper. It runs in minutes.

Prints, per policy: the highest lossless rate on 2 cores (Table 2), the fewest cores without
loss at the fixed rate, counting measurement work (Fig. 13), and latency, ring occupancy and
loss at the fixed rate on Elixir's core count (Table 1). Build first: cargo build --release.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
HYFLOW = os.path.join(ROOT, "target", "release", "hyflow")
POLICIES = ["elixir", "tfo", "lfp", "ovs-rebalance", "offload-all", "psf"]
# Seconds simulated before measuring: two of Elixir's replacement windows, so that every
# policy has filled its table (the paper measures a switch in service, not a cold one).
WARMUP = 20
BUILTIN_COSTS = {"rx_ns": 92.6, "microflow_hit_ns": 36.1, "megaflow_hit_ns": 73.3,
                 "upcall_ns": 781.4, "sample_ns": 27.4, "gigaflow_install_ns": 960.0}


def setup(quick, seconds, tmp):
    if quick:
        costs = os.path.join(tmp, "slow-host.json")
        with open(costs, "w") as f:
            json.dump({k: v * 1000 for k, v in BUILTIN_COSTS.items()}, f)
        rate = 56e3
        trace = f"gen:gateway,flows=100000,bursty=100,rate={rate:.0f},duration={seconds + WARMUP}"
        common = ["--costs", costs]
        exact = ["--large-entries", "10000", "--bursty-entries", "20"]
        return rate, trace, common, exact, ["--nic-entries", "10020"]
    rate = 56e6
    trace = f"gen:gateway,duration={seconds + WARMUP}"
    return rate, trace, [], [], ["--nic-entries", "50100"]


def sim(trace, args):
    out = subprocess.run([HYFLOW, "sim", "--trace", trace, "--warmup", str(WARMUP), "--json", "-", *args],
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
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args()
    if not os.access(HYFLOW, os.X_OK):
        sys.exit("build first: cargo build --release")
    quick = not a.full
    threads = ["--search-threads", str(a.threads)] if a.threads else []
    with tempfile.TemporaryDirectory() as tmp:
        rate, trace, common, exact, megaflow = setup(quick, a.seconds, tmp)
        print(f"# {'quick (1,000x slower host)' if quick else 'full'}: {trace}, fixed rate {rate:.0f} pkt/s\n")
        rows = {}
        for p in POLICIES:
            args = common + policy_args(p, exact, megaflow) + threads
            two = sim(trace, args + ["--cores", "2", "--find", "max-rate"])
            fewest = sim(trace, args + ["--rate", str(rate), "--find", "min-cores", "--max-cores", "32"])
            rows[p] = (two, fewest)
            print(f"{p}: max rate on 2 cores {two.get('max_rate_pps', two.get('error'))}, "
                  f"min cores at {rate:.0f} {fewest.get('min_cores', fewest.get('error'))}", flush=True)
        cores = rows["elixir"][1].get("min_cores", 2)
        print(f"\n| policy | max lossless rate, 2 cores (pkt/s) | min cores at the fixed rate "
              f"| at the fixed rate on {cores} cores: latency mean / p99 (µs) | ring mean / p99 | loss | hw share |")
        print("|---|---|---|---|---|---|---|")
        for p in POLICIES:
            args = common + policy_args(p, exact, megaflow)
            fixed = sim(trace, args + ["--rate", str(rate), "--cores", str(cores)])
            two, fewest = rows[p]
            lat = fixed.get("latency_us", {})
            ring = fixed.get("ring", {})
            print(f"| {p} | {two.get('max_rate_pps', '—')} | {fewest.get('min_cores', '> 32')} "
                  f"| {lat.get('mean', '—')} / {lat.get('p99', '—')} | {ring.get('mean', '—')} / {ring.get('p99', '—')} "
                  f"| {fixed.get('loss_rate', 0) * 100:.2f}% | {fixed.get('hw_share', 0) * 100:.1f}% |", flush=True)


if __name__ == "__main__":
    main()
