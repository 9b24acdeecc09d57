"""Sweeps: the same table from any backend and any number of workers."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

import hyflow
from hyflow.sweep import configs

GRID = {"microflow_entries": [1024, 65536], "consistency": ["signature", "action"], "nic": ["megaflow", "gigaflow"]}


def test_configs_cross_product_in_order():
    got = configs(GRID, None, {"no_megaflow": True})
    assert len(got) == 8
    assert got[0] == {"no_megaflow": True, "microflow_entries": 1024, "consistency": "signature", "nic": "megaflow"}
    assert got[1]["nic"] == "gigaflow" and got[-1]["microflow_entries"] == 65536
    assert configs(None, [{"a": 1}], {"b": 2}) == [{"b": 2, "a": 1}]
    with pytest.raises(TypeError):
        configs(GRID, [{}], None)
    with pytest.raises(TypeError, match="list of values"):
        configs({"microflow_entries": 1024}, None, None)


@pytest.fixture(scope="module")
def local(inputs):
    return hyflow.sweep("replay", GRID, flows=inputs["flows"], trace=inputs["trace"], updates=inputs["updates"],
                        workers=1, progress=False)


def test_local_sweep_rows_are_the_single_runs(local, inputs):
    assert local.shape[0] == 8
    assert list(local["config.microflow_entries"]) == [1024] * 4 + [65536] * 4
    assert local["config.megaflow_entries"].iloc[0] == 200_000  # the CLI's default, filled in
    single = hyflow.replay(flows=inputs["flows"], trace=inputs["trace"], updates=inputs["updates"],
                           microflow_entries=65536, consistency="action", nic="gigaflow")
    row = local.iloc[7]
    for key in ("packets", "nic_hit_rate", "microflow_hits", "megaflow_hits", "upcalls", "stale"):
        assert row[key] == single.summary[key], key
    assert row["gigaflow.tables"] == single.summary["gigaflow"]["tables"]
    wall_clock = [c for c in local.columns if c.startswith(hyflow._hyflow.REPLAY_WALL_CLOCK_KEY)]
    assert wall_clock == [], wall_clock


def test_two_workers_give_the_same_table(local, inputs):
    two = hyflow.sweep("replay", GRID, flows=inputs["flows"], trace=inputs["trace"], updates=inputs["updates"],
                       workers=2, progress=False)
    pd.testing.assert_frame_equal(local, two)


def test_ray_gives_the_same_table(local, inputs, tmp_path):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        on_ray = hyflow.sweep("replay", GRID, backend="ray", flows=inputs["flows"], trace=inputs["trace"],
                              updates=inputs["updates"], progress=False)
        pd.testing.assert_frame_equal(local, on_ray)
        shipped = hyflow.sweep("replay", GRID, backend="ray", ship_files=True, flows=inputs["flows"],
                               trace=inputs["trace"], updates=inputs["updates"], progress=False)
        # Shipped files run from the worker's copies: the same figures, other paths.
        figures = [c for c in local.columns if not c.startswith("config.")]
        pd.testing.assert_frame_equal(local[figures], shipped[figures])
        assert shipped["config.trace"].iloc[0] != str(inputs["trace"])
        # An engine error crosses from the worker with its message, naming the run.
        with pytest.raises(hyflow.HyflowError, match=r"^cores must be at least 1 \(sweep run 1: "):
            hyflow.sweep("sim", {"cores": [1, 0]}, backend="ray", flows=inputs["flows"], trace=inputs["trace"],
                         progress=False)
    finally:
        ray.shutdown()


def test_sim_and_topk_sweeps(inputs):
    sims = hyflow.sweep("sim", {"cores": [1, 2], "policy": ["psf", "offload-all"]}, flows=inputs["flows"],
                        trace=inputs["trace"], rate=500_000, progress=False)
    assert sims.shape[0] == 4 and "latency_us.p99" in sims.columns
    assert (sims["config.search_threads"] == 1).all()
    tops = hyflow.sweep("topk", {"algo": ["fastkeeper-bitmap", "cm"]}, trace=inputs["dynamic"], k=10,
                        progress=False)
    assert list(tops["memory_used"] > 0) == [True, True]
    # Each top-k row carries its accuracy against the capture's exact top-k.
    for _, row in tops.iterrows():
        (truth,) = hyflow.eval_topk(inputs["dynamic"], algos=row["config.algo"], k=10).to_dict("records")
        assert (row["precision"], row["are"]) == (truth["precision"], truth["are"])
    assert tops["precision"].between(0, 1).all()


def test_parquet_and_command_line(local, inputs, tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text(
        f'command = "replay"\n[base]\nflows = "{inputs["flows"]}"\ntrace = "{inputs["trace"]}"\n'
        f'updates = "{inputs["updates"]}"\n[grid]\n'
        'microflow_entries = [1024, 65536]\nconsistency = ["signature", "action"]\nnic = ["megaflow", "gigaflow"]\n'
    )
    out = tmp_path / "results.parquet"
    done = subprocess.run([sys.executable, "-m", "hyflow", "sweep", str(grid), "--out", str(out), "--workers", "2"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "wrote 8 runs" in done.stdout
    table = pd.read_parquet(out)
    # Parquet reads a missing figure (no Gigaflow report on a megaflow NIC) back as None.
    def missing_as_none(frame):
        return frame.astype(object).where(frame.notna(), None)

    pd.testing.assert_frame_equal(missing_as_none(table), missing_as_none(local), check_dtype=False)
    bad = tmp_path / "bad.toml"
    bad.write_text('command = "replay"\n[grid]\nmicroflow_entries = [0]\n')
    done = subprocess.run([sys.executable, "-m", "hyflow", "sweep", str(bad), "--out", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "hyflow:" in done.stderr
    # The table's format follows the extension: CSV for .csv; an unknown one is refused before
    # any run.
    csv = tmp_path / "results.csv"
    done = subprocess.run([sys.executable, "-m", "hyflow", "sweep", str(grid), "--out", str(csv), "--workers", "2"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert list(pd.read_csv(csv).columns) == list(local.columns) and len(pd.read_csv(csv)) == 8
    done = subprocess.run([sys.executable, "-m", "hyflow", "sweep", str(grid), "--out", str(tmp_path / "r.xlsx")],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "r.xlsx: cannot tell the table's format" in done.stderr
    assert "wrote" not in done.stdout


def test_the_example_figure_runs(tmp_path):
    """examples/python/gigaflow_vs_megaflow.py end to end, at a small scale."""
    from conftest import ROOT

    out = tmp_path / "figure.png"
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "python" / "gigaflow_vs_megaflow.py"), "--out",
                           str(out), "--packets", "20000", "--flows", "2000", "--rules", "500"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = [line for line in done.stdout.splitlines() if line.split()[:1] in (["ofd"], ["psc"], ["ols"], ["ant"], ["otl"])]
    assert len(rows) == 5


def test_a_failing_run_is_named(inputs):
    with pytest.raises(hyflow.HyflowError, match=r"^cores must be at least 1 \(sweep run 1: .*'cores': 0"):
        hyflow.sweep("sim", {"cores": [1, 0]}, flows=inputs["flows"], trace=inputs["trace"], workers=1,
                     progress=False)
    with pytest.raises(TypeError, match="unexpected keyword argument 'coers'"):
        hyflow.sweep("sim", {"coers": [1]}, progress=False)
