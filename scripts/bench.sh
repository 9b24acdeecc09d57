#!/usr/bin/env bash
# Runs the criterion benchmarks and prints the BENCHMARKS.md tables (throughput and the
# ratio against the baseline measured in the same run).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench -p hyflow --bench classifier -- --warm-up-time 1 --measurement-time 3 "$@"
cargo bench -p hyflow --bench pipeline -- --warm-up-time 1 --measurement-time 4 "$@"
cargo bench -p hyflow --bench caches -- --warm-up-time 1 --measurement-time 4 "$@"
cargo bench -p hyflow --bench gigaflow -- --warm-up-time 1 --measurement-time 3 "$@"
cargo bench -p hyflow --bench topk -- --warm-up-time 1 --measurement-time 3 "$@"
cargo bench -p hyflow --bench sim -- --warm-up-time 1 --measurement-time 4 "$@"
cargo bench -p hyflow --bench parse -- --warm-up-time 1 --measurement-time 3 "$@"
cargo bench -p hyflow --bench revalidation -- --warm-up-time 1 --measurement-time 3 "$@"
cargo bench -p hyflow --bench stateful -- --warm-up-time 1 --measurement-time 3 "$@"
python3 scripts/bench_table.py
