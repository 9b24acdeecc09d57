#!/usr/bin/env bash
# The whole test suite: formatting, lints, documentation links, unit/integration/property
# tests (unit tests in release and in debug), packaging of the engine crate, the Python
# package (wheel built and installed, pytest), and the
# independent checkers (Open vSwitch vectors, flow extraction on real captures) when
# ../shared/tools is present.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs)"; exit 1; }
rustup component add rustfmt clippy >/dev/null 2>&1 || true
# Property tests draw their cases from one fixed seed here, so a run is reproducible (plain
# `cargo test` draws fresh ones each time, to explore); set PROPTEST_RNG_SEED to change it.
export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-20261126}"
# The live switch's AF_XDP I/O compiles an XDP program with clang against libbpf's headers
# (Debian's clang and libbpf-dev); everything else builds with Rust alone. Its tests set the
# hosts' veths up with ethtool.
if ! command -v clang >/dev/null || [ ! -f /usr/include/bpf/bpf_helpers.h ] || ! command -v ethtool >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libbpf-dev ethtool >/dev/null
  fi
fi
LIVE_FEATURES=()
if command -v clang >/dev/null && [ -f /usr/include/bpf/bpf_helpers.h ]; then
  LIVE_FEATURES=(--features hyflow-cli/afxdp)
else
  echo "test.sh: no clang/libbpf-dev (not root?): the live switch is built and tested with AF_PACKET only"
fi
cargo fmt --all -- --check
# The engine's modules form the layers docs/ARCHITECTURE.md lists: no upward import, no cycle,
# each row's imports as the table says.
python3 scripts/layer_graph.py --check
cargo clippy --workspace --all-targets --release "${LIVE_FEATURES[@]}" -- -D warnings
# The engine's documentation builds without broken links.
RUSTDOCFLAGS="-D warnings" cargo doc -p hyflow --no-deps --quiet
cargo test --workspace --release "${LIVE_FEATURES[@]}"
# The unit tests again in debug, so that debug assertions run (the revalidator checks its
# dependency index against a scan of every cache on every update).
cargo test --workspace --lib --bins
# The engine crate packages and builds on its own (no file from outside it).
cargo package -p hyflow --allow-dirty --quiet
# The Python package: what its build and tests need, the wheel built and installed, pytest
# (every function against the CLI's output for the same run; sweeps on threads and on Ray).
python3 -m pip install --quiet --disable-pip-version-check "maturin>=1.5,<2" pytest numpy pandas pyarrow ray matplotlib pillow
# The HTML report is checked in a real browser: Debian's headless-capable Chromium.
if ! command -v chromium >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
rm -rf target/wheels
python3 -m maturin build --release --quiet --out target/wheels
python3 -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps target/wheels/hyflow-*.whl
python3 -m pytest -q -p no:cacheprovider crates/hyflow-py/tests
# The charts in docs/plots are what the binary draws now from the runs behind them.
python3 scripts/docs_images.py --check
# BENCHMARKS.md's deterministic figures still reproduce: each script recomputes a quick subset
# of its generated blocks and fails on any cell that moved.
python3 scripts/topk_bench.py --check
python3 scripts/microflow_hitrate.py --check
python3 scripts/sim_bench.py --check
python3 scripts/gigaflow_bench.py --check
python3 scripts/elixir_bench.py --check
python3 scripts/paper_table.py --check
if [ -f ../shared/tools/ovsvec.py ] && [ -f ../shared/ovs-vectors/sample.json ]; then
  python3 ../shared/tools/ovsvec.py check --cases ../shared/ovs-vectors/sample.json --hyflow target/release/hyflow
fi
if [ -f ../shared/tools/pcapcheck.py ]; then
  python3 ../shared/tools/pcapcheck.py --corpus crates/hyflow/tests/data/pcap-corpus --hyflow target/release/hyflow
