"""A WebSocket echo service for the port proxy's tests, run in the sandbox (stdlib only, so
that it runs alike on Debian 12 and 13 whatever their python3-websockets).

usage: ws_echo_server.py PORT [ADDRESS]
Answers an upgrade with 101 (the first subprotocol offered, if any), then sends one text frame:
JSON of the request line's path, the client's address and the headers it received; then echoes
every text and binary frame, answers pings, and closes after a close frame. A request that is not
an upgrade gets 400.
"""
import base64
import hashlib
import json
import socket
import struct
import sys
import threading

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def frame(op, payload):
    n = len(payload)
    if n < 126:
        head = struct.pack(">BB", 0x80 | op, n)
    elif n < 65536:
        head = struct.pack(">BBH", 0x80 | op, 126, n)
    else:
        head = struct.pack(">BBQ", 0x80 | op, 127, n)
    return head + payload


def unmask(data, mask):
    if not data:
        return data
    key = (mask * (len(data) // 4 + 1))[: len(data)]
    value = int.from_bytes(data, "big") ^ int.from_bytes(key, "big")
    return value.to_bytes(len(data), "big")


class Conn:
    def __init__(self, sock, rest):
        self.sock, self.buf = sock, rest

    def need(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise EOFError
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def handle(sock, client):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            return
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, value = line.split(":", 1)
        headers[name.strip().lower()] = value.strip()
    if headers.get("upgrade", "").lower() != "websocket":
        body = b"not a websocket"
        sock.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n%s" % (len(body), body))
        sock.close()
        return
    digest = hashlib.sha1((headers["sec-websocket-key"] + GUID).encode()).digest()
    reply = ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Accept: " + base64.b64encode(digest).decode() + "\r\n")
    offered = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",") if p.strip()]
    if offered:
        reply += "Sec-WebSocket-Protocol: " + offered[0] + "\r\n"
    seen = json.dumps({"path": lines[0].split(" ")[1], "client": client,
                       "headers": headers}).encode()
    sock.sendall(reply.encode() + b"\r\n" + frame(1, seen))
    conn = Conn(sock, rest)
    try:
        while True:
            b0, b1 = conn.need(2)
            op, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", conn.need(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", conn.need(8))[0]
            mask = conn.need(4) if b1 & 0x80 else b"\0\0\0\0"
            payload = unmask(conn.need(n), mask)
            if op == 8:
                sock.sendall(frame(8, payload[:2]))
                break
            sock.sendall(frame(10 if op == 9 else op, payload))
    except (EOFError, OSError):
        pass
    sock.close()


def main():
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1", int(sys.argv[1])))
    server.listen(64)
    while True:
        sock, peer = server.accept()
        threading.Thread(target=handle, args=(sock, peer[0]), daemon=True).start()


main()
