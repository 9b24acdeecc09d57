#!/usr/bin/env python3
"""Summarise criterion results (target/criterion) as markdown tables with baseline ratios."""
import json
import os
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "target", "criterion")


def mean_ns(path):
    """Mean time per packet (ns): criterion's mean per iteration over its element count."""
    with open(os.path.join(path, "new", "estimates.json")) as f:
        ns = json.load(f)["mean"]["point_estimate"]
    with open(os.path.join(path, "new", "benchmark.json")) as f:
        return ns / json.load(f)["throughput"]["Elements"]


def rate(ns):
    return 1e9 / ns


def fmt(r):
    return "%.2f M/s" % (r / 1e6) if r >= 1e6 else "%.1f K/s" % (r / 1e3)


def header(*cols):
    """A markdown table header, after a blank line."""
    print()
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))


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
        header("rules/masks", "tss_lookup", "tss_lookup_batch", "tss_lookup_wc", "linear_scan", "lookup ÷ linear")
        params = sorted({p for (_, p) in cls}, key=lambda p: (int(p.split("rules")[0]), int(p.split("_")[1].split("m")[0])))
        for p in params:
            row = [cls.get((b, p)) for b in ("tss_lookup", "tss_lookup_batch", "tss_lookup_wc", "linear_scan")]
            cells = [fmt(rate(x)) if x else "—" for x in row]
            ratio = "%.0f×" % (row[3] / row[0]) if row[0] and row[3] else "—"
            print("| %s | %s | %s |" % (p, " | ".join(cells), ratio))
    pipe = group("pipeline")
    if pipe:
        header("pipeline benchmark", "packets/s")
        for (b, p), ns in sorted(pipe.items()):
            print("| %s/%s | %s |" % (b, p, fmt(rate(ns))))
        t = [ns for (b, _), ns in pipe.items() if b.startswith("traversal")]
        l = [ns for (b, _), ns in pipe.items() if b.startswith("linear")]
        if t and l:
            print("\ntraversal+megaflow ÷ linear lookups on the same path: %.0f×" % (l[0] / t[0]))

    caches()
    revalidation()
    gigaflow()
    topk()
    sim()


def gigaflow():
    ltm = group("ltm")
    if ltm:
        header("workload (Pipebench, high locality)", "Gigaflow 4×8K LTM lookups", "Megaflow 32K stage lookups",
               "Gigaflow ÷ Megaflow")
        for kind in sorted({p for (_, p) in ltm}):
            g, m = ltm.get(("gigaflow_4x8K", kind)), ltm.get(("megaflow_32K", kind))
            if g and m:
                print("| %s | %s | %s | %.2f× |" % (kind.upper(), fmt(rate(g)), fmt(rate(m)), m / g))
    part = group("partition")
    if part:
        header("workload", "partition + rule generation + install", "slow-path translation", "install ÷ translation time")
        for kind in sorted({p for (_, p) in part}):
            g, t = part.get(("gigaflow_dp_install", kind)), part.get(("translation", kind))
            if g and t:
                print("| %s | %s traversals/s | %s traversals/s | %.2f |" % (
                    kind.upper(), fmt(rate(g)).replace(" M/s", " M").replace(" K/s", " K"),
                    fmt(rate(t)).replace(" M/s", " M").replace(" K/s", " K"), g / t))


def topk():
    tk = group("topk")
    if tk:
        ref = tk.get(("insert", "heavykeeper-crate"))
        header("detector (30 KB, k = 100)", "packets/s", "÷ heavykeeper crate")
        for (b, algo), ns in sorted(tk.items(), key=lambda kv: kv[1]):
            print("| %s | %s | %s |" % (algo, fmt(rate(ns)), "%.2f×" % (ref / ns) if ref else "—"))


def sim():
    g = group("sim")
    if g:
        header("built-in workload, 1 core, offload-all", "packets/s", "÷ switch alone")
        base = g.get(("builtin_switch_only", ""))
        for name in ("builtin_offload_all_1core", "builtin_switch_only"):
            ns = g.get((name, ""))
            if ns:
                print("| %s | %s | %s |" % (name, fmt(rate(ns)), "%.2f×" % (base / ns) if base else "—"))


def revalidation():
    g = group("rule_update")
    if g:
        header("cached megaflows", "one update touching 10 entries", "same update, empty cache")
        for n in ("10000", "100000", "1000000"):
            c, e = g.get(("cached", n)), g.get(("empty_cache", n))
            if c:
                print("| %s | %.1f µs | %s |" % (n, c / 1e3, "%.2f µs" % (e / 1e3) if e else "—"))


def caches():
    mf = group("microflow")
    if mf:
        header("entries", "FlowShadow 1-way", "1-way, batch of 32", "4-way", "4-way, batch", "hashbrown map",
               "hashbrown, hyflow hash", "1-way vs map", "batch vs map")
        for size in ("4K", "64K", "1M"):
            names = ("flowshadow_1way", "flowshadow_1way_batch", "flowshadow_4way", "flowshadow_4way_batch",
                     "hashbrown_map", "hashbrown_table_keyhash")
            row = [mf.get((b, size)) for b in names]
            if not all(row):
                continue
            cells = [fmt(rate(x)) for x in row]
            print("| %s | %s | %.2f× | %.2f× |" % (size, " | ".join(cells), row[4] / row[0], row[4] / row[1]))
    mem_path = os.path.join(ROOT, "cache_memory.json")
    if os.path.isfile(mem_path):
        with open(mem_path) as f:
            mem = json.load(f)
        header("structure", "entries (slots)", "cached", "bytes per cached microflow")
        for m in mem:
            print("| %s | %s | %d | %.0f |" % (m["structure"], m["entries"], m["cached"], m["bytes_per_entry"]))
    meg = group("megaflow")
    if meg:
        header("masks", "tuple space (dpcls-like)", "linear scan", "ratio")
        for masks in ("1masks", "8masks", "32masks"):
            t, l = meg.get(("tuple_space", masks)), meg.get(("linear_scan", masks))
            if t and l:
                print("| %s | %s | %s | %.0f× |" % (masks[:-5], fmt(rate(t)), fmt(rate(l)), l / t))
    rep = group("replay")
    if rep:
        header("replay of the built-in workload", "packets/s", "÷ no cache")
        base = rep.get(("builtin_no_cache", ""))
        for name in ("builtin_default", "builtin_no_nic", "builtin_no_cache"):
            ns = rep.get((name, ""))
            if ns:
                print("| %s | %s | %s |" % (name, fmt(rate(ns)), "%.2f×" % (base / ns) if base else "—"))


if __name__ == "__main__":
    sys.exit(main())
