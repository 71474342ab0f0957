#!/usr/bin/python3
"""Tiny servers and clients for the ruleset tests and pve-sandbox-check (network namespaces or
containers; the clients also run as `python3 - ARGS < netprobe.py`).

serve --tcp P,.. --udp P,.. --log FILE --ready FILE   echo servers on every address (v4+v6)
tcp HOST PORT [--timeout S] [--src ADDR] [--sport P]   exit 0 iff connect + echo round trip
udp HOST PORT [--timeout S]                            exit 0 iff an echo came back
hold HOST PORT --flag FILE --duration S                echo every 0.2s; prints "before=N after=M"
                                                       (counts round trips before/after FILE exists)
flood HOST PORT --n N --timeout S                      N simultaneous connects; prints successes
series HOST PORT --n N --gap S --timeout S             N connects one after another; prints successes
dhcp-raw IFACE TOKEN                                   broadcast UDP 0.0.0.0:68 -> 255.255.255.255:67
arp-raw IFACE CLAIM_IP                                 broadcast gratuitous ARP replies: CLAIM_IP is-at us
"""
import argparse
import os
import select
import socket
import struct
import sys
import threading
import time


def serve(args):
    log = open(args.log, "a", buffering=1) if args.log else None
    socks = []
    for port in [int(p) for p in args.tcp.split(",") if p]:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # (a client may still connect from this port: tcp --sport)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind(("::", port))
        s.listen(512)
        socks.append(("tcp", s))
    for port in [int(p) for p in args.udp.split(",") if p]:
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind(("::", port))
        socks.append(("udp", s))

    def echo(conn):
        try:
            conn.settimeout(30)
            while True:
                data = conn.recv(4096)
                if not data:
                    break
                conn.sendall(data)
        except OSError:
            pass
        finally:
            conn.close()

    if args.ready:
        with open(args.ready, "w") as f:
            f.write("ready\n")
    while True:
        readable, _, _ = select.select([s for _, s in socks], [], [])
        for s in readable:
            kind = next(k for k, x in socks if x is s)
            if kind == "tcp":
                try:
                    conn, peer = s.accept()
                except OSError:
                    continue
                if log:
                    log.write("tcp %d %s\n" % (s.getsockname()[1], peer[0]))
                threading.Thread(target=echo, args=(conn,), daemon=True).start()
            else:
                data, peer = s.recvfrom(4096)
                if log:
                    log.write("udp %d %s %s\n" % (s.getsockname()[1], peer[0],
                                                  data.decode(errors="replace")))
                try:
                    s.sendto(data, peer)
                except OSError:
                    pass


