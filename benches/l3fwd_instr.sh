#!/usr/bin/env bash
# Instructions per routed frame of rpmd's l3fwd and DPDK's l3fwd example
# (issue 51), each under callgrind on CPU 1 with a virtio-user port on
# each of two vhost-user sockets, fed by testpmd flowgen on CPU 0 at full
# speed (so every poll finds a whole burst): the same ports, rules and
# traffic as `compare.sh l3fwd`, counted instead of timed, which the
# noisy host's two speed modes cannot move.
#
#   bash benches/l3fwd_instr.sh [--lookup em|lpm] [--size BYTES] [--seconds S] [--runs N] [--only ours|dpdk]
#       (root, valgrind, dpdk-dev, dpdk-doc; about 2 min a run)
#
# Each router runs N times (default 2), S seconds each (default 40),
# callgrind counting only inside its forwarding loop: DPDK's
# `em_main_loop`/`lpm_main_loop` and rpmd's `Forward::run` (the task the
# lcore runs), everything they call included (the virtio driver, the
# lookups, the header work); start-up (the exact-match tables' fill) and
# shutdown are not counted. A run's figure is its count over the frames
# the generator got back; the table shows every run and the median.
# (Differencing whole-process counts of two run lengths moved by ±25
# instructions a frame between invocations of one binary.) Ends with
# `RESULT l3fwd_instr lookup=<em|lpm> ours=<n> dpdk=<n> ratio=<ours ÷ dpdk>`.
set -euo pipefail
cd "$(dirname "$0")/.."
lookup=em size=64 secs=40 runs=2 only="dpdk ours"
while [ $# -gt 0 ]; do
    case "$1" in
        --lookup) lookup=$2; shift 2 ;;
        --size) size=$2; shift 2 ;;
        --seconds) secs=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        *) echo "usage: l3fwd_instr.sh [--lookup em|lpm] [--size BYTES] [--seconds S] [--runs N] [--only ours|dpdk]" >&2; exit 2 ;;
    esac
