"""Typed results: the CLI's JSON as dicts, per-row data as pandas DataFrames whose columns are
the engine's own NumPy arrays (numbers, without a copy) or Arrow arrays (strings and lists,
built over the engine's buffers without a Python object per row)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from . import _hyflow


def strings(column) -> pd.arrays.ArrowExtensionArray:
    """A string column from the engine's (UTF-8 bytes, offsets) pair."""
    data, offsets = column
    array = pa.LargeStringArray.from_buffers(len(offsets) - 1, pa.py_buffer(offsets), pa.py_buffer(data))
    return pd.arrays.ArrowExtensionArray(array)


def report_frame(page: str) -> str:
    """A report page for a notebook's output cell: in a frame of its own, so that its style
    stays inside it."""
    import html

    return (
        '<iframe style="width:100%;height:900px;border:1px solid #ddd" '
        f'srcdoc="{html.escape(page, quote=True)}"></iframe>'
    )


def field_column(column):
    """A flow field's values from the engine's string column ("" where absent): numbers
    (nullable ``UInt64``) when every present value is a plain decimal, text otherwise."""
    values = pd.Series(strings(column)).replace("", None)
    present = values.dropna()
    if len(present) and present.str.fullmatch(r"0|[1-9][0-9]{0,18}").all():
        return pd.array(values, dtype="UInt64")
    return values.array


def decisions_frame(d: dict) -> pd.DataFrame:
    """Per-packet decisions: index, time (sim), layer (categorical), drop, output ports."""
    offsets = d["port_offsets"]
    ports = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(d["ports"]))
    columns = {"i": d["i"]}
    if "t_ns" in d:
        columns["t_ns"] = d["t_ns"]
    columns["layer"] = pd.Categorical.from_codes(d["layer"].astype(np.int8), categories=d["layers"])
    columns["drop"] = np.diff(offsets) == 0
    columns["outputs"] = pd.arrays.ArrowExtensionArray(ports)
    return pd.DataFrame(columns, copy=False)


def rules_frame(d: dict, counters: bool) -> pd.DataFrame:
    """Rules as columns; with their packet and byte counters after a run."""
    columns = {
        "table": d["table"],
        "priority": d["priority"],
        "cookie": d["cookie"],
    }
    for name in ("idle_timeout", "hard_timeout"):
        if name in d:
            columns[name] = d[name]
    columns["match"] = strings(d["match"])
    columns["actions"] = strings(d["actions"])
    if counters:
        columns["n_packets"] = d["n_packets"]
        columns["n_bytes"] = d["n_bytes"]
    return pd.DataFrame(columns, copy=False)


@dataclass
class ReplayResult:
    """What ``hyflow.replay`` measured.

    ``summary`` has the CLI's ``--json`` keys; ``rules`` the per-rule counters at the end (the
    CLI's ``--rule-stats``); ``decisions`` every packet's layer and outputs when asked for.
    ``str()`` is the CLI's report.
    """

    summary: dict
    text: str
    rules: pd.DataFrame
    decisions: pd.DataFrame | None = None
    #: The run record the HTML report draws (JSON text, as ``--report FILE.json`` writes it).
    record: str = ""

    def __str__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return report_frame(_hyflow.report_html([self.record]))

    def __repr__(self) -> str:
        s = self.summary
        return (
            f"ReplayResult(packets={s['packets']}, nic_hit_rate={s['nic_hit_rate']:.4f}, "
            f"microflow_hit_rate={s['microflow_hit_rate']:.4f}, megaflow_hit_rate={s['megaflow_hit_rate']:.4f}, "
            f"upcall_rate={s['upcall_rate']:.4f})"
        )


