"""Every API function on small inputs, checked against the CLI's output for the same run."""

from __future__ import annotations

import json
import threading

import numpy as np
import pandas as pd
import pytest

import hyflow
from conftest import FLOWS, cli, cli_json

def without_host(summary: dict) -> dict:
    """The report without its host wall-clock figures (never the same twice)."""
    out = json.loads(json.dumps(summary))
    out.pop(hyflow._hyflow.REPLAY_WALL_CLOCK_KEY, None)
    return out


def test_replay_builtin_matches_cli():
    r = hyflow.replay()
    assert without_host(r.summary) == without_host(cli_json("replay"))
    assert str(r).startswith("built-in workload:")
    assert r.summary["packets"] == 200_000


def test_replay_options_match_cli(inputs):
    kw = dict(flows=inputs["flows"], trace=inputs["trace"], updates=inputs["updates"], microflow_entries=1024,
              consistency="signature", nic="gigaflow", nic_tables=3, warmup=0.05)
    r = hyflow.replay(**kw)
    args = ["replay", "--flows", inputs["flows"], "--trace", inputs["trace"], "--updates", inputs["updates"],
            "--microflow-entries", "1024", "--consistency", "signature", "--nic", "gigaflow", "--nic-tables", "3",
            "--warmup", "0.05"]
    assert without_host(r.summary) == without_host(cli_json(*args))
    assert r.summary["nic_scheme"] == "gigaflow" and r.summary["updates"] > 0


def test_replay_decisions_and_rules_match_cli(inputs, tmp_path):
    r = hyflow.replay(flows=inputs["flows"], trace=inputs["trace"], updates=inputs["updates"], decisions=True)
    log = tmp_path / "decisions.jsonl"
    done = cli("replay", "--flows", inputs["flows"], "--trace", inputs["trace"], "--updates", inputs["updates"],
               "--decisions", log, "--rule-stats")
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in log.read_text().splitlines()]
    d = r.decisions
    assert len(d) == len(records) == 20_000
    assert d["i"].dtype == np.uint64 and d["drop"].dtype == bool
    assert isinstance(d["layer"].dtype, pd.CategoricalDtype)
    assert list(d["layer"].astype(str)) == [rec["layer"] for rec in records]
    assert list(d["drop"]) == [rec["drop"] for rec in records]
    assert [list(p) for p in d["outputs"]] == [[o["port"] for o in rec["outputs"]] for rec in records]
    # Per-rule counters: the CLI's --rule-stats lines, in the same order.
    lines = [l for l in done.stdout.splitlines() if l.startswith(" cookie=")]
    assert len(lines) == len(r.rules)
    for line, row in zip(lines, r.rules.itertuples()):
        assert f"table={row.table}, n_packets={row.n_packets}, n_bytes={row.n_bytes}, priority={row.priority}" in line
    assert r.rules["n_packets"].dtype == np.uint64


def test_sim_matches_cli(inputs, tmp_path):
    kw = dict(flows=inputs["flows"], trace=inputs["trace"], policy="elixir", large_entries=200, bursty_entries=20,
              rate=200_000, interval=5)
    s = hyflow.sim(decisions=True, **kw)
    csv, log = tmp_path / "series.csv", tmp_path / "decisions.jsonl"
    args = ["sim", "--flows", inputs["flows"], "--trace", inputs["trace"], "--policy", "elixir", "--large-entries",
            "200", "--bursty-entries", "20", "--rate", "200000", "--interval", "5"]
    assert s.summary == cli_json(*args)
    done = cli(*args, "--timeseries", csv, "--decisions", log)
    assert done.returncode == 0, done.stderr
    series = pd.read_csv(csv)
    assert list(series.columns) == list(s.series.columns)
    assert len(series) == len(s.series) > 10
    np.testing.assert_allclose(series.to_numpy(float), s.series.to_numpy(float), rtol=1e-6, atol=0.5)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert list(s.decisions["t_ns"]) == [rec["t_ns"] for rec in records]
    assert list(s.decisions["layer"].astype(str)) == [rec["layer"] for rec in records]
    # Latency histograms: counts add up to the delivered packets, the CDF ends at 1.
    for path, part in s.latency.groupby("path", observed=True):
        key = {"all": "latency_us", "hardware": "latency_hw_us", "software": "latency_sw_us"}[path]
        assert part["count"].sum() == s.summary[key]["count"]
        assert part["cdf"].iloc[-1] == pytest.approx(1.0)


