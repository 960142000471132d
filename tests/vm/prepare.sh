#!/usr/bin/env bash
# What every QEMU guest test needs first: qemu-system-x86 and cpio (apt,
# when missing), then Debian's guest kernel and busybox (fetch-guest.sh).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
if ! command -v qemu-system-x86_64 >/dev/null || ! command -v cpio >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        qemu-system-x86 cpio binutils xz-utils zstd >/dev/null
fi
qemu-system-x86_64 --version | head -1
"$HERE/fetch-guest.sh"
