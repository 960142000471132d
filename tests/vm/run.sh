#!/usr/bin/env bash
# The VFIO integration test: our pmd code against real VFIO, in a QEMU 7.2
# guest with an emulated Intel IOMMU (these hosts have no VFIO or IOMMU).
#
#   install qemu-system-x86 and cpio (apt) -> fetch Debian's kernel and
#   busybox (apt-get download) -> build vfio_guest and rpmd-bind statically
#   -> initramfs -> start the host frame peer -> boot under TCG -> the guest
#   binds the NICs with rpmd-bind and runs the cases -> verdict.
#
# Pass = QEMU exit status 1 (the guest wrote 0 to isa-debug-exit), the
# marker "@@RPMD guest-test rc=0" and an "N passed, 0 failed" line.
# A sixth NIC, a modern virtio-net with two queue pairs, has DPDK testpmd
# as its backend (vhost-user, io forwarding, every frame back on the queue
# pair it came in on), so the guest RAM is a shared memfd.
# Logs: $VM_DIR/run/serial.log, $VM_DIR/run/peer.log, $VM_DIR/run/testpmd.log,
# $VM_DIR/run/monitor.log (QEMU monitor commands the guest asked for).
# Env: VM_DIR (/var/tmp/rpmd-vm), PORT_BASE (17001), TIMEOUT (300 s),
# QEMU_WRAP (a command to run QEMU under, e.g. "gdb -batch -ex run -ex bt --args").
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export VM_DIR=${VM_DIR:-/var/tmp/rpmd-vm}
PORT_BASE=${PORT_BASE:-17001}
TIMEOUT=${TIMEOUT:-300}
RUN="$VM_DIR/run"
mkdir -p "$RUN"
t0=$SECONDS
say() { echo "[vm $((SECONDS - t0))s] $*"; }

"$HERE/prepare.sh"

# Static binaries for the guest; the explicit --target keeps build scripts
# and proc-macros dynamic. A separate target dir keeps the host build's
# cache intact.
export CARGO_TARGET_DIR="$ROOT/target/vm"
(cd "$ROOT" && RUSTFLAGS='-C target-feature=+crt-static' cargo build -q --release \
    --target x86_64-unknown-linux-gnu -p rpmd-pmd --example vfio_guest)
(cd "$ROOT" && RUSTFLAGS='-C target-feature=+crt-static' cargo build -q --release \
    --target x86_64-unknown-linux-gnu -p rpmd-apps --bin rpmd-bind)
(cd "$ROOT" && RUSTFLAGS='-C target-feature=+crt-static' cargo build -q --release \
    --target x86_64-unknown-linux-gnu -p rpmd-virtio --example virtio_guest)
(cd "$ROOT" && RUSTFLAGS='-C target-feature=+crt-static' cargo build -q --release \
    --target x86_64-unknown-linux-gnu -p rpmd-mlx4 --example mlx4_guest)
(cd "$ROOT" && RUSTFLAGS='-C target-feature=+crt-static' cargo build -q --release \
    --target x86_64-unknown-linux-gnu -p rpmd-igb --example igb_guest)
BIN="$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release"
"$HERE/build-initramfs.sh" "$RUN/initrd.cpio.gz" "$BIN/examples/vfio_guest" "$BIN/rpmd-bind" \
    "$BIN/examples/virtio_guest" "$BIN/examples/mlx4_guest" "$BIN/examples/igb_guest"
say "binaries and initramfs built"

# NICs: 0 modern virtio-net whose DMA goes through the vIOMMU (also offering
# packed rings and a 9000-byte MTU); 1 transitional
# virtio-net (legacy I/O BAR); 2 e1000e; 3 and 4 modern virtio-net behind a
# PCI bridge, so they share one IOMMU group. Each on its own dgram backend.
nics=(
    "virtio-net-pci,disable-legacy=on,iommu_platform=on,packed=on,host_mtu=9000"
    "virtio-net-pci,disable-legacy=off"
    "e1000e"
    "virtio-net-pci,disable-legacy=on,iommu_platform=on,bus=br0,addr=1"
    "virtio-net-pci,disable-legacy=on,iommu_platform=on,bus=br0,addr=2"
)
args=(-nodefaults -display none -no-reboot -m 512M -smp 2
      -accel tcg,thread=multi -cpu max
      -object memory-backend-memfd,id=ram,size=512M,share=on
      -machine q35,kernel-irqchip=split,memory-backend=ram
      -device intel-iommu,intremap=on,caching-mode=on,device-iotlb=on
      -device isa-debug-exit,iobase=0xf4,iosize=0x04
      -device pci-bridge,id=br0,chassis_nr=1
      -monitor "unix:$RUN/monitor.sock,server=on,wait=off"
      -serial "file:$RUN/serial.log")
