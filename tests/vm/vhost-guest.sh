#!/usr/bin/env bash
# Two QEMU guests on one rpmd vswitch through rpmd's vhost-user backend.
#
#   install qemu-system-x86 and cpio (apt) -> fetch Debian's kernel and
#   busybox -> build vswitch -> initramfs with a random file and its
#   digest -> vswitch with two vhost-user ports (the server side of each
#   socket) -> boot both guests under TCG, whose Linux virtio-net drivers
#   attach with -netdev vhost-user -> each guest pings the other and
#   fetches the other's copy of the file over TCP, checking its bytes ->
#   the vswitch's summary must show both stations learned and the frames
#   forwarded -> "N passed, M failed".
#
# The guests' RAM is a shared memfd (share=on), which the backend maps.
# QEMU 10 (bookworm-backports; the test command installs it) gives the
# NICs MSI-X vectors, which QEMU 7.2 under TCG crashed setting up for
# vhost (shared/reference/qemu-vhost/REPORT.md). The vswitch does not
# spin (its ports' busyloop_us=0): it sleeps on the guests' kicks, with a
# 20 ms timer behind them, and calls them, so the notification paths are
# what carry the traffic, and the two TCG guests keep the CPUs.
# NIC_OPTS adds virtio-net-pci options (packed=on: packed rings, whose
# vring base is 32-bit); QUEUES=N gives each NIC and port N queue pairs
# (mq=on: QEMU adds the memory regions once per pair). The one-vCPU
# guests use the first pair.
# Checksums: port A offers CSUM/GUEST_CSUM (the default), port B does not
# (csum=0), and the vswitch asks for the checksum offloads. Guest A's TCP
# checksums cross the switch partial and port B completes them on their
# way into guest B, whose stack verifies them (a wrong one stalls the
# transfer); guest B computes its own. The xstats must show both.
# Logs: $VM_DIR/vhost/{vswitch.log,serial-a.log,serial-b.log,qemu-*.log}.
# Env: VM_DIR (/var/tmp/rpmd-vm), TIMEOUT (240 s), DATA_KB (2048),
# VSWITCH_OPTS (extra vswitch options), PORT_OPTS (extra port options),
# NIC_OPTS (extra virtio-net-pci options), QUEUES (1).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export VM_DIR=${VM_DIR:-/var/tmp/rpmd-vm}
TIMEOUT=${TIMEOUT:-240}
DATA_KB=${DATA_KB:-2048}
QUEUES=${QUEUES:-1}
NIC="${NIC_OPTS:+,$NIC_OPTS}"
NETDEV=""
if [ "$QUEUES" -gt 1 ]; then
    NIC="$NIC,mq=on,vectors=$((2 * QUEUES + 2))"
    NETDEV=",queues=$QUEUES"
    PORT_OPTS="${PORT_OPTS:-},queues=$QUEUES"
fi
RUN="$VM_DIR/vhost"
mkdir -p "$RUN"
t0=$SECONDS
say() { echo "[vhost-vm $((SECONDS - t0))s] $*"; }

"$HERE/prepare.sh"

(cd "$ROOT" && cargo build -q --release -p rpmd-apps --bin vswitch)
VSWITCH="${CARGO_TARGET_DIR:-$ROOT/target}/release/vswitch"
head -c $((DATA_KB * 1024)) /dev/urandom > "$RUN/data"
md5sum "$RUN/data" | cut -d' ' -f1 > "$RUN/data.md5"
GUEST_TEST="$HERE/vhost-guest-test.sh" "$HERE/build-initramfs.sh" "$RUN/initrd.cpio.gz" \
    "$RUN/data" "$RUN/data.md5"
say "vswitch and initramfs built ($DATA_KB KiB to move each way)"

SOCK_A="$RUN/a.sock"
SOCK_B="$RUN/b.sock"
rm -f "$SOCK_A" "$SOCK_B" "$RUN"/serial-*.log "$RUN"/qemu-*.log
VS=""
QA=""
QB=""
cleanup() {
    for p in $QA $QB; do kill "$p" 2>/dev/null || true; done
    [ -n "$VS" ] && kill -INT "$VS" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -f "$SOCK_A" "$SOCK_B"
}
trap cleanup EXIT

# shellcheck disable=SC2086 # the options are words
"$VSWITCH" --no-telemetry -l 0 --spin-us 0 --sleep-us 20000 ${VSWITCH_OPTS:-} \
    --xstats \
    --dev "vhost-user:$SOCK_A,busyloop_us=0${PORT_OPTS:-}" \
    --dev "vhost-user:$SOCK_B,busyloop_us=0,csum=0${PORT_OPTS:-}" \
    > "$RUN/vswitch.log" 2>&1 &
