#!/usr/bin/env bash
# Side-by-side benchmarks: rpmd and DPDK 22.11 (Debian dpdk-dev) in the same
# run on the same machine, interleaved (A B A B ...), medians and ratios.
#
#   benches/compare.sh [SUITE] [--runs N]     (run as root on Debian)
#
# Suites: ring (DPDK's ring_perf_autotest vs our ring_perf), mempool
# (DPDK's rte_mempool under the loop of mempool_perf_autotest, built here as
# benches/dpdk/mempool_peer.c against libdpdk, vs our mempool_perf; 24
# representative cases of 1 s, or MEMPOOL_ALL=1 for all 384; MEMPOOL_SECONDS
# sets the seconds per run), virtio (our virtio-user vs DPDK's, txonly,
# rxonly and io, 64 and 1518 bytes, against testpmd's vhost-user), seeds (the run-loop experiments: yield to a
# runnable sibling on the CPU, and what each yield signal costs), txlock
# (the lock in front of a shared TX queue vs spin, mutex and busylock). No
# SUITE runs all of them. Each suite ends with
# `RESULT <suite> worst_ratio=<x>`.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/hugepages.sh

suites="ring mempool virtio seeds txlock"
suite=all
runs=3
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs=${2:?--runs needs a number}; shift 2 ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        -*) echo "compare.sh: unknown option $1 (accepted: --runs N)" >&2; exit 2 ;;
        *) suite=$1; shift ;;
    esac
done
[ "$suite" = all ] && suite=$suites
for s in $suite; do
    case " $suites " in *" $s "*) ;; *) echo "compare.sh: unknown suite '$s' (accepted: $suites)" >&2; exit 2 ;; esac
done

if ! command -v dpdk-test >/dev/null; then
    echo "== installing DPDK (dpdk-dev) from Debian"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q && apt-get install -y -q dpdk-dev
fi
echo "== building rpmd benchmarks (release)"
cargo build --release -q -p rpmd-benches --bins
huge_setup 1024

for s in $suite; do
    case "$s" in
        ring)
            echo "== ring: DPDK ring_perf_autotest vs rpmd ring_perf, $runs interleaved runs each"
            target/release/compare_ring --runs "$runs" --huge-dir "$HUGE_DIR" --cores 0,1
            ;;
        mempool)
            echo "== mempool: DPDK rte_mempool (mempool_perf_autotest's loop) vs rpmd mempool_perf, $runs interleaved runs each"
            command -v pkg-config >/dev/null || apt-get install -y -q pkg-config
            gcc -O3 -march=native -o target/release/mempool_peer benches/dpdk/mempool_peer.c \
                $(pkg-config --cflags --libs libdpdk)
            target/release/compare_mempool --peer target/release/mempool_peer --runs "$runs" \
                --seconds "${MEMPOOL_SECONDS:-1}" --huge-dir "$HUGE_DIR" --mbuf \
                $([ "${MEMPOOL_ALL:-0}" = 1 ] && echo --all)
            ;;
        virtio)
            echo "== virtio: rpmd's virtio-user vs DPDK's net_virtio_user against testpmd's net_vhost, $runs interleaved runs each"
            target/release/compare_virtio --huge-dir "$HUGE_DIR" --runs "$runs" --seconds 3
            ;;
        txlock)
            echo "== txlock: spin lock, std Mutex, busylock scheme and rpmd's TxLock in front of one TX queue"
            for _ in $(seq "$runs"); do target/release/txlock --seconds 2; done
            ;;
        seeds)
            echo "== seeds: the run-loop experiments (yield to a runnable sibling, signal costs, spin budgets, backlog drain)"
            target/release/yield_signal_cost
            target/release/seeds yield --runs "$runs" --seconds 2
            target/release/seeds spin --runs "$runs" --seconds 2
            target/release/seeds backlog --runs "$runs" --seconds 2
            ;;
    esac
done
