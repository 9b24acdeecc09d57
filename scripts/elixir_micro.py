#!/usr/bin/env python3
"""Elixir's micro-benchmarks (BENCHMARKS.md): isolated bursts (Fig. 11) and the cores one
bursty flow needs (Fig. 3b), at the quick scale of scripts/elixir_bench.py.

Usage: scripts/elixir_micro.py [--bursts N] [--part fig11|fig3b|all] [--queue-threshold K] [--write]

Fig. 11 (§5.2, "queue-based bursty flow detection"): flows "with the same average rate but
different peak rates" burst one at a time over the steady gateway background; for each peak
rate, Elixir on the cores it needs for the background (4 at the quick scale), and per burst,
from the generator's log: whether its core's ring reached K (detection time: burst start to
that crossing — the paper measures from a signal packet the sender injects at the burst's
start), whether its flow moved into the NIC while it lasted (caught) and how soon. Bursty
flows average 0.2% of the rate (1,120 pkt/s) and peak at 15–80% of it (84–448 kpps, one to
six cores' worth), for 0.5–1.5 s; they are as many as a fifth of their burst ratio, so that
about 0.2 burst at once (isolated). --bursts N (1,000 by default, the paper's count) sets the
traffic's length: N / 4 expected bursts per peak rate.

Fig. 3b (§2.1): one stable flow, and one bursty flow at a fifth of its average rate, each
alone through pure software forwarding (psf), lossless on how many cores? Under receive-side
scaling (`--steer rss`, what the headline runs of elixir_bench.py use) a flow has one core,
and no count of cores helps a flow whose peak exceeds it; the paper's forwarder needed 4 cores
for its bursty flow, so its packets must reach several cores: `--steer spray` deals packets
to the cores in turn. The flows are written as a capture (UDP, 10 s; the stable flow at 50
kpps, the bursty one at 10 kpps on average, at burst ratios 10, 20 and 40, bursts of 0.1–0.4 s),
on the quick scale's host (every cost x100: a core forwards about 78 kpps).

Build first: cargo build --release (or set HYFLOW to a binary).
"""
import argparse
import os
import random
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchdoc  # noqa: E402
from elixir_bench import HYFLOW, ROOT, policy_args, setup, sim  # noqa: E402

PEAKS = [0.15, 0.3, 0.5, 0.8]  # shares of the rate
AVERAGE_SHARE = 0.002  # each bursty flow's average rate, share of the rate
CONCURRENT = 0.2  # bursts under way at once, on average
CAUGHT_WITHIN_MS = 20.0


