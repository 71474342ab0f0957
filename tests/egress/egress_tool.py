#!/usr/bin/env python3
"""Probes for the egress end-to-end test (egress-e2e.sh), run inside the rig's namespaces.

dns SERVER NAME [--type A|AAAA|TXT] [--tcp] [--port 53] [--timeout S]
    prints "<RCODE> [addr ...]" (A records of the answer), TIMEOUT, or ERROR <what>; over UDP
    the query is sent again each second until S (default 5) has passed
connect HOST PORT [--timeout S]
    prints open (the echo server answered), reset, unreachable, timeout; and the seconds taken
agent SOCKET LINE
    sends one request line to pve-sandbox-agent and prints the reply line
dnsbench SERVER NAME [--n N] [--port 53]
    N sequential A queries (one socket), prints "p50_us=.. p99_us=.. ok=.."
dnsburst SERVER NAME [--n N]
    N A queries sent at once from one socket, then replies collected until 1 s of silence;
    prints "answered=K"
dnspaced SERVER (NAME | --random-under ZONE) [--rate R] [--seconds S] [--timeout T]
    A queries at a steady rate from one socket (random names under ZONE: cache misses), answers
    collected as they come; a query unanswered after T seconds counts as T. Prints
    "sent=.. answered=.. noerror=.. lost=.. p50_us=.. p99_us=.."
"""
import argparse
import errno
import os
import random
import select
import socket
import struct
import sys
import time

TYPES = {"A": 1, "AAAA": 28, "TXT": 16}
RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}


def read_name(msg, off):
    jumped, end = False, off
    for _ in range(128):
        n = msg[off]
        if n & 0xC0 == 0xC0:
            if not jumped:
                end = off + 2
            jumped = True
            off = ((n & 0x3F) << 8) | msg[off + 1]
            continue
        if n == 0:
            return end if jumped else off + 1
        off += 1 + n
    raise ValueError("name loop")


# A lost UDP query is sent again after this long, as a stub resolver does, until the probe's
# timeout: an expected answer survives one drop on a busy machine, and a probe that expects
# none (--timeout under a second) still sends once.
RESEND_S = 1.0


def udp_query(q, server, timeout):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    deadline = time.monotonic() + timeout
    while True:
        s.sendto(q, server)
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout()
        s.settimeout(min(left, RESEND_S))
        try:
            return s.recvfrom(4096)[0]
        except socket.timeout:
            if time.monotonic() >= deadline:
                raise


def cmd_dns(a):
    qid = random.randint(0, 65535)
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in a.name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack("!HH", TYPES[a.type], 1)
    try:
        if a.tcp:
            s = socket.create_connection((a.server, a.port), timeout=a.timeout)
            s.settimeout(a.timeout)
            s.sendall(struct.pack("!H", len(q)) + q)
            ln = struct.unpack("!H", s.recv(2))[0]
            msg = b""
            while len(msg) < ln:
                chunk = s.recv(ln - len(msg))
                if not chunk:
                    break
                msg += chunk
        else:
            msg = udp_query(q, (a.server, a.port), a.timeout)
    except socket.timeout:
        print("TIMEOUT")
        return 1
    except OSError as e:
        print("ERROR " + (errno.errorcode.get(e.errno, str(e.errno)) if e.errno else str(e)))
        return 1
    rid, flags, qd, an = struct.unpack("!HHHH", msg[:8])
    if not flags & 0x8000:
        print("NOT-A-RESPONSE")  # e.g. an echo server
        return 1
    if rid != qid:
        print("ERROR wrong-id")
        return 1
    off = 12
    for _ in range(qd):
        off = read_name(msg, off) + 4
    addrs = []
    for _ in range(an):
        off = read_name(msg, off)
        rtype, _, ttl, rdlen = struct.unpack("!HHIH", msg[off:off + 10])
        off += 10
        if rtype == 1 and rdlen == 4:
            addrs.append(socket.inet_ntoa(msg[off:off + 4]))
        off += rdlen
    print(" ".join([RCODES.get(flags & 0xF, str(flags & 0xF))] + addrs))
    return 0


def cmd_connect(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(a.timeout)
    start = time.time()
    try:
        s.connect((a.host, a.port))
        s.sendall(b"probe\n")
        result = "open" if s.recv(16) == b"probe\n" else "closed"
    except socket.timeout:
        result = "timeout"
    except ConnectionRefusedError:
        result = "reset"
    except ConnectionResetError:
        result = "reset"
    except OSError as e:
        result = "unreachable" if e.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EACCES) \
            else "error-" + errno.errorcode.get(e.errno, str(e.errno))
    finally:
        s.close()
    print("%s %.2f" % (result, time.time() - start))
    return 0


def cmd_agent(a):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(a.socket)
    s.sendall(a.line.encode() + b"\n")
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    print(buf.decode().rstrip("\n"))
    return 0


