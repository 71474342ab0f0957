#!/usr/bin/env python3
"""What the Python SDK adds to a command: ``sb.commands.run("true")`` against the same
request sent raw, in one run, interleaved (SDK, raw httpx, raw http.client, repeat) so that
both see the same machine. Prints p50/p99 of each and the SDK's cost over raw HTTP.

Not part of ctest (it measures, it does not judge the machine). Run it on the real stack:

    tests/python/stack.sh build /usr/bin/python3 tests/bench/python/bench_commands.py [N]

Target (issue #36): the SDK adds at most 0.3 ms p50 over raw HTTP.
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import sys
import time
from typing import Callable, Dict, List
from urllib.parse import urlparse

import httpx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "sdk", "python"))
from pve_sandbox import Sandbox  # noqa: E402


def pct(xs: List[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    url, token = os.environ["PVS_URL"], os.environ["PVS_TOKEN"]
    with Sandbox.create(ttl=900) as sb:
        body = json.dumps({"command": "true"}).encode()
        headers = {
            "Authorization": "Bearer " + token,
            "Content-Type": "application/json",
            "Prefer": "respond-async",  # what the SDK sends, so both are judged alike
        }
        path = f"/v1/sandboxes/{sb.id}/exec"
        raw = httpx.Client(base_url=url, headers=headers)
        u = urlparse(url)
        conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port or 80)

        def sdk() -> None:
            assert sb.commands.run("true").exit_code == 0

        def raw_httpx() -> None:
            r = raw.post(path, content=body)
            assert r.status_code == 200 and r.json()["exit_code"] == 0

        def raw_http_client() -> None:
            conn.request("POST", path, body=body, headers=headers)
            r = conn.getresponse()
            assert r.status == 200 and json.loads(r.read())["exit_code"] == 0

        runs: Dict[str, Callable[[], None]] = {
            "sdk": sdk,
            "raw httpx": raw_httpx,
            "raw http.client": raw_http_client,
        }
        times: Dict[str, List[float]] = {k: [] for k in runs}
        for _ in range(20):  # warm-up: connections, the sandbox's SSH session
            for f in runs.values():
                f()
        for _ in range(n):
            for k, f in runs.items():
                t0 = time.perf_counter()
                f()
                times[k].append((time.perf_counter() - t0) * 1000.0)
        raw.close()
        conn.close()
    print(f"commands.run('true'), {n} calls each, interleaved")
    for k, xs in times.items():
        print(
            f"  {k:16s} p50 {pct(xs, 50):7.3f} ms   p99 {pct(xs, 99):7.3f} ms   mean {statistics.mean(xs):7.3f} ms"
        )
    for base in ("raw httpx", "raw http.client"):
        d = pct(times["sdk"], 50) - pct(times[base], 50)
        ratio = pct(times["sdk"], 50) / pct(times[base], 50)
        print(f"  sdk vs {base}: +{d:.3f} ms p50 (ratio {ratio:.3f}); target <= 0.3 ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
