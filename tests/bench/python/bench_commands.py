#!/usr/bin/env python3
"""What the Python SDK adds to a call: ``sb.commands.run("true")`` (and, to see the SDK's own
cost without a command's noise, ``sb.get_info()``) against the same request sent raw, in one
run, interleaved (each round runs the three in a rotating order) so all see the same machine.

Raw http.client is the curl equivalent (one persistent connection, the request written in one
send). Raw httpx is the same httpx client the SDK is built on, with the same TCP_NODELAY
socket, so "sdk - raw httpx" is the SDK's own code. Prints p50/p99 of each, the p50 of the
per-round differences and the ratio. Not part of ctest (it measures, it does not judge the
machine). Run it on the real stack:

    tests/python/stack.sh build /usr/bin/python3 tests/bench/python/bench_commands.py [N]

Target (issue #36): the SDK adds at most 0.3 ms p50 over raw HTTP.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import sys
import time
from typing import Callable, Dict, List
from urllib.parse import urlparse

import httpx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "sdk", "python"))
from pve_sandbox import Sandbox  # noqa: E402
from pve_sandbox._transport import _NoDelay, _with_nodelay  # noqa: E402


def pct(xs: List[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def measure(name: str, n: int, runs: Dict[str, Callable[[], None]]) -> None:
    times: Dict[str, List[float]] = {k: [] for k in runs}
    for _ in range(20):  # warm-up: connections, the sandbox's SSH session
        for f in runs.values():
            f()
    order = list(runs.items())
    for i in range(n):
        for k, f in order[i % len(order) :] + order[: i % len(order)]:  # no position favoured
            t0 = time.perf_counter()
            f()
            times[k].append((time.perf_counter() - t0) * 1000.0)
    print(f"{name}: {n} rounds, interleaved")
    for k, xs in times.items():
        print(f"  {k:16s} p50 {pct(xs, 50):8.3f} ms   p99 {pct(xs, 99):8.3f} ms")
    for base in [k for k in runs if k != "sdk"]:
        diffs = [a - b for a, b in zip(times["sdk"], times[base])]
        ratio = pct(times["sdk"], 50) / pct(times[base], 50)
        d50 = pct(times["sdk"], 50) - pct(times[base], 50)
        print(
            f"  sdk - {base:16s} p50s differ by {d50:+7.3f} ms (ratio {ratio:.3f}); "
            f"p50 of per-round differences {pct(diffs, 50):+7.3f} ms (target: +0.3 ms at most)"
        )


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    url, token = os.environ["PVS_URL"], os.environ["PVS_TOKEN"]
    with Sandbox.create(ttl=900) as sb:
        body = json.dumps({"command": "true"}).encode()
        headers = {
            "Authorization": "Bearer " + token,
            "Content-Type": "application/json",
            "Prefer": "respond-async",  # what the SDK sends, so both are judged alike
        }
        path = f"/v1/sandboxes/{sb.id}/exec"
        raw = httpx.Client(
            base_url=url, headers=headers, transport=_with_nodelay(httpx.HTTPTransport(), _NoDelay)
        )
        u = urlparse(url)
        conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port or 80)
        conn.connect()
        assert conn.sock is not None
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as curl does

        def raw_http_client() -> None:
            conn.request("POST", path, body=body, headers=headers)
            r = conn.getresponse()
            assert r.status == 200 and json.loads(r.read())["exit_code"] == 0

        def raw_httpx() -> None:
            r = raw.post(path, content=body)
            assert r.status_code == 200 and r.json()["exit_code"] == 0

        def sdk() -> None:
            assert sb.commands.run("true").exit_code == 0

        measure(
            'commands.run("true")',
            n,
            {"sdk": sdk, "raw http.client": raw_http_client, "raw httpx": raw_httpx},
        )

        info_path = f"/v1/sandboxes/{sb.id}"

        def info_http_client() -> None:
            conn.request("GET", info_path, headers={"Authorization": "Bearer " + token})
            r = conn.getresponse()
            assert r.status == 200 and json.loads(r.read())["id"] == sb.id

        def info_httpx() -> None:
            r = raw.get(info_path)
            assert r.status_code == 200 and r.json()["id"] == sb.id

        def info_sdk() -> None:
            assert sb.get_info().id == sb.id

        measure(
            "get_info()",
            n,
            {"sdk": info_sdk, "raw http.client": info_http_client, "raw httpx": info_httpx},
        )
        raw.close()
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
