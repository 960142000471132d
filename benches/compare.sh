#!/usr/bin/env bash
# Side-by-side benchmarks: rpmd and DPDK 22.11 (Debian dpdk-dev) in the same
# run on the same machine, interleaved (A B A B ...), medians and ratios.
#
#   benches/compare.sh [SUITE] [--runs N]     (run as root on Debian)
#
# Suites: ring (DPDK's ring_perf_autotest vs our ring_perf), mempool (DPDK's
# mempool_perf_autotest vs our mempool_perf; DPDK needs an hour for all
# cases, so MEMPOOL_DPDK_SECONDS=S stops it after S seconds and compares the
# cases it finished). No SUITE runs all of them. Each suite ends with
# `RESULT <suite> worst_ratio=<x>`.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/hugepages.sh

suites="ring mempool"
suite=all
runs=3
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs=${2:?--runs needs a number}; shift 2 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
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
huge_setup 256

for s in $suite; do
    case "$s" in
        ring)
            echo "== ring: DPDK ring_perf_autotest vs rpmd ring_perf, $runs interleaved runs each"
            target/release/compare_ring --runs "$runs" --huge-dir "$HUGE_DIR" --cores 0,1
            ;;
        mempool)
            echo "== mempool: DPDK mempool_perf_autotest vs rpmd mempool_perf"
            target/release/compare_mempool --dpdk-seconds "${MEMPOOL_DPDK_SECONDS:-0}" \
                --seconds "${MEMPOOL_SECONDS:-5}" --huge-dir "$HUGE_DIR"
            ;;
    esac
done
