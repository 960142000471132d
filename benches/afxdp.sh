#!/usr/bin/env bash
# compare.sh's afxdp suite: rpmd's af_xdp and af_packet ports against
# DPDK's net_af_xdp and net_af_packet on the same veth pair, in a network
# namespace of its own (removed at exit): a sender on vdl0 (CPU 0) and a
# receiver on vdl1 (CPU 1), both DPDK testpmd or both rpmd gen: txonly ->
# rxonly (txrx; gen writes only the headers per frame, as testpmd does),
# or io <-> io with one burst sent first, bouncing (io). gen's lcores
# never sleep (--poll spin), as testpmd's poll loop never
# does: with its default 50 us spin budget, the io rows lose a third of
# their rate to the wake-ups between bursts, which measures the run loop,
# not the port. The receiver's Mpps per second, the first
# second dropped, median per run; runs interleave DPDK, rpmd, DPDK again
# (A/A: how far DPDK moves from itself in the same minute). Rows: 64 and
# 1518 bytes; AF_XDP with kernel busy polling off and on (DPDK 22.11's
# default is on: busy_budget=64, 20 us).
# Ends with `RESULT afxdp worst_ratio=<x> geomean=<g>` (DPDK Mpps / ours).
# Usage: benches/afxdp.sh HUGE_DIR RUNS SECONDS OUT_DIR
set -uo pipefail
HUGE_DIR=$1 RUNS=${2:-3} SECS=${3:-4} OUT=${4:-target/compare}
NS=rpmdbx$$
GEN=target/release/gen
ip netns add $NS
trap 'ip netns del $NS 2>/dev/null' EXIT
ip -n $NS link add vdl0 type veth peer name vdl1
ip netns exec $NS sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
# MTU 1504: a 1518-byte frame (testpmd's --txpkts counts no FCS) passes
# a packet socket's length check, which allows no VLAN slack untagged.
ip -n $NS link set vdl0 mtu 1504; ip -n $NS link set vdl1 mtu 1504
for i in lo vdl0 vdl1; do ip -n $NS link set $i up; done

# Median of the numbers on stdin after the first line (a label).
med() { awk 'NR>1' | sort -g | awk '{a[++n]=$1} END {print (n ? a[int((n+1)/2)] : 0)}'; }
# Median of per-second rates on stdin: seconds with traffic only, the
# first and last (partial) ones dropped.
steady() { awk '$1 > 0 {a[++n]=$1} END {print "rates"; for (i = (n > 2 ? 2 : 1); i <= (n > 2 ? n - 1 : n); i++) print a[i]}' | med; }

dpdk_run() { # KIND SIZE EXTRA ROLE -> Mpps at the receiver (ROLE: txrx or io)
    local kind=$1 size=$2 extra=$3 role=$4 drv rxmode=rxonly txmode="txonly --txpkts=$size"
    [ "$role" = io ] && { rxmode=io; txmode="io --tx-first"; }
    case $kind in af_xdp) drv=net_af_xdp ;; af_packet) drv=net_af_packet ;; esac
    # testpmd's EAL takes 2-3 s to start: the receiver outlives the sender.
    local t=$((SECS + 9)) log=$OUT/afxdp_dpdk_rx.log
    local eal="--no-pci --huge-dir $HUGE_DIR --huge-unlink -m 256 --log-level=lib.eal:error"
    timeout -s INT -k 3 $t ip netns exec $NS dpdk-testpmd --lcores 0@1,1@1 --file-prefix bxr$$ $eal \
        --vdev "${drv}0,iface=vdl1$extra" -- --forward-mode=$rxmode --stats-period 1 --total-num-mbufs=16384 \
        </dev/null >"$log" 2>&1 &
    local rx=$!
    sleep 3
    timeout -s INT -k 3 $((SECS + 3)) ip netns exec $NS dpdk-testpmd --lcores 0@0,1@0 --file-prefix bxt$$ $eal \
        --vdev "${drv}1,iface=vdl0$extra" -- --forward-mode=$txmode --stats-period 1 \
        --total-num-mbufs=16384 </dev/null >"$OUT/afxdp_dpdk_tx.log" 2>&1
    wait $rx
    sed 's/\x1b\[[0-9;]*[A-Za-z]//g' "$log" | awk '/Rx-pps:/ {print $2 / 1e6}' | steady
}