def test_sim_search_matches_cli(inputs):
    s = hyflow.sim(flows=inputs["flows"], trace=inputs["trace"], policy="psf", rate=2_000_000, find="min_cores",
                   max_cores=8)
    expected = cli_json("sim", "--flows", inputs["flows"], "--trace", inputs["trace"], "--policy", "psf", "--rate",
                        "2000000", "--find", "min-cores", "--max-cores", "8")
    assert s.summary == expected
    assert s.summary["min_cores"] >= 1
    # Every count to the bound, as rows a DataFrame takes (Elixir's Fig. 13).
    losses = pd.DataFrame(s.summary["loss_by_cores"])
    assert list(losses["cores"]) == list(range(1, 9))
    assert (losses[losses["cores"] >= s.summary["min_cores"]]["lost"] == 0).all()


def test_topk_matches_cli(inputs):
    t = hyflow.topk(inputs["dynamic"], k=20, window="2s", block="500ms")
    done = cli("topk", "--trace", inputs["dynamic"], "--k", "20", "--window", "2s", "--block", "500ms", "--json")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(l) for l in done.stdout.splitlines()]
    assert len(t.boundaries) == len(lines) > 3
    rows = []
    for b, line in enumerate(lines):
        for rank, f in enumerate(line["flows"], 1):
            rows.append({"boundary": b, "t": line["t"], "packets": line["packets"], "rank": rank, "count": f["count"],
                         **f["key"]})
    expected = pd.DataFrame(rows)
    got = t.flows.astype({c: object for c in ("nw_src", "nw_dst")})
    assert list(got.columns) == list(expected.columns)
    for column in expected.columns:
        assert [str(v) for v in got[column]] == [str(v) for v in expected[column]], column
    assert t.flows["count"].dtype == np.uint64 and t.flows["rank"].dtype == np.uint32
    assert t.summary["packets"] == 40_000


def test_eval_topk_matches_cli(inputs):
    frame = hyflow.eval_topk(inputs["dynamic"], algos=["fastkeeper-bitmap", "cm"], memory="20KB", k="10,50",
                             window="2s", block="500ms")
    done = cli("eval", "topk", "--trace", inputs["dynamic"], "--algos", "fastkeeper-bitmap,cm", "--memory", "20KB",
               "--k", "10,50", "--window", "2s", "--block", "500ms", "--json")
    assert done.returncode == 0, done.stderr
    expected = pd.DataFrame([json.loads(l) for l in done.stdout.splitlines()])
    assert len(frame) == 4
    pd.testing.assert_frame_equal(frame, expected)


def test_trace_matches_cli(tmp_path):
    packet = "in_port=1,dl_dst=00:00:00:00:00:02,dl_type=0x0800,nw_src=10.0.0.1,nw_dst=10.0.1.5,nw_proto=6,tp_dst=80"
    t = hyflow.trace(FLOWS, packet)
    done = cli("trace", "--flows", FLOWS, packet, "--json")
    assert done.returncode == 0, done.stderr
    assert t.record == json.loads(done.stdout)
    assert str(t) == cli("trace", "--flows", FLOWS, packet).stdout
    many = hyflow.trace(FLOWS, packets=FLOWS.parent / "packets.txt")
    assert isinstance(many, list) and len(many) > 1


def test_generators_write_what_the_cli_writes(tmp_path):
    line = hyflow.gen.traffic(flows=FLOWS, out=tmp_path / "py.pcap", packets=5000, flows_count=100, seed=7)
    assert line.startswith("wrote 5000 packets")
    done = cli("gen", "traffic", "--flows", FLOWS, "--out", tmp_path / "cli.pcap", "--packets", "5000",
               "--flows-count", "100", "--seed", "7")
    assert done.stdout.strip() == line.replace(str(tmp_path / "py.pcap"), str(tmp_path / "cli.pcap"))
    assert (tmp_path / "py.pcap").read_bytes() == (tmp_path / "cli.pcap").read_bytes()
    hyflow.gen.updates(flows=FLOWS, out=tmp_path / "py.txt", seed=3)
    cli("gen", "updates", "--flows", FLOWS, "--out", tmp_path / "cli.txt", "--seed", "3")
    assert (tmp_path / "py.txt").read_text() == (tmp_path / "cli.txt").read_text()
    hyflow.gen.dynamic(out=tmp_path / "d.pcap", packets=2000, flows_count=100, bursts=2)
    hyflow.gen.gateway(out=tmp_path / "g.pcap", flows_count=1000, bursty=10, rate=20_000, duration=0.1)
    hyflow.gen.pipeline(kind="ofd", out=tmp_path / "ofd", rules=200, headers=1000, packets=3000, flows_count=300)
    assert (tmp_path / "ofd" / "trace.pcap").exists()
    assert len(hyflow.load_trace(tmp_path / "g.pcap")) > 1000


