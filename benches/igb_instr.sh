#!/usr/bin/env bash
# Instructions per forwarded frame of rpmd's igb driver against DPDK
# 22.11's igb PMD (net_e1000_igb), on the same emulated 82576 in the same
# QEMU guest (issue 49). The guest runs under TCG, so its rates measure
# QEMU; instruction counts do not depend on it.
#
#   bash benches/igb_instr.sh [--short S] [--long L]   (root, valgrind, dpdk-dev)
#
# The guest (tests/vm's kernel and busybox) has one 82576, bound to
# vfio-pci behind the virtual IOMMU. The host floods it with 64-byte
# frames through its dgram netdev (igb_feed.py), far faster than the
# forwarder takes them, so every poll finds a whole burst; the forwarder
# runs in io mode (every frame back out of the port it came in on) under
# callgrind, on its own vCPU:
# - ours: `gen --mode io --dev pci:A --poll spin`, counting inside the igb
#   queues' rx_burst and tx_burst (and the mempool they call), not the
#   loop around them;
# - DPDK's: testpmd io on net_e1000_igb, counting every instruction in the
#   PMD and the mempool, mbuf and ring libraries (Debian's DPDK has no
#   symbol table, so by object; the mempool's fast path is inlined into
#   the PMD), not testpmd's loop.
# Each side runs S and L seconds (interleaved: ours, DPDK, ours, DPDK);
# the difference of the two counts over the difference of their frames
# takes start-up and shutdown out, as virtio_instr.sh does. Frames a
# receive poll (calls of the receive function, from callgrind's call
# counts; DPDK's is the PMD's most called function) show that every poll
# found a whole burst.
#
# Ends with `RESULT igb_instr ours=<n> dpdk=<n> ratio=<ours ÷ DPDK's>`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHORT=30 LONG=90
while [ $# -gt 0 ]; do
    case $1 in
        --short) SHORT=$2; shift 2 ;;
        --long) LONG=$2; shift 2 ;;
        *) echo "usage: $0 [--short S] [--long L]" >&2; exit 2 ;;
    esac
done
command -v valgrind >/dev/null || { echo "igb_instr.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
command -v dpdk-testpmd >/dev/null || { echo "igb_instr.sh: needs dpdk-testpmd (apt-get install dpdk-dev)" >&2; exit 1; }
export VM_DIR=${VM_DIR:-/var/tmp/rpmd-vm}
RUN="$VM_DIR/igb-instr"
mkdir -p "$RUN"
"$ROOT/tests/vm/prepare.sh"

export CARGO_TARGET_DIR="$ROOT/target/vm"
for b in gen rpmd-bind; do
    (cd "$ROOT" && RUSTFLAGS='-C target-feature=+crt-static' cargo build -q --release \
        --target x86_64-unknown-linux-gnu -p rpmd-apps --bin $b)
done
BIN="$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release"
VG=/usr/libexec/valgrind
GUEST_TEST="$ROOT/benches/igb_instr_guest.sh" "$ROOT/tests/vm/build-initramfs.sh" \
    "$RUN/initrd.cpio.gz" "$BIN/gen" "$BIN/rpmd-bind" "$ROOT/benches/cg_sum.awk" \
    "$VG/callgrind-amd64-linux" "$VG/vgpreload_core-amd64-linux.so" "$VG/default.supp"

# The 82576 behind a root port; its dgram netdev takes the feeder's
# frames on port P and sends to P + 1, the feeder's (left unread).
P=${PORT_BASE:-17101}
args=(-nodefaults -display none -no-reboot -m 1G -smp 2
      -accel tcg,thread=multi -cpu max
      -machine q35,kernel-irqchip=split
      -device intel-iommu,intremap=on,caching-mode=on
      -device isa-debug-exit,iobase=0xf4,iosize=0x04
      -serial "file:$RUN/serial.log"
      -device "pcie-root-port,id=rp0,chassis=1,slot=1"
      -netdev "dgram,id=n0,local.type=inet,local.host=127.0.0.1,local.port=$P,remote.type=inet,remote.host=127.0.0.1,remote.port=$((P + 1))"
      -device "igb,netdev=n0,bus=rp0,mac=52:54:00:00:00:08")
kernel=$(ls "$VM_DIR"/kernel/boot/vmlinuz-* | head -1)
args+=(-kernel "$kernel" -initrd "$RUN/initrd.cpio.gz"
       -append "console=ttyS0 quiet intel_iommu=on iommu=pt panic=-1 SHORT=$SHORT LONG=$LONG SIDES=${SIDES:-ours,dpdk}")
limit=$((4 * (SHORT + LONG) + 1200))
echo "== booting the guest (TCG; at most $limit s)"
python3 "$ROOT/benches/igb_feed.py" $((P + 1)) "$P" 52:54:00:00:00:08 ${FEED_RATE:-100000} &
feed=$!
trap 'kill $feed 2>/dev/null || true' EXIT
set +e
timeout "$limit" qemu-system-x86_64 "${args[@]}" > "$RUN/qemu.log" 2>&1
rc=$?
set -e
kill $feed 2>/dev/null || true
tr -d '\r' < "$RUN/serial.log" > "$RUN/serial.txt"
grep -a -E '^(@@IGBI|ours:|dpdk:|generator:)' "$RUN/serial.txt" || true
grep -aq '^@@IGBI done' "$RUN/serial.txt" || {
    echo "igb_instr.sh: the guest did not finish (qemu rc=$rc); serial log: $RUN/serial.txt" >&2
    exit 1
}
# side -> "instructions a frame, frames a receive poll" from the
# differences of its long and short runs.
per_frame() {
    awk -v side="$1" -v s="$SHORT" -v l="$LONG" '
        $1 == "@@IGBI" && $2 == side && $3 == s {i1 = $4; f1 = $5; r1 = $6}
        $1 == "@@IGBI" && $2 == side && $3 == l {i2 = $4; f2 = $5; r2 = $6}
        END {
            if (f2 > f1 && i2 > i1 && r2 > r1)
                printf "%.1f %.1f\n", (i2 - i1) / (f2 - f1), (f2 - f1) / (r2 - r1)
            else print "nan nan"
        }' "$RUN/serial.txt"
}
read -r ours ours_rx < <(per_frame ours)
read -r dpdk dpdk_rx < <(per_frame dpdk)
echo "  ours: $ours instructions a forwarded frame, $ours_rx frames a receive poll"
echo "  DPDK's net_e1000_igb: $dpdk instructions a forwarded frame, $dpdk_rx frames a receive poll"
ratio=$(awk -v a="$ours" -v b="$dpdk" 'BEGIN {if (b + 0 > 0 && a + 0 > 0) printf "%.3f", a / b; else print "nan"}')
echo "RESULT igb_instr ours=$ours dpdk=$dpdk ratio=$ratio"
