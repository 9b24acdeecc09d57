#!/usr/bin/env python3
"""`hyflow kvs` against memcached's own UDP clients (root): Debian's libmemcached-tools,
a second independent client beside kvscheck.py.

Namespace `hymc-s` holds the server's veth end `mc0` (10.94.0.1); its peer `hymcc`
(10.94.0.2) stays here, where the clients run:
  * `memcaslap -U` (the only libmemcached tool that reads over UDP): its workload of 90% get /
    10% set, every get's value verified against what it set (`-v 1.0`), first with 100-byte
    values, then with 1,310-byte ones (replies of two datagrams). Its counters must show no
    miss, no failed verification, no drop, no timeout.
  * `memcslap --udp --test=set`: sets with `noreply` and values of up to ~5,000 bytes, most
    of them IP fragments at MTU 1500 (libmemcached's gets refuse UDP, so nothing reads back
    here: the server's report must show every set stored and the fragments put together).
Then the server's report must account for every request: none malformed, every get a hit,
every set stored, fragments with nothing dropped.

Usage: scripts/memcached_tools_check.py [--hyflow BIN] -- [hyflow kvs options]
(e.g. `-- --cores 2 --steer key --nic-hash`). Exits non-zero with the reason on a mismatch.
"""
import argparse
import json
import re
import shutil
import subprocess
import sys
import time

from live_netns import make_app, remove_app

NS, HOST_IF, SERVER, CLIENT = "hymc-s", "hymcc", "10.94.0.1", "10.94.0.2"
ASLAP_RUNS = [(2000, 100), (500, 1310)]
SLAP_SETS = 200
CLEAN = ["get_misses", "verify_misses", "verify_failed", "packet_drop", "udp_timeout"]


def memcaslap(count, value_bytes):
    """Runs memcaslap over UDP; its counters."""
    cmd = ["timeout", "60", "memcaslap", "-s", "%s:11211" % SERVER, "-U", "-T", "1", "-c", "4",
           "-x", str(count), "-X", str(value_bytes), "-v", "1.0"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        # With no replies at all it waits forever: the timeout ends it (124).
        raise SystemExit("memcaslap exited %d: %s%s" % (r.returncode, r.stdout[-400:], r.stderr[-400:]))
    counters = {k: int(v) for k, v in re.findall(r"^(\w+): (\d+)$", r.stdout, re.M)}
    missing = [k for k in ["cmd_get", "cmd_set"] + CLEAN if k not in counters]
    if missing:
        raise SystemExit("memcaslap printed no %s: %s" % (", ".join(missing), r.stdout[-600:]))
    return counters


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hyflow", default="target/release/hyflow")
    ap.add_argument("server_args", nargs="*", help="hyflow kvs options (after --)")
    a = ap.parse_args()
    for tool in ("memcaslap", "memcslap"):
        if not shutil.which(tool):
            raise SystemExit("%s not found: apt-get install libmemcached-tools" % tool)
    make_app(NS, HOST_IF, "mc0", SERVER + "/24", CLIENT + "/24")
    server = None
    try:
        args = ["ip", "netns", "exec", NS, a.hyflow, "kvs", "--iface", "mc0", "--json"] + a.server_args
        server = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = server.stdout.readline()
        if "ready" not in line:
            raise SystemExit("server: %s %s" % (line, server.stderr.read()))
        gets = sets = 0
        for count, value_bytes in ASLAP_RUNS:
            c = memcaslap(count, value_bytes)
            bad = {k: c[k] for k in CLEAN if c[k]}
            if bad or c["cmd_get"] + c["cmd_set"] != count:
                raise SystemExit("memcaslap -X %d: %s" % (value_bytes, c))
            gets += c["cmd_get"]
            sets += c["cmd_set"]
        cmd = ["timeout", "60", "memcslap", "--servers=%s:11211" % SERVER, "--udp", "--test=set",
               "--execute-number=%d" % SLAP_SETS, "--concurrency=1"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        # memcslap exits 0 even when it fails: its output says so.
        if r.returncode != 0 or "FAILURE" in r.stdout + r.stderr:
            raise SystemExit("memcslap: %s%s" % (r.stdout[-400:], r.stderr[-400:]))
        # Its sets have no reply: give the last ones' frames time to land.
        time.sleep(0.3)
        server.send_signal(2)
        out, err = server.communicate(timeout=30)
        server = None
        report = json.loads(out)
    finally:
        if server is not None:
            server.kill()
            server.wait()
        remove_app(NS, HOST_IF)
    s, f = report["service"], report["fragments"]
    want = {
        "requests": gets + sets + SLAP_SETS,
        "get_keys": gets,
        "get_hits": gets,
        "stores": sets + SLAP_SETS,
        "stored": sets + SLAP_SETS,
    }
    wrong = {k: (s[k], v) for k, v in want.items() if s[k] != v}
    if wrong or any(n for n in s["malformed"]) or any(f["dropped"]):
        raise SystemExit("the server's report (got, want): %s; malformed %s; fragments %s" % (wrong, s["malformed"], f))
    if f["datagrams"] == 0:
        raise SystemExit("memcslap's sets came in no fragments: the check of fragmented requests checked nothing")
    print("memcached tools: memcaslap %d requests (%d gets verified, replies up to 2 datagrams), memcslap %d "
          "noreply sets (%d in IP fragments, put together): every answer right, every set stored"
          % (gets + sets, gets, SLAP_SETS, f["datagrams"]))


if __name__ == "__main__":
    main()