def fig11(n_bursts, cores, k):
    """Fig. 11's table and its summary, as markdown lines."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        rate, trace, common, exact, megaflow, warmup = setup(True, 20.0, tmp, None)
        seconds = n_bursts / len(PEAKS) / CONCURRENT  # bursts last 1 s on average
        out.append(f"Fig. 11: isolated bursts over the quick gateway background ({rate:.0f} pkt/s, "
                   f"elixir on {cores} cores, K {k or 'from the headroom rule'}, {seconds:.0f} s measured per peak rate):")
        out.append("")
        out.append("| peak (pkt/s) | burst ratio | bursts | held already | filled their ring to K "
                   "| detection mean / median / max (ms) | caught | caught within 20 ms | time to NIC mean (ms) |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        totals = [0, 0, 0, 0, 0]
        for peak in PEAKS:
            ratio = peak / AVERAGE_SHARE
            bursty = max(1, round(CONCURRENT * ratio))
            spec = trace.replace(",duration=50.0", f",duration={seconds + warmup:.0f}") + (
                f",bursty={bursty},burst-peak={peak},burst-ratio={ratio:g},burst-duration=0.5..1.5")
            own_k = ["--queue-threshold", str(k)] if k else []
            run = sim(spec, common + policy_args("elixir", exact, megaflow) + own_k + ["--cores", str(cores)])
            if "error" in run:
                out.append(f"| {peak * rate:,.0f} | {ratio:g} | {run['error']} | | | | | | |")
                continue
            bursts = run["bursts"]["list"]
            held = [b for b in bursts if b["held_at_start"]]
            fresh = [b for b in bursts if not b["held_at_start"]]
            filled = [b for b in fresh if b.get("detected_ms") is not None]
            det = sorted(b["detected_ms"] for b in filled)
            caught = [b for b in fresh if b.get("offloaded_ms") is not None]
            fast = [b for b in caught if b["offloaded_ms"] <= CAUGHT_WITHIN_MS]
            to_nic = sum(b["offloaded_ms"] for b in caught) / len(caught) if caught else None
            detection = (f"{sum(det) / len(det):.2f} / {det[len(det) // 2]:.2f} / {det[-1]:.2f}"
                         if det else "—")
            out.append(f"| {peak * rate:,.0f} | {ratio:g} | {len(bursts)} | {len(held)} | {len(filled)} | {detection} "
                       f"| {len(caught)} | {len(fast)} | {'—' if to_nic is None else f'{to_nic:.2f}'} |")
            print(out[-1], file=sys.stderr, flush=True)
            for i, v in enumerate([len(bursts), len(held), len(fresh), len(caught), len(fast)]):
                totals[i] += v
        n, held, fresh, caught, fast = totals
        if n:
            out.append("")
            out.append(f"All: {n} bursts; {held} found their flow in the NIC already (from an earlier burst); "
                       f"of the other {fresh}, {caught} caught while lasting ({caught / max(fresh, 1):.1%}), "
                       f"{fast} within {CAUGHT_WITHIN_MS:.0f} ms of their start ({fast / max(fresh, 1):.1%}); "
                       f"with those held already: {(held + fast) / n:.1%} in the NIC within "
                       f"{CAUGHT_WITHIN_MS:.0f} ms.")
    return out


def write_capture(path, flows, seconds):
    """A pcap of UDP frames (60 bytes) to the gateway: `flows` is a list of (index, schedule),
    schedule(t) the flow's rate (pkt/s) at time t; packets are spaced by each flow's rate."""
    times = []
    for index, schedule in flows:
        t = 0.0
        while t < seconds:
            r = schedule(t)
            if r <= 0:
                t += 0.001
                continue
            times.append((t, index))
            t += 1.0 / r
    times.sort()
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))  # nanosecond pcap
        for t, index in times:
            frame = udp_frame(index)
            sec = int(t)
            f.write(struct.pack("<IIII", sec, int((t - sec) * 1e9), len(frame), len(frame)))
            f.write(frame)
    return len(times)


def udp_frame(index):
    eth = bytes.fromhex("0200000000ff") + bytes.fromhex("020000000001") + b"\x08\x00"
    src = bytes([10, 0, 0, 1 + index])
    dst = bytes([198, 18, 0, 1])
    total = 46
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0, 64, 17, 0, src, dst)
    s = sum(struct.unpack("!10H", ip))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    ip = ip[:10] + struct.pack("!H", ~s & 0xFFFF) + ip[12:]
    udp = struct.pack("!HHHH", 40000 + index, 443, total - 20, 0)
    return eth + ip + udp + bytes(total - 28)


def fig3b(max_cores):
    """Fig. 3b's table, as markdown lines."""
    stable_pps, seconds = 50e3, 10.0
    out = [f"Fig. 3b: cores one flow needs through pure software forwarding (quick host: every cost x100), "
           f"lossless on how many of 1–{max_cores}:", "",
           "| flow | average / peak (pkt/s) | --steer rss | --steer spray |",
           "|---|---|---|---|"]
    rng = random.Random(3)
    cases = [("stable", lambda t: stable_pps, stable_pps)]
    for ratio in (10, 20, 40):
        avg = stable_pps / 5
        peak = avg * ratio
        # Bursts of 0.1–0.4 s, separated so that the average is avg.
        spans, t = [], 0.5
        while t < seconds:
            d = rng.uniform(0.1, 0.4)
            spans.append((t, t + d))
            t += d * ratio
        def schedule(t, spans=spans, peak=peak):
            return peak if any(a <= t < b for a, b in spans) else 0.0
        cases.append((f"bursty, ratio {ratio}", schedule, peak))
    with tempfile.TemporaryDirectory() as tmp:
        _, _, common, _, _, _ = setup(True, 20.0, tmp, None)
        host = common[:common.index("--warmup")]  # the quick host's costs and rings
        for name, schedule, peak in cases:
            path = os.path.join(tmp, "flow.pcap")
            n = write_capture(path, [(0, schedule)], seconds)
            avg = n / seconds
            cells = []
            for steer in ("rss", "spray"):
                run = sim(path, host + ["--flows", os.path.join(ROOT, "examples", "gateway.flows"), "--policy", "psf", "--steer", steer, "--find", "min-cores",
                                        "--max-cores", str(max_cores)])
                if "error" in run:
                    cells.append(run["error"])
                    continue
                m = run.get("min_cores")
                cells.append(f"> {max_cores}" if m is None else str(m))
            out.append(f"| {name} | {avg:,.0f} / {peak:,.0f} | {cells[0]} | {cells[1]} |")
            print(out[-1], file=sys.stderr, flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bursts", type=int, default=1000, help="expected bursts over all peak rates (Fig. 11)")
    ap.add_argument("--cores", type=int, default=4, help="Elixir's cores for Fig. 11 (its min cores at the quick scale)")
    ap.add_argument("--max-cores", type=int, default=8, help="largest core count tried (Fig. 3b)")
    ap.add_argument("--part", choices=["fig11", "fig3b", "all"], default="all")
    ap.add_argument("--queue-threshold", type=int, default=None,
                    help="Elixir's K for Fig. 11 (default: the headroom rule, 110 at this scale; 551 is the "
                         "full-scale rule's share of the ring)")
    ap.add_argument("--write", action="store_true",
                    help="replace BENCHMARKS.md's blocks (elixir-micro-fig3b, elixir-micro-fig11 or "
                         "elixir-micro-fig11-kK with --queue-threshold K)")
    a = ap.parse_args()
    if not os.access(HYFLOW, os.X_OK):
        sys.exit("build first: cargo build --release")
    if a.write and (a.bursts != 1000 or a.cores != 4 or a.max_cores != 8):
        sys.exit("--write is for the default --bursts, --cores and --max-cores")
    command = "python3 scripts/elixir_micro.py"
    if a.part in ("fig3b", "all"):
        lines = fig3b(a.max_cores)
        print("\n".join(lines) + "\n")
        if a.write:
            benchdoc.write_block("elixir-micro-fig3b", "\n".join(lines), command + " --part fig3b")
    if a.part in ("fig11", "all"):
        lines = fig11(a.bursts, a.cores, a.queue_threshold)
        print("\n".join(lines) + "\n")
        if a.write:
            k = a.queue_threshold
            own = f" --queue-threshold {k}" if k else ""
            benchdoc.write_block(f"elixir-micro-fig11{f'-k{k}' if k else ''}", "\n".join(lines),
                                 command + " --part fig11" + own)

if __name__ == "__main__":
    main()