def test_loaders(inputs):
    rules = hyflow.load_flows(FLOWS)
    assert len(rules) == hyflow.replay(flows=FLOWS, trace=inputs["trace"]).rules.shape[0] == 38
    assert rules["table"].dtype == np.uint8 and rules["priority"].dtype == np.uint16
    updates = hyflow.load_updates(inputs["updates"])
    assert len(updates) == sum(1 for l in inputs["updates"].read_text().splitlines() if l and not l.startswith("#"))
    assert set(updates["command"]) <= {"add", "modify", "modify-strict", "delete", "delete-strict"}
    packets = hyflow.load_trace(inputs["trace"])
    done = cli("parse-pcap", "--wire-lengths", inputs["trace"])
    assert list(packets["flow"]) == done.stdout.splitlines()
    assert packets["ts_ns"].dtype == np.uint64 and packets["bytes"].dtype == np.uint32
    assert (packets["malformed"] == "").all()


def test_errors_carry_the_cli_message_in_python_words(tmp_path):
    """The CLI's message, with options spelled as the keywords that set them."""
    with pytest.raises(hyflow.HyflowError, match=r"/nonexistent\.flows: cannot read"):
        hyflow.replay(flows="/nonexistent.flows", trace="/nonexistent.pcap")
    bad = tmp_path / "bad.flows"
    bad.write_text("table=0,priority=1,nw_src=10.0.0.300,actions=drop\n")
    done = cli("trace", "--flows", bad, "in_port=1")
    message = done.stderr.strip().removeprefix("hyflow: ")
    assert f"{bad}:1:" in message
    with pytest.raises(hyflow.HyflowError) as e:
        hyflow.trace(bad, "in_port=1")
    assert str(e.value) == message
    with pytest.raises(hyflow.HyflowError, match="^cores must be at least 1"):
        hyflow.sim(cores=0)
    with pytest.raises(hyflow.HyflowError, match="^microflow_entries=lots: not a whole number"):
        hyflow.replay(microflow_entries="lots")
    with pytest.raises(TypeError, match="unexpected keyword argument 'microflow_entrys'"):
        hyflow.replay(microflow_entrys=4)
    with pytest.raises(TypeError, match="flag"):
        hyflow.replay(no_nic="yes")
    with pytest.raises(TypeError, match="result.summary"):
        hyflow.replay(json="out.json")


def test_runs_release_the_gil():
    """A Python thread keeps running while the engine replays."""
    ticks, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            ticks[0] += 1

    thread = threading.Thread(target=spin)
    thread.start()
    try:
        before = ticks[0]
        hyflow.replay()
        during = ticks[0] - before
    finally:
        stop.set()
        thread.join()
    # Holding the GIL, the engine would let the thread run only between Python calls.
    assert during > 10_000


def test_docs_and_options():
    assert "microflow_entries: int (default 65536)" in hyflow.replay.__doc__
    opts = hyflow.options("sim")
    assert {"cores", "policy", "find"} <= set(opts["keyword"])
    assert opts.set_index("keyword").loc["cores", "default"] == 1


def test_stubs_are_current():
    """The committed type stubs are what the CLI's options generate."""
    import subprocess
    import sys

    from conftest import ROOT

    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "python_stubs.py"), "--check"], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr


def test_sim_plots_and_a_series_sized_to_the_run(tmp_path):
    """Without an interval the series has 200 to 1,000 round intervals; plot= writes the CLI's
    charts."""
    s = hyflow.sim(rate=8_000_000, ring=1024, policy="psf", plot=tmp_path)
    assert 200 <= len(s.series) <= 1000
    step = s.series["t_s"].diff().dropna().round(12).unique()
    assert len(step) == 1 and f"{step[0] * 1e6:g}"[0] in "15"
    assert s.series["lost"].sum() > 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(f"{n}.{e}" for n in ("rate", "ring", "latency_cdf") for e in ("png", "svg"))


