#!/bin/busybox sh
# /init of the test guest (PID 1): mount, load the modules, run the tests,
# report through isa-debug-exit. The guest writes one byte to I/O port 0xf4
# through /dev/port; QEMU then exits with (byte << 1) | 1: 1 = pass, 3 = fail.
# A panic or reboot exits 0 and a hang hits the host's timeout, so neither
# can pass by accident.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /lib/modules/load-order); do
    insmod /lib/modules/$m.ko || echo "@@RPMD insmod $m FAILED"
done
exit_qemu() {
    printf "\\$(printf %03o "$1")" | dd of=/dev/port bs=1 seek=244 count=1 conv=notrunc 2>/dev/null
}
sh /rpmd/guest-test.sh
rc=$?
echo "@@RPMD guest-test rc=$rc uptime=$(cut -d' ' -f1 /proc/uptime)s"
if [ $rc -eq 0 ]; then exit_qemu 0; else exit_qemu 1; fi
poweroff -f
