"""The Ray side of `hyflow sim --find ... --backend ray` (run by the CLI as `python3 -c`).

Protocol, one JSON object per line: the CLI writes the setup, this answers
{"width": N} once Ray is up (or {"error": ...}); then for each {"probes": [[cores, rate|null],
...]} it runs every probe as a Ray task and answers {"results": [...]} in the same order, each
{"cores", "lost", "offered", "loss_rate", "steady"} or {"error": message}. End of input ends
the search (and a local cluster with it).

A task runs the CLI's own binary on the search's options with the hidden --probe-cores and
--probe-rate, in the CLI's working directory: every node needs the binary and the input files
at the same paths (shared storage).
"""

import json
import logging
import subprocess
import sys


def reply(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def probe(exe, cwd, argv, cores, rate):
    cmd = [exe, "sim", *argv, "--probe-cores", str(cores)]
    if rate is not None:
        cmd += ["--probe-rate", repr(float(rate))]
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        lines = [l for l in done.stderr.splitlines() if l.strip()]
        if not lines:
            return {"error": f"the probe exited with status {done.returncode}"}
        return {"error": lines[-1].removeprefix("hyflow: ")}
    return json.loads(done.stdout.splitlines()[-1])


def main():
    setup = json.loads(sys.stdin.readline())
    try:
        import ray
    except ImportError as e:
        reply({"error": f"--backend ray needs Python's ray package (pip install ray): {e}"})
        return
    address = setup["address"]
    try:
        ray.init(
            address=address,
            num_cpus=setup["workers"] if address is None else None,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    except Exception as e:  # Ray's errors for a cluster it cannot reach are of many types
        reply({"error": f"cannot start or reach the Ray cluster ({address or 'local'}): {e}"})
        return
    task = ray.remote(num_cpus=1)(probe)
    reply({"width": setup["workers"] or max(1, int(ray.cluster_resources().get("CPU", 1)))})
    for line in sys.stdin:
        probes = json.loads(line)["probes"]
        refs = [task.remote(setup["exe"], setup["cwd"], setup["argv"], c, r) for c, r in probes]
        results = []
        for ref in refs:
            try:
                results.append(ray.get(ref))
            except Exception as e:
                results.append({"error": f"the Ray task failed: {e}"})
        reply({"results": results})
    ray.shutdown()


main()
