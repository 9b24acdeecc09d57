"""Capacity searches with their probes on Ray, from the CLI (``--backend ray``) and from
Python (``backend="ray"``): the same answer, summary and loss by cores as the local search."""

from __future__ import annotations

import json

import pytest

import hyflow
from hyflow import _hyflow, _options

from conftest import cli, cli_json

ray = pytest.importorskip("ray")

SEARCH = {"policy": "psf", "rate": 20_000_000, "find": "min-cores", "max_cores": 4}


def search_args(inputs) -> list[str]:
    return ["sim", "--flows", inputs["flows"], "--trace", inputs["trace"], "--policy", "psf", "--rate", "20000000",
            "--find", "min-cores", "--max-cores", "4"]


def test_cli_ray_search_answers_as_the_local_one(inputs):
    local = cli_json(*search_args(inputs))
    assert local["min_cores"] >= 2, "one core must lose for the comparison to mean something"
    assert len(local["loss_by_cores"]) == 4
    on_ray = cli_json(*search_args(inputs), "--backend", "ray", "--search-threads", "2")
    assert on_ray == local
    rate = ["sim", "--flows", inputs["flows"], "--trace", inputs["trace"], "--cores", "2", "--find", "max-rate"]
    assert cli_json(*rate, "--backend", "ray", "--search-threads", "2") == cli_json(*rate)


def test_cli_ray_search_errors_are_clear(inputs):
    done = cli("sim", "--backend", "ray")
    assert done.returncode != 0 and "--find" in done.stderr
    done = cli("sim", "--find", "max-rate", "--ray-address", "auto")
    assert done.returncode != 0 and "give --backend ray too" in done.stderr, done.stderr
    # A probe that fails on its worker fails the search with the worker's message (at the
    # input's own rate and under psf, only the probes read the trace).
    done = cli("sim", "--flows", inputs["flows"], "--trace", "no-such.pcap", "--policy", "psf", "--find", "min-cores",
               "--max-cores", "2", "--backend", "ray")
    assert done.returncode != 0
    assert "hyflow: a Ray probe: no-such.pcap: cannot open" in done.stderr, done.stderr


def test_python_ray_search_answers_as_the_local_one(inputs):
    files = {"flows": inputs["flows"], "trace": inputs["trace"]}
    local = hyflow.sim(**files, **SEARCH, progress=False)
    on_ray = hyflow.sim(**files, **SEARCH, backend="ray", search_threads=2, progress=False)
    assert on_ray.summary == local.summary
    assert local.summary["min_cores"] >= 2
    # The input files shipped through the object store: the same answer.
    rate = {"cores": 2, "find": "max-rate"}
    local = hyflow.sim(**files, **rate, progress=False)
    shipped = hyflow.sim(**files, **rate, backend="ray", search_threads=2, ship_files=True, progress=False)
    assert shipped.summary == local.summary and local.summary["max_rate_pps"] > 0
    assert not ray.is_initialized(), "the local cluster the search started is stopped"


class Failing:
    """A probe runner whose workers all fail, as Ray tasks that could not run."""

    width = 2

    def __init__(self):
        self.batches = []

    def __call__(self, probes):
        self.batches.append(list(probes))
        return [{"error": f"no worker for {cores} cores"} for cores, _ in probes]


def test_a_probe_runners_error_is_the_searchs(inputs):
    argv = _options.argv("sim", {"flows": inputs["flows"], "trace": inputs["trace"], **SEARCH, "backend": "ray"})
    runner = Failing()
    with pytest.raises(hyflow.HyflowError, match="^a Ray probe: no worker for 1 cores$"):
        _hyflow.sim(argv, False, None, None, runner)
    assert runner.batches == [[(c, 20_000_000.0) for c in range(1, 5)]]
    with pytest.raises(hyflow.HyflowError, match="needs the Ray probe runner"):
        _hyflow.sim(argv, False, None, None, None)
    # A task's probe is the loss the search records for that count.
    local = json.loads(_hyflow.sim(argv[:-1], False, None, None)["summary"])
    assert dict(_hyflow.sim_probe(argv, 1, 20_000_000.0)) == local["loss_by_cores"][0]