def cmd_dnsbench(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    s.connect((a.server, a.port))
    question = b""
    for label in a.name.split("."):
        question += bytes([len(label)]) + label.encode()
    question += b"\0" + struct.pack("!HH", 1, 1)
    times, ok = [], 0
    for i in range(a.n):
        q = struct.pack("!HHHHHH", i & 0xFFFF, 0x0100, 1, 0, 0, 0) + question
        start = time.perf_counter()
        s.send(q)
        try:
            msg = s.recv(4096)
        except socket.timeout:
            continue
        times.append(time.perf_counter() - start)
        ok += 1 if (struct.unpack("!H", msg[2:4])[0] & 0xF) == 0 else 0
    times.sort()
    if not times:
        print("p50_us=0 p99_us=0 ok=0")
        return 1
    print("p50_us=%.0f p99_us=%.0f ok=%d" % (times[len(times) // 2] * 1e6,
                                            times[min(len(times) - 1, len(times) * 99 // 100)] * 1e6, ok))
    return 0


def cmd_dnsburst(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((a.server, a.port))
    question = b""
    for label in a.name.split("."):
        question += bytes([len(label)]) + label.encode()
    question += b"\0" + struct.pack("!HH", 1, 1)
    for i in range(a.n):
        s.send(struct.pack("!HHHHHH", i & 0xFFFF, 0x0100, 1, 0, 0, 0) + question)
    s.settimeout(1.0)
    answered = 0
    try:
        while True:
            s.recv(4096)
            answered += 1
    except socket.timeout:
        pass
    print("answered=%d" % answered)
    return 0


def cmd_dnspaced(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((a.server, a.port))
    s.setblocking(False)
    pending, times, noerror, sent = {}, [], 0, 0
    start = time.perf_counter()
    end = start + a.seconds
    qid = random.randint(0, 65535)
    while True:
        now = time.perf_counter()
        due = min(int((now - start) * a.rate) + 1, int(a.seconds * a.rate)) if now < end else sent
        while sent < due:  # catches up after a slow turn: the rate is kept
            qid = (qid + 1) & 0xFFFF
            name = a.name or "%08x.%s" % (random.getrandbits(32), a.random_under)
            q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
            for label in name.split("."):
                q += bytes([len(label)]) + label.encode()
            q += b"\0" + struct.pack("!HH", 1, 1)
            pending[qid] = now
            sent += 1
            try:
                s.send(q)
            except OSError:
                pass
        for k in [k for k, t in pending.items() if now - t > a.timeout]:
            del pending[k]
            times.append(a.timeout)
        if now >= end and not pending:
            break
        wait = max(0.0, min(1.0 / a.rate, end - now)) if now < end else 0.05
        r, _, _ = select.select([s], [], [], wait)
        while r:
            try:
                msg = s.recv(4096)
            except BlockingIOError:
                break
            got = struct.unpack("!H", msg[:2])[0]
            if got in pending:
                times.append(time.perf_counter() - pending.pop(got))
                noerror += 1 if (struct.unpack("!H", msg[2:4])[0] & 0xF) == 0 else 0
    lost = sum(1 for t in times if t >= a.timeout)
    times.sort()
    p50 = times[len(times) // 2] if times else 0
    p99 = times[min(len(times) - 1, len(times) * 99 // 100)] if times else 0
    print("sent=%d answered=%d noerror=%d lost=%d p50_us=%.0f p99_us=%.0f" %
          (sent, len(times) - lost, noerror, lost, p50 * 1e6, p99 * 1e6))
    return 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dns")
    d.add_argument("server")
    d.add_argument("name")
    d.add_argument("--type", default="A", choices=sorted(TYPES))
    d.add_argument("--tcp", action="store_true")
    d.add_argument("--port", type=int, default=53)
    d.add_argument("--timeout", type=float, default=5.0)
    c = sub.add_parser("connect")
    c.add_argument("host")
    c.add_argument("port", type=int)
    c.add_argument("--timeout", type=float, default=2.0)
    g = sub.add_parser("agent")
    g.add_argument("socket")
    g.add_argument("line")
    b = sub.add_parser("dnsbench")
    b.add_argument("server")
    b.add_argument("name")
    b.add_argument("--n", type=int, default=200)
    b.add_argument("--port", type=int, default=53)
    u = sub.add_parser("dnsburst")
    u.add_argument("server")
    u.add_argument("name")
    u.add_argument("--n", type=int, default=500)
    u.add_argument("--port", type=int, default=53)
    t = sub.add_parser("dnspaced")
    t.add_argument("server")
    t.add_argument("name", nargs="?", default="")
    t.add_argument("--random-under", default="")
    t.add_argument("--rate", type=float, default=20)
    t.add_argument("--seconds", type=float, default=10)
    t.add_argument("--timeout", type=float, default=3)
    t.add_argument("--port", type=int, default=53)
    a = p.parse_args()
    return {"dns": cmd_dns, "connect": cmd_connect, "agent": cmd_agent,
            "dnsbench": cmd_dnsbench, "dnsburst": cmd_dnsburst, "dnspaced": cmd_dnspaced}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