fi
# Real frames through `hyflow switch` (root: namespaces, veth, XDP), compared with Open vSwitch's
# traces; the packets whose outputs carry a VLAN tag are left out here (a packet socket cannot
# see the tag, see the script) and checked byte for byte by tests/live_switch.rs instead.
if [ -f ../shared/tools/livecheck.py ] && [ -f ../shared/ovs-vectors/sample.json ]; then
  if [ "$(id -u)" = 0 ]; then
    python3 scripts/livecheck_cases.py ../shared/ovs-vectors/sample.json target/livecheck-cases.json
    IO=afpacket
    [ ${#LIVE_FEATURES[@]} -gt 0 ] && IO=afxdp
    python3 ../shared/tools/livecheck.py --hyflow target/release/hyflow --cases target/livecheck-cases.json --index -1 --switch-arg=--io --switch-arg=$IO
    python3 ../shared/tools/livecheck.py --hyflow target/release/hyflow --cases target/livecheck-cases.json --index -1 --switch-arg=--io --switch-arg=afpacket
    # The XDP NIC tier: later rounds of the same flows are forwarded in the kernel (in every
    # case), under offload-all (its misses steered over two cores by the 5-tuple's addresses
    # and ports) and under each policy that fills an exact-match table, every
    # software packet sampled and their windows cut so that they decide while a case lasts
    # (the shortest sends its 6 packets a round, 3 ms apart): TFO's bin to 10 ms; Elixir's
    # replacement to 50 ms over an identification window of 200 ms, with 6 rounds, so that
    # even the shortest case spans two replacements whenever it starts.
    if [ ${#LIVE_FEATURES[@]} -gt 0 ]; then
      LC=(python3 ../shared/tools/livecheck.py --hyflow target/release/hyflow --cases target/livecheck-cases.json --index -1 --require-nic-hits --switch-arg=--nic --switch-arg=xdp)
      "${LC[@]}" --rounds 3 --switch-arg=--cores --switch-arg=2 --switch-arg=--steer --switch-arg=nw_src,nw_dst,tp_src,tp_dst
      "${LC[@]}" --rounds 3 --switch-arg=--policy --switch-arg=ovs-rebalance
      "${LC[@]}" --rounds 3 --switch-arg=--policy --switch-arg=tfo --switch-arg=--sample-rate --switch-arg=1 --switch-arg=--bin --switch-arg=0.01
      "${LC[@]}" --rounds 6 --switch-arg=--policy --switch-arg=elixir --switch-arg=--sample-rate --switch-arg=1 \
        --switch-arg=--replacement-window --switch-arg=0.05 --switch-arg=--identification-window --switch-arg=0.2
    fi
  else
    echo "test.sh: livecheck skipped (6 runs): it needs root"
  fi
fi
# FlexKVS on a real interface, from an independent memcached UDP client (root, AF_XDP).
if [ -f ../shared/tools/kvscheck.py ] && [ ${#LIVE_FEATURES[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    python3 ../shared/tools/kvscheck.py --keys 500 target/release/hyflow kvs --cores 2 --steer flow
    python3 ../shared/tools/kvscheck.py --keys 500 target/release/hyflow kvs --cores 2 --steer key --nic-hash
  else
    echo "test.sh: kvscheck skipped (2 runs): it needs root"
  fi
fi
# FlexKVS from memcached's own UDP clients (libmemcached-tools: memcaslap verifies every get,
# memcslap's sets come in IP fragments), both steering modes (root, AF_XDP).
if [ ${#LIVE_FEATURES[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    command -v memcaslap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libmemcached-tools >/dev/null; }
    (cd scripts && python3 memcached_tools_check.py --hyflow ../target/release/hyflow -- --cores 2 --steer flow)
    (cd scripts && python3 memcached_tools_check.py --hyflow ../target/release/hyflow -- --cores 2 --steer key --nic-hash)
  else
    echo "test.sh: memcached tools check skipped (2 runs): it needs root"
  fi
fi
