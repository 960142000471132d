#!/usr/bin/env bash
# Miri on the unsafe core: the ring crate (slots, bursts, zero-copy
# views, every sync mode) and the mempool and mbufs (objects addressed by
# raw pointers in DMA memory, lcore caches, chains), through their tests
# that make no system call Miri lacks. Under Miri a DMA region is heap
# memory instead of a memfd mapping (pmd/src/dma.rs), with isolation off
# for its stand-in file. Installs the miri component if it is missing.
#
#   scripts/miri.sh          (nightly; about 12 minutes on 2 vCPUs, most of
#                            them the mempool's cross-thread and 3000-mbuf tests)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo +nightly miri --version >/dev/null 2>&1; then
    rustup component add --toolchain nightly miri rust-src
fi
export MIRIFLAGS="-Zmiri-disable-isolation ${MIRIFLAGS:-}"
export CARGO_TARGET_DIR="$PWD/target/miri"
echo "== Miri: rpmd-ring (unit and functional tests)"
cargo +nightly miri test -q -p rpmd-ring --lib --test functional
echo "== Miri: rpmd-pmd mempool and mbuf tests"
cargo +nightly miri test -q -p rpmd-pmd --test mempool -- --test-threads=1
echo "RESULT miri ok"
