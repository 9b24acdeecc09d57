#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit/integration/property tests, and the
# independent Open vSwitch vector checker when ../shared/tools is present.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs)"; exit 1; }
rustup component add rustfmt clippy >/dev/null 2>&1 || true
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --release -- -D warnings
cargo test --workspace --release
if [ -f ../shared/tools/ovsvec.py ] && [ -f ../shared/ovs-vectors/sample.json ]; then
  python3 ../shared/tools/ovsvec.py check --cases ../shared/ovs-vectors/sample.json --hyflow target/release/hyflow
fi