ports=()
for i in "${!nics[@]}"; do
    args+=(-netdev "dgram,id=n$i,local.type=inet,local.host=127.0.0.1,local.port=$((PORT_BASE + i)),remote.type=inet,remote.host=127.0.0.1,remote.port=$((PORT_BASE + 20 + i))"
           -device "${nics[$i]},netdev=n$i,mac=52:54:00:00:00:0$((i + 1))")
    ports+=($((PORT_BASE + 20 + i)))
done
# NIC 5 (00:10.0): two queue pairs behind DPDK's vhost-user backend, which
# handles the IOMMU's translations (iommu-support=1; the IOMMU's
# device-iotlb and the NIC's ats are what QEMU advises for vhost). No
# MSI-X on it: QEMU 7.2 under TCG crashes in vhost_net_start setting MSI-X
# vector notifiers (seen with gdb); the other modern NIC tests MSI-X.
VHU="$RUN/vhu.sock"
if command -v dpdk-testpmd >/dev/null; then
    args+=(-chardev "socket,id=vhu,path=$VHU"
           -netdev "vhost-user,id=n5,chardev=vhu,queues=2"
           -device "virtio-net-pci,netdev=n5,mq=on,vectors=0,disable-legacy=on,iommu_platform=on,ats=on,addr=0x10,mac=52:54:00:00:00:06")
elif [ "${CI:-}" = true ] || [ "${RPMD_REQUIRE_PEERS:-}" = 1 ]; then
    say "dpdk-testpmd not found: the two-queue-pair NIC (00:10.0) needs it as its vhost-user backend (CI=true: a missing peer is a failure)"
    exit 1
else
    say "SKIPPED: the two-queue-pair NIC (00:10.0): dpdk-testpmd not found"
    if [ -n "${RPMD_SKIP_LOG:-}" ]; then
        echo "VFIO guest's two-queue-pair NIC: dpdk-testpmd not found" >>"$RPMD_SKIP_LOG"
    fi
fi
# NIC 6 (00:11.0): no control queue (ctrl_vq=off; QEMU still offers
# CTRL_RX): the port must not negotiate CTRL_RX nor accept receive
# filters it cannot program.
args+=(-netdev "dgram,id=n6,local.type=inet,local.host=127.0.0.1,local.port=$((PORT_BASE + 6)),remote.type=inet,remote.host=127.0.0.1,remote.port=$((PORT_BASE + 26))"
       -device "virtio-net-pci,netdev=n6,ctrl_vq=off,disable-legacy=on,iommu_platform=on,addr=0x11,mac=52:54:00:00:00:07")
ports+=($((PORT_BASE + 26)))
# NICs 7 and 8: QEMU's Intel 82576 model (-device igb, QEMU 8.0 and
# later), each behind a PCIe root port of its own (its SR-IOV VFs' function
# numbers do not fit beside other devices on the root bus), cabled to each
# other (each one's datagrams go to the other's socket). The guest finds
# them in this order: MACs ...:08 and ...:09.
for k in 7 8; do
    peer=$((15 - k))
    args+=(-device "pcie-root-port,id=rp$k,chassis=$k,slot=$k"
           -netdev "dgram,id=n$k,local.type=inet,local.host=127.0.0.1,local.port=$((PORT_BASE + k)),remote.type=inet,remote.host=127.0.0.1,remote.port=$((PORT_BASE + peer))"
           -device "igb,netdev=n$k,bus=rp$k,mac=52:54:00:00:00:0$((k + 1))")
done
kernel=$(ls "$VM_DIR"/kernel/boot/vmlinuz-* | head -1)
args+=(-kernel "$kernel" -initrd "$RUN/initrd.cpio.gz"
       -append "console=ttyS0 quiet intel_iommu=on iommu=pt panic=-1")

