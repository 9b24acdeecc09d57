#!/usr/bin/env bash
# Instructions per packet of every top-k detector and of the `heavykeeper` crate, counted by
# valgrind's callgrind over one pass of the `topk` criterion benchmark's stream (1,000,000
# packets, 30 KB, k = 100; only the pass itself is counted, not building the stream).
# Deterministic, so unlike packets/s it does not move with the host's load.
# Usage: bash scripts/topk_instructions.sh [NAME...]   (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }
exe=$(cargo bench -p hyflow --bench topk --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("executable") and m["target"]["name"] == "topk":
        print(m["executable"])')
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    names=(fastkeeper-bitmap fastkeeper sl-hk elixir wcss heavykeeper cm univmon spacesaving lossy heavykeeper-crate)
fi
out=$(mktemp -d)
printf '| detector (30 KB, k = 100) | instructions per packet |\n|---|---|\n'
for name in "${names[@]}"; do
    valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*measured_pass*' \
        --callgrind-out-file="$out/$name" "$exe" --once "$name" >/dev/null 2>&1
    total=$(grep -E '^(summary|totals):' "$out/$name" | head -1 | awk '{print $2}')
    python3 -c "print(f'| $name | {$total / 1_000_000:.0f} |')"
done
rm -rf "$out"
