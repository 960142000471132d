# Sourced by the scripts that need 2 MiB hugepages (DPDK's dpdk-test and,
# later, rpmd's DMA memory). Reserves what is missing through sysfs, mounts
# a private hugetlbfs, and undoes both on exit.
#   huge_setup MB   -> sets HUGE_DIR; call huge_cleanup (or rely on the trap)
HUGE_SYSFS=/sys/kernel/mm/hugepages/hugepages-2048kB
HUGE_DIR=${HUGE_DIR:-/mnt/rpmd-huge}
HUGE_ORIG_NR=""
HUGE_MOUNTED=0

huge_setup() {
    local mb=$1 need free nr
    need=$(( (mb + 1) / 2 ))
    if [ ! -d "$HUGE_SYSFS" ]; then
        echo "hugepages: $HUGE_SYSFS missing: this kernel has no 2 MiB hugepages" >&2
        return 1
    fi
    free=$(cat "$HUGE_SYSFS/free_hugepages")
    nr=$(cat "$HUGE_SYSFS/nr_hugepages")
    if [ "$free" -lt "$need" ]; then
        HUGE_ORIG_NR=$nr
        echo $(( nr + need - free )) > "$HUGE_SYSFS/nr_hugepages" 2>/dev/null || true
        free=$(cat "$HUGE_SYSFS/free_hugepages")
        if [ "$free" -lt "$need" ]; then
            echo "hugepages: need $need free 2 MiB pages, have $free;" \
                 "as root: echo $(( nr + need )) > $HUGE_SYSFS/nr_hugepages" >&2
            return 1
        fi
    fi
    mkdir -p "$HUGE_DIR"
    if ! mountpoint -q "$HUGE_DIR"; then
        mount -t hugetlbfs -o pagesize=2M nodev "$HUGE_DIR"
        HUGE_MOUNTED=1
    fi
    trap huge_cleanup EXIT
}

huge_cleanup() {
    if [ "$HUGE_MOUNTED" = 1 ]; then
        rm -f "$HUGE_DIR"/* 2>/dev/null || true
        umount "$HUGE_DIR" 2>/dev/null || true
        HUGE_MOUNTED=0
    fi
    if [ -n "$HUGE_ORIG_NR" ]; then
        echo "$HUGE_ORIG_NR" > "$HUGE_SYSFS/nr_hugepages" 2>/dev/null || true
        HUGE_ORIG_NR=""
    fi
}
