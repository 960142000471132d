#!/usr/bin/env bash
# mlx4: what the ConnectX-3 driver itself costs per forwarded frame, on
# the device model (no card here). mlx4_fwd runs l2fwd's io loop between
# the model's two cabled ports on one pinned CPU; the model times its own
# work (the TX engine and the cable's RX engine, inside the send
# doorbell), which is taken out. Each run prints the driver's rx + tx
# nanoseconds per frame and those at the CPU's nominal clock; the runs'
# median, min and max are reported (the spread is the noise), beside
# DPDK's published per-packet costs of its PMDs (rx + tx: 58 cycles
# vectorised, 89 scalar). With valgrind, one callgrind run counts the
# instructions of rx_burst and tx_burst alone (the model's doorbell
# handling excluded). Then the same with the model's engines on a thread
# of their own on the other CPU (`--engine-cpu 0`): CQEs and frames come
# from another core, as from a NIC, and the driver's cost is the time of
# the bursts that moved frames (less any wait for the model's doorbell
# queue). Ends with `RESULT mlx4 cycles_per_pkt=<in-thread median>
# async_cycles_per_pkt=<engine apart, median>` (target for the second
# <= 89).
#
#   benches/mlx4.sh [RUNS] [SECONDS] [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5} secs=${2:-2} out=${3:-target/compare}
mkdir -p "$out"
bin=target/release/mlx4_fwd
[ -x "$bin" ] || cargo build --release -q -p rpmd-benches --bin mlx4_fwd
field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }
stats() { sort -n | awk '{a[NR]=$1} END {printf "%s %s %s\n", a[int((NR+1)/2)], a[1], a[NR]}'; }

: > "$out/mlx4.log"
for i in $(seq "$runs"); do
    line=$("$bin" --seconds "$secs" --cpu 1 2>/dev/null | grep '^mlx4_fwd')
    echo "$line" | tee -a "$out/mlx4.log"
done
read -r cyc cmin cmax < <(field cycles_per_pkt < "$out/mlx4.log" | stats)
read -r dns _ _ < <(field driver_ns_per_pkt < "$out/mlx4.log" | stats)
read -r mns _ _ < <(field model_ns_per_pkt < "$out/mlx4.log" | stats)
read -r mpps _ _ < <(field mpps < "$out/mlx4.log" | stats)
instr=n/a
if command -v valgrind >/dev/null; then
    cg="$out/mlx4.callgrind"
    pk=$(valgrind --tool=callgrind --callgrind-out-file="$cg" --collect-atstart=no \
        --toggle-collect='*RxRing as rpmd_pmd::port::RxQueue>::rx_burst' \
        --toggle-collect='*TxRing as rpmd_pmd::port::TxQueue>::tx_burst' \
        --toggle-collect='*Bar2 as rpmd_pmd::function::regs::RegisterSpace>::write' \
        "$bin" --packets 100000 --cpu 1 2>/dev/null | field pkts)
    ir=$(callgrind_annotate "$cg" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
    instr=$(awk -v i="$ir" -v p="$pk" 'BEGIN {printf "%.0f", i / p}')
fi
echo "mlx4: driver rx+tx per frame: $cyc cycles (min $cmin, max $cmax over $runs runs), $dns ns; model $mns ns; loop $mpps Mpps (model included); $instr instructions (callgrind)"
: > "$out/mlx4-async.log"
for i in $(seq "$runs"); do
    line=$("$bin" --seconds "$secs" --cpu 1 --engine-cpu 0 2>/dev/null | grep '^mlx4_fwd')
    echo "$line" | tee -a "$out/mlx4-async.log"
done
read -r acyc amin amax < <(field cycles_per_pkt < "$out/mlx4-async.log" | stats)
read -r ampps _ _ < <(field mpps < "$out/mlx4-async.log" | stats)
echo "mlx4: engine on the other CPU: driver rx+tx per frame $acyc cycles (min $amin, max $amax over $runs runs); loop $ampps Mpps (the model's engine the bound)"
echo "mlx4: DPDK's published rx+tx per packet: 58 cycles (vector), 89 (scalar)"
echo "RESULT mlx4 cycles_per_pkt=$cyc async_cycles_per_pkt=$acyc"
