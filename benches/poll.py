#!/usr/bin/env python3
"""compare.sh poll: what each run-loop mode costs and what latency it buys.

The IRQ-suspension table (Linux 6.13) redone on rpmd: rr's server and
client in separate processes on separate CPUs, the client's virtio-user
port attached to the server's vhost-user port (rpmd's backend, with no
busy loop of its own, so the lcore's mode alone decides; the server
wakes on the client's kicks when it sleeps).

    benches/poll.py [--runs N] [--seconds S] [--out DIR]

Offered load: idle, 10 ... 80 % of the closed-loop maximum (the lowest of
runs+2 processes: a process runs in one of two modes) as an open loop
(Poisson arrivals, latency from each request's scheduled time), and 100 %
as the closed loop itself. Modes, interleaved in every round: spin,
interrupt, fixed 50 us (the old default: --spin-us 50 --yield off) and
adaptive (the default). The server's CPU is its lcore thread's own CPU
time over the client's run (/proc/PID/task/TID/schedstat), cycles per
transaction at the TSC's rate. Each row is the median of N runs, with the
spread of the key figures. The idle row: a client attached that
sends one request a second (the server's CPU over that time, and those
requests' p99: the first request after a second of silence). Then
l2fwd's embedded topology under the default and --poll spin, and rr
through the vswitch app with the client and the switch sharing a CPU,
under the default, the old default (a fixed 50 us spin, no yield) and
the yield off.
The same at 20 % and 100 % over AF_XDP on a veth pair (the kernel's
path: each end's XDP socket, the server sleeping on its socket's poll),
for the default and full spin.
Ends with RESULT lines (see the issue's definitions) and a PNG of p99
against server CPU per mode.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

RR = "target/release/rr"
VSWITCH = "target/release/vswitch"
L2FWD = "target/release/l2fwd"
MODES = {
    "spin": ["--poll", "spin"],
    "interrupt": ["--poll", "interrupt"],
    "fixed50": ["--poll", "adaptive", "--spin-us", "50", "--yield", "off"],
    "adaptive": ["--poll", "adaptive"],
}
LOADS = [10, 20, 40, 60, 80, 100]
# The AF_XDP link: a veth pair made for the run, the server on its first
# end, the client on its second.
VETH = ("rpmdpv0", "rpmdpv1")


def vhost_link(sock):
    """(server device, client device, a path that exists once the server
    listens) for the vhost-user link on `sock`."""
    return f"vhost-user:{sock}", f"virtio-user:{sock}", sock


AFXDP_LINK = (f"af_xdp:{VETH[0]}", f"af_xdp:{VETH[1]}", None)


def tsc_hz():
    """The TSC's rate as the kernel calibrated it, else the nominal MHz."""
    try:
        out = subprocess.run(["dmesg"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if "tsc: Refined TSC clocksource calibration" in line or "tsc: Detected" in line:
                mhz = float(line.split(":")[-1].split("MHz")[0].split()[-1])
                return mhz * 1e6
    except (OSError, ValueError, IndexError):
        pass
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("cpu MHz"):
                return float(line.split(":")[1]) * 1e6
    return 1e9


def lcore_cpu_ns(pid):
    """CPU ns of the process's lcore thread (named lcore<N>)."""
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            with open(f"{base}/{tid}/comm") as f:
                if not f.read().startswith("lcore"):
                    continue
            with open(f"{base}/{tid}/schedstat") as f:
                return int(f.read().split()[0])
        except OSError:
            continue
    return None


def start_server(link, mode):
    dev, _, ready = link
    args = [RR, "--role", "server", "--dev", dev, "-l", "0",
            "--no-telemetry", "--duration", "600"] + MODES[mode]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(200):
        if ready is None or os.path.exists(ready):
            break
        if p.poll() is not None:
            sys.exit(f"poll.py: the server exited: {p.stderr.read().decode()}")
        time.sleep(0.02)
    # Its lcore thread exists once the socket does.
    for _ in range(100):
        if lcore_cpu_ns(p.pid) is not None:
            return p
        time.sleep(0.01)
    return p


def stop(p):
    p.send_signal(2)
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def client(link, secs, rate=None, arrivals="poisson", warmup=0.3):
    args = [RR, "--role", "client", "--dev", link[1], "-l", "1", "--poll", "spin",
            "--no-bound", "--no-telemetry", "--json", "--duration", str(secs), "--warmup", str(warmup)]
    if rate is not None:
        args += ["--rate", str(rate), "--arrivals", arrivals]
    out = subprocess.run(args, capture_output=True, text=True, timeout=secs + 60)
    for line in out.stdout.splitlines():
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if v.get("type") == "summary":
            return v
    sys.exit(f"poll.py: the client gave no summary: {out.stderr}")


def one_run(mode, load, rate, secs, hz, n, afxdp=False):
    """One row's run: server in `mode`, the client at `rate` (None: the
    closed loop), over vhost-user or (`afxdp`) AF_XDP on the veth pair.
    Returns the row's figures."""
    sock = f"/tmp/rpmd-poll-{os.getpid()}-{n}.sock"
    link = AFXDP_LINK if afxdp else vhost_link(sock)
    srv = start_server(link, mode)
    try:
        c0 = lcore_cpu_ns(srv.pid)
        t0 = time.monotonic()
        s = client(link, secs, rate)
        wall = time.monotonic() - t0
        c1 = lcore_cpu_ns(srv.pid)
    finally:
        stop(srv)
        if os.path.exists(sock):
            os.unlink(sock)
    cpu_ns = (c1 or 0) - (c0 or 0)
    # Every transaction of the run (the warm-up's too) against the
    # server's CPU over the whole client run.
    txns = max(s["transactions"] * secs / max(s["seconds"], 1e-9), 1)
    return {
        "mode": mode, "load": load, "offered": rate, "tps": s["tps"],
        "p50": s["p50_ns"] / 1e3, "p99": s["p99_ns"] / 1e3, "p999": s["p999_ns"] / 1e3,
        "lost": s["lost"], "cpu": 100.0 * cpu_ns / 1e9 / wall,
        "cycles": cpu_ns * hz / 1e9 / txns,
    }


def idle_and_wake(mode, n, samples):
    """A client attached but nearly silent: one request a second (a fixed
    open loop). The server's CPU over that time (the idle row: its lcore
    waits on the client's kicks), and the p99 (with few samples, the
    worst) of those requests, each after a second of silence."""
    sock = f"/tmp/rpmd-poll-{os.getpid()}-idle{n}.sock"
    link = vhost_link(sock)
    srv = start_server(link, mode)
    try:
        c0, t0 = lcore_cpu_ns(srv.pid), time.monotonic()
        s = client(link, samples + 0.5, rate=1.0, arrivals="fixed", warmup=0.5)
        c1, t1 = lcore_cpu_ns(srv.pid), time.monotonic()
    finally:
        stop(srv)
    return 100.0 * ((c1 or 0) - (c0 or 0)) / 1e9 / (t1 - t0), s["p99_ns"] / 1e3


def shared_cpu_tps(opts, secs, n):
    """rr through the vswitch app, the client sharing CPU 1 with the
    switch (the server on CPU 0): every process runs `opts`. What a user
    meets when lcores of two programs share a CPU."""
    a, b = (f"/tmp/rpmd-poll-{os.getpid()}-sw{n}-{x}.sock" for x in "ab")
    sw = subprocess.Popen([VSWITCH, "-l", "1", "--no-telemetry", "--period", "3600",
                           "--dev", f"vhost-user:{a}", "--dev", f"vhost-user:{b}"] + opts,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        if os.path.exists(a) and os.path.exists(b):
            break
        time.sleep(0.02)
    srv = subprocess.Popen([RR, "--role", "server", "--dev", f"virtio-user:{b}", "-l", "0",
                            "--no-telemetry", "--duration", "600"] + opts,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        out = subprocess.run([RR, "--role", "client", "--dev", f"virtio-user:{a}", "-l", "1",
                              "--no-telemetry", "--no-bound", "--json", "--duration", str(secs)] + opts,
                             capture_output=True, text=True, timeout=secs + 60)
    finally:
        stop(srv)
        stop(sw)
        for x in (a, b):
            if os.path.exists(x):
                os.unlink(x)
    for line in out.stdout.splitlines():
        v = json.loads(line)
        if v.get("type") == "summary":
            return v["tps"]
    sys.exit(f"poll.py: the switched client gave no summary: {out.stderr}")


def l2fwd_mpps(mode, secs):
    out = subprocess.run([L2FWD, "--duration", str(secs), "--json", "--no-telemetry", "--poll", mode],
                         capture_output=True, text=True, timeout=secs + 60)
    for line in out.stdout.splitlines():
        v = json.loads(line)
        if v.get("type") == "summary":
            return v["mpps"]
    sys.exit(f"poll.py: l2fwd gave no summary: {out.stderr}")


def afxdp_rows(runs, secs, hz, n):
    """The default and full spin at 20 % and 100 % over AF_XDP on a veth
    pair made for it (and removed): {(mode, load): [row, ...]}, or None
    where the machine cannot make one."""
    made = subprocess.run(["ip", "link", "add", VETH[0], "type", "veth", "peer", "name", VETH[1]],
                          capture_output=True).returncode == 0
    if not made:
        print("AF_XDP link: no veth pair here (needs root and iproute2); skipped")
        return None
    try:
        for v in VETH:
            subprocess.run(["ip", "link", "set", v, "up"], check=True)
        peaks = [one_run("spin", 100, None, secs, hz, n + i, afxdp=True)["tps"] for i in range(runs)]
        peak = min(peaks)
        print(f"AF_XDP closed-loop maximum (spin): {peak:.0f} transactions/s, the lowest of {spread(peaks)}")
        rows = {}
        for r in range(runs):
            for load in (20, 100):
                rate = None if load == 100 else peak * load / 100
                order = ["spin", "adaptive"] if r % 2 == 0 else ["adaptive", "spin"]
                for mode in order:
                    n += 1
                    rows.setdefault((mode, load), []).append(
                        one_run(mode, load, rate, secs, hz, n, afxdp=True))
        return rows
    finally:
        subprocess.run(["ip", "link", "del", VETH[0]], capture_output=True)


def med(xs):
    return statistics.median(xs)


def spread(xs):
    return f"{min(xs):.3g}-{max(xs):.3g}"


def main():
    # A TERM (a timeout, pkill) unwinds like Ctrl-C, so every server and
    # switch started is stopped in its `finally`.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--out", default="target/compare")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    hz = tsc_hz()
    n = 0
    # The closed-loop maximum, under full spin.
    # The loads are shares of the lowest closed-loop maximum of several
    # processes: a process runs in one of two modes (0.9 M/s or 3.5 M/s
    # on the AMD guest: the backend's slow mode, issue 52), and a load
    # above the slow mode's capacity would measure a growing queue.
    peaks = []
    for _ in range(a.runs + 2):
        n += 1
        peaks.append(one_run("spin", 100, None, a.seconds, hz, n)["tps"])
    peak = min(peaks)
    print(f"closed-loop maximum (spin, one session): {peak:.0f} transactions/s, the lowest of {spread(peaks)}")
    rows = {}
    for r in range(a.runs):
        for load in LOADS:
            rate = None if load == 100 else peak * load / 100
            order = list(MODES)
            order = order[r % len(order):] + order[:r % len(order)]
            for mode in order:
                n += 1
                rows.setdefault((mode, load), []).append(one_run(mode, load, rate, a.seconds, hz, n))
    idle = {m: [] for m in MODES}
    wakes = {m: [] for m in MODES}
    for _ in range(max(1, a.runs // 2)):
        for m in MODES:
            n += 1
            cpu, p99 = idle_and_wake(m, n, 4)
            idle[m].append(cpu)
            wakes[m].append(p99)
    wake = {m: med(v) for m, v in wakes.items()}
    shared = {"default": [], "old": [], "off": []}
    shared_opts = {"default": [], "old": ["--spin-us", "50", "--yield", "off"], "off": ["--yield", "off"]}
    for _ in range(a.runs):
        for k, o in shared_opts.items():
            n += 1
            shared[k].append(shared_cpu_tps(o, a.seconds, n))
    l2 = {"adaptive": [], "spin": []}
    for _ in range(a.runs):
        for m in l2:
            l2[m].append(l2fwd_mpps(m, 3))
    xdp = afxdp_rows(a.runs, a.seconds, hz, n + 1000)

    csv = open(f"{a.out}/poll.csv", "w")
    csv.write("mode,load,tps,p50_us,p99_us,p999_us,server_cpu_pct,cycles_per_txn\n")
    print(f"\n{'mode':<10} {'load':>5} {'trans/s':>9} {'p50 us':>8} {'p99 us':>8} {'p99.9 us':>9} "
          f"{'srv CPU%':>9} {'cyc/txn':>9}  spread (p99; CPU%)")
    for mode in MODES:
        print(f"{mode:<10} {'idle':>5} {0:>9} {'-':>8} {'-':>8} {'-':>9} {med(idle[mode]):>9.1f} {'-':>9}  {spread(idle[mode])}")
        for load in LOADS:
            rs = rows[(mode, load)]
            m = {k: med([x[k] for x in rs]) for k in ("tps", "p50", "p99", "p999", "cpu", "cycles")}
            print(f"{mode:<10} {load:>4}% {m['tps']:>9.0f} {m['p50']:>8.1f} {m['p99']:>8.1f} {m['p999']:>9.1f} "
                  f"{m['cpu']:>9.1f} {m['cycles']:>9.0f}  {spread([x['p99'] for x in rs])}; {spread([x['cpu'] for x in rs])}")
            csv.write(f"{mode},{load},{m['tps']:.0f},{m['p50']:.2f},{m['p99']:.2f},{m['p999']:.2f},{m['cpu']:.2f},{m['cycles']:.0f}\n")
    csv.close()
    print("\nfirst request after a second of silence, p99 of 4 (median over invocations): " +
          ", ".join(f"{m} {wake[m]:.1f} us" for m in MODES))
    print(f"l2fwd embedded Mpps: adaptive {spread(l2['adaptive'])}, spin {spread(l2['spin'])}")
    print("rr through vswitch, client and switch sharing CPU 1, trans/s: " +
          ", ".join(f"{k} {spread(v)}" for k, v in shared.items()) +
          " (old: the defaults before --poll, a fixed 50 us spin with the yield off)")

    def m(mode, load, k):
        return med([x[k] for x in rows[(mode, load)]])
    cost20 = m("adaptive", 20, "cycles") / m("adaptive", 100, "cycles")
    p99_20 = m("adaptive", 20, "p99") / m("spin", 20, "p99")
    peak_ratio = m("adaptive", 100, "tps") / m("spin", 100, "tps")
    wake_us = wake["adaptive"] - m("adaptive", 20, "p99")
    l2_ratio = med(l2["adaptive"]) / med(l2["spin"])
    print(f"RESULT poll cost20={cost20:.3f} p99_20={p99_20:.3f} peak={peak_ratio:.3f} "
          f"idle_cpu={med(idle['adaptive']):.2f} wake_us={wake_us:.1f}")
    print(f"RESULT poll_l2fwd ratio={l2_ratio:.3f}")
    if xdp is not None:
        def x(mode, load, k):
            return med([r[k] for r in xdp[(mode, load)]])
        print("\nAF_XDP on a veth pair:")
        for (mode, load) in sorted(xdp):
            print(f"  {mode:<10} {load:>4}% {x(mode, load, 'tps'):>9.0f} trans/s, p50 {x(mode, load, 'p50'):.1f} us, "
                  f"p99 {x(mode, load, 'p99'):.1f} us, server CPU {x(mode, load, 'cpu'):.1f} %, "
                  f"{x(mode, load, 'cycles'):.0f} cycles a transaction; p99 {spread([r['p99'] for r in xdp[(mode, load)]])}")
        print(f"RESULT poll_afxdp cost20={x('adaptive', 20, 'cycles') / x('adaptive', 100, 'cycles'):.3f} "
              f"p99_20={x('adaptive', 20, 'p99') / x('spin', 20, 'p99'):.3f} "
              f"peak={x('adaptive', 100, 'tps') / x('spin', 100, 'tps'):.3f}")
    print(f"RESULT poll_shared gain={med(shared['default']) / med(shared['old']):.3f} "
          f"(default / the old default's trans/s, two programs' lcores on one CPU)")

    plot = (f"set terminal png size 900,560; set output '{a.out}/poll.png'; set datafile separator ','; "
            "set xlabel 'server CPU %'; set ylabel 'p99 latency (us)'; set logscale y; set key outside right; "
            "set title 'rr over vhost-user: p99 against server CPU, loads 10-100 %'; plot " +
            ", ".join(f"'< grep ^{mo}, {a.out}/poll.csv' using 7:5 with linespoints title '{mo}'" for mo in MODES))
    if subprocess.run(["gnuplot", "-e", plot]).returncode == 0:
        print(f"plot: {a.out}/poll.png")


if __name__ == "__main__":
    main()
