#!/usr/bin/env python3
"""Every numeric option of every command at 0, -1, 1e-9, 1e-6, 1e11 and 1e300: prints the ones that
panic, run out of memory (under a 4 GB address-space limit) or take longer than 15 s.

Usage: scripts/cli_abuse.py   (build first: cargo build --release)
Long runs are expected for counts that only cost time (e.g. gen traffic --packets 1e11);
a panic or an allocation failure never is.
"""
import os, re, subprocess, tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
H = os.path.join(ROOT, "target", "release", "hyflow")
F = os.path.join(ROOT, "examples", "l2l3acl.flows")
SKIP = {"FILE", "DIR", "PATH", "SPAN", "FIELDS", "NAME", "ADDRESS", "LIST", "KIND", "POLICY", "ALGO", "ALGOS",
        "SCHEME", "MODE"}


def main():
    tmp = tempfile.mkdtemp()
    trace = os.path.join(tmp, "t.pcap")
    subprocess.run([H, "gen", "dynamic", "--out", trace, "--packets", "20000"], check=True, capture_output=True)
    out = lambda name: os.path.join(tmp, name)
    commands = {"replay": [], "sim": [], "topk": ["--trace", trace], "eval topk": ["--trace", trace],
                "gen traffic": ["--flows", F, "--out", out("a.pcap")], "gen dynamic": ["--out", out("b.pcap")],
                "gen updates": ["--flows", F, "--out", out("u.txt")], "gen gateway": ["--out", out("c.pcap")],
                "gen pipeline": ["--out", out("pp")]}
    for command, base in commands.items():
        help_text = subprocess.run([H, *command.split(), "--help"], capture_output=True, text=True).stdout
        for option, meta in re.findall(r"--([a-z0-9-]+) <([A-Z_]+)>", help_text):
            if meta in SKIP:
                continue
            for value in ["-1", "0", "1e-9", "1e-6", "99999999999", "1e300"]:
                args = [*command.split(), *base, "--" + option, value]
                try:
                    r = subprocess.run(["bash", "-c", 'ulimit -v 4000000; exec "$@"', "x", H, *args],
                                       capture_output=True, text=True, timeout=15)
                except subprocess.TimeoutExpired:
                    print("slow (over 15 s):", " ".join(args))
                    continue
                crashed = "panicked" in r.stderr or "memory allocation" in r.stderr or r.returncode < 0
                if crashed:
                    last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
                    print("CRASH:", " ".join(args), "->", r.returncode, last[:160])


if __name__ == "__main__":
    main()
