#!/usr/bin/env python3
"""The spread of RESULT lines over several invocations of a suite.

Reads a log holding the RESULT lines of N invocations (stdin), groups them
by name and metric (`RESULT yield gain=1.785 (target >= 1.52 ...)`), and
prints for each: the value per invocation, min / median / max, and how
many invocations met the target the line states (`target >= X` or
`target <= X`; a line that says ": met" or "not met" judged itself). Ends with one
`RESULT <name> <metric>=<median>` line per metric, for compare.sh's
summary table.
"""
import re
import statistics
import sys

LINE = re.compile(r"^RESULT (\S+) (\w+)=([-\d.]+|nan|inf)(.*)$")
TARGET = re.compile(r"target (>=|<=) ([\d.]+)")


def met(value, rest):
    # A line that judges itself (a condition beside the bound, or a
    # tolerance from its A/A) says so; its word stands.
    if "not met" in rest:
        return False
    if re.search(r": met\b", rest):
        return True
    t = TARGET.search(rest)
    if not t:
        return None
    bound = float(t.group(2))
    return value >= bound if t.group(1) == ">=" else value <= bound


def main():
    groups = {}
    for line in sys.stdin:
        m = LINE.match(line.strip())
        if not m:
            continue
        name, metric, value, rest = m.groups()
        key = (name, metric)
        g = groups.setdefault(key, {"values": [], "met": [], "target": None})
        v = float(value)
        g["values"].append(v)
        g["met"].append(met(v, rest))
        t = TARGET.search(rest)
        if t:
            g["target"] = f"{t.group(1)} {t.group(2)}"
    if not groups:
        print("spread: no RESULT lines")
        return 1
    print("spread over invocations (each value is one invocation's RESULT):")
    for (name, metric), g in groups.items():
        vals = g["values"]
        lo, med, hi = min(vals), statistics.median(vals), max(vals)
        known = [m for m in g["met"] if m is not None]
        target = (
            f"; target {g['target']} met in {sum(known)} of {len(vals)}"
            if known
            else ""
        )
        each = " ".join(f"{v:.3f}" for v in vals)
        print(
            f"  {name} {metric}: {each}  (min {lo:.3f}, median {med:.3f}, max {hi:.3f}{target})"
        )
    for (name, metric), g in groups.items():
        known = [m for m in g["met"] if m is not None]
        tail = f" ({sum(known)} of {len(known)} met target {g['target']})" if known else ""
        print(f"RESULT {name} {metric}={statistics.median(g['values']):.3f}{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
