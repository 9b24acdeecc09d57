"""The HTML report in a real browser: headless Chromium (Debian's `chromium`, which
scripts/test.sh installs) loads the pages `hyflow report` and `--report` write, and the DOM it
built is checked — every chart there and drawn, every figure equal to the run's JSON — and a
screenshot taken of it."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

import hyflow
from conftest import FLOWS, cli

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(*args: str) -> subprocess.CompletedProcess:
    if CHROMIUM is None:
        pytest.fail("chromium is not installed: scripts/test.sh installs Debian's chromium package")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--allow-file-access-from-files"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120)


class Dom(HTMLParser):
    """The elements of a page: tag, attributes, the text inside, and their ancestors' tags."""

    def __init__(self):
        super().__init__()
        self.elements: list[dict] = []
        self.open: list[dict] = []

    def handle_starttag(self, tag, attrs):
        e = {"tag": tag, "attrs": dict(attrs), "text": "", "parents": [o["tag"] for o in self.open], "children": []}
        if self.open:
            self.open[-1]["children"].append(e)
        self.elements.append(e)
        if tag not in ("meta", "br", "img", "input", "link", "path", "line", "circle", "rect", "polyline", "polygon"):
            self.open.append(e)

    def handle_endtag(self, tag):
        for i in range(len(self.open) - 1, -1, -1):
            if self.open[i]["tag"] == tag:
                del self.open[i:]
                break

    def handle_data(self, data):
        for e in self.open:
            e["text"] += data

    def find(self, **attrs) -> list[dict]:
        return [e for e in self.elements if all(e["attrs"].get(k) == v for k, v in attrs.items())]


def loaded_dom(page: Path) -> Dom:
    """The DOM Chromium built from `page` (after parsing and layout), as its serialisation."""
    done = chromium("--dump-dom", page.as_uri())
    assert done.returncode == 0, done.stderr
    assert "<body" in done.stdout, done.stdout[:500]
    dom = Dom()
    dom.feed(done.stdout)
    return dom


def value_at(summary: dict, key: str):
    v = summary
    for k in key.split("/"):
        v = v[k]
    return v


def descendants(e: dict):
    for c in e["children"]:
        yield c
        yield from descendants(c)


def check_figures(dom: Dom, run: int, summary: dict) -> int:
    """Every figure of run `run` equals its JSON value; returns how many were checked."""
    checked = 0
    for e in dom.find(**{"data-run": str(run)}):
        key = e["attrs"].get("data-key")
        if key is None:
            continue
        want = value_at(summary, key)
        assert json.loads(e["attrs"]["data-value"]) == want, (key, e["attrs"]["data-value"], want)
        shown = e["text"].replace(",", "").replace("%", "").replace("µs", "").strip()
        if isinstance(want, float) and e["text"].endswith("%"):
            assert abs(float(shown) - want * 100) < 0.006, (key, e["text"], want)
        else:
            assert float(shown) == pytest.approx(want), (key, e["text"], want)
        checked += 1
    return checked


SIM_CHARTS = {"rate", "ring", "nic", "latency_cdf", "shares", "ports", "top-flows"}
#: psf keeps everything in software: no NIC to chart.
PSF_CHARTS = SIM_CHARTS - {"nic"}


def test_the_report_in_a_browser(tmp_path):
    runs = []
    for name, extra in (("offload-all", []), ("psf", ["--policy", "psf"])):
        record = tmp_path / f"{name}.json"
        json_out = tmp_path / f"{name}.summary.json"
        done = cli("sim", *extra, "--report", record, "--json", json_out)
        assert done.returncode == 0, done.stderr
        runs.append((record, json.loads(json_out.read_text())))
    record = tmp_path / "replay.json"
    json_out = tmp_path / "replay.summary.json"
    done = cli("replay", "--report", record, "--json", json_out)
    assert done.returncode == 0, done.stderr
    runs.append((record, json.loads(json_out.read_text())))
    page = tmp_path / "report.html"
    done = cli("report", *[r for r, _ in runs], "--out", page)
    assert done.returncode == 0, done.stderr
    assert "wrote the report of 3 runs" in done.stdout
    text = page.read_text()
    for fetch in ('src="http', "src='http", 'href="http', "url(http", "@import", "<script src", "<link"):
        assert fetch not in text, f"nothing fetched at view time: {fetch}"

    dom = loaded_dom(page)
    checked = 0
    for i, (_, summary) in enumerate(runs):
        section = dom.find(**{"class": "run", "data-run": str(i)})
        assert len(section) == 1, i
        charts = {e["attrs"]["data-chart"] for e in descendants(section[0]) if "data-chart" in e["attrs"]}
        want = [SIM_CHARTS, PSF_CHARTS, {"shares", "ports", "top-flows"}][i]
        assert want <= charts, (i, charts)
        # Every chart is drawn: an SVG with lines in it.
        for fig in (e for e in descendants(section[0]) if e["tag"] == "figure"):
            svg = [d for d in descendants(fig) if d["tag"] == "svg"]
            assert svg and sum(1 for d in descendants(svg[0]) if d["tag"] in ("polyline", "path", "line")) > 5
        # Where packets were handled: the bar's segments are the summary's counts.
        segments = {e["attrs"]["data-layer"]: int(e["attrs"]["data-packets"]) for e in descendants(section[0])
                    if "data-layer" in e["attrs"]}
        if i < 2:
            assert segments["nic"] == summary["hw_packets"] and segments["lost"] == summary["lost"]
            assert segments["slowpath"] == summary["host"]["upcalls"]
        else:
            assert segments["nic"] == summary["nic_hits"] and segments["slowpath"] == summary["upcalls"]
        # Ports: the table's counters are the summary's.
        cells = [e for e in descendants(section[0]) if "data-field" in e["attrs"]]
        assert len(cells) == 4 * len(summary["ports"])
        for j, p in enumerate(summary["ports"]):
            for k, field in enumerate(("rx_packets", "rx_bytes", "tx_packets", "tx_bytes")):
                assert int(cells[4 * j + k]["attrs"]["data-value"]) == p[field]
        checked += check_figures(dom, i, summary)
    assert checked >= 3 * 10, checked
    comparison = dom.find(**{"data-chart": "comparison"})
    assert len(comparison) == 1 and dom.find(**{"data-chart": "latency_cdf_compared"})

    shot = tmp_path / "report.png"
    done = chromium(f"--screenshot={shot}", "--window-size=1200,2600", page.as_uri())
    assert done.returncode == 0 and shot.stat().st_size > 50_000, done.stderr
    from PIL import Image

    with Image.open(shot) as im:
        colours = im.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is None or len(colours) > 50, "the screenshot shows more than a blank page"


def test_a_single_run_page_and_notebook_html(tmp_path):
    page = tmp_path / "sim.html"
    done = cli("sim", "--report", page)
    assert done.returncode == 0, done.stderr
    dom = loaded_dom(page)
    assert {e["attrs"]["data-chart"] for e in dom.elements if "data-chart" in e["attrs"]} >= SIM_CHARTS
    # Python: the same page, in a frame of its own in a notebook.
    r = hyflow.sim(progress=False)
    frame = r._repr_html_()
    assert frame.startswith("<iframe") and "srcdoc=" in frame and "data-chart=&quot;rate&quot;" in frame
    both = hyflow.report(r, hyflow.replay(progress=False), out=tmp_path / "py.html")
    assert 'data-chart="comparison"' in both and (tmp_path / "py.html").read_text() == both