rpmd_run() { # KIND SIZE EXTRA ROLE
    local kind=$1 size=$2 extra=$3 role=$4 rxmode=rxonly txmode="txonly --headers-only"
    [ "$role" = io ] && { rxmode=io; txmode="io --tx-first 1"; }
    ip netns exec $NS $GEN --mode $rxmode --poll spin --dev "$kind:vdl1$extra" -l 1 --duration $((SECS + 3)) --json --no-telemetry \
        >"$OUT/afxdp_rpmd_rx.log" 2>&1 &
    local rx=$!
    sleep 1
    ip netns exec $NS $GEN --mode $txmode --poll spin --dev "$kind:vdl0$extra" -l 0 --size $size --duration $SECS --no-telemetry \
        >/dev/null 2>&1
    wait $rx
    grep '"type":"progress"' "$OUT/afxdp_rpmd_rx.log" | grep -o '"rx_mpps":[0-9.e+-]*' | cut -d: -f2 | steady
}

# kind size role variant DPDK-devargs rpmd-devargs ("-": none)
rows=(
    "af_xdp 64 txrx busy_off ,busy_budget=0 -"
    "af_xdp 64 txrx busy_on ,busy_budget=64 ,busy_poll_us=20,busy_budget=64"
    "af_xdp 1518 txrx busy_off ,busy_budget=0 -"
    "af_xdp 1518 txrx busy_on ,busy_budget=64 ,busy_poll_us=20,busy_budget=64"
    "af_xdp 64 io busy_off ,busy_budget=0 -"
    "af_xdp 64 io busy_on ,busy_budget=64 ,busy_poll_us=20,busy_budget=64"
    "af_packet 64 txrx - - -"
    "af_packet 1518 txrx - - -"
    "af_packet 64 txrx qdisc_bypass ,qdisc_bypass=1 ,qdisc_bypass=1"
    "af_packet 64 io - - -"
)
csv=$OUT/afxdp.csv
echo "kind,size,role,variant,dpdk_mpps,rpmd_mpps,dpdk_aa_mpps,ratio,aa_ratio" >"$csv"
printf '%-10s %5s %-5s %-13s %9s %9s %9s %7s %7s\n' kind size role variant DPDK rpmd DPDK-A/A ratio A/A
ratios=()
for row in "${rows[@]}"; do
    read -r kind size role variant dx rx <<<"$row"
    [ "$dx" = - ] && dx=""
    [ "$rx" = - ] && rx=""
    d=(); r=(); a=()
    for _ in $(seq "$RUNS"); do
        d+=("$(dpdk_run "$kind" "$size" "$dx" "$role")")
        r+=("$(rpmd_run "$kind" "$size" "$rx" "$role")")
        a+=("$(dpdk_run "$kind" "$size" "$dx" "$role")")
    done
    md=$(printf '%s\n' x "${d[@]}" | med); mr=$(printf '%s\n' x "${r[@]}" | med); ma=$(printf '%s\n' x "${a[@]}" | med)
    ratio=$(awk -v a="$md" -v b="$mr" 'BEGIN {printf "%.3f", (b > 0 ? a / b : 99)}')
    aa=$(awk -v a="$md" -v b="$ma" 'BEGIN {printf "%.3f", (b > 0 ? a / b : 99)}')
    printf '%-10s %5s %-5s %-13s %9.3f %9.3f %9.3f %7s %7s   (runs: DPDK %s | rpmd %s | DPDK %s)\n' \
        "$kind" "$size" "$role" "$variant" "$md" "$mr" "$ma" "$ratio" "$aa" "${d[*]}" "${r[*]}" "${a[*]}"
    echo "$kind,$size,$role,$variant,$md,$mr,$ma,$ratio,$aa" >>"$csv"
    ratios+=("$ratio")
done
printf '%s\n' "${ratios[@]}" | awk '{s += log($1); if ($1 > w) w = $1; n++} END {printf "RESULT afxdp worst_ratio=%.3f geomean=%.3f\n", w, exp(s / n)}'
if command -v gnuplot >/dev/null; then
    awk -F, 'NR>1 {print NR-1, $5, $6, "\"" $1 " " $2 " " $3 " " $4 "\""}' "$csv" >"$OUT/afxdp.dat"
    gnuplot -e "set terminal png size 900,500; set output '$OUT/afxdp.png'; set style data histograms; \
        set style fill solid; set ylabel 'Mpps received'; set xtics rotate by -30; \
        set title 'AF_XDP and AF_PACKET over veth: DPDK vs rpmd'; \
        plot '$OUT/afxdp.dat' using 2:xtic(4) title 'DPDK', '' using 3 title 'rpmd'" && echo "plot: $OUT/afxdp.png"
fi
