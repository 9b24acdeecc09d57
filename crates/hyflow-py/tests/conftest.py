"""Fixtures: the `hyflow` binary the Python results are checked against, the repository's
examples, and small generated inputs (made once per session, by the CLI)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FLOWS = ROOT / "examples" / "l2l3acl.flows"


def cli_binary() -> Path:
    path = Path(os.environ.get("HYFLOW_BIN", ROOT / "target" / "release" / "hyflow"))
    if not path.exists():
        raise RuntimeError(f"{path}: build the CLI first (cargo build --release -p hyflow-cli) or set HYFLOW_BIN")
    return path


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Runs the CLI; fails the test on a non-zero exit unless the caller checks stderr."""
    return subprocess.run([str(cli_binary()), *map(str, args)], cwd=cwd, capture_output=True, text=True)


def cli_json(*args: str) -> dict:
    done = cli(*args, "--json", "-")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="session")
def inputs(tmp_path_factory) -> dict:
    """A small trace and updates for the example pipeline, and a dynamic trace for top-k."""
    d = tmp_path_factory.mktemp("inputs")
    for args in (
        ("gen", "traffic", "--flows", FLOWS, "--out", d / "traffic.pcap", "--packets", "20000", "--flows-count", "300"),
        ("gen", "updates", "--flows", FLOWS, "--out", d / "updates.txt", "--seconds", "0.2", "--rate", "1"),
        ("gen", "dynamic", "--out", d / "dynamic.pcap", "--packets", "40000", "--flows-count", "2000", "--rate", "10000"),
    ):
        done = cli(*args)
        assert done.returncode == 0, done.stderr
    return {
        "flows": FLOWS,
        "trace": d / "traffic.pcap",
        "updates": d / "updates.txt",
        "dynamic": d / "dynamic.pcap",
        "dir": d,
    }
