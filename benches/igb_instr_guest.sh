#!/bin/sh
# Runs in igb_instr.sh's guest (busybox sh, started by /init): the 82576
# goes to vfio-pci, and while the host floods it with 64-byte frames a
# forwarder in io mode runs on it under callgrind (CPU 1): rpmd's
# `gen --mode io` and DPDK's testpmd io (net_e1000_igb), each for a short
# and a long run, interleaved. Prints one line a run:
#   @@IGBI <ours|dpdk> <seconds> <instructions> <frames forwarded> <receive polls> <transmit calls>
# (ours' transmit calls read 0 where the call is a tail jump callgrind
# does not count as a call).
# Ours: callgrind counts inside the igb queues' rx_burst and tx_burst
# only (and the mempool they call). DPDK's: every instruction in the PMD
# and the mempool, mbuf and ring libraries (Debian's DPDK has no symbol
# table), summed by object in the guest (cg_sum.awk).
R=/rpmd
# Seconds of the two runs a side (from the kernel command line).
SHORT=${SHORT:-30}; LONG=${LONG:-90}
TP=$R/dpdk
export VALGRIND_LIB=$R VALGRIND_LAUNCHER=$R/callgrind-amd64-linux
echo "@@RPMD igb_instr start kernel=$(uname -r)"
$R/rpmd-bind --hugepages 160 || { echo "@@IGBI error hugepages"; exit 1; }
mkdir -p /mnt/huge /var/run /tmp && mount -t hugetlbfs nodev /mnt/huge
A=""
for d in /sys/bus/pci/devices/*; do
    [ "$(cat $d/vendor):$(cat $d/device)" = 0x8086:0x10c9 ] && A=${d##*/}
done
[ -n "$A" ] || { echo "@@IGBI error no 82576"; exit 1; }
$R/rpmd-bind --bind vfio-pci $A || { echo "@@IGBI error bind $A"; exit 1; }

# rpmd's gen in io mode on A for $1 seconds under callgrind.
ours() {
    cg=/tmp/ours-$1.cg
    taskset 2 $R/callgrind-amd64-linux --callgrind-out-file=$cg --collect-atstart=no \
        '--toggle-collect=*rpmd_igb*RxRing as*rx_burst*' \
        '--toggle-collect=*rpmd_igb*TxRing as*tx_burst*' \
        $R/gen --mode io --dev pci:$A -l 1 --poll spin --duration $1 > /tmp/ours.log 2>&1
    frames=$(sed -n 's/.*opackets \([0-9]*\).*/\1/p' /tmp/ours.log | tail -1)
    awk -v MODE=fn -v RE='rpmd_igb::rxtx::(RxRing as .*::rx_burst|TxRing as .*::tx_burst)' \
        -f $R/cg_sum.awk $cg > /tmp/ours.sum
    ir=$(head -1 /tmp/ours.sum)
    rxc=$(awk '/^calls .*rx_burst/ {print $2}' /tmp/ours.sum)
    txc=$(awk '/^calls .*tx_burst/ {print $2}' /tmp/ours.sum)
    echo "@@IGBI ours $1 ${ir:-0} ${frames:-0} ${rxc:-0} ${txc:-0}"
    grep -E "summary|pci:" /tmp/ours.log | sed 's/^/ours: /'
}

# DPDK's testpmd io on A under callgrind, stopped (SIGINT) $1 seconds
# after its forwarding started.
dpdk() {
    s=$1
    cg=/tmp/dpdk-$1.cg
    taskset 2 $R/callgrind-amd64-linux --callgrind-out-file=$cg \
        $TP/lib/ld-linux-x86-64.so.2 --library-path $TP/lib $TP/dpdk-testpmd \
        --lcores 0@1,1@1 -n 1 -m 64 --huge-dir /mnt/huge --file-prefix=fwd -a $A \
        -d $TP/pmds/librte_mempool_ring.so -d $TP/pmds/librte_net_e1000.so -- \
        --forward-mode=io --port-topology=loop --total-num-mbufs=4096 -a \
        --stats-period 1000 > /tmp/dpdk.log 2>&1 &
    fwd=$!
    i=0
    while ! grep -q "start packet forwarding" /tmp/dpdk.log && [ $i -lt 6000 ] &&
        kill -0 $fwd 2>/dev/null; do
        i=$((i + 1)); sleep 0.1
    done
    echo "dpdk: forwarding after $((i / 10)) s"
    sleep $1
    kill -INT $fwd 2>/dev/null
    i=0
    while kill -0 $fwd 2>/dev/null && [ $i -lt 3000 ]; do i=$((i + 1)); sleep 0.1; done
    kill -9 $fwd 2>/dev/null
    frames=$(awk '/Accumulated forward statistics/ {a = 1} a && /TX-packets:/ {print $2; exit}' /tmp/dpdk.log)
    : > /tmp/dpdk.sum
    [ -s $cg ] && awk -v MODE=ob -v RE='librte_(net_e1000|mempool|mbuf|ring)' \
        -f $R/cg_sum.awk $cg > /tmp/dpdk.sum
    ir=$(head -1 /tmp/dpdk.sum)
    # The PMD's two most called functions: rx_burst (every poll) and
    # tx_burst (every poll that received).
    set -- $(grep '^calls ' /tmp/dpdk.sum | sort -k2,2nr | head -2 | awk '{print $2}')
    echo "@@IGBI dpdk $s ${ir:-0} ${frames:-0} ${1:-0} ${2:-0}"
    grep -E "RX-packets|TX-packets|EAL: (Error|Cannot)|Fail|rror" /tmp/dpdk.log | head -6 | sed 's/^/dpdk: /'
    [ -n "$frames" ] || tail -15 /tmp/dpdk.log | sed 's/^/dpdk: /'
}

for secs in $SHORT $LONG; do
    for side in $(echo ${SIDES:-ours,dpdk} | tr , ' '); do
        $side $secs
        rm -f /mnt/huge/fwd*
    done
done
echo "@@IGBI done"