@dataclass
class SimResult:
    """What ``hyflow.sim`` measured.

    ``summary`` has the CLI's ``--json`` keys (with ``find``, the search's answer in
    ``min_cores`` — with ``min_cores_within_tolerance`` and every count's loss in
    ``loss_by_cores`` — or ``max_rate_pps``, and the figures of the run that gave it). ``series`` is
    the time series of complete intervals (the CLI's ``--timeseries`` columns), ``latency`` the
    latency histograms per path with their CDF, ``decisions`` every packet's fate when asked
    for. ``str()`` is the CLI's summary.
    """

    summary: dict
    text: str
    series: pd.DataFrame
    latency: pd.DataFrame
    decisions: pd.DataFrame | None = None
    #: The run record the HTML report draws (JSON text, as ``--report FILE.json`` writes it).
    record: str = ""

    def __str__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return report_frame(_hyflow.report_html([self.record]))

    def __repr__(self) -> str:
        s = self.summary
        found = "".join(f", {k}={s[k]}" for k in ("min_cores", "max_rate_pps") if s.get(k) is not None)
        return (
            f"SimResult(policy={s['policy']!r}, packets={s['packets']}, hw_share={s['hw_share']:.4f}, "
            f"loss_rate={s['loss_rate']:.6f}, p99_us={s['latency_us']['p99']}{found})"
        )


def series_frame(d: dict) -> pd.DataFrame:
    """The time series in the CLI's CSV columns: rates per second, losses and ring maximum."""
    per_s = 1.0 / d["interval_s"]
    return pd.DataFrame(
        {
            "t_s": d["t_s"],
            "sw_pps": d["sw"] * per_s,
            "hw_pps": d["hw"] * per_s,
            "served_pps": d["served"] * per_s,
            "lost": d["lost"],
            "ring_max": d["ring_max"],
        },
        copy=False,
    )


def latency_frame(d: dict) -> pd.DataFrame:
    """Latency histograms per path (all, hardware, software): value (µs), count, CDF."""
    parts = []
    for path, (values, counts) in d.items():
        total = counts.sum()
        parts.append(
            pd.DataFrame(
                {
                    "path": path,
                    "latency_us": values / 1e3,
                    "count": counts,
                    "cdf": np.cumsum(counts) / total if total else np.zeros(len(counts)),
                }
            )
        )
    frame = pd.concat(parts, ignore_index=True)
    frame["path"] = pd.Categorical(frame["path"], categories=list(d))
    return frame


@dataclass
class TopkResult:
    """What ``hyflow.topk`` reported.

    ``flows`` has one row per boundary and rank: ``boundary`` (0-based), ``t`` (s since the
    first packet), ``packets`` (read so far), ``rank``, ``count`` (packets in the window) and
    one column per key field, as the CLI's JSON writes the values. ``boundaries`` has one row
    per boundary, with why it names fewer than k flows when it does. ``summary`` is the run's
    (packets read, malformed, without the key, memory used); ``notes`` what the CLI adds on
    standard error.
    """

    flows: pd.DataFrame
    boundaries: pd.DataFrame
    summary: dict
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(self.notes)

    def __repr__(self) -> str:
        return f"TopkResult(boundaries={len(self.boundaries)}, rows={len(self.flows)}, packets={self.summary['packets']})"


def topk_result(d: dict) -> TopkResult:
    columns = dict(d["columns"])
    for name, col in d["fields"].items():
        values = pd.Series(strings(col))
        # Numbers as numbers (ports, protocols), as the CLI's JSON gives them: a field whose
        # every value is a plain decimal; addresses and hex values stay text.
        if len(values) and values.str.fullmatch(r"0|[1-9][0-9]{0,18}").all():
            columns[name] = values.astype(np.uint64).to_numpy()
        else:
            columns[name] = strings(col)
    records = [json.loads(b) for b in d["boundaries"]]
    boundaries = pd.DataFrame(
        {
            "t": [r["t"] for r in records],
            "packets": np.array([r["packets"] for r in records], dtype=np.uint64),
            "short": [r.get("short", {}).get("reason") for r in records],
            "held": [r.get("short", {}).get("held") for r in records],
        }
    )
    return TopkResult(
        flows=pd.DataFrame(columns, copy=False),
        boundaries=boundaries,
        summary=json.loads(d["summary"]),
        notes=list(d["notes"]),
    )


@dataclass
class Trace:
    """One packet's way through the pipeline: ``record`` is the CLI's ``trace --json`` object,
    ``str()`` its text (as ``ofproto/trace`` prints it)."""

    record: dict
    text: str

    def __str__(self) -> str:
        return self.text
