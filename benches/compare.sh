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
# rxonly and io, 64 and 1518 bytes, against testpmd's vhost-user), l2fwd
# (our l2fwd vs testpmd io/mac forwarding between the same two vhost-user
# ports fed by a testpmd flowgen, plus a burst-size sweep 1..256), rr
# (request/response latency over shm in one process against the
# cache-line round-trip bound, and through testpmd io between two
# vhost-user ports), poll (the run loop's modes, spin, interrupt, fixed
# 50 us and adaptive, under rr's open loop at 10-80 % of the closed-loop
# maximum and the closed loop, over virtio-user into rpmd's vhost-user
# backend: latency beside the server's CPU; idle CPU, the first request
# after silence, l2fwd under the default and spin; benches/poll.py), seeds (the run-loop experiments: yield to a runnable
# sibling on the CPU, in one process and across processes, and what each
# yield signal costs; spin budgets; backlog drain; SEEDS_INVOCATIONS
# (default 5) interleaved invocations, with each RESULT's spread over
# them: benches/spread.py), seeds-vhost
# (vhost_net's TX and RX busy polling on our vhost-user backend, rr
# through a two-port switch; benches/seeds_vhost.sh), txlock (the egress
# shaper under N enqueuers behind TxLock vs spin, mutex and busylock, then
# the shaper's class rates against Linux HTB on a veth pair), afxdp (our
# af_xdp and af_packet ports vs DPDK's net_af_xdp and net_af_packet on one
# veth pair, txonly -> rxonly, kernel busy polling off and on; benches/
# afxdp.sh, which runs DPDK twice per round as its A/A), capture (what
# --pcap costs l2fwd; benches/capture.sh, no capture twice per round as its
# A/A), vhost (our vhost-user backend vs DPDK's net_vhost under the same
# DPDK virtio-user peer, measured at the peer, DPDK twice per round as its
# A/A; then ours<->ours vs testpmd<->testpmd), mlx4 (the ConnectX-3
# driver's own rx+tx cycles per frame on the device model, held against
# DPDK's published per-packet costs; benches/mlx4.sh), lookup (DPDK's
# lpm, fib, lpm6 and hash_readwrite_lf perf autotests vs rpmd-lookup under
# the same loops, DPDK twice per round as its A/A: ends
# `RESULT lookup worst_ratio=<x> geomean=<y> aa_worst=<z>`), l3fwd (our
# l3fwd vs DPDK's l3fwd example built from dpdk-doc, LPM and EM, 64 and
# 512 bytes, between two vhost-user ports fed by testpmd flowgen; each
# router is first run with every route to port 0, and the suite fails
# unless the generator then receives on port 0 only). No SUITE runs
# all of them. ring-aa and mempool-aa (not part of "all") run DPDK against
# itself, to show how far a row at parity reads from 1.0 by noise alone.
# --runs defaults to 3, and to 9 (of 2 s) for virtio, whose rates vary
# most from one process to the next. Each suite ends with
# `RESULT <suite> worst_ratio=<x>`; the run ends with one table of them.
# CSVs, the log and a PNG plot per suite (gnuplot: each suite's medians
# side by side; l2fwd's Mpps vs burst size; rr's latency CDF) go to
# target/compare/.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/hugepages.sh

suites="ring mempool virtio vhost l2fwd rr poll seeds seeds-vhost txlock afxdp capture mlx4 lookup l3fwd"
suite=all
runs=
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs=${2:?--runs needs a number}; shift 2 ;;
        -h|--help) sed -n '2,53p' "$0"; exit 0 ;;
        -*) echo "compare.sh: unknown option $1 (accepted: --runs N)" >&2; exit 2 ;;
        *) suite=$1; shift ;;
    esac
done
[ "$suite" = all ] && suite=$suites
# virtio: each process's rate depends on where its ring's few shared lines
# land (LLC slice, host backing), so one run is one draw from a wide,
# lumpy spread, for DPDK and for us: more, shorter runs by default.
vruns=${runs:-9}
runs=${runs:-3}
for s in $suite; do
    case " $suites ring-aa mempool-aa " in *" $s "*) ;; *) echo "compare.sh: unknown suite '$s' (accepted: $suites ring-aa mempool-aa)" >&2; exit 2 ;; esac
