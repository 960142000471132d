#!/usr/bin/env bash
# Soak with faults: sequence-numbered frames from rpmd's vhost-user
# backends through l2fwd (another process, its two virtio-user ports) and
# back, while backend A restarts every few seconds, backend B writes a
# wrong used entry now and then and l2fwd's port on B sends a descriptor
# outside its memory table now and then (target/release/soak; see its
# docs). With `--via testpmd`, l2fwd's second port reaches B through DPDK's
# testpmd (net_vhost to net_virtio_user), which is SIGKILLed and started
# again every few seconds instead.
#
#   benches/soak.sh [--frames N (1e8)] [--restart-secs S (3)]
#                   [--fault-every N (1e6; 0: off)]
#                   [--bad-desc-every N (1e6; 0: off)]
#                   [--via testpmd] [--max-secs S (900)]
#
# Ends with `RESULT soak frames=<n> lost_mbufs=<m> corrupt=<c> ...` and
# exits non-zero unless every mbuf came back, no frame was corrupt,
# duplicated or reordered, both processes' anonymous memory stayed flat
# after the warm-up and l2fwd exited cleanly. The test command runs a
# short one (10^7 frames).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --release -p rpmd-apps --bin l2fwd -p rpmd-benches --bin soak
# shellcheck source=../scripts/hugepages.sh
. scripts/hugepages.sh
# Both processes' pools and rings (4 KiB pages without; slower, not wrong).
huge_setup 256 || echo "soak: running on 4 KiB pages" >&2
target/release/soak --l2fwd target/release/l2fwd "$@"
