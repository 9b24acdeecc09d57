"""``python -m hyflow sweep GRID.toml --out results.csv|results.parquet [--ray ADDRESS]``.

GRID.toml names the command, the base options and either a grid of values to combine or a
list of runs::

    command = "replay"            # replay, sim or topk
    [base]                        # options every run shares (default: the built-in workload)
    trace = "traffic.pcap"
    flows = "pipeline.flows"
    [grid]                        # every combination of these values
    microflow_entries = [1024, 65536]
    consistency = ["signature", "action"]

or ``[[runs]]`` tables, one per run, instead of ``[grid]``. Relative paths in ``base``, ``grid``
and ``runs`` are relative to the GRID file.
"""

from __future__ import annotations

import argparse
import os
import sys

from .sweep import COMMANDS, _FILE_OPTIONS, sweep


def _load_toml(path: str) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]
    with open(path, "rb") as f:
        return tomllib.load(f)


def _resolve(config: dict, root: str) -> dict:
    out = dict(config)
    for name in _FILE_OPTIONS:
        value = out.get(name)
        if isinstance(value, str) and not value.startswith("gen:"):
            out[name] = os.path.join(root, value)
        elif isinstance(value, list):
            out[name] = [os.path.join(root, v) if isinstance(v, str) else v for v in value]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hyflow", description="hyflow from Python")
    sub = parser.add_subparsers(dest="verb", required=True)
    s = sub.add_parser("sweep", help="run a grid of configs into one table (CSV or Parquet)")
    s.add_argument("grid", metavar="GRID.toml", help="command, base options and grid or runs")
    s.add_argument("--out", required=True, metavar="FILE", help="the table: CSV for .csv, Parquet for .parquet")
    s.add_argument("--ray", metavar="ADDRESS", help="run on this Ray cluster ('local' for a local one)")
    s.add_argument("--workers", type=int, metavar="N", help="parallel runs (default: the machine's cores)")
    s.add_argument("--ship-files", action="store_true", help="with --ray: send input files through the object store")
    args = parser.parse_args(argv)

    spec = _load_toml(args.grid)
    root = os.path.dirname(os.path.abspath(args.grid))
    command = spec.get("command", "replay")
    if command not in COMMANDS:
        parser.error(f"{args.grid}: command must be one of {', '.join(COMMANDS)}, not {command!r}")
    unknown = set(spec) - {"command", "base", "grid", "runs"}
    if unknown:
        parser.error(f"{args.grid}: unknown keys {', '.join(sorted(unknown))} (command, base, grid, runs)")
    base = _resolve(spec.get("base", {}), root)
    grid = _resolve(spec["grid"], root) if "grid" in spec else None
    runs = [_resolve(r, root) for r in spec["runs"]] if "runs" in spec else None
    backend = "ray" if args.ray else "local"
    address = None if args.ray in (None, "local") else args.ray
    from . import HyflowError

    try:
        frame = sweep(
            command,
            grid,
            runs=runs,
            backend=backend,
            workers=args.workers,
            address=address,
            ship_files=args.ship_files,
            out=args.out,
            **base,
        )
    except (HyflowError, TypeError, ValueError) as e:
        print(f"hyflow: {e}", file=sys.stderr)
        return 1
    print(f"wrote {len(frame)} runs x {len(frame.columns)} columns to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
