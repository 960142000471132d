#!/usr/bin/env bash
# Instructions per forwarded frame of the two vhost-user backends on the
# same loop (issue 52), the sibling of virtio_instr.sh: io with 64-byte
# frames on a packed ring, 32 frames in flight, the backend under
# callgrind on CPU 1 against testpmd's net_virtio_user in io mode on CPU 0
# at full speed (so every poll of the backend finds a whole burst).
#
#   bash benches/vhost_instr.sh            (root, valgrind, dpdk-dev)
#
# Ours: `compare_vhost --ours-only io-64-packed`, callgrind counting inside
# `rx_burst` and `tx_burst` only (the backend's dequeue and enqueue, and
# the mempool they call; not the loop around them), over the frames the
# backend sent back. DPDK's: testpmd's net_vhost in io mode. Debian's
# DPDK has no symbol table, so its count is by object: every instruction
# executed in librte_vhost, the vhost PMD and the mempool, mbuf and ring
# libraries, not testpmd's forwarding loop; two runs of different
# lengths, the difference of their counts over the difference of their
# frames, which takes start-up and the vhost-user messages out. Both
# under valgrind's fair scheduling: otherwise a backend's message thread
# starves behind its polling lcore and the peer's setup times out.
#
# Split into dequeue (frames taken from the peer: DPDK's
# rte_vhost_dequeue_burst, an exported symbol, counted with what it calls;
# our rx_burst) and enqueue (the rest: frames sent to the peer and freed).
#
# Ends with `RESULT vhost_instr ours=<n> dpdk=<n> ratio=<ours / DPDK's>
# dequeue=<ratio> enqueue=<ratio>`.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/hugepages.sh
command -v valgrind >/dev/null || { echo "vhost_instr.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
command -v dpdk-testpmd >/dev/null || { echo "vhost_instr.sh: needs dpdk-testpmd (apt-get install dpdk-dev)" >&2; exit 1; }
cargo build --release -q -p rpmd-benches --bin compare_vhost
huge_setup 1024 >/dev/null
out=target/vhost_instr
mkdir -p "$out"
sock=/tmp/rpmd-hi-$$.sock

# testpmd's net_virtio_user in io mode on CPU 0, sending the first burst,
# until killed; its pid in $peer.
peer_start() {
    dpdk-testpmd --no-pci --lcores 0@0,1@0 --file-prefix=hiP --huge-dir "$HUGE_DIR" -m 256 \
        --log-level=lib.eal:error --single-file-segments \
        --vdev "net_virtio_user0,path=$sock,queues=1,packed_vq=1" -- \
        --forward-mode=io --txpkts=64 --port-topology=loop --total-num-mbufs=16384 -a --tx-first --stats-period 5 \
        </dev/null >"$out/peer.log" 2>&1 &
    peer=$!
}
# Waits up to 30 s for process $1 to exit, then kills it.
reap() {
    local st
    for _ in $(seq 300); do
        st=$(ps -o stat= -p "$1" 2>/dev/null) || break
        case "$st" in Z*) break ;; esac
        sleep 0.1
    done
    kill -KILL "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}
peer_stop() {
    kill -INT "$peer" 2>/dev/null || true
    reap "$peer"
    rm -f "$HUGE_DIR"/hiP* 2>/dev/null || true
}

# The largest inclusive count of a function matching $2.
function_ir() {
    callgrind_annotate --inclusive=yes "$1" 2>/dev/null |
        awk -v re="$2" '$0 ~ re && /^ *[0-9,]+ / {gsub(",", "", $1); if ($1 + 0 > m) m = $1 + 0} END {printf "%.0f\n", m}'
}

# Sum of the instructions callgrind counted in the objects named by $2.
objects_ir() {
    callgrind_annotate --threshold=100 "$1" 2>/dev/null |
        awk -v re="$2" '$0 ~ re && /^ *[0-9,]+ / {gsub(",", "", $1); s += $1} END {printf "%.0f\n", s}'
}

# DPDK's backend under callgrind for $1 seconds of traffic:
# "<instructions> <frames> <instructions in the dequeue>".
dpdk_run() {
    rm -f "$sock"
    local cg="$out/dpdk-$1.cg"
    valgrind --tool=callgrind --fair-sched=yes --callgrind-out-file="$cg" \
        dpdk-testpmd --no-pci --lcores 0@1,1@1 --file-prefix=hiB --huge-dir "$HUGE_DIR" -m 256 \
        --log-level=lib.eal:error --huge-unlink --vdev "net_vhost0,iface=$sock,queues=1" -- \
        --forward-mode=io --txpkts=64 --port-topology=loop --total-num-mbufs=16384 -a --stats-period 5 \
        </dev/null >"$out/dpdk-$1.log" 2>&1 &
    local back=$!
    for _ in $(seq 600); do [ -S "$sock" ] && break; sleep 0.1; done
    [ -S "$sock" ] || { echo "vhost_instr.sh: DPDK's backend did not listen" >&2; kill "$back"; exit 1; }
    sleep 1
    peer_start
    sleep "$1"
    # The peer first: a vhost backend stopping its port waits for it.
    peer_stop
    kill -INT "$back" 2>/dev/null || true
    reap "$back"
    rm -f "$sock"
    local frames ir
    frames=$(awk '/Accumulated forward statistics/ {a = 1} a && /TX-packets:/ {print $2; exit}' "$out/dpdk-$1.log")
    ir=$(objects_ir "$cg" 'librte_(vhost|net_vhost|mempool|mbuf|ring)')
    echo "$ir ${frames:-0} $(function_ir "$cg" 'rte_vhost_dequeue_burst')"
}

echo "== DPDK net_vhost (testpmd io, packed, 64 B) under callgrind: 20 s and 50 s"
read -r i1 f1 d1 < <(dpdk_run 20)
read -r i2 f2 d2 < <(dpdk_run 50)
echo "  20 s: $f1 frames, $i1 instructions in vhost and mempool/mbuf/ring; 50 s: $f2 frames, $i2"
per() { awk -v a="$1" -v b="$2" -v x="$f1" -v y="$f2" 'BEGIN {if (y > x) printf "%.1f", (b - a) / (y - x); else print "nan"}'; }
dpdk=$(per "$i1" "$i2")
dpdk_deq=$(per "$d1" "$d2")
dpdk_enq=$(awk -v t="$dpdk" -v d="$dpdk_deq" 'BEGIN {printf "%.1f", t - d}')
echo "  DPDK: $dpdk instructions a forwarded frame (dequeue $dpdk_deq, enqueue $dpdk_enq)"

echo "== rpmd vhost-user (compare_vhost --ours-only io-64-packed) under callgrind"
cg="$out/ours.cg"
valgrind --tool=callgrind --fair-sched=yes --callgrind-out-file="$cg" --collect-atstart=no \
    --toggle-collect='*rx_burst*' --toggle-collect='*tx_burst*' \
    target/release/compare_vhost --huge-dir "$HUGE_DIR" --ours-only io-64-packed --seconds 20 \
    >"$out/ours.log" 2>&1
frames=$(grep -o 'frames [0-9]*' "$out/ours.log" | head -1 | grep -o '[0-9]*')
ir=$(callgrind_annotate "$cg" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
a_frame() { awk -v i="$1" -v f="$frames" 'BEGIN {if (f > 0) printf "%.1f", i / f; else print "nan"}'; }
ours=$(a_frame "$ir")
ours_deq=$(a_frame "$(function_ir "$cg" 'BackendRx.*rx_burst')")
ours_enq=$(a_frame "$(function_ir "$cg" 'BackendTx.*tx_burst')")
echo "  ours: $ir instructions over $frames frames: $ours a forwarded frame (dequeue $ours_deq, enqueue $ours_enq)"
ratio() { awk -v o="$1" -v d="$2" 'BEGIN {if (d > 0) printf "%.3f", o / d; else print "nan"}'; }
echo "RESULT vhost_instr ours=$ours dpdk=$dpdk ratio=$(ratio "$ours" "$dpdk") dequeue=$(ratio "$ours_deq" "$dpdk_deq") enqueue=$(ratio "$ours_enq" "$dpdk_enq")"
