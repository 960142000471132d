#!/usr/bin/env bash
# rpmd on a real ConnectX-3 (or ConnectX-3 Pro), for users who have one:
# the team has none, and the driver has only run on rpmd's device model.
#
#   scripts/mlx4-card.sh BDF [SECONDS]   # as root; cable port 1 to port 2
#   scripts/mlx4-card.sh --model         # the same steps on the model (no card)
#
# Steps: rpmd-bind --preflight; hugepages; the card bound to vfio-pci
# (its kernel driver, mlx4_core, is put back at exit); then three runs:
# the ports' bring-up (vswitch for 1 s: link, MAC, the card's
# counters), rr between the two ports over the cable (round trips and
# their CPU cost, closed loop, then --poll interrupt), and gen sending
# 64-byte frames out of port 1 (the tx rate; port 2 is not opened, so
# the card drops them). Everything goes to a report file: send it (with
# `lspci -vv -s BDF` and the firmware version `ethtool -i` showed before)
# in an issue, pass or fail.
set -uo pipefail
BIN=${RPMD_BIN:-$(dirname "$0")/../target/release}
if [ "${1:-}" = --model ]; then
    MODEL=1
    DEV1=mlx4-model:card,wire=1
    DEV2=mlx4-model:card,port=2,wire=1
    SECS=${2:-2}
else
    MODEL=0
    BDF=${1:?usage: $0 BDF [SECONDS] | --model}
    DEV1=pci:$BDF,port=1
    DEV2=pci:$BDF,port=2
    SECS=${2:-10}
fi
for b in rpmd-bind vswitch rr gen; do
    [ -x "$BIN/$b" ] || { echo "no $BIN/$b: cargo build --release -p rpmd-apps (or set RPMD_BIN)" >&2; exit 2; }
done
REPORT=${REPORT:-rpmd-mlx4-report-$(date +%Y%m%d-%H%M%S).txt}
: > "$REPORT"
say() { echo "== $*" | tee -a "$REPORT"; }
run() {
    say "$*"
    "$@" >> "$REPORT" 2>&1
    local rc=$?
    echo "-- exit $rc" >> "$REPORT"
    return $rc
}
failed=0
if [ "$MODEL" = 0 ]; then
    run "$BIN/rpmd-bind" --preflight "$BDF"
    old=$(basename "$(readlink "/sys/bus/pci/devices/$BDF/driver" 2>/dev/null)" 2>/dev/null)
    run "$BIN/rpmd-bind" --hugepages 1024 || failed=1
    if [ "$old" != vfio-pci ]; then
        run "$BIN/rpmd-bind" --bind vfio-pci "$BDF" || { say "cannot bind $BDF: see above"; exit 1; }
        # Give the card back to its kernel driver at exit.
        trap '"$BIN/rpmd-bind" --bind "${old:-mlx4_core}" "$BDF" >/dev/null 2>&1' EXIT
    fi
fi
run "$BIN/vswitch" --dev "$DEV1" --dev "$DEV2" --duration 1 --no-telemetry --xstats || failed=1
run "$BIN/rr" --dev "$DEV1" --dev "$DEV2" --duration "$SECS" --no-telemetry --json || failed=1
run "$BIN/rr" --dev "$DEV1" --dev "$DEV2" --duration "$SECS" --no-telemetry --poll interrupt --json || failed=1
run "$BIN/gen" --mode txonly --dev "$DEV1" --size 64 --duration "$SECS" --no-telemetry || failed=1
grep -q "no transaction completed" "$REPORT" && failed=1
say "result: $([ $failed = 0 ] && echo every step ran || echo a step failed) (report: $REPORT)"
exit $failed
