#!/usr/bin/env bash
# Runs every fuzz target (fuzz/, cargo-fuzz with libFuzzer, nightly) for
# S seconds each, from its seed corpus (fuzz/seeds/TARGET, in the repo)
# and a working corpus under target/fuzz-corpus/ (kept between runs, not
# in the repo). A crash leaves its input in fuzz/artifacts/TARGET/; make
# it a regression test in the crate it found the bug in.
#
#   scripts/fuzz.sh [--seconds S] [TARGET ...]      (default 30 s, all)
#
# Ends with `RESULT fuzz targets=<n> crashes=<m>`; exits 1 on a crash.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=30
want=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) secs=${2:?--seconds needs a number}; shift 2 ;;
        -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
        -*) echo "fuzz.sh: unknown option $1 (accepted: --seconds S)" >&2; exit 2 ;;
        *) want+=("$1"); shift ;;
    esac
done
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz.sh: needs the nightly toolchain (rustup toolchain install nightly)" >&2
    exit 1
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz (crates.io)"
    cargo +nightly install cargo-fuzz --locked -q || { echo "fuzz.sh: cannot install cargo-fuzz" >&2; exit 1; }
fi
export CARGO_TARGET_DIR="$PWD/target/fuzz-build"
mkdir -p target
cd fuzz
targets=$(cargo +nightly fuzz list)
[ ${#want[@]} -gt 0 ] && targets="${want[*]}"
echo "== building the fuzz targets (nightly, AddressSanitizer)"
cargo +nightly fuzz build -O --debug-assertions >../target/fuzz-build.log 2>&1 || {
    tail -30 ../target/fuzz-build.log; echo "fuzz.sh: the targets do not build" >&2; exit 1; }
n=0 crashes=0
for t in $targets; do
    n=$((n + 1))
    work="../target/fuzz-corpus/$t"
    mkdir -p "$work" "seeds/$t" "artifacts/$t"
    log="../target/fuzz-$t.log"
    if cargo +nightly fuzz run -O --debug-assertions "$t" "$work" "seeds/$t" -- \
        -max_total_time="$secs" -print_final_stats=1 -close_fd_mask=1 >"$log" 2>&1; then
        execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
        cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
        echo "$t: ${execs:-?} executions in $secs s, coverage ${cov:-?} edges, corpus $(ls "$work" | wc -l) inputs"
    else
        crashes=$((crashes + 1))
        echo "$t: CRASH (log $log; input in fuzz/artifacts/$t/)"
        grep -m5 -E 'panicked|ERROR: AddressSanitizer|SUMMARY' "$log" | sed 's/^/  /'
    fi
done
echo "RESULT fuzz targets=$n crashes=$crashes"
[ "$crashes" -eq 0 ]
