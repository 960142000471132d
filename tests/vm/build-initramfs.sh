#!/usr/bin/env bash
# Builds the guest's initramfs: static busybox, the kernel modules VFIO and
# virtio-net need (and igb and 8021q, listed in late-order for the test to
# load) (dependencies read from each module's `depends=` field,
# since Debian's kernel package ships no modules.dep), our /init, and the
# payload files under /rpmd.
#   usage: build-initramfs.sh OUT.cpio.gz PAYLOAD...
# Env: GUEST_TEST, the script /init runs (default: guest-test.sh here).
set -euo pipefail
VM_DIR=${VM_DIR:-/var/tmp/rpmd-vm}
OUT=${1:?usage: $0 OUT.cpio.gz PAYLOAD...}; shift
HERE=$(cd "$(dirname "$0")" && pwd)
KVER=$(ls "$VM_DIR/kernel/lib/modules" | head -1)
MODDIR="$VM_DIR/kernel/lib/modules/$KVER"
WANT="virtio_pci virtio_net vfio vfio_iommu_type1 vfio-pci"
# Loaded by the test, not at boot: Linux's igb driver (the peer of rpmd's
# on the second 82576, which must stay unbound until then) and VLANs.
LATE="igb 8021q"

declare -A KO SEEN
while IFS= read -r f; do
    b=${f##*/}; b=${b%%.ko*}
    KO[$b]=$f; KO[${b//-/_}]=$f
done < <(find "$MODDIR/kernel" -name '*.ko*')

plain() {   # busybox insmod wants an uncompressed module
    case "$1" in
        *.ko.xz) xz -dc "$1" ;;
        *.ko.zst) zstd -qdc "$1" ;;
        *.ko.gz) gzip -dc "$1" ;;
        *) cat "$1" ;;
    esac
}
ORDER=()
visit() {
    local m=$1 f d
    [ -n "${SEEN[$m]:-}" ] && return
    SEEN[$m]=1
    f=${KO[$m]:-}
    if [ -z "$f" ]; then
        grep -q "/${m//_/[-_]}.ko" "$MODDIR/modules.builtin" && return   # built in
        echo "build-initramfs: module $m not found" >&2; exit 1
    fi
    for d in $(plain "$f" | strings -a | sed -n 's/^depends=//p' | tr ',' ' '); do visit "$d"; done
    ORDER+=("$m")
}
for m in $WANT $LATE; do visit "$m"; done

ROOT=$(mktemp -d)
trap 'rm -rf "$ROOT"' EXIT
mkdir -p "$ROOT"/{bin,dev,proc,sys,tmp,rpmd,lib/modules}
cp "$VM_DIR/busybox/bin/busybox" "$ROOT/bin/busybox"
for m in "${ORDER[@]}"; do plain "${KO[$m]}" > "$ROOT/lib/modules/$m.ko"; done
for m in "${ORDER[@]}"; do
    case " $LATE " in *" $m "*) echo "$m" ;; *) echo "$m" >&3 ;; esac
done > "$ROOT/lib/modules/late-order" 3> "$ROOT/lib/modules/load-order"
for p in "$@"; do cp "$p" "$ROOT/rpmd/"; done
# DPDK's testpmd with the igb PMD, the peer of rpmd's igb driver in the
# guest: the binary, the two plugins it loads (-d), and every library they
# load (the host's glibc and loader included; the guest runs it through
# that loader).
if TESTPMD=$(command -v dpdk-testpmd); then
    D="$ROOT/rpmd/dpdk"
    mkdir -p "$D/lib" "$D/pmds"
    PMDS=$(ls -d /usr/lib/x86_64-linux-gnu/dpdk/pmds-* | head -1)
    cp "$TESTPMD" "$D/"
    for m in mempool_ring net_e1000; do cp -L "$PMDS/librte_$m.so" "$D/pmds/"; done
    for f in "$TESTPMD" "$D"/pmds/*.so; do
        ldd "$f" | awk '/=> \// {print $3} /^[[:space:]]*\/.*ld-linux/ {print $1}'
    done | sort -u | while read -r l; do cp -L "$l" "$D/lib/"; done
fi
cp "$HERE/guest-init.sh" "$ROOT/init"
cp "${GUEST_TEST:-$HERE/guest-test.sh}" "$ROOT/rpmd/guest-test.sh"
chmod +x "$ROOT/init" "$ROOT/bin/busybox"
(cd "$ROOT" && find . | cpio -o -H newc --quiet | gzip -1) > "$OUT"
echo "initramfs $OUT ($(du -h "$OUT" | cut -f1)), kernel $KVER, modules: ${ORDER[*]}"