def test_names_through_keywords():
    """A dump from Open vSwitch with table and port names loads with the CLI's --ports and
    --tables as keywords."""
    from conftest import ROOT

    d = ROOT / "crates" / "hyflow" / "tests" / "data" / "ovs-names"
    names = dict(ports=d / "show.txt", tables=d / "table-features.txt")
    rules = hyflow.load_flows(d / "dump-names.txt", **names)
    assert len(rules) == 7 and set(rules["table"]) == {0, 5}
    t = hyflow.trace(d / "dump-names.txt", 'in_port="antrea-gw0",ip,nw_dst=10.1.2.3', **names)
    assert [o["port"] for o in t.record["outputs"]] == [3]
    with pytest.raises(hyflow.HyflowError, match="unknown table 'Classifier'"):
        hyflow.load_flows(d / "dump-names.txt")


def test_groups_through_keywords(tmp_path):
    """Groups (`ovs-ofctl dump-groups` output) load with the CLI's --groups as a keyword; a
    flow naming a missing group is an error with file, line and column."""
    groups = tmp_path / "groups.txt"
    groups.write_text(
        "OFPST_GROUP_DESC reply (OF1.5) (xid=0x2):\n"
        " group_id=1,type=all,bucket=bucket_id:0,actions=output:1,output:2,"
        "bucket=bucket_id:1,actions=set_field:9.9.9.9->ip_src,output:3\n"
    )
    flows = tmp_path / "flows.txt"
    flows.write_text("in_port=5,actions=group:1,output:4\n")
    rules = hyflow.load_flows(flows, groups=groups)
    assert list(rules["actions"]) == ["group:1,output:4"]
    t = hyflow.trace(flows, "in_port=5,tcp,nw_src=1.1.1.1", groups=groups)
    # An action set keeps a bucket's last output; each bucket acts on a copy of the packet.
    assert [o["port"] for o in t.record["outputs"]] == [2, 3, 4]
    assert t.record["buckets"] == ["group 1 bucket 0", "group 1 bucket 1"]
    assert t.record["outputs"][1]["packet"]["nw_src"] == "9.9.9.9"
    assert t.record["outputs"][2]["packet"]["nw_src"] == "1.1.1.1"
    with pytest.raises(hyflow.HyflowError, match=r"flows.txt:1:19: group 1 does not exist \(no groups are known: give a groups file\)"):
        hyflow.load_flows(flows)


def test_conntrack_passes_and_conversations_match_cli(tmp_path):
    antrea = FLOWS.parent / "antrea"
    names = {"ports": antrea / "ports.txt", "tables": antrea / "tables.txt", "groups": antrea / "groups.txt"}
    flags = [x for k, v in names.items() for x in (f"--{k}", v)]
    packets = antrea / "packets.txt"
    traces = hyflow.trace(antrea / "antrea.flows", packets=packets, ct_next=["trk,est"], **names)
    done = cli("trace", "--flows", antrea / "antrea.flows", *flags, "--packets", packets, "--ct-next", "trk,est", "--json")
    assert done.returncode == 0, done.stderr
    assert [t.record for t in traces] == [json.loads(line) for line in done.stdout.splitlines()]
    assert traces[0].record["recirculations"][0]["ct_state"] == "est|trk"
    line = hyflow.gen.conversations(flows=antrea / "antrea.flows", spec=antrea / "conversations.txt",
                                    out=tmp_path / "c.pcapng", conversations=200, **names)
    assert "of 200 conversations" in line
    r = hyflow.replay(flows=antrea / "antrea.flows", trace=tmp_path / "c.pcapng", **names)
    cli_summary = cli_json("replay", "--flows", antrea / "antrea.flows", *flags, "--trace", tmp_path / "c.pcapng")
    assert without_host(r.summary) == without_host(cli_summary)
    rc = r.summary["recirculation"]
    assert rc["recirculations"] > 0 and rc["conntrack"]["invalid"] == 0


# Issue 31, part 6: Python that behaves in a notebook.

