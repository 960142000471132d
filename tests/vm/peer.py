#!/usr/bin/env python3
"""Host side of the guest's NICs: one UDP socket per QEMU `-netdev dgram`.

A dgram backend carries one Ethernet frame per datagram, with no header. On
each port given we receive what the guest sends and answer frames of
ethertype 0x88b5 whose payload starts with b"RPMD-VM PING": the reply goes
to the sender's MAC, from 02:00:00:00:00:99, with PING replaced by PONG,
sent to the datagram's source (the netdev's local port). A frame whose
payload starts with b"RPMD-VM ECHO" followed by a MAC address is answered
the same way but to that address (to test the guest's receive filters).

usage: peer.py --timeout SECONDS PORT...
"""
import select
import socket
import sys
import time


def main():
    args = sys.argv[1:]
    timeout = 600.0
    if args[:1] == ["--timeout"]:
        timeout, args = float(args[1]), args[2:]
    socks = []
    for p in args:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        # The guest keeps up to 128 frames in flight; the default receive
        # buffer (~208 KiB of truesize) overflows while this logs under a
        # loaded TCG guest, and the kernel drops the datagram silently.
        try:
            s.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE (root)
        except OSError:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        s.bind(("127.0.0.1", int(p)))
        socks.append(s)
    print(f"peer: listening on {args}", flush=True)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        ready, _, _ = select.select(socks, [], [], 1.0)
        for s in ready:
            frame, src = s.recvfrom(65536)
            port = s.getsockname()[1]
            print(f"peer[{port}]: {len(frame)} bytes {frame[:32].hex()}", flush=True)
            if frame[12:14] == b"\x88\xb5" and frame[14:26] == b"RPMD-VM PING":
                reply = frame[6:12] + bytes.fromhex("020000000099") + b"\x88\xb5" + b"RPMD-VM PONG" + frame[26:]
                s.sendto(reply, src)
                print(f"peer[{port}]: echoed to {src[1]}", flush=True)
            elif frame[12:14] == b"\x88\xb5" and frame[14:26] == b"RPMD-VM ECHO" and len(frame) >= 32:
                reply = frame[26:32] + bytes.fromhex("020000000099") + b"\x88\xb5" + b"RPMD-VM PONG" + frame[26:]
                s.sendto(reply, src)
                print(f"peer[{port}]: echoed to {frame[26:32].hex()} via {src[1]}", flush=True)


if __name__ == "__main__":
    main()