def family_of(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def addr_of(host, port):
    if ":" in host:
        return socket.getaddrinfo(host, port, socket.AF_INET6, socket.SOCK_STREAM)[0][4]
    return (host, port)


def tcp_once(host, port, timeout, src=None, sport=0):
    s = socket.socket(family_of(host), socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        if sport:
            # maybe a port a local server listens on (serve sets SO_REUSEPORT too)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if src or sport:
            s.bind((src or ("::" if family_of(host) == socket.AF_INET6 else "0.0.0.0"), sport))
        s.connect(addr_of(host, port))
        s.sendall(b"probe\n")
        return s.recv(16) == b"probe\n"
    except OSError:
        return False
    finally:
        s.close()


def cmd_tcp(args):
    return 0 if tcp_once(args.host, args.port, args.timeout, args.src, args.sport) else 1


def cmd_udp(args):
    s = socket.socket(family_of(args.host), socket.SOCK_DGRAM)
    s.settimeout(args.timeout)
    try:
        if args.src:
            s.bind((args.src, 0))
        s.sendto(args.token.encode() if args.token else b"probe", addr_of(args.host, args.port))
        data, _ = s.recvfrom(64)
        return 0 if data == (args.token.encode() if args.token else b"probe") else 1
    except OSError:
        return 1


def cmd_hold(args):
    s = socket.socket(family_of(args.host), socket.SOCK_STREAM)
    s.settimeout(1.0)
    before = after = 0
    try:
        s.connect(addr_of(args.host, args.port))
    except OSError:
        print("before=0 after=0 connect-failed")
        return 1
    s.settimeout(0.3)
    print("connected", flush=True)
    # "echoed" once the first round trip is back (callers cut after it, not after a sleep);
    # the duration counts from then, and a connection that never echoes ends 10 s later.
    end = time.time() + args.duration + 10
    seq = 0
    while time.time() < end:
        flagged = os.path.exists(args.flag)
        seq = seq % 255 + 1
        try:
            s.sendall(bytes([seq]))
            # Only this send's echo counts: one late from before the cut is no round trip after.
            if s.recv(16).endswith(bytes([seq])):
                if flagged:
                    after += 1
                else:
                    before += 1
                    if before == 1:
                        print("echoed", flush=True)
                        end = time.time() + args.duration
        except OSError:
            pass
        time.sleep(0.2)
    print("before=%d after=%d" % (before, after))
    s.close()
    return 0


def cmd_flood(args):
    socks = []
    for _ in range(args.n):
        s = socket.socket(family_of(args.host), socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(addr_of(args.host, args.port))
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            continue
        socks.append(s)
    deadline = time.time() + args.timeout
    ok = 0
    pending = set(socks)
    while pending and time.time() < deadline:
        _, writable, _ = select.select([], list(pending), [], max(0.0, deadline - time.time()))
        for s in writable:
            pending.discard(s)
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                ok += 1
    for s in socks:
        s.close()
    print(ok)
    return 0


def cmd_series(args):
    ok = 0
    for _ in range(args.n):
        if tcp_once(args.host, args.port, args.timeout):
            ok += 1
        time.sleep(args.gap)
    print(ok)
    return 0


def csum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def cmd_dhcp_raw(args):
    payload = args.token.encode()
    udp_len = 8 + len(payload)
    udp = struct.pack("!HHHH", 68, 67, udp_len, 0) + payload
    src, dst = socket.inet_aton("0.0.0.0"), socket.inet_aton("255.255.255.255")
    pseudo = src + dst + struct.pack("!BBH", 0, 17, udp_len)
    udp = udp[:6] + struct.pack("!H", csum(pseudo + udp) or 0xFFFF) + udp[8:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, 0, 0, 64, 17, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((args.iface, 0))
    mac = s.getsockname()[4]
    frame = b"\xff" * 6 + mac + b"\x08\x00" + ip + udp
    s.send(frame)
    return 0


def cmd_arp_raw(args):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((args.iface, 0))
    mac = s.getsockname()[4]
    ip = socket.inet_aton(args.claim)
    arp = struct.pack("!HHBBH", 1, 0x0800, 6, 4, 2) + mac + ip + b"\xff" * 6 + ip
    frame = b"\xff" * 6 + mac + b"\x08\x06" + arp
    for _ in range(3):
        s.send(frame)
        time.sleep(0.05)
    return 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("serve")
    a.add_argument("--tcp", default="")
    a.add_argument("--udp", default="")
    a.add_argument("--log")
    a.add_argument("--ready")
    for name in ("tcp", "udp", "hold", "flood", "series"):
        a = sub.add_parser(name)
        a.add_argument("host")
        a.add_argument("port", type=int)
        a.add_argument("--timeout", type=float, default=1.0)
        a.add_argument("--src")
        a.add_argument("--sport", type=int, default=0)
        a.add_argument("--flag")
        a.add_argument("--duration", type=float, default=3.0)
        a.add_argument("--n", type=int, default=20)
        a.add_argument("--gap", type=float, default=0.05)
        a.add_argument("--token")
    a = sub.add_parser("dhcp-raw")
    a.add_argument("iface")
    a.add_argument("token")
    a = sub.add_parser("arp-raw")
    a.add_argument("iface")
    a.add_argument("claim")
    args = p.parse_args()
    fn = {"serve": serve, "tcp": cmd_tcp, "udp": cmd_udp, "hold": cmd_hold,
          "flood": cmd_flood, "series": cmd_series, "dhcp-raw": cmd_dhcp_raw, "arp-raw": cmd_arp_raw}[args.cmd]
    sys.exit(fn(args) or 0)


if __name__ == "__main__":
    main()
