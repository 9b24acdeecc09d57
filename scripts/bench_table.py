#!/usr/bin/env python3
"""Summarise criterion results (target/criterion) as markdown tables with baseline ratios."""
import json
import os
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "target", "criterion")
BATCH = 1024  # packets per benchmark iteration (see crates/hyflow/benches)


def mean_ns(path):
    with open(os.path.join(path, "new", "estimates.json")) as f:
        return json.load(f)["mean"]["point_estimate"]


def rate(ns):
    return BATCH / (ns * 1e-9)


def fmt(r):
    return "%.2f M/s" % (r / 1e6) if r >= 1e6 else "%.1f K/s" % (r / 1e3)


def group(name):
    base = os.path.join(ROOT, name)
    out = {}
    if not os.path.isdir(base):
        return out
    for bench in sorted(os.listdir(base)):
        bdir = os.path.join(base, bench)
        if not os.path.isdir(bdir) or bench == "report":
            continue
        if os.path.isfile(os.path.join(bdir, "new", "estimates.json")):
            out[(bench, "")] = mean_ns(bdir)
            continue
        for param in sorted(os.listdir(bdir)):
            pdir = os.path.join(bdir, param)
            if os.path.isfile(os.path.join(pdir, "new", "estimates.json")):
                out[(bench, param)] = mean_ns(pdir)
    return out


def main():
    cls = group("classifier")
    if cls:
        print("| rules/masks | tss_lookup | tss_lookup_batch | tss_lookup_wc | linear_scan | lookup ÷ linear |")
        print("|---|---|---|---|---|---|")
        params = sorted({p for (_, p) in cls}, key=lambda p: (int(p.split("rules")[0]), int(p.split("_")[1].split("m")[0])))
        for p in params:
            row = [cls.get((b, p)) for b in ("tss_lookup", "tss_lookup_batch", "tss_lookup_wc", "linear_scan")]
            cells = [fmt(rate(x)) if x else "—" for x in row]
            ratio = "%.0f×" % (row[3] / row[0]) if row[0] and row[3] else "—"
            print("| %s | %s | %s |" % (p, " | ".join(cells), ratio))
    pipe = group("pipeline")
    if pipe:
        print()
        print("| pipeline benchmark | packets/s |")
        print("|---|---|")
        for (b, p), ns in sorted(pipe.items()):
            print("| %s/%s | %s |" % (b, p, fmt(rate(ns))))
        t = [ns for (b, _), ns in pipe.items() if b.startswith("traversal")]
        l = [ns for (b, _), ns in pipe.items() if b.startswith("linear")]
        if t and l:
            print("\ntraversal+megaflow ÷ linear lookups on the same path: %.0f×" % (l[0] / t[0]))


if __name__ == "__main__":
    sys.exit(main())
