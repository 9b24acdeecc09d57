#!/usr/bin/env bash
# The whole test suite: formatting, lints, documentation links, unit/integration/property
# tests (unit tests in release and in debug), packaging of the engine crate, and the
# independent checkers (Open vSwitch vectors, flow extraction on real captures) when
# ../shared/tools is present.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs)"; exit 1; }
rustup component add rustfmt clippy >/dev/null 2>&1 || true
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --release -- -D warnings
# The engine's documentation builds without broken links.
RUSTDOCFLAGS="-D warnings" cargo doc -p hyflow --no-deps --quiet
cargo test --workspace --release
# The unit tests again in debug, so that debug assertions run (the revalidator checks its
# dependency index against a scan of every cache on every update).
cargo test --workspace --lib --bins
# The engine crate packages and builds on its own (no file from outside it).
cargo package -p hyflow --allow-dirty --quiet
if [ -f ../shared/tools/ovsvec.py ] && [ -f ../shared/ovs-vectors/sample.json ]; then
  python3 ../shared/tools/ovsvec.py check --cases ../shared/ovs-vectors/sample.json --hyflow target/release/hyflow
fi
if [ -f ../shared/tools/pcapcheck.py ]; then
  python3 ../shared/tools/pcapcheck.py --corpus crates/hyflow/tests/data/pcap-corpus --hyflow target/release/hyflow
fi
