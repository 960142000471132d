#!/bin/sh
# Runs in the guest (busybox sh), started by /init. Reserves hugepages,
# checks that preflight and the VFIO layer refuse a NIC still bound to its
# kernel driver, binds the NICs to vfio-pci with rpmd-bind, checks that a
# group with a member left on a kernel driver is refused, then runs
# vfio_guest on every NIC, then virtio_guest (rpmd's virtio-net PCI
# driver) on the modern ones, then mlx4_guest (the ConnectX-3 driver's VFIO
# path) on a modern one and the e1000e, then igb_guest (the 82576 driver)
# on the two 82576s, and against DPDK's testpmd and then Linux's igb on
# the second, then rpmd's igbvf on a VF of the second that Linux's igb
# enabled and serves. Exit 0 iff every case passed; the last line is
# "N passed, M failed".
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "case $1: ok"; }
bad() { fail=$((fail + 1)); echo "case $1: FAIL: $2"; }
B=/rpmd/rpmd-bind
echo "@@RPMD guest-test start kernel=$(uname -r) uptime=$(cut -d' ' -f1 /proc/uptime)s"
dmesg | grep -E 'DMAR: (IOMMU enabled|Intel\(R\) Virtualization)' | sed 's/^/dmesg: /'

$B --hugepages 64 && ok "rpmd-bind --hugepages" || bad "rpmd-bind --hugepages" "rc=$?"

MODERN=""; TRANS=""; E1000E=""; BRIDGED=""; MQ=""; NOCTRL=""; SAME_GROUP=""; IGB=""
for d in /sys/bus/pci/devices/*; do
    case $(cat $d/class) in 0x02*) ;; *) continue ;; esac
    bdf=${d##*/}
    case $(cat $d/vendor):$(cat $d/device):$bdf in
        0x1af4:0x1041:0000:00:10.0) MQ="$MQ $bdf" ;;
        0x1af4:0x1041:0000:00:11.0) NOCTRL="$NOCTRL $bdf" ;;
        0x1af4:0x1041:0000:00:*) MODERN="$MODERN $bdf" ;;
        0x1af4:0x1041:*) BRIDGED="$BRIDGED $bdf" ;;
        0x1af4:0x1000:*) TRANS="$TRANS $bdf" ;;
        0x8086:0x10d3:*) E1000E="$E1000E $bdf" ;;
        0x8086:0x10c9:*) IGB="$IGB $bdf" ;;
    esac
done
echo "modern:$MODERN transitional:$TRANS e1000e:$E1000E bridged:$BRIDGED multiqueue:$MQ no-ctrl:$NOCTRL igb:$IGB"
$B --status

# A NIC still on its kernel driver: preflight and the VFIO layer say so.
for b in $MODERN; do
    out=$($B --preflight $b); rc=$?
    echo "$out"
    if [ $rc -eq 1 ] && echo "$out" | grep -q "still bound to its kernel driver virtio-pci" \
        && echo "$out" | grep -q "fix: rpmd-bind --bind vfio-pci $b"; then
        ok "preflight names $b as kernel-bound"
    else
        bad "preflight names $b as kernel-bound" "rc=$rc"
    fi
    /rpmd/vfio_guest --kernel-bound $b && ok "vfio refuses kernel-bound $b" || bad "vfio refuses kernel-bound $b" "rc=$?"
done

for b in $MODERN $TRANS $E1000E $MQ $NOCTRL $IGB; do
    $B --bind vfio-pci $b && ok "bind $b" || bad "bind $b" "rc=$?"
done
for b in $MODERN; do
    out=$($B --preflight $b); rc=$?
    echo "$out"
    [ $rc -eq 0 ] && ok "preflight passes for $b" || bad "preflight passes for $b" "rc=$rc"
done

