#!/usr/bin/env bash
# rpmd's test command (README "Quick start"; .ci/run runs exactly this).
# Installs what the tests need, then runs every check: format, lints, docs,
# unit and integration tests, mlx4 built with a deliberate defect,
# release-mode stress tests, loom model checks,
# the VFIO test in a QEMU guest with a virtual IOMMU (tests/vm/run.sh), two
# QEMU guests on a vswitch through the vhost-user backend
# (tests/vm/vhost-guest.sh), and
# a one-run smoke of the DPDK comparison (to keep it working; its ratios are
# a benchmark, not asserted here).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

# Tests that cannot run here (no root, no testpmd, no QEMU) record a line
# in this file (rpmd_pmd::testing::missing_peer); under CI=true, or with
# RPMD_REQUIRE_PEERS=1, a missing peer fails instead. The summary at the
# end counts them.
export RPMD_SKIP_LOG="$PWD/target/skipped-tests.txt"
mkdir -p target
: >"$RPMD_SKIP_LOG"
require_peers() { [ "${CI:-}" = true ] || [ "${RPMD_REQUIRE_PEERS:-}" = 1 ]; }
# A suite this script cannot run: a failure when peers are required,
# otherwise a recorded skip.
skip_suite() {
    if require_peers; then
        echo "FAILED: $1: $2 (CI=true or RPMD_REQUIRE_PEERS=1: a missing peer is a failure)" >&2
        exit 1
    fi
    echo "SKIPPED $1: $2" >&2
    echo "$1: $2" >>"$RPMD_SKIP_LOG"
}

step "installing test dependencies (Debian: dpdk-dev, qemu-system-x86 10 from bookworm-backports, cpio, tshark, gnuplot-nox)"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    # QEMU 10, the generation users run (and the first with an igb
    # model), is in Debian 12's backports: the suite is added here, as a
    # user's own set-up would, and only QEMU is taken from it.
    if . /etc/os-release && [ "${VERSION_CODENAME:-}" = bookworm ] &&
        ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
        echo "adding the bookworm-backports suite to apt's sources (for QEMU 10)"
        printf '%s\n' "Types: deb" "URIs: http://deb.debian.org/debian" \
            "Suites: bookworm-backports" "Components: main" \
            "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" \
            >/etc/apt/sources.list.d/bookworm-backports.sources
    fi
    apt-get update -q
    apt-get install -y -q dpdk-dev
    qemu_suite=()
    grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/ &&
        qemu_suite=(-t bookworm-backports)
    apt-get install -y -q --no-install-recommends "${qemu_suite[@]}" qemu-system-x86 qemu-utils
    apt-get install -y -q --no-install-recommends cpio binutils xz-utils zstd \
        libxdp1 libbpf1 iputils-ping tshark gnuplot-nox
    # Linux's igb and mlx4 sources, which igb/ and mlx4/tests/linux_defs.rs
    # extract at test time to check the drivers' definitions against.
    apt-get install -y -q --no-install-recommends linux-source
    qemu-system-x86_64 --version | head -1
else
    echo "not root (or no apt-get): no package installs; tests needing them are skipped" >&2
fi
command -v cargo >/dev/null || { echo "cargo not found: install Rust with rustup first" >&2; exit 1; }
rustup component add rustfmt clippy >/dev/null 2>&1 || true

step "cargo fmt --check"
cargo fmt --all --check
step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
step "cargo doc -D warnings"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps -q
step "cargo test (debug)"
cargo test --workspace
step "release-mode stress tests"
cargo test --release -p rpmd-ring --test stress -- --nocapture --test-threads=1
step "mlx4 built with a deliberate defect fails where the real driver passes (mlx4/tests/defects.rs)"
cargo test -p rpmd-mlx4 --features defects --test defects
step "loom model checks"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release -p rpmd-ring --test loom
if [ "$(id -u)" = 0 ] && command -v qemu-system-x86_64 >/dev/null; then
    step "VFIO in a QEMU guest with a virtual IOMMU (tests/vm/run.sh)"
    bash tests/vm/run.sh
    step "two QEMU guests on a vswitch of vhost-user ports (tests/vm/vhost-guest.sh)"
    bash tests/vm/vhost-guest.sh
    step "the same with packed rings (NIC_OPTS=packed=on), then four queue pairs (QUEUES=4, mq=on)"
    NIC_OPTS=packed=on bash tests/vm/vhost-guest.sh
    QUEUES=4 bash tests/vm/vhost-guest.sh
