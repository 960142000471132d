#!/usr/bin/env python3
"""Runs QEMU monitor commands the guest asks for on its serial console.

The guest writes "@@RPMD monitor CMD" (for instance "set_link n7 off", to
take a NIC's link down as a pulled cable would); this follows the serial
log and sends CMD to QEMU's human monitor on a UNIX socket, logging each
command and QEMU's answer. Exits after --timeout seconds.

usage: monitor.py --timeout S SERIAL_LOG MONITOR_SOCKET
"""
import argparse
import os
import socket
import sys
import time

TAG = "@@RPMD monitor "


def run(sock_path, cmd):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect(sock_path)
    s.sendall((cmd + "\n").encode())
    out = b""
    try:
        while b"(qemu)" not in out.split(cmd.encode(), 1)[-1]:
            chunk = s.recv(4096)
            if not chunk:
                break
            out += chunk
    except socket.timeout:
        pass
    s.close()
    return out.decode(errors="replace").replace("\r", "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("serial")
    ap.add_argument("monitor")
    a = ap.parse_args()
    end = time.time() + a.timeout
    pos = 0
    pending = b""
    while time.time() < end:
        try:
            with open(a.serial, "rb") as f:
                f.seek(pos)
                data = f.read()
                pos += len(data)
        except FileNotFoundError:
            data = b""
        pending += data
        *lines, pending = pending.split(b"\n")
        for line in lines:
            text = line.decode(errors="replace").replace("\r", "")
            i = text.find(TAG)
            if i < 0:
                continue
            cmd = text[i + len(TAG):].strip()
            try:
                answer = run(a.monitor, cmd)
                print(f"{cmd!r}: {answer.strip()[-200:]!r}", flush=True)
            except OSError as e:
                print(f"{cmd!r}: monitor unreachable: {e}", flush=True)
        time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
