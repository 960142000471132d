#!/usr/bin/env bash
# capture: what --pcap costs l2fwd. l2fwd on its embedded topology (two
# ring ports, the generator and sink on the second lcore), run after run,
# interleaved: without capture (twice per round: the A/A that shows the
# noise), capturing port 0's received frames, and capturing both ports
# both ways into one file. Medians of Mpps forwarded; frames the capture
# could not keep up with (counted, never waited for) as a share of those
# it saw. Ends with `RESULT capture cost_rx=<x> cost_all=<x>` (Mpps
# without ÷ with; 1.0 = free).
#
#   benches/capture.sh [RUNS] [SECONDS] [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5} secs=${2:-4} out=${3:-target/compare}
mkdir -p "$out"
l2fwd=${L2FWD:-target/release/l2fwd}
[ -x "$l2fwd" ] || cargo build --release -q -p rpmd-apps --bin l2fwd
file="$out/capture-bench.pcapng"

# One run: "mpps written dropped" from l2fwd's JSON summary.
run() {
    "$l2fwd" --duration "$secs" --json --no-telemetry "$@" 2>/dev/null | tail -1 | python3 -c '
import json, sys
s = json.loads(sys.stdin.read())
w = sum(c["written"] for c in s["captures"]); d = sum(c["dropped"] for c in s["captures"])
print("%.3f %d %d" % (s["mpps"], w, d))'
    rm -f "$file"
}
med() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -a off off2 rx all rxmiss allmiss
for i in $(seq "$runs"); do
    set -- $(run); off+=("$1")
    set -- $(run --pcap "0:rx=$file"); rx+=("$1"); rxmiss+=("$(awk -v w="$2" -v d="$3" 'BEGIN {print (w + d) ? d / (w + d) : 0}')")
    set -- $(run); off2+=("$1")
    set -- $(run --pcap "0=$file" --pcap "1=$file"); all+=("$1"); allmiss+=("$(awk -v w="$2" -v d="$3" 'BEGIN {print (w + d) ? d / (w + d) : 0}')")
    echo "round $i: off ${off[-1]} / ${off2[-1]} Mpps, capture port 0 rx ${rx[-1]} Mpps (${rxmiss[-1]} not captured), all ${all[-1]} Mpps (${allmiss[-1]} not captured)"
done
m_off=$(printf '%s\n' "${off[@]}" "${off2[@]}" | med)
m_rx=$(printf '%s\n' "${rx[@]}" | med)
m_all=$(printf '%s\n' "${all[@]}" | med)
aa=$(paste <(printf '%s\n' "${off[@]}") <(printf '%s\n' "${off2[@]}") | awk '{r = $1 / $2; if (NR == 1 || r < lo) lo = r; if (NR == 1 || r > hi) hi = r} END {printf "%.3f-%.3f", lo, hi}')
printf '%-34s %10s %14s\n' "l2fwd, embedded topology" "Mpps" "not captured"
printf '%-34s %10s %14s\n' "no capture (A/A ratios $aa)" "$m_off" "-"
printf '%-34s %10s %14s\n' "--pcap 0:rx" "$m_rx" "$(printf '%s\n' "${rxmiss[@]}" | med)"
printf '%-34s %10s %14s\n' "--pcap both ports, both ways" "$m_all" "$(printf '%s\n' "${allmiss[@]}" | med)"
printf 'row,Mpps\nno capture,%s\ncapture port 0 rx,%s\ncapture all,%s\n' "$m_off" "$m_rx" "$m_all" > "$out/capture.csv"
echo "RESULT capture cost_rx=$(awk -v a="$m_off" -v b="$m_rx" 'BEGIN {printf "%.3f", a / b}') cost_all=$(awk -v a="$m_off" -v b="$m_all" 'BEGIN {printf "%.3f", a / b}')"