def test_ctrl_c_stops_a_long_run():
    """SIGINT during a run raises KeyboardInterrupt instead of waiting for the run's end: the
    run (the elixir-scale gateway, minutes long) is stopped from its progress callback."""
    import signal

    timer = threading.Timer(0.5, lambda: signal.raise_signal(signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            hyflow.sim(trace="gen:gateway,preset=elixir", progress=False)
    finally:
        timer.cancel()


def test_progress_callback_hears_how_far_a_run_got():
    heard = []
    r = hyflow.sim(trace="gen:gateway,duration=2", progress=lambda *a: heard.append(a))
    assert heard, "the callback hears at least the end of the run"
    packets, read, total = heard[-1]
    assert packets >= r.summary["packets"] and 0 < read <= total


def test_errors_speak_python():
    with pytest.raises(hyflow.HyflowError, match=r"^nic_entries=-1: not a whole number"):
        hyflow.replay(nic_entries=-1)
    with pytest.raises(hyflow.HyflowError, match=r"^microflow_entries must be at least 1 \(turn the cache off with no_microflow"):
        hyflow.replay(microflow_entries=0)
    with pytest.raises(hyflow.HyflowError, match=r"^nic_entries must be at least 1 \(for no NIC at all: no_nic in replay, policy psf in sim\)$"):
        hyflow.replay(nic_entries=0)
    with pytest.raises(hyflow.HyflowError) as e:
        hyflow.sim(rate=-5)
    assert str(e.value).startswith("rate must be") and "--" not in str(e.value)
    with pytest.raises(hyflow.HyflowError) as e:
        hyflow.sim(policy="nope")
    assert "'policy'" in str(e.value) or "policy" in str(e.value) and "--policy" not in str(e.value)


def test_topk_numeric_key_fields_are_numbers(inputs):
    r = hyflow.topk(inputs["dynamic"], key="5tuple")
    flows = r.flows
    for name in ("nw_proto", "tp_src", "tp_dst"):
        assert pd.api.types.is_integer_dtype(flows[name]), (name, flows[name].dtype)
    assert pd.api.types.is_string_dtype(flows["nw_src"]) or flows["nw_src"].dtype == object
    some_port = int(flows["tp_dst"].iloc[0])
    assert (flows.tp_dst == some_port).any()


def test_trace_takes_a_list_of_packets():
    packets = ["in_port=1,ip,nw_dst=10.0.0.1", "in_port=1,tcp,tp_dst=80"]
    traces = hyflow.trace(FLOWS, packets)
    assert [t.record for t in traces] == [hyflow.trace(FLOWS, p).record for p in packets]


def test_replay_dumps_and_counters(tmp_path):
    r = hyflow.replay(dump_megaflows=tmp_path / "mf.txt")
    lines = (tmp_path / "mf.txt").read_text().splitlines()
    assert len(lines) == r.summary["megaflow_entries_now"]
    assert r.summary["forwarded"] + r.summary["dropped"] == r.summary["packets"]


def test_load_trace_gives_a_column_per_field(inputs):
    t = hyflow.load_trace(inputs["trace"], in_port=1)
    assert {"protocol", "in_port", "dl_src", "nw_src", "nw_dst", "tp_dst"} <= set(t.columns)
    assert pd.api.types.is_integer_dtype(t["tp_dst"]) and pd.api.types.is_integer_dtype(t["in_port"])
    # Each row's fields are its flow's, and a field a packet lacks is missing.
    for _, row in t.head(50).iterrows():
        parts = dict(p.split("=", 1) if "=" in p else ("protocol", p) for p in row["flow"].split(","))
        for name, value in parts.items():
            assert str(row[name]) == (value if name != "in_port" else "1"), (name, row["flow"])
    tcp = t[t["protocol"] == "tcp"]
    assert len(tcp) and tcp["tp_dst"].notna().all()
    assert (t["in_port"] == 1).all()


def test_a_long_run_shows_a_tqdm_bar_when_tqdm_is_there(monkeypatch):
    """With tqdm installed (a stand-in here), a run lasting more than half a second (ten
    million packets) shows a bar that ends at the input's end."""
    import sys
    import types

    bars = []

    class Bar:
        def __init__(self, total=None, desc="", unit=""):
            self.total, self.desc, self.n, self.closed = total, desc, 0, False
            bars.append(self)

        def set_postfix(self, **kw):
            self.postfix = kw

        def refresh(self):
            pass

        def close(self):
            self.closed = True

    fake = types.ModuleType("tqdm.auto")
    fake.tqdm = Bar
    monkeypatch.setitem(sys.modules, "tqdm", types.ModuleType("tqdm"))
    monkeypatch.setitem(sys.modules, "tqdm.auto", fake)
    r = hyflow.sim(trace="gen:gateway,duration=20")
    assert len(bars) == 1, "one bar for a run of seconds"
    bar = bars[0]
    assert bar.desc == "hyflow sim" and bar.closed and bar.n == bar.total > 0
    assert bar.postfix["packets"] >= r.summary["packets"]