done
case "$lookup" in em|lpm) ;; *) echo "l3fwd_instr.sh: --lookup em or lpm" >&2; exit 2 ;; esac
[ "$secs" -ge 10 ] && [ "$runs" -ge 1 ] || { echo "l3fwd_instr.sh: --seconds 10 or more, --runs 1 or more" >&2; exit 2; }
. scripts/hugepages.sh
command -v valgrind >/dev/null || { echo "l3fwd_instr.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
command -v dpdk-testpmd >/dev/null || { echo "l3fwd_instr.sh: needs dpdk-testpmd (apt-get install dpdk-dev)" >&2; exit 1; }
cargo build --release -q -p rpmd-apps --bin l3fwd
dpdk_l3fwd=target/dpdk-examples/l3fwd/build/l3fwd
if [ ! -x "$dpdk_l3fwd" ]; then
    dpkg -s dpdk-doc >/dev/null 2>&1 || apt-get install -y -q dpdk-doc
    rm -rf target/dpdk-examples && mkdir -p target/dpdk-examples
    cp -r /usr/share/dpdk/examples/l3fwd /usr/share/dpdk/examples/common target/dpdk-examples/
    # As compare.sh: no virtual port offers Rx checksum offload.
    sed -i 's/\.offloads = RTE_ETH_RX_OFFLOAD_CHECKSUM,/.offloads = 0,/' target/dpdk-examples/l3fwd/main.c
    make -C target/dpdk-examples/l3fwd shared >/dev/null
fi
huge_setup 2048 >/dev/null
out=target/l3fwd_instr
mkdir -p "$out"
s0=/tmp/rpmd-l3i-$$-0.sock s1=/tmp/rpmd-l3i-$$-1.sock

# compare_l3fwd's rules: LPM two /23s; EM the generator's 1024 flows.
if [ "$lookup" = lpm ]; then
    printf 'R10.253.0.0/23 0\nR10.253.2.0/23 1\n' >"$out/r4"
    printf 'R2001:db8::/32 0\n' >"$out/r6"
else
    : >"$out/r4"
    for k in $(seq 0 1023); do
        echo "R10.253.$((k / 256)).$((k % 256)) 10.254.0.0 1001 1000 0x11 $((k & 1))" >>"$out/r4"
    done
    printf 'R2001:db8::1 2001:db8::2 9 9 0x11 0\n' >"$out/r6"
fi

# testpmd flowgen on CPU 0 with two net_vhost ports, until stopped.
generator() {
    rm -f "$s0" "$s1"
    dpdk-testpmd --no-pci --lcores 0@0,1@0 --file-prefix=l3igen --huge-dir "$HUGE_DIR" -m 512 --huge-unlink \
        --log-level=lib.eal:error --log-level=user1:error \
        --vdev "net_vhost0,iface=$s0,queues=1" --vdev "net_vhost1,iface=$s1,queues=1" -- \
        --forward-mode=flowgen --total-num-mbufs=16384 --txpkts="$size" -a --stats-period 5 \
        </dev/null >"$out/gen.log" 2>&1 &
    gen=$!
    for _ in $(seq 300); do [ -S "$s0" ] && [ -S "$s1" ] && break; sleep 0.1; done
    [ -S "$s0" ] && [ -S "$s1" ] || { echo "l3fwd_instr.sh: the generator made no sockets" >&2; exit 1; }
    sleep 0.3
}

# Stops the generator (in the shell that started it, so that the wait
# waits) and sets `frames` to what it received (both ports).
stop_generator() {
    kill -INT "$gen" 2>/dev/null
    wait "$gen" 2>/dev/null || true
    rm -f "$s0" "$s1"
    frames=$(awk '/Accumulated forward statistics/ {a = 1} a && /RX-packets:/ {print $2; exit}' "$out/gen.log")
}

total_ir() {
    callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}

# One router ($1: dpdk or ours), run $2, under callgrind: its count in
# the loop over the frames the generator got back.
run() {
    generator
    local cg="$out/$1-$2.cg"
    if [ "$1" = dpdk ]; then
        timeout -s INT "$secs" valgrind --tool=callgrind --callgrind-out-file="$cg" \
            --collect-atstart=no --toggle-collect="${lookup}_main_loop" \
            "$dpdk_l3fwd" --no-pci -l 1 --file-prefix=l3idut --huge-dir "$HUGE_DIR" -m 1024 --single-file-segments \
            --log-level=lib.eal:error --log-level=user1:error \
            --vdev "net_virtio_user0,path=$s0,queues=1" --vdev "net_virtio_user1,path=$s1,queues=1" -- \
            -p 0x3 --config '(0,0,1),(1,0,1)' --parse-ptype --lookup="$lookup" \
            --rule_ipv4="$out/r4" --rule_ipv6="$out/r6" </dev/null >"$out/$1-$2.log" 2>&1 || true
        rm -f "$HUGE_DIR"/l3idut* 2>/dev/null || true
    else
        timeout -s INT "$secs" valgrind --tool=callgrind --callgrind-out-file="$cg" \
            --collect-atstart=no --toggle-collect='*l3fwd::task::Forward*Task*run*' \
            target/release/l3fwd -l 1 --poll spin --no-telemetry \
            --dev "virtio-user:$s0" --dev "virtio-user:$s1" --lookup "$lookup" \
            --rule-ipv4 "$out/r4" --rule-ipv6 "$out/r6" </dev/null >"$out/$1-$2.log" 2>&1 || true
    fi
    stop_generator
    local ir
    ir=$(total_ir "$cg")
    echo "  run $2: ${frames:-0} frames, $ir instructions in the loop" >&2
    awk -v i="$ir" -v f="${frames:-0}" 'BEGIN {if (f > 0) printf "%.1f\n", i / f; else print "nan"}'
}

median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

declare -A res=([dpdk]=nan [ours]=nan)
for who in $only; do
    echo "== $who l3fwd ($lookup, $size B) under callgrind, $runs runs of $secs s"
    per=()
    for r in $(seq "$runs"); do
        per+=("$(run "$who" "$r")")
    done
    res[$who]=$(printf '%s\n' "${per[@]}" | median)
    echo "  instructions a routed frame: ${per[*]}; median ${res[$who]}"
done
ratio=$(awk -v a="${res[ours]}" -v b="${res[dpdk]}" 'BEGIN {if (b > 0) printf "%.3f", a / b; else print "nan"}')
echo "RESULT l3fwd_instr lookup=$lookup ours=${res[ours]} dpdk=${res[dpdk]} ratio=$ratio"
