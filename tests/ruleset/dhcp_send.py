#!/usr/bin/env python3
"""Sends BOOTP/DHCP client messages as a tenant could, for the ruleset's DHCP guard test.

usage: dhcp_send.py TYPE CHADDR CIADDR SRC_IP DST_IP [COUNT]
  TYPE    discover | release | decline
  CHADDR  the client hardware address written into the message (need not be our own MAC)
  CIADDR  ciaddr (release) or the requested address option (decline); 0.0.0.0 for discover
Sent from SRC_IP:68 to DST_IP:67 over an ordinary UDP socket, COUNT times (default 1).
"""
import os
import socket
import struct
import sys

TYPES = {"discover": 1, "decline": 4, "release": 7}
SERVER = "10.99.0.1"


def message(kind, chaddr, ciaddr):
    mac = bytes.fromhex(chaddr.replace(":", ""))
    header = struct.pack(
        "!BBBBIHH4s4s4s4s16s64s128s",
        1, 1, 6, 0, int.from_bytes(os.urandom(4), "big"), 0, 0x8000,
        socket.inet_aton(ciaddr if kind == "release" else "0.0.0.0"),
        bytes(4), bytes(4), bytes(4), mac.ljust(16, b"\0"), bytes(64), bytes(128))
    options = bytes([53, 1, TYPES[kind]])
    if kind in ("release", "decline"):
        options += bytes([54, 4]) + socket.inet_aton(SERVER)
    if kind == "decline":
        options += bytes([50, 4]) + socket.inet_aton(ciaddr)
    return header + b"\x63\x82\x53\x63" + options + b"\xff"


def main(argv):
    if len(argv) not in (6, 7) or argv[1] not in TYPES:
        sys.exit(__doc__)
    kind, chaddr, ciaddr, src, dst = argv[1:6]
    count = int(argv[6]) if len(argv) == 7 else 1
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    sock.bind((src, 68))
    for _ in range(count):
        sock.sendto(message(kind, chaddr, ciaddr), (dst, 67))


if __name__ == "__main__":
    main(sys.argv)