done

# DPDK and gnuplot (every suite draws).
pkgs=""
command -v dpdk-test >/dev/null || pkgs="dpdk-dev"
command -v gnuplot >/dev/null || pkgs="$pkgs gnuplot-nox"
if [ -n "$pkgs" ]; then
    echo "== installing from Debian: $pkgs"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q && apt-get install -y -q $pkgs
fi
echo "== building rpmd benchmarks and apps (release)"
cargo build --release -q -p rpmd-benches -p rpmd-apps --bins
# 512 MB for the generator and 1024 for a DPDK device under test
# (l3fwd's exact-match tables take over 400) in the forwarding suites.
huge_setup 2048
OUT=target/compare
mkdir -p "$OUT"

# rr's p50 over its bound, from the JSON summary on stdin.
# A suite's medians side by side: bars per row of CSV (row,COL1,COL2,...;
# written by the comparison through RPMD_PLOT_CSV) -> PNG.
plot_bars() { # CSV PNG TITLE YLABEL
    [ -s "$1" ] || { echo "plot: no rows in $1"; return 0; }
    local w=$(( 360 + 34 * $(wc -l <"$1") ))
    [ "$w" -lt 700 ] && w=700
    gnuplot -e "set terminal png size $w,560; set output '$2'; set datafile separator ','; \
        set style data histograms; set style histogram clustered gap 1; set style fill solid 0.8 border -1; \
        set key autotitle columnhead; set xtics rotate by -35 noenhanced; set title '$3' noenhanced; \
        set ylabel '$4'; set yrange [0:*]; set bmargin 8; \
        plot for [i=2:*] '$1' using i:xtic(1)" && echo "plot: $2"
}

rr_ratio() { python3 -c 'import json,sys; s=json.loads(sys.stdin.read().splitlines()[-1]); print("%.3f %.0f %.0f %.0f" % (s["p50_over_bound"], s["p50_ns"], s["bound_p50_ns"], s["tps"]))'; }

