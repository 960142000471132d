#!/usr/bin/env bash
# Sanitizers on the tests that exercise rpmd's unsafe code under real
# concurrency and real peers (nightly):
#   tsan   ThreadSanitizer on the ring's multi-threaded stress tests and
#          the mempool's cross-thread tests (std rebuilt with it);
#   asan   AddressSanitizer on the virtio-user tests against DPDK testpmd
#          (root, dpdk-dev) and the hostile vhost-user backend.
#
#   scripts/sanitizers.sh [tsan|asan ...]      (default: both)
#
# Ends with `RESULT sanitizers ok`; any report fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
target=x86_64-unknown-linux-gnu
which=("$@")
[ ${#which[@]} -eq 0 ] && which=(tsan asan)
if ! rustup +nightly component list --installed 2>/dev/null | grep -q rust-src; then
    rustup component add --toolchain nightly rust-src
fi
for s in "${which[@]}"; do
    case "$s" in
        tsan)
            echo "== ThreadSanitizer: ring stress (release) and mempool tests"
            export TSAN_OPTIONS="halt_on_error=1 ${TSAN_OPTIONS:-}"
            RUSTFLAGS="-Zsanitizer=thread" CARGO_TARGET_DIR=target/tsan \
                cargo +nightly test -q -Zbuild-std --target $target --release -p rpmd-ring --test stress -- --test-threads=1
            RUSTFLAGS="-Zsanitizer=thread" CARGO_TARGET_DIR=target/tsan \
                cargo +nightly test -q -Zbuild-std --target $target -p rpmd-pmd --test mempool
            ;;
        asan)
            echo "== AddressSanitizer: virtio-user against testpmd and the hostile backend"
            # Leak reports off: a pool dropped while mbufs are out keeps its
            # memory on purpose (pmd::mbuf::pool), and the tests make such pools.
            export ASAN_OPTIONS="detect_leaks=0 ${ASAN_OPTIONS:-}"
            RUSTFLAGS="-Zsanitizer=address" CARGO_TARGET_DIR=target/asan \
                cargo +nightly test -q -Zbuild-std --target $target -p rpmd-virtio --test testpmd --test hostile_backend
            ;;
        *) echo "sanitizers.sh: unknown sanitizer '$s' (tsan, asan)" >&2; exit 2 ;;
    esac
done
echo "RESULT sanitizers ok"