VS=$!
for _ in $(seq 100); do [ -S "$SOCK_A" ] && [ -S "$SOCK_B" ] && break; sleep 0.1; done
[ -S "$SOCK_A" ] && [ -S "$SOCK_B" ] || { say "vswitch made no sockets; see $RUN/vswitch.log"; cat "$RUN/vswitch.log"; exit 1; }

kernel=$(ls "$VM_DIR"/kernel/boot/vmlinuz-* | head -1)
boot() {   # boot ROLE SOCKET MAC
    timeout "$TIMEOUT" qemu-system-x86_64 -nodefaults -display none -no-reboot -m 256M -smp 1 \
        -accel tcg -cpu max -machine q35 \
        -object memory-backend-memfd,id=mem,size=256M,share=on -numa node,memdev=mem \
        -device isa-debug-exit,iobase=0xf4,iosize=0x04 -serial "file:$RUN/serial-$1.log" \
        -chardev "socket,id=c0,path=$2" -netdev "vhost-user,id=n0,chardev=c0$NETDEV" \
        -device "virtio-net-pci,netdev=n0,mac=$3$NIC" \
        -kernel "$kernel" -initrd "$RUN/initrd.cpio.gz" \
        -append "console=ttyS0 quiet panic=-1 rpmd.role=$1" > "$RUN/qemu-$1.log" 2>&1
}
say "booting two guests (TCG; NIC options: ${NIC#,})"
set +e
boot a "$SOCK_A" 52:54:00:00:00:1a &
QA=$!
boot b "$SOCK_B" 52:54:00:00:00:1b &
QB=$!
wait $QA; rc_a=$?
wait $QB; rc_b=$?
QA=""
QB=""
kill -INT "$VS" 2>/dev/null
wait "$VS"; rc_vs=$?
VS=""
set -e
say "guests finished: qemu rc a=$rc_a b=$rc_b (1 = pass); vswitch rc=$rc_vs"

passed=0
failed=0
result() {   # result NAME ok|FAIL
    echo "$2 $1"
    if [ "$2" = ok ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}
for r in a b; do
    tr -d '\r' < "$RUN/serial-$r.log" > "$RUN/serial-$r.txt"
    grep -a '^@@RPMD' "$RUN/serial-$r.txt" | sed "s/^/guest $r: /" || true
    for c in reach ping stream peer-done; do
        if grep -aq "^@@RPMD check $c ok" "$RUN/serial-$r.txt"; then
            result "guest $r: $c" ok
        else
            result "guest $r: $c" FAIL
        fi
    done
    [ -s "$RUN/qemu-$r.log" ] && sed "s/^/qemu $r: /" "$RUN/qemu-$r.log" | head -10
done
[ $rc_a -eq 1 ] && [ $rc_b -eq 1 ] && result "both guests exit passing" ok || result "both guests exit passing" FAIL
[ $rc_vs -eq 0 ] && result "vswitch exits cleanly" ok || result "vswitch exits cleanly" FAIL
sed 's/^/vswitch: /' "$RUN/vswitch.log" | grep -v '^vswitch: \[' | tail -12
if grep -q ' 2 addresses learned' "$RUN/vswitch.log"; then
    result "vswitch learned both stations" ok
else
    result "vswitch learned both stations" FAIL
fi
# Each port forwarded at least the file's worth of frames (1448-byte
# segments) to the other.
min=$((DATA_KB * 1024 / 1448))
for p in 0 1; do
    tx=$(sed -n "s/^  port $p (.*): rx [0-9]* tx \([0-9]*\) .*/\1/p" "$RUN/vswitch.log")
    if [ "${tx:-0}" -ge "$min" ]; then
        result "vswitch port $p sent $tx frames (>= $min)" ok
    else
        result "vswitch port $p sent ${tx:-no} frames (>= $min)" FAIL
    fi
done
# Guest A's partial checksums came in kept partial (port 0, rx) and
# were completed into guest B (port 1, tx).
xstat() {   # xstat PORT NAME
    sed -n "/^  port $1 /,/xstats:/p" "$RUN/vswitch.log" | tr ' ' '\n' | sed -n "s/^$2=//p"
}
for c in "0 rx_q0_csum_partial" "1 tx_q0_csum_completed"; do
    set -- $c
    n=$(xstat "$1" "$2")
    if [ "${n:-0}" -ge "$min" ]; then
        result "port $1 $2 = $n (>= $min)" ok
    else
        result "port $1 $2 = ${n:-0} (>= $min)" FAIL
    fi
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