# Two NICs behind a PCI bridge share an IOMMU group; with only one on
# vfio-pci the group is not viable.
set -- $BRIDGED
if [ $# -ge 2 ]; then
    $B --bind vfio-pci $1 && ok "bind $1" || bad "bind $1" "rc=$?"
    $B --status
    out=$($B --preflight $1); rc=$?
    echo "$out"
    if [ $rc -eq 1 ] && echo "$out" | grep -q "not viable: other members on kernel drivers: $2 (virtio-pci)"; then
        ok "preflight names the non-viable group of $1"
    else
        bad "preflight names the non-viable group of $1" "rc=$rc"
    fi
    /rpmd/vfio_guest --not-viable $1 && ok "vfio refuses non-viable $1" || bad "vfio refuses non-viable $1" "rc=$?"
    # With both on vfio-pci the group is viable: virtio_guest opens the
    # two functions as two ports of one registry (below).
    $B --bind vfio-pci $2 && ok "bind $2" || bad "bind $2" "rc=$?"
    SAME_GROUP="--same-group $1 $2"
else
    bad "bridged NICs" "expected two, found '$BRIDGED'"
fi

args=""
for b in $MODERN; do args="$args --modern $b"; done
for b in $TRANS; do args="$args --transitional $b"; done
for b in $E1000E; do args="$args --e1000e $b"; done
if [ -z "$MODERN" ] || [ -z "$TRANS" ] || [ -z "$E1000E" ]; then
    bad "NIC discovery" "a modern virtio, a transitional virtio and an e1000e are needed"
fi
out=$(/rpmd/vfio_guest $args); rc=$?
echo "$out"
p=$(echo "$out" | sed -n 's/^vfio_guest: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
f=$(echo "$out" | sed -n 's/^vfio_guest: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
pass=$((pass + ${p:-0})); fail=$((fail + ${f:-1}))
[ $rc -eq 0 ] || [ "${f:-1}" -ne 0 ] || fail=$((fail + 1))

# rpmd's virtio-net PCI driver through the port API: the modern NICs
# through the IOMMU (IOVA = VA), the transitional one (no ACCESS_PLATFORM)
# through its legacy interface with physical addresses.
vargs="$MODERN"
for b in $TRANS; do vargs="$vargs --legacy $b"; done
# The two-pair NIC whose backend is DPDK testpmd on the host.
for b in $MQ; do vargs="$vargs --mq $b"; done
# Two functions of one IOMMU group, as two ports.
[ -n "$SAME_GROUP" ] && vargs="$vargs $SAME_GROUP"
# The function without a control queue.
for b in $NOCTRL; do vargs="$vargs --no-ctrl $b"; done
[ -n "$NOCTRL" ] || bad "NIC discovery" "no function at 00:11.0 (ctrl_vq=off)"
out=$(/rpmd/virtio_guest $vargs); rc=$?
echo "$out"
p=$(echo "$out" | sed -n 's/^virtio_guest: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
f=$(echo "$out" | sed -n 's/^virtio_guest: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
pass=$((pass + ${p:-0})); fail=$((fail + ${f:-1}))
[ $rc -eq 0 ] || [ "${f:-1}" -ne 0 ] || fail=$((fail + 1))

# The ConnectX-3 driver's generic VFIO path (QEMU has no ConnectX-3): its
# identity check, DMA memory, BAR mapping and reset on a modern virtio NIC
# and the e1000e.
margs=""
for b in $MODERN; do margs="$b"; break; done
for b in $E1000E; do margs="$margs $b"; done
out=$(/rpmd/mlx4_guest $margs); rc=$?
echo "$out"
p=$(echo "$out" | sed -n 's/^mlx4_guest: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
f=$(echo "$out" | sed -n 's/^mlx4_guest: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
pass=$((pass + ${p:-0})); fail=$((fail + ${f:-1}))
[ $rc -eq 0 ] || [ "${f:-1}" -ne 0 ] || fail=$((fail + 1))

# The igb driver on QEMU's 82576 model: the two 82576s, in bus order,
# have the MACs run.sh gave them; the e1000e is refused; then the two,
# cabled to each other, as rpmd ports exchanging frames.
iargs=""; mac=8
for b in $IGB; do iargs="$iargs $b=52:54:00:00:00:0$mac"; mac=$((mac + 1)); done
for b in $E1000E; do iargs="$iargs --not-igb $b"; done
[ "$mac" = 10 ] || bad "NIC discovery" "want two 82576s (QEMU -device igb), found:$IGB"
set -- $IGB
[ $# -eq 2 ] && iargs="$iargs --pair $1,$2"
out=$(/rpmd/igb_guest $iargs); rc=$?
echo "$out"
p=$(echo "$out" | sed -n 's/^igb_guest: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
f=$(echo "$out" | sed -n 's/^igb_guest: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
pass=$((pass + ${p:-0})); fail=$((fail + ${f:-1}))
[ $rc -eq 0 ] || [ "${f:-1}" -ne 0 ] || fail=$((fail + 1))
# rpmd's igb against DPDK's: testpmd (net_e1000_igb) on the second 82576,
# still bound to vfio-pci, in macswap forwarding; rpmd on the first.
set -- $IGB
TP=/rpmd/dpdk
if [ $# -eq 2 ] && [ -x $TP/dpdk-testpmd ]; then
    mkdir -p /mnt/huge /var/run && mount -t hugetlbfs nodev /mnt/huge
    mkfifo /tmp/testpmd.in
    $TP/lib/ld-linux-x86-64.so.2 --library-path $TP/lib $TP/dpdk-testpmd \
        -l 0-1 -n 1 -m 64 --huge-dir /mnt/huge --file-prefix=igb -a $2 \
        -d $TP/pmds/librte_mempool_ring.so \
        -d $TP/pmds/librte_net_e1000.so -- \
        --forward-mode=macswap --port-topology=loop --nb-cores=1 \
        --total-num-mbufs=2048 -a < /tmp/testpmd.in > /tmp/testpmd.log 2>&1 &
    tp=$!
    exec 3>/tmp/testpmd.in
    i=0
    while ! grep -q "Press enter to exit" /tmp/testpmd.log && [ $i -lt 600 ] &&
        kill -0 $tp 2>/dev/null; do
        i=$((i + 1)); sleep 0.1
    done
    if grep -q "Press enter to exit" /tmp/testpmd.log; then
        ok "testpmd (net_e1000_igb) on $2"
        out=$(/rpmd/igb_guest --dpdk-peer $1,52:54:00:00:00:09); rc=$?
        echo "$out"
        p=$(echo "$out" | sed -n 's/^igb_guest: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
        f=$(echo "$out" | sed -n 's/^igb_guest: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
        pass=$((pass + ${p:-0})); fail=$((fail + ${f:-1}))
        [ $rc -eq 0 ] || [ "${f:-1}" -ne 0 ] || fail=$((fail + 1))
    else
        bad "testpmd (net_e1000_igb) on $2" "not forwarding within 60 s"
        tail -20 /tmp/testpmd.log | sed 's/^/testpmd: /'
    fi
    # In a subshell: a write to a FIFO testpmd no longer reads is SIGPIPE.
    (echo >&3) 2>/dev/null; exec 3>&-
    i=0
    while kill -0 $tp 2>/dev/null && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
    kill $tp 2>/dev/null
    sed 's/^/testpmd: /' /tmp/testpmd.log | grep -E "Port 0|RX-packets|TX-packets|EAL: (Error|Cannot)|Fail|error" | head -20
    umount /mnt/huge
elif [ $# -eq 2 ]; then
    # run.sh refuses to boot without dpdk-testpmd under CI=true; here the
    # peer is missing on a developer's host: said, not passed.
    echo "case igb against DPDK's igb PMD: SKIPPED (no dpdk-testpmd on the host; install dpdk-dev)"
fi

# rpmd's igb against Linux's: the second 82576 goes to Linux's igb driver
# with 10.9.0.2/24, and 10.9.1.2/24 on VLAN 100; rpmd keeps the first.
set -- $IGB
if [ $# -eq 2 ]; then
    for m in $(cat /lib/modules/late-order); do
        insmod /lib/modules/$m.ko || bad "insmod $m" "rc=$?"
    done
    sysctl -qw net.ipv4.icmp_ratelimit=0
    $B --bind igb $2 >/dev/null || bad "rpmd-bind --bind igb $2" "rc=$?"
    dev=""; i=0
    while [ -z "$dev" ] && [ $i -lt 50 ]; do
        dev=$(ls /sys/bus/pci/devices/$2/net/ 2>/dev/null | head -1); i=$((i + 1)); sleep 0.1
    done
    if [ -z "$dev" ]; then
        bad "Linux igb on $2" "no network interface appeared"
    else
        ip link set $dev up && ip addr add 10.9.0.2/24 dev $dev &&
        ip link add link $dev name $dev.100 type vlan id 100 &&
        ip link set $dev.100 up && ip addr add 10.9.1.2/24 dev $dev.100 ||
            bad "Linux igb on $2" "configuring $dev failed"
        i=0
        while [ "$(cat /sys/class/net/$dev/carrier 2>/dev/null)" != 1 ] && [ $i -lt 50 ]; do
            i=$((i + 1)); sleep 0.1
        done
        peer=$(cat /sys/class/net/$dev/address)
        rx0=$(cat /sys/class/net/$dev/statistics/rx_packets)
        out=$(/rpmd/igb_guest --linux-peer $1,$peer); rc=$?
        echo "$out"
        p=$(echo "$out" | sed -n 's/^igb_guest: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
        f=$(echo "$out" | sed -n 's/^igb_guest: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
        pass=$((pass + ${p:-0})); fail=$((fail + ${f:-1}))
        [ $rc -eq 0 ] || [ "${f:-1}" -ne 0 ] || fail=$((fail + 1))
        rx=$(( $(cat /sys/class/net/$dev/statistics/rx_packets) - rx0 ))
        [ $rx -ge 8 ] && ok "Linux igb counted $rx frames from rpmd" ||
            bad "Linux igb counters" "rx_packets grew by $rx, want at least 8"
        # SR-IOV: Linux's igb enables a virtual function on the same
        # 82576 and keeps serving the PF; rpmd's igbvf drives the VF
        # through VFIO, asking Linux for its setup over the mailbox, and
        # talks to Linux's stack on the PF through the device's switch.
        pf=/sys/bus/pci/devices/$2
        if echo 1 > $pf/sriov_numvfs; then
            ok "Linux igb enabled a VF on $2"
            vf=$(basename "$(readlink $pf/virtfn0)")
            $B --bind vfio-pci $vf >/dev/null && ok "bind VF $vf" || bad "bind VF $vf" "rc=$?"
            out=$(/rpmd/igb_guest --vf-linux-peer $vf,$peer); rc=$?
            echo "$out"
            p=$(echo "$out" | sed -n 's/^igb_guest: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
            f=$(echo "$out" | sed -n 's/^igb_guest: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
            pass=$((pass + ${p:-0})); fail=$((fail + ${f:-1}))
            [ $rc -eq 0 ] || [ "${f:-1}" -ne 0 ] || fail=$((fail + 1))
            echo 0 > $pf/sriov_numvfs || bad "Linux igb disables its VF" "rc=$?"
        else
            bad "Linux igb enables a VF on $2" "sriov_numvfs: rc=$?"
        fi
        dmesg | grep -iE 'igb.*(vf|mailbox)|vfio' | tail -8 | sed 's/^/dmesg: /'
    fi
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
