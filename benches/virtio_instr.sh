#!/usr/bin/env bash
# Instructions per forwarded frame of the two virtio-user drivers on the
# same loop (issue 28): io with 64-byte frames on a packed ring, 32 frames
# in flight, against testpmd's net_vhost backend on CPU 0 at full speed,
# the driver under callgrind on CPU 1 (so every poll finds a whole burst).
#
#   bash benches/virtio_instr.sh            (root, valgrind, dpdk-dev)
#
# Ours: `compare_virtio --ours-only io-64-packed` with callgrind counting
# inside `rx_burst`, `tx_burst` and `in_flight` only (the port's code and
# the mempool it calls; not the loop around it), frames from CV_BURSTS.
# DPDK's: testpmd's net_virtio_user in io mode. Debian's DPDK has no
# symbol table, so its count is by object: every instruction executed in
# the PMD (librte_net_virtio) and the mempool, mbuf and ring libraries
# (the mempool's fast path is inlined into the PMD), not testpmd's own
# forwarding loop. Two runs of different lengths; the difference of
# their counts over the difference of their frames takes start-up and
# shutdown out.
#
# Ends with `RESULT virtio_instr ours=<n> dpdk=<n>`.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/hugepages.sh
command -v valgrind >/dev/null || { echo "virtio_instr.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
command -v dpdk-testpmd >/dev/null || { echo "virtio_instr.sh: needs dpdk-testpmd (apt-get install dpdk-dev)" >&2; exit 1; }
cargo build --release -q -p rpmd-benches --bin compare_virtio
huge_setup 1024 >/dev/null
out=target/virtio_instr
mkdir -p "$out"
sock=/tmp/rpmd-vi-$$.sock

# testpmd's net_vhost in io mode on CPU 0 until killed.
backend() {
    rm -f "$sock"
    dpdk-testpmd --no-pci --lcores 0@0,1@0 --file-prefix=viA --huge-dir "$HUGE_DIR" -m 256 \
        --log-level=lib.eal:error --huge-unlink --vdev "net_vhost0,iface=$sock,queues=1" -- \
        --forward-mode=io --txpkts=64 --port-topology=loop --total-num-mbufs=16384 -a --stats-period 5 \
        </dev/null >"$out/backend.log" 2>&1 &
    back=$!
    for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
    [ -S "$sock" ] || { echo "virtio_instr.sh: the backend did not listen" >&2; exit 1; }
    sleep 0.3
}
stop_backend() { kill -INT "$back" 2>/dev/null; wait "$back" 2>/dev/null || true; rm -f "$sock"; }

# Sum of the instructions callgrind counted in the objects named by $2.
objects_ir() {
    callgrind_annotate --threshold=100 "$1" 2>/dev/null |
        awk -v re="$2" '$0 ~ re && /^ *[0-9,]+ / {gsub(",", "", $1); s += $1} END {printf "%.0f\n", s}'
}

# DPDK's driver under callgrind for $1 seconds: "<instructions> <frames>".
dpdk_run() {
    backend
    local cg="$out/dpdk-$1.cg"
    timeout -s INT "$1" valgrind --tool=callgrind --callgrind-out-file="$cg" \
        dpdk-testpmd --no-pci --lcores 0@1,1@1 --file-prefix=viB --huge-dir "$HUGE_DIR" -m 256 \
        --log-level=lib.eal:error --single-file-segments \
        --vdev "net_virtio_user0,path=$sock,queues=1,packed_vq=1" -- \
        --forward-mode=io --txpkts=64 --port-topology=loop --total-num-mbufs=16384 -a --stats-period 5 --tx-first \
        </dev/null >"$out/dpdk-$1.log" 2>&1 || true
    stop_backend
    rm -f "$HUGE_DIR"/viB* 2>/dev/null || true
    local frames ir
    frames=$(awk '/Accumulated forward statistics/ {a = 1} a && /RX-packets:/ {print $2; exit}' "$out/dpdk-$1.log")
    ir=$(objects_ir "$cg" 'librte_(net_virtio|mempool|mbuf|ring)')
    echo "$ir ${frames:-0}"
}

echo "== DPDK net_virtio_user (testpmd io, packed, 64 B) under callgrind: 20 s and 50 s"
read -r i1 f1 < <(dpdk_run 20)
read -r i2 f2 < <(dpdk_run 50)
echo "  20 s: $f1 frames, $i1 instructions in the PMD and mempool/mbuf/ring; 50 s: $f2 frames, $i2"
dpdk=$(awk -v a="$i1" -v b="$i2" -v x="$f1" -v y="$f2" 'BEGIN {if (y > x) printf "%.1f", (b - a) / (y - x); else print "nan"}')
echo "  DPDK: $dpdk instructions a forwarded frame"

echo "== rpmd virtio-user (compare_virtio --ours-only io-64-packed) under callgrind"
cg="$out/ours.cg"
CV_BURSTS=1 valgrind --tool=callgrind --callgrind-out-file="$cg" --collect-atstart=no \
    --toggle-collect='*rx_burst*' --toggle-collect='*tx_burst*' --toggle-collect='*in_flight*' \
    target/release/compare_virtio --huge-dir "$HUGE_DIR" --ours-only io-64-packed >"$out/ours.log" 2>&1
frames=$(grep -o 'frames [0-9]*' "$out/ours.log" | head -1 | grep -o '[0-9]*')
ir=$(callgrind_annotate "$cg" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
ours=$(awk -v i="$ir" -v f="$frames" 'BEGIN {if (f > 0) printf "%.1f", i / f; else print "nan"}')
echo "  ours: $ir instructions over $frames frames: $ours a forwarded frame"
echo "RESULT virtio_instr ours=$ours dpdk=$dpdk"
