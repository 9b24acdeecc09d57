#!/usr/bin/env python3
"""Redraws the images in docs/ from the runs behind them, with the binary as built now.

Usage: scripts/docs_images.py [--check]

- docs/plots/sim-{psf-capped,offload-all-unlimited}-{rate,ring,nic,latency_cdf}.png: the
  answering runs of BENCHMARKS' timing table (scripts/sim_bench.py's trace; min cores at 20 Mpps).
- docs/plots/elixir-fig12-{elixir,tfo}-rate.png: Fig. 12's runs of scripts/elixir_bench.py
  --quick at its fixed rate on 4 cores (its table's answer).
- docs/plots/kvs-fig4.png: FlexKVS's throughput against cores (FlexNIC's Figure 4): `hyflow
  kvs-sim` with this host's costs (docs/data/kvs-costs.json, `calibrate --kvs`) and the live
  points of scripts/kvs_bench.py --save (docs/data/kvs-live-points.json).
- docs/report.png: headless Chromium's screenshot of `hyflow report` comparing the two
  timing runs (not with --check: a browser's rendering varies between versions).

--check redraws the plots into a temporary directory and fails unless they are the
committed ones, byte for byte (the runs are deterministic and the charts use a bundled
font): scripts/test.sh runs it (about 30 s), so a change to what the charts draw comes with
new images. Build first: cargo build --release.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HYFLOW = os.path.join(ROOT, "target", "release", "hyflow")
FLOWS = os.path.join(ROOT, "examples", "l2l3acl.flows")
PLOTS = os.path.join(ROOT, "docs", "plots")
CHARTS = ("rate", "ring", "nic", "latency_cdf")
#: The timing runs: name, options (as scripts/sim_bench.py runs them).
TIMING_RUNS = (
    ("sim-psf-capped", ["--policy", "psf", "--nic-updates", "2000"]),
    ("sim-offload-all-unlimited",
     ["--policy", "offload-all", "--nic-updates", "0", "--update-stall", "0", "--update-host-cost", "0"]),
)
#: Elixir's answer in BENCHMARKS (min cores at the fixed rate), where Fig. 12 is drawn.
ELIXIR_CORES = 4


def sh(args: list[str]) -> str:
    return subprocess.run([HYFLOW, *args], check=True, capture_output=True, text=True).stdout


def timing_plots(out: str, tmp: str) -> list[str]:
    """Draws the timing runs' charts into `out`; returns the records written (for the report)."""
    trace = os.path.join(tmp, "bursty.pcap")
    sh(["gen", "dynamic", "--flows", FLOWS, "--out", trace, "--flows-count", "20000", "--packets", "3000000",
        "--rate", "100000", "--bursts", "300"])
    records = []
    for name, options in TIMING_RUNS:
        plots = os.path.join(tmp, name)
        record = os.path.join(tmp, f"{name}.json")
        sh(["sim", "--flows", FLOWS, "--trace", trace, *options, "--rate", "20000000", "--find", "min-cores",
            "--plot", plots, "--report", record])
        for chart in CHARTS:
            drawn = os.path.join(plots, f"{chart}.png")
            if os.path.exists(drawn):  # no NIC chart for a run whose NIC held nothing
                shutil.copyfile(drawn, os.path.join(out, f"{name}-{chart}.png"))
        records.append(record)
    return records


def elixir_plots(out: str, tmp: str) -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import elixir_bench

    rate, trace, common, exact, megaflow, _ = elixir_bench.setup(True, 20.0, tmp, None)
    for policy in ("elixir", "tfo"):
        plots = os.path.join(tmp, f"elixir-{policy}")
        args = common + elixir_bench.policy_args(policy, exact, megaflow)
        elixir_bench.sim(trace, args + ["--rate", str(rate), "--cores", str(ELIXIR_CORES), "--plot", plots])
        shutil.copyfile(os.path.join(plots, "rate.png"), os.path.join(out, f"elixir-fig12-{policy}-rate.png"))


def kvs_plot(out: str) -> None:
    data = os.path.join(ROOT, "docs", "data")
    sh(["kvs-sim", "--costs", os.path.join(data, "kvs-costs.json"), "--live", os.path.join(data, "kvs-live-points.json"),
        "--plot", os.path.join(out, "kvs-fig4.png")])


def screenshot(records: list[str], tmp: str) -> None:
    page = os.path.join(tmp, "report.html")
    sh(["report", *records, "--out", page])
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("chromium is not installed (Debian: apt-get install chromium)")
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={os.path.join(ROOT, 'docs', 'report.png')}", "--window-size=1200,3400",
                    "file://" + page], check=True, capture_output=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail unless the plots are the committed ones")
    a = ap.parse_args()
    if not os.access(HYFLOW, os.X_OK):
        sys.exit("build first: cargo build --release")
    with tempfile.TemporaryDirectory() as tmp:
        if a.check:
            drawn = os.path.join(tmp, "drawn")
            os.makedirs(drawn)
            timing_plots(drawn, tmp)
            elixir_plots(drawn, tmp)
            kvs_plot(drawn)
            stale = [f for f in sorted(os.listdir(drawn))
                     if not os.path.exists(os.path.join(PLOTS, f)) or not filecmp.cmp(os.path.join(drawn, f), os.path.join(PLOTS, f), shallow=False)]
            if stale:
                print(f"docs/plots is stale ({', '.join(stale)}): run scripts/docs_images.py", file=sys.stderr)
                return 1
            print(f"docs/plots: {len(os.listdir(drawn))} charts as committed")
            return 0
        os.makedirs(PLOTS, exist_ok=True)
        records = timing_plots(PLOTS, tmp)
        elixir_plots(PLOTS, tmp)
        kvs_plot(PLOTS)
        screenshot(records, tmp)
    print("redrew docs/plots and docs/report.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
