#!/usr/bin/env python3
"""Feeds igb_instr.sh's guest: 60-byte IPv4/UDP frames (64 with the FCS
the wire adds) to the 82576's `-netdev dgram` socket, one frame a
datagram, at RATE frames a second until killed, far more than the
forwarder under callgrind takes, so that its receive ring stays full and
every poll finds a whole burst. What the guest sends back is left unread.

usage: igb_feed.py LOCAL_PORT NETDEV_PORT DST_MAC RATE
"""
import socket
import struct
import sys
import time


def frame(dst_mac):
    udp = struct.pack("!HHHH", 1024, 1024, 8 + 18, 0) + bytes(18)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
                     bytes([198, 18, 0, 1]), bytes([198, 18, 0, 2]))
    words = struct.unpack("!10H", ip)
    s = sum(words)
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    ip = ip[:10] + struct.pack("!H", ~s & 0xFFFF) + ip[12:]
    eth = bytes.fromhex(dst_mac.replace(":", "")) + bytes.fromhex("020000000099") + b"\x08\x00"
    return eth + ip + udp


def main():
    local, netdev, dst, rate = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    f = frame(dst)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", local))
    to = ("127.0.0.1", netdev)
    burst = 64
    t = time.monotonic()
    while True:
        for _ in range(burst):
            try:
                s.sendto(f, to)
            except OSError:
                pass  # QEMU not up yet, or gone
        t += burst / rate
        wait = t - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        else:
            t = time.monotonic()


if __name__ == "__main__":
    main()