else
    skip_suite "VFIO guest test (tests/vm/run.sh)" "needs root and qemu-system-x86_64"
    skip_suite "vhost-user guest test (tests/vm/vhost-guest.sh)" "needs root and qemu-system-x86_64"
fi
step "main job smoke: l2fwd on its embedded topology for 2 s"
cargo run --release -q -p rpmd-apps --bin l2fwd -- --duration 2
if [ "$(id -u)" = 0 ]; then
    step "egress shaper against Linux HTB on a veth pair, short (shaper_anchor: rpmd's classes within 1 %)"
    cargo build --release -q -p rpmd-benches --bin shaper_anchor
    target/release/shaper_anchor --seconds 3 --runs 1 --check 1
    step "soak with faults, short: 10^7 frames through l2fwd (benches/soak.sh)"
    bash benches/soak.sh --frames 10000000 --restart-secs 1 --fault-every 1000000 --max-secs 300
    step "soak with a SIGKILLed peer, short: frames through l2fwd and testpmd (benches/soak.sh --via testpmd)"
    bash benches/soak.sh --via testpmd --frames 20000000 --restart-secs 2 --max-secs 300
else
    skip_suite "soak (benches/soak.sh)" "needs root (hugepages)"
fi
if command -v dpdk-test >/dev/null && [ "$(id -u)" = 0 ]; then
    step "benchmark smoke: benches/compare.sh ring --runs 1"
    bash benches/compare.sh ring --runs 1
    step "experiment smoke: yield_proc, backlog_port, txlock, yield_signal_cost, mlx4_fwd (short runs, figures not judged)"
    (. scripts/hugepages.sh && huge_setup 256 >/dev/null &&
        target/release/yield_proc --sessions 2 --runs 1 --seconds 0.3 --signals off,runqueue,state &&
        target/release/yield_proc --link vswitch --sessions 2 --runs 1 --seconds 0.3 --signals off,runqueue &&
        target/release/backlog_port --runs 1 --seconds 0.3 &&
        target/release/txlock --runs 1 --seconds 0.3 --enqueuers 2 --cpus 0,1 &&
        target/release/yield_signal_cost | tail -2 &&
        target/release/mlx4_fwd --seconds 0.3 --cpu 1 &&
        target/release/mlx4_fwd --seconds 0.3 --cpu 1 --engine-cpu 0)
else
    skip_suite "benchmark smoke (benches/compare.sh ring)" "needs root and dpdk-test (apt-get install dpdk-dev)"
fi
if cargo +nightly --version >/dev/null 2>&1; then
    step "Miri: the ring's unit and functional tests (the mempool's too: scripts/miri.sh, 12 min)"
    cargo +nightly miri --version >/dev/null 2>&1 || rustup component add --toolchain nightly miri rust-src
    MIRIFLAGS="-Zmiri-disable-isolation" CARGO_TARGET_DIR=target/miri \
        cargo +nightly miri test -q -p rpmd-ring --lib --test functional
    step "fuzzing: every target 10 s (scripts/fuzz.sh)"
    bash scripts/fuzz.sh --seconds 10
else
    skip_suite "fuzzing (scripts/fuzz.sh)" "needs the nightly toolchain (rustup toolchain install nightly)"
fi
skipped=$(wc -l <"$RPMD_SKIP_LOG")
if [ "$skipped" -eq 0 ]; then
    step "all checks passed, none skipped"
else
    step "checks passed, but $skipped skipped:"
    sed 's/^/  /' "$RPMD_SKIP_LOG"
fi