# One boot of the guest with its host-side peers (the dgram echo, the
# monitor relay, testpmd's vhost-user port); sets rc to QEMU's status.
boot() {
    python3 "$HERE/peer.py" --timeout $((TIMEOUT + 30)) "${ports[@]}" > "$RUN/peer.log" 2>&1 &
    PEER=$!
    rm -f "$RUN/serial.log"
    # Monitor commands the guest asks for on its console (set_link for the
    # igb link events).
    python3 "$HERE/monitor.py" --timeout $((TIMEOUT + 30)) "$RUN/serial.log" "$RUN/monitor.sock" \
        > "$RUN/monitor.log" 2>&1 &
    MONITOR=$!
    TESTPMD=""
    cleanup() {
        kill $PEER $MONITOR 2>/dev/null || true
        [ -n "$TESTPMD" ] && kill $TESTPMD 2>/dev/null || true
    }
    trap cleanup EXIT
    if command -v dpdk-testpmd >/dev/null; then
        rm -f "$VHU"
        # stdin stays open (testpmd exits at EOF); killed at the end.
        sleep infinity | dpdk-testpmd --no-pci --no-huge -m 1024 --lcores 0@0,1@1 \
            --file-prefix=rpmdvm --log-level=lib.eal:error \
            --vdev "net_vhost0,iface=$VHU,queues=2,iommu-support=1" -- \
            --forward-mode=io --rxq=2 --txq=2 --nb-cores=1 --port-topology=loop -a --total-num-mbufs=8192 \
            > "$RUN/testpmd.log" 2>&1 &
        TESTPMD=$!
        for _ in $(seq 300); do [ -S "$VHU" ] && break; sleep 0.1; done
        [ -S "$VHU" ] || { say "testpmd made no vhost-user socket; see $RUN/testpmd.log"; exit 1; }
    fi
    say "booting the guest (TCG)"
    set +e
    timeout "$TIMEOUT" ${QEMU_WRAP:-} qemu-system-x86_64 "${args[@]}" > "$RUN/qemu.log" 2>&1
    rc=$?
    set -e
    cleanup
}
boot
# QEMU 10 under multi-threaded TCG has aborted, rarely, on its own
# assertion in iotlb_to_section (a race between a vCPU's TLB fill and an
# IOMMU mapping change; seen twice in about ten runs, at different points
# of the guest's run). That is not a result of the guest's tests: boot
# once more, and judge that run.
if [ $rc -eq 134 ] && grep -q 'iotlb_to_section: Assertion' "$RUN/qemu.log"; then
    say "QEMU aborted on its own iotlb_to_section assertion (a TCG race, not a guest result); booting the guest once more"
    cp "$RUN/qemu.log" "$RUN/qemu-abort.log"
    boot
fi
say "guest finished: qemu rc=$rc"
tr -d '\r' < "$RUN/serial.log" > "$RUN/serial.txt"
grep -a -E '^(case |@@RPMD|dmesg:|modern:|\[FAIL\]|\[ok  \]|\[WARN\]|preflight:)' "$RUN/serial.txt" || true
[ -s "$RUN/qemu.log" ] && sed 's/^/qemu: /' "$RUN/qemu.log" | head -20
summary=$(grep -a -E '^[0-9]+ passed, [0-9]+ failed$' "$RUN/serial.txt" | tail -1 || true)
# The blocked-DMA cases must also show outside the test: the IOMMU
# recorded a fault at the address each case printed (virtio's and the
# 82576's own). QEMU's VT-d model logs only its first translation fault,
# so a later one is found in the guest kernel's report of the fault
# recording registers ("DMAR: [DMA Write ...] Request device [02:00.0]
# fault addr ...").
blocked=$(grep -a -E '^case .*IOMMU blocks.*: ok' "$RUN/serial.txt" | grep -o -E 'unmapped IOVA 0x[0-9a-f]+' | awk '{print $3}' || true)
if [ -z "$blocked" ]; then
    say "host: no blocked-DMA case passed in the guest"
    summary=""
fi
for iova in $blocked; do
    if grep -q "vtd_iommu_translate: detected translation failure (dev=.*, iova=$iova)" "$RUN/qemu.log"; then
        say "host: QEMU's IOMMU logged the fault of the blocked device write at $iova"
    elif dmar=$(grep -a -o "Request device \[[0-9a-f:.]*\] fault addr $iova " "$RUN/serial.txt"); then
        say "host: the IOMMU recorded the fault of the blocked device write ($dmar; QEMU logs only its first)"
    else
        say "host: no VT-d translation fault at $iova in QEMU's log; that blocked-DMA case did not reach the IOMMU"
        summary=""
    fi
done
if [ $rc -eq 1 ] && grep -aq '^@@RPMD guest-test rc=0' "$RUN/serial.txt" && [[ "$summary" == *" 0 failed" ]]; then
    say "VFIO guest test PASS: $summary"
    echo "$summary"
    exit 0
fi
say "VFIO guest test FAIL (qemu rc=$rc, ${summary:-no summary}); serial log: $RUN/serial.log"
echo "${summary:-0 passed, 1 failed}"
exit 1