run_suites() {
for s in $suite; do
    case "$s" in
        ring)
            echo "== ring: DPDK ring_perf_autotest vs rpmd ring_perf, $runs interleaved runs each"
            RPMD_PLOT_CSV="$OUT/ring.csv" target/release/compare_ring --runs "$runs" --huge-dir "$HUGE_DIR" --cores 0,1
            plot_bars "$OUT/ring.csv" "$OUT/ring.png" "ring: DPDK ring_perf vs rpmd ring_perf" "cycles per element (lower is faster)"
            ;;
        ring-aa)
            echo "== ring-aa: DPDK ring_perf_autotest against itself (A/A), $runs interleaved runs each"
            RPMD_PLOT_CSV="$OUT/ring_aa.csv" target/release/compare_ring --aa --runs "$runs" --huge-dir "$HUGE_DIR" --cores 0,1
            plot_bars "$OUT/ring_aa.csv" "$OUT/ring_aa.png" "ring: DPDK against itself (A/A)" "cycles per element"
            ;;
        mempool|mempool-aa)
            if [ "$s" = mempool ]; then
                echo "== mempool: DPDK rte_mempool (mempool_perf_autotest's loop) vs rpmd mempool_perf, $runs interleaved runs each"
                mode=--mbuf
            else
                echo "== mempool-aa: DPDK rte_mempool against itself (A/A), $runs interleaved runs each"
                mode=--aa
            fi
            command -v pkg-config >/dev/null || apt-get install -y -q pkg-config
            gcc -O3 -march=native -o target/release/mempool_peer benches/dpdk/mempool_peer.c \
                $(pkg-config --cflags --libs libdpdk)
            RPMD_PLOT_CSV="$OUT/$s.csv" target/release/compare_mempool --peer target/release/mempool_peer --runs "$runs" \
                --seconds "${MEMPOOL_SECONDS:-1}" --huge-dir "$HUGE_DIR" $mode \
                $([ "${MEMPOOL_ALL:-0}" = 1 ] && echo --all)
            plot_bars "$OUT/$s.csv" "$OUT/$s.png" "$s: DPDK rte_mempool vs rpmd (per case)" "objects per second (higher is faster)"
            ;;
        virtio)
            echo "== virtio: rpmd's virtio-user vs DPDK's net_virtio_user against testpmd's net_vhost, $vruns interleaved runs each"
            RPMD_PLOT_CSV="$OUT/virtio.csv" target/release/compare_virtio --huge-dir "$HUGE_DIR" --runs "$vruns" --seconds 2
            plot_bars "$OUT/virtio.csv" "$OUT/virtio.png" "virtio-user against testpmd vhost: DPDK vs rpmd" "Mpps (median)"
            ;;
        vhost)
            echo "== vhost: rpmd's vhost-user backend vs DPDK's net_vhost under testpmd's net_virtio_user, $runs rounds of DPDK, rpmd, DPDK"
            RPMD_PLOT_CSV="$OUT/vhost.csv" target/release/compare_vhost --huge-dir "$HUGE_DIR" --runs "$runs" --seconds 2
            plot_bars "$OUT/vhost.csv" "$OUT/vhost.png" "vhost-user backend under a DPDK virtio-user peer: DPDK vs rpmd" "Mpps at the peer (median)"
            ;;
        l2fwd)
            echo "== l2fwd: rpmd l2fwd vs testpmd io/mac forwarding between two vhost-user ports (testpmd flowgen), $runs interleaved runs each, and a burst sweep"
            target/release/compare_l2fwd --l2fwd target/release/l2fwd --huge-dir "$HUGE_DIR" \
                --runs "$runs" --seconds 4 --sweep --csv "$OUT/l2fwd.csv"
            awk -F, 'NR>1 && $1=="io" && $2==64 {print $3, $4, $5}' "$OUT/l2fwd.csv" | sort -n > "$OUT/batch.dat"
            gnuplot -e "set terminal png size 800,500; set output '$OUT/batch.png'; set logscale x 2; \
                set xlabel 'burst size'; set ylabel 'Mpps forwarded (64 B, io)'; set key left top; \
                set title 'l2fwd between two vhost-user ports: testpmd vs rpmd'; \
                plot '$OUT/batch.dat' using 1:2 with linespoints title 'DPDK testpmd', \
                     '' using 1:3 with linespoints title 'rpmd l2fwd'" && echo "plot: $OUT/batch.png"
            ;;
        rr)
            echo "== rr: 1-byte request/response, one session, over shm (client core 1, server core 0) vs the cache-line bound, $runs runs"
            ratios=()
            for i in $(seq "$runs"); do
                r=$(target/release/rr --duration 3 --json --cdf "$OUT/rr_cdf_shm.csv" 2>/dev/null | rr_ratio)
                set -- $r
                echo "run $i: p50 $2 ns, bound $3 ns, $4 transactions/s: p50 = $1 x bound"
                ratios+=("$1")
            done
            med=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
            echo "== rr through testpmd io between two vhost-user ports (client core 1, server core 0, testpmd core 0)"
            id=$$
            dpdk-testpmd --no-pci --lcores 0@0,1@0 --file-prefix=rrtp --huge-dir "$HUGE_DIR" -m 512 --huge-unlink \
                --log-level=lib.eal:error --vdev "net_vhost0,iface=/tmp/rpmd-rr-$id-0.sock,queues=1" \
                --vdev "net_vhost1,iface=/tmp/rpmd-rr-$id-1.sock,queues=1" -- --forward-mode=io -a \
                < <(sleep 30) >/dev/null 2>&1 &
            tp=$!
            for _ in $(seq 100); do [ -S "/tmp/rpmd-rr-$id-1.sock" ] && break; sleep 0.1; done
            # testpmd polls core 0 too: the server sleeps when idle (no spin,
            # 10 us timer) so the two share the core by wake-ups, not slices.
            target/release/rr --role server --dev "virtio-user:/tmp/rpmd-rr-$id-1.sock" -l 0 --duration 6 \
                --spin-us 0 --sleep-us 10 >/dev/null 2>&1 &
            srv=$!
            target/release/rr --role client --dev "virtio-user:/tmp/rpmd-rr-$id-0.sock" -l 1 --duration 3 --spin-us 1000 \
                --no-bound --cdf "$OUT/rr_cdf_testpmd.csv" || true
            kill -INT $srv $tp 2>/dev/null || true
            wait $srv $tp 2>/dev/null || true
            rm -f /tmp/rpmd-rr-$id-*.sock
            gnuplot -e "set terminal png size 800,500; set output '$OUT/rr_cdf.png'; set logscale x; \
                set xlabel 'round trip (us)'; set ylabel 'percentile'; set key right bottom; \
                set datafile separator ','; set title 'rr latency CDF, 1-byte request/response, one session'; \
                plot '$OUT/rr_cdf_shm.csv' every ::1 using (\$1/1000):2 with lines title 'shm, one process', \
                     '$OUT/rr_cdf_testpmd.csv' every ::1 using (\$1/1000):2 with lines title 'virtio-user through testpmd io'" \
                && echo "plot: $OUT/rr_cdf.png"
            echo "rr p50 over the cache-line round-trip bound (median of $runs): $med (target 2.5, issue 52)"
            echo "RESULT rr worst_ratio=$med"
            ;;
        afxdp)
            echo "== afxdp: rpmd af_xdp/af_packet vs DPDK net_af_xdp/net_af_packet over one veth pair (txonly -> rxonly), $runs interleaved runs each, DPDK twice (A/A)"
            bash benches/afxdp.sh "$HUGE_DIR" "$runs" 4 "$OUT"
            ;;
        capture)
            echo "== capture: l2fwd's Mpps with --pcap off and on (embedded topology), $runs interleaved rounds, no-capture twice per round (A/A)"
            bash benches/capture.sh "$runs" 4 "$OUT"
            plot_bars "$OUT/capture.csv" "$OUT/capture.png" "l2fwd (embedded topology) with and without --pcap" "Mpps forwarded"
            ;;
        lookup)
            echo "== lookup: DPDK's lpm, fib, lpm6 and hash_readwrite_lf perf autotests vs rpmd-lookup under the same loops (lookup_perf), $runs interleaved rounds, DPDK twice per round (its A/A)"
            RPMD_PLOT_CSV="$OUT/lookup.csv" target/release/compare_lookup --runs "$runs" --huge-dir "$HUGE_DIR" --cores 0,1
            plot_bars "$OUT/lookup.csv" "$OUT/lookup.png" "lookup: DPDK autotests vs rpmd-lookup" "cycles per lookup (lower is faster)"
            ;;
        l3fwd)
            echo "== l3fwd: rpmd's l3fwd vs DPDK's l3fwd example (built from dpdk-doc) between two vhost-user ports fed by testpmd flowgen, lpm and em, 64 and 512 bytes, $runs interleaved runs"
            dpkg -s dpdk-doc >/dev/null 2>&1 || apt-get install -y -q dpdk-doc
            command -v pkg-config >/dev/null || apt-get install -y -q pkg-config
            rm -rf target/dpdk-examples && mkdir -p target/dpdk-examples
            cp -r /usr/share/dpdk/examples/l3fwd /usr/share/dpdk/examples/common target/dpdk-examples/
            # The one change: l3fwd asks every port for Rx checksum offload,
            # which no virtual port (virtio-user, vhost) offers, so its
            # configure fails; a DPDK user on virtio drops the request.
            sed -i 's/\.offloads = RTE_ETH_RX_OFFLOAD_CHECKSUM,/.offloads = 0,/' target/dpdk-examples/l3fwd/main.c
            make -C target/dpdk-examples/l3fwd shared >/dev/null
            RPMD_PLOT_CSV="$OUT/l3fwd.csv" target/release/compare_l3fwd --dpdk-l3fwd target/dpdk-examples/l3fwd/build/l3fwd \
                --huge-dir "$HUGE_DIR" --runs "$runs" --seconds 4
            plot_bars "$OUT/l3fwd.csv" "$OUT/l3fwd.png" "l3fwd: DPDK vs rpmd, same ports and rules" "Mpps at the generator (higher is faster)"
            ;;
        mlx4)
            echo "== mlx4: the ConnectX-3 driver's rx+tx cost per frame, l2fwd io between the device model's two cabled ports (model time taken out), $((runs + 2)) runs, and callgrind"
            bash benches/mlx4.sh "$((runs + 2))" 2 "$OUT"
            ;;
        poll)
            echo "== poll: run-loop modes, latency against the server's CPU (rr over vhost-user, and AF_XDP on a veth pair), $runs interleaved rounds"
            python3 benches/poll.py --runs "$runs" --seconds 2 --out "$OUT"
            ;;
        seeds-vhost)
            echo "== seeds-vhost: vhost_net's TX and RX busy polling on rpmd's vhost-user backend, rr through a two-port switch, $runs rounds"
            bash benches/seeds_vhost.sh "$runs" 2 "$OUT"
            ;;
        txlock)
            echo "== txlock: a shaped egress under N enqueuers: spin lock, std Mutex, busylock scheme and rpmd's TxLock"
            RPMD_PLOT_CSV="$OUT/txlock.csv" target/release/txlock --seconds 2 --runs "$runs"
            plot_bars "$OUT/txlock.csv" "$OUT/txlock.png" "txlock: packets delivered through one shaped egress (configured 1.56 M/s)" "million delivered per second"
            echo "== shaper accuracy: rpmd's egress classes against Linux HTB, same veth, generator and configuration"
            target/release/shaper_anchor --seconds 5 --runs "$runs"
            ;;
        seeds)
            inv=${SEEDS_INVOCATIONS:-5}
            echo "== seeds: the run-loop experiments (signal costs; then $inv interleaved invocations of: yield across processes over shm, over vhost-user and through the vswitch app, yield, spin budgets, backlog drain in memory and on a vhost-user port)"
            target/release/yield_signal_cost
            : > "$OUT/seeds_invocations.log"
            for i in $(seq "$inv"); do
                echo "-- seeds invocation $i of $inv"
                {
                    RPMD_PLOT_CSV="$OUT/seeds_yield_proc.csv" target/release/yield_proc --runs "$runs" --seconds 2
                    target/release/yield_proc --link vhost --runs "$runs" --seconds 2
                    target/release/yield_proc --link vswitch --sessions 2,1,16,64 --signals off,runqueue --runs "$runs" --seconds 2
                    RPMD_PLOT_CSV="$OUT/seeds_yield.csv" target/release/seeds yield --runs "$runs" --seconds 2
                    target/release/seeds spin --runs "$runs" --seconds 2
                    target/release/seeds backlog --runs "$runs" --seconds 2
                    target/release/backlog_port --runs "$runs" --seconds 2
                } | tee -a "$OUT/seeds_invocations.log" | sed "s/^RESULT/  invocation $i: RESULT/"
            done
            python3 benches/spread.py < "$OUT/seeds_invocations.log"
            plot_bars "$OUT/seeds_yield_proc.csv" "$OUT/seeds_proc.png" "seeds: responders in separate processes, yield signals (last invocation)" "thousand transactions per second"
            plot_bars "$OUT/seeds_yield.csv" "$OUT/seeds.png" "seeds: yield to a runnable sibling, off vs on (last invocation)" "thousand transactions per second"
            ;;
    esac
done
}

run_suites 2>&1 | tee "$OUT/compare.log"
echo
echo "== summary (DPDK / rpmd unless the suite says otherwise; <= 1.0 means rpmd is at least as fast)"
grep '^RESULT' "$OUT/compare.log" | sed 's/^RESULT //' | \
    awk -v csv="$OUT/results.csv" 'BEGIN {print "suite,metric,value" > csv; printf "%-16s %-12s %s\n", "suite", "metric", "value"}
         {split($2, kv, "="); printf "%-16s %-12s %s\n", $1, kv[1], kv[2]; print $1 "," kv[1] "," kv[2] >> csv}'
echo "(results: $OUT/results.csv; log, CSVs and plots in $OUT/)"
