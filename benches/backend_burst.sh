#!/usr/bin/env bash
# Instructions per frame of the vhost-user backend's device side, split
# and packed, the guest's TX (rx) and RX (tx), 64-byte frames in bursts of
# 32, without and with CSUM/GUEST_CSUM: callgrind counts only
# `Vring::dequeue`/`enqueue` and what they call
# (target/release/backend_burst, no peer: the driver is the same thread;
# see its docs). Ends with one `backend_burst RING DIR: <x> instructions
# a frame` line each.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "backend_burst.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
cargo build -q --release -p rpmd-benches --bin backend_burst
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
bursts=2000
for ring in split packed; do
    for dir in rx tx rx-csum tx-csum; do
        opt=""
        case $dir in *-csum) dir=${dir%-csum}; opt=csum ;; esac
        fn='*vq::Vring::dequeue*'
        [ "$dir" = tx ] && fn='*vq::Vring::enqueue*'
        valgrind --tool=callgrind --callgrind-out-file="$out/cg" --collect-atstart=no \
            --toggle-collect="$fn" target/release/backend_burst "$ring" "$dir" "$bursts" $opt \
            >/dev/null 2>&1
        ir=$(callgrind_annotate "$out/cg" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
        awk -v ir="$ir" -v n=$((bursts * 32)) -v r="$ring" -v d="$dir${opt:+ (csum)}" \
            'BEGIN { printf "backend_burst %s %s: %.1f instructions a frame\n", r, d, ir / n }'
    done
done
