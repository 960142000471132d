#!/usr/bin/env bash
# Fetches the guest's kernel and busybox from Debian with `apt-get download`
# and unpacks them with `dpkg -x` under $VM_DIR (nothing is installed on the
# host, nothing is committed). Skips what is already there for the same
# package version.
#   $VM_DIR/kernel/boot/vmlinuz-*          Debian's stock kernel
#   $VM_DIR/kernel/lib/modules/<kver>/     its modules (VFIO, virtio)
#   $VM_DIR/busybox/bin/busybox            static busybox
set -euo pipefail
VM_DIR=${VM_DIR:-/var/tmp/rpmd-vm}
mkdir -p "$VM_DIR"
cd "$VM_DIR"
# linux-image-amd64 is a metapackage; its one Depends is the real image.
kpkg() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}'; }
KPKG=$(kpkg)
if [ -z "$KPKG" ]; then
    apt-get update -qq
    KPKG=$(kpkg)
fi
[ -n "$KPKG" ] || { echo "fetch-guest: no linux-image-amd64 package in the apt lists" >&2; exit 1; }
if [ "$(cat kernel/.pkg 2>/dev/null)" != "$KPKG" ]; then
    rm -rf kernel linux-image-*.deb
    apt-get download "$KPKG" 2>&1 | grep -v 'Download is performed unsandboxed' || true
    mkdir -p kernel
    dpkg -x ./"$KPKG"_*.deb kernel
    rm -f ./"$KPKG"_*.deb
    echo "$KPKG" > kernel/.pkg
fi
if [ ! -x busybox/bin/busybox ]; then
    rm -rf busybox busybox-static_*.deb
    apt-get download busybox-static 2>&1 | grep -v 'Download is performed unsandboxed' || true
    mkdir -p busybox
    dpkg -x ./busybox-static_*.deb busybox
    rm -f ./busybox-static_*.deb
fi
echo "guest kernel: $KPKG; busybox: $(busybox/bin/busybox | head -1)"
