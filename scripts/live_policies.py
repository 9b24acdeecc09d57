#!/usr/bin/env python3
"""Offload policies live on cloud-gateway traffic (root): what each policy leaves to the
switch's core, and what it loses, with `hyflow switch --nic xdp --policy P` against the
software path alone (`--nic none`), on the same veths, pipeline and traffic.

Namespace `hylp-sw` holds ports p1..p9, `hylp-h` their peers; examples/gateway.flows admits
tenant traffic on port 1 and routes it to ports 2-9. `hyflow send --trace gen:gateway` (the
laptop preset: 50,000 steady and 300 bursty flows, churn every 2 s, 4 s of traffic) puts the
traffic on h1 from CPU 0, as fast as it can unless --rate says; the switch runs on CPU 1.
The generator's CPU also runs the receive side of the veth, and so the XDP program.

Per run: frames offered (the sender's count), frames the switch decided (`show --json`
packets: software's and the kernel's hits credited), lost (offered but never decided: a full
AF_XDP ring, counted by the kernel), the NIC tier's share, the core's load (its processing
time, idle polling left out, over the sending time), the policy's installs, removals and
urgent moves (installs and removals: the kernel's table's), for Elixir the time from a ring
reaching K to the bursty move it triggered, and the longest time one call of the policy held
the engine (every core waits for it).

Elixir runs with windows shortened to the 4 s of traffic (T = 1 s, L = 2 s, as `sim` can be
told) and K = --queue-threshold (2,048 of the ring's 4,096 by default); TFO with its 1 s bin;
OVS rebalance with its 3 s interval; the exact-match table is 50,000 + 100 entries.

Then `sim` on the same traffic at each run's offered rate, with the costs `hyflow calibrate
--live` fitted from the `--nic none` run, beside the live figures: loss, the NIC's share and
software's latency (live: from the XDP program's hand-off to the transmit ring).

Prints Markdown tables for BENCHMARKS.md. Usage: scripts/live_policies.py [--hyflow BIN]
[--rate PPS] [--queue-threshold K]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import live_bench
from live_bench import sent
from live_netns import make, remove, sh

SW, HOST = "hylp-sw", "hylp-h"
PORTS = 9
FLOWS = "examples/gateway.flows"


def send(binary, rate):
    """Sends the gateway traffic on h1 from CPU 0: (frames sent, seconds)."""
    return sent(live_bench.send(binary, "gen:gateway", 1, rate, host=HOST))


def run(binary, tmp, name, switch_args, rate, costs=None):
    """One run of the switch with `switch_args` under the traffic at `rate`; with `costs`, the
    costs `hyflow calibrate --live` fits from it are written there."""
    make(SW, HOST, PORTS)
    ports = os.path.join(tmp, "ports.txt")
    open(ports, "w").write("".join("p%d=%d\n" % (i, i) for i in range(1, PORTS + 1)))
    sock = os.path.join(tmp, "lp.sock")
    proc = subprocess.Popen(
        ["ip", "netns", "exec", SW, "taskset", "-c", "1", binary, "switch", "--flows", FLOWS, "--ports", ports,
         "--ctl", sock] + switch_args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if "ready" not in proc.stdout.readline():
            raise RuntimeError("hyflow switch: %s" % proc.stderr.read())
        offered, secs = send(binary, rate)
        time.sleep(1.0)
        show = json.loads(sh(binary, "ctl", sock, "show", "--json"))
        if costs:
            sh(binary, "calibrate", "--live", sock, "--out", costs)
    finally:
        proc.terminate()
        proc.wait(10)
        remove(SW, HOST)
    decided = show["packets"]
    processing = sum(c["processing_ns"] for c in show["cores"])
    policy = show.get("policy") or {}
    tier = (show.get("nic_tier") or {}).get("stats") or {}
    holds = [show["main_engine_holds"]] + [c["engine_holds"] for c in show["cores"]]
    return dict(name=name, offered=offered, secs=secs, decided=decided, nic=show.get("nic_hits", 0),
                load=processing / (secs * 1e9), policy=policy, tier=tier, latency=show.get("latency_sw_us") or {},
                longest_hold_us=max(h["longest_us"] for h in holds), long_holds=sum(h["long"] for h in holds),
                long_holds_ms=sum(h["long_ms"] for h in holds))


def max_lossless_rate(binary, tmp, switch_args, lo, hi, rel=0.03):
    """The highest rate (frames/s) at which the switch loses no frame of the traffic, by
    bisection between `lo` and `hi` to `rel` of the rate (as `sim --find max-rate`), each trial
    a fresh switch."""
    while hi - lo > rel * hi:
        mid = (lo + hi) / 2
        r = run(binary, tmp, "", switch_args, mid)
        if r["offered"] - r["decided"] == 0:
            lo = mid
        else:
            hi = mid
    return lo


SIM_MACHINE = ["--trace", "gen:gateway", "--ring", "4096", "--cores", "1", "--nic-updates", "0",
               "--nic-counter-reads", "0", "--nic-update-latency", "0", "--nic-capability", "xdp"]


def sim_run(binary, costs, policy_args, rate):
    """`sim` on the same traffic at the live run's offered `rate`, one core, the live switch's
    ring, its NIC tier's limits and what its XDP program can hold, with the costs the live
    switch fitted: (loss rate, NIC share, software latency p50 / p99 µs)."""
    out = os.path.join(tempfile.mkdtemp(), "sim.json")
    sh(binary, "sim", *SIM_MACHINE, "--rate", "%.0f" % rate, "--costs", costs, "--json", out, *policy_args)
    r = json.load(open(out))
    sw = r.get("latency_sw_us") or {}
    return r["loss_rate"], r["hw_share"], sw


def sim_max_rate(binary, costs, policy_args):
    """`sim --find max-rate` on the same traffic, one core, the live switch's ring and costs."""
    out = sh(binary, "sim", "--trace", "gen:gateway", "--ring", "4096", "--cores", "1", "--nic-updates", "0",
             "--nic-counter-reads", "0", "--nic-update-latency", "0", "--costs", costs, "--find", "max-rate",
             *policy_args)
    for line in out.splitlines():
        if "max" in line and "pkt/s" in line:
            return line.strip()
    return out.strip().splitlines()[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hyflow", default="target/release/hyflow")
    ap.add_argument("--rate", type=float, help="frames per second [default: as fast as the sender goes]")
    ap.add_argument("--queue-threshold", type=int, default=2048)
    ap.add_argument("--max-rate", action="store_true",
                    help="also the highest lossless rate, live (bisection) and in `sim` with the live costs, "
                         "for --nic none and ovs-rebalance")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("live_policies.py needs root (namespaces, XDP)")
    tmp = tempfile.mkdtemp()
    k = str(a.queue_threshold)
    elixir = ["--policy", "elixir", "--replacement-window", "1", "--identification-window", "2", "--queue-threshold", k]
    # Each live run, and the `sim` policy that models it (`psf`: no NIC).
    runs = [
        ("software path (`--nic none`)", ["--nic", "none"], ["--policy", "psf"]),
        ("offload-all (megaflows)", ["--nic", "xdp", "--policy", "offload-all"], ["--policy", "offload-all"]),
        ("elixir", ["--nic", "xdp"] + elixir, elixir),
        ("tfo", ["--nic", "xdp", "--policy", "tfo"], ["--policy", "tfo"]),
        ("ovs-rebalance", ["--nic", "xdp", "--policy", "ovs-rebalance"], ["--policy", "ovs-rebalance"]),
    ]
    costs = os.path.join(tmp, "costs.json")
    # The layers' costs from the software path's run; the cost of a kernel table write from
    # offload-all's (the run that writes most per frame software sees).
    tier_costs = os.path.join(tmp, "tier-costs.json")
    fitted = {"software path (`--nic none`)": costs, "offload-all (megaflows)": tier_costs}
    rows = [run(a.hyflow, tmp, name, args, a.rate, fitted.get(name)) for name, args, _ in runs]
    combined = json.load(open(costs))
    combined["nic_write_ns"] = json.load(open(tier_costs))["nic_write_ns"]
    json.dump(combined, open(costs, "w"), indent=2)
    print("gateway traffic (gen:gateway, laptop preset) from CPU 0, the switch on CPU 1; K = %s of 4,096\n" % k)
    print("| policy | offered pps | decided | lost | in the XDP tier | core load | installs | removals | "
          "urgent moves | ring at K → move, p50 / p99 µs | policy's longest hold of the engine, µs "
          "(calls ≥ 1 ms: count, ms in all) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        p, live = r["policy"], (r["policy"].get("live") or {})
        lost = r["offered"] - r["decided"]
        det = live.get("detection_us") or [0, 0, 0]
        hold = "%.0f (%d, %.1f)" % (live["hook_us"][2], live["long_hooks"], live["long_hooks_ms"]) if live else "—"
        print("| %s | %.0f | %d | %d (%.2f%%) | %.1f%% | %.0f%% | %s | %s | %s | %s | %s |" % (
            r["name"], r["offered"] / r["secs"], r["decided"], lost, 100.0 * lost / max(1, r["offered"]),
            100.0 * r["nic"] / max(1, r["decided"]), 100 * r["load"],
            r["tier"].get("installs", "—"), r["tier"].get("removals", "—"), live.get("urgent_moves", "—") if p else "—",
            "%.0f / %.0f" % (det[0], det[1]) if live.get("urgent_moves") else "—", hold))
    print("\ncosts fitted from the `--nic none` run (`nic_write_ns` from the offload-all run): %s"
          % open(costs).read().replace("\n", " "))
    print("\n`sim` on the same traffic at each run's offered rate, with those costs (`%s --rate R --costs "
          "COSTS --policy P ...`):\n" % " ".join(SIM_MACHINE))
    print("| policy | live: lost | sim: lost | live: in the XDP tier | sim: in the NIC | live: software latency "
          "p50 / p99 µs | sim: software latency p50 / p99 µs | live: longest hold of the engine, µs (holds ≥ 1 ms: "
          "count, ms) | live: kernel table writes, ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r, (name, _, sim_args) in zip(rows, runs):
        loss, share, sw = sim_run(a.hyflow, costs, sim_args, r["offered"] / r["secs"])
        lat = lambda l: "%.1f / %.1f" % (l["p50"], l["p99"]) if l.get("count") else "—"
        print("| %s | %.2f%% | %.2f%% | %.1f%% | %.1f%% | %s | %s | %.0f (%d, %.1f) | %s |" % (
            name, 100.0 * (r["offered"] - r["decided"]) / max(1, r["offered"]), 100 * loss,
            100.0 * r["nic"] / max(1, r["decided"]), 100 * share, lat(r["latency"]), lat(sw),
            r["longest_hold_us"], r["long_holds"], r["long_holds_ms"],
            "%.1f" % r["tier"]["sync_ms"] if "sync_ms" in r["tier"] else "—"))
    if a.max_rate:
        print("\n| switch | live: highest lossless rate, pps | sim (live costs) |")
        print("|---|---|---|")
        for name, args, policy in (("software path (`--nic none`; `psf` in sim)", ["--nic", "none"], ["--policy", "psf"]),
                                   ("ovs-rebalance", ["--nic", "xdp", "--policy", "ovs-rebalance"],
                                    ["--policy", "ovs-rebalance"])):
            live_max = max_lossless_rate(a.hyflow, tmp, args, 100_000, 1_200_000)
            print("| %s | %.0f | %s |" % (name, live_max, sim_max_rate(a.hyflow, costs, policy)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
