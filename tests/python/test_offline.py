"""Pieces of the SDK that need no stack: error mapping, the NDJSON fold, request bodies, and
the background wrapper run by this machine's sh (a sleep, then killed)."""

from __future__ import annotations

import io
import subprocess
import time
import warnings
from typing import List

import pytest

from pve_sandbox import (
    AlreadyExists,
    ApprovalDenied,
    ApprovalRequired,
    InsecureTokenWarning,
    LimitExceeded,
    NoMatch,
    NotFound,
    PermissionDenied,
    PvsError,
    Unavailable,
    resolve_config,
)
from pve_sandbox import _protocol as P
from pve_sandbox._shared import BackgroundWrapper, body_chunks
from pve_sandbox._transport import PollingApprovalWaiter

CFG = resolve_config("http://127.0.0.1:1", "pvs_x")
WAITER = PollingApprovalWaiter(CFG)


def err(status: int, body: bytes, **headers: str) -> PvsError:
    return P.error_from_reply(
        status, {k.replace("_", "-"): v for k, v in headers.items()}, body, WAITER
    )


def test_errors_by_code_and_status() -> None:
    e = err(
        404,
        b'{"error":{"code":"not_found","message":"no sandbox sb-1"}}',
        x_request_id="r1",
    )
    assert isinstance(e, NotFound) and e.message == "no sandbox sb-1" and e.request_id == "r1"
    assert isinstance(err(409, b'{"error":{"code":"already_exists","message":"x"}}'), AlreadyExists)
    assert isinstance(err(422, b'{"error":{"code":"no_match","message":"x"}}'), NoMatch)
    assert isinstance(err(503, b"not json"), Unavailable)
    le = err(429, b'{"error":{"code":"limit_exceeded","message":"x"}}', retry_after="1")
    assert isinstance(le, LimitExceeded) and le.retry_after == 1.0
    d = err(
        403,
        b'{"error":{"code":"permission_denied","message":"approval ap-1 denied by bob"}}',
    )
    assert isinstance(d, ApprovalDenied) and isinstance(d, PermissionDenied)
    a = err(
        202,
        b'{"approval":{"id":"ap-1","state":"pending","action":"exec","message":"m"}}',
    )
    assert isinstance(a, ApprovalRequired) and a.approval.id == "ap-1" and a.approval.pending
    assert a.approval._waiter is WAITER  # what its wait() asks


def test_exec_events_fold() -> None:
    out: List[str] = []
    ev = P.ExecEvents(out.append, None)
    for line in [
        '{"type":"start","sandbox":"sb-1"}',
        '{"type":"stdout","data":"a"}',
        '{"type":"stderr","data":"e"}',
        '{"type":"stdout","data":"b"}',
        '{"type":"exit","exit_code":2,"timed_out":false,"truncated":false,"duration_ms":5}',
    ]:
        ev.feed_line(line)
    r = ev.finish()
    assert (out, r.stdout, r.stderr, r.exit_code) == (["a", "b"], "ab", "e", 2)
    with pytest.raises(Unavailable):
        P.ExecEvents(None, None).feed_line(
            '{"type":"error","error":{"code":"unavailable","message":"ssh dropped"}}'
        )
    with pytest.raises(PvsError):
        P.ExecEvents(None, None).finish()


def test_bodies_and_headers() -> None:
    assert body_chunks("é") == "é".encode()
    chunks = body_chunks(io.BytesIO(b"x" * 200000))
    assert not isinstance(chunks, bytes) and [len(c) for c in chunks] == [65536] * 3 + [3392]
    c = P.exec_call(CFG, "sb-1", "ls", cwd=None, env=None, stdin=None, timeout=1.5,
                    approval="ap-9", stream=True)  # fmt: skip
    assert c.body == {"command": "ls", "timeout_seconds": 2}
    assert c.headers["Approval"] == "ap-9" and c.headers["Prefer"] == "respond-async"
    assert c.headers["Accept"] == "application/x-ndjson"
    assert P.sb_path("sb-1", "snapshots", "a/b") == "/sandboxes/sb-1/snapshots/a%2Fb"


def test_background_wrapper_kills_its_process_group() -> None:
    w = BackgroundWrapper('echo "it\'s"; sleep 57 & sleep 58')
    p = subprocess.Popen(["sh", "-c", w.command], start_new_session=True, stdout=subprocess.PIPE)
    assert p.stdout is not None and p.stdout.readline() == b"it's\n"
    k = subprocess.run(["sh", "-c", w.kill_command], start_new_session=True)
    assert k.returncode == 0 and p.wait(10) == -9
    # SIGKILL is sent to the whole group at once; the processes are gone when the kernel has
    # torn them down, which a busy machine may take a moment to do: wait for it, with a bound.
    # Whole command lines only (-x): another test's "sleep 580" is not one of these.
    deadline = time.monotonic() + 10
    while True:
        left = subprocess.run(["pgrep", "-fx", "sleep 5[78]"], capture_output=True).stdout
        if left == b"" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert left == b""


def test_config_repr_never_shows_the_token() -> None:
    cfg = resolve_config("https://sandbox.example.test", "pvs_secret_token_value")
    assert "pvs_secret_token_value" not in repr(cfg)
    assert "pvs_secret_token_value" not in str(cfg)
    assert cfg.token == "pvs_secret_token_value"  # still there for the calls


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8787",
        "http://127.9.8.7",
        "http://[::1]:8787",
        "http://localhost:8787",
        "http://LOCALHOST",
        "https://sandbox.example.test",
        "https://203.0.113.7:8443",
    ],
)
def test_no_warning_over_tls_or_to_loopback(url: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resolve_config(url, "pvs_x")


@pytest.mark.parametrize(
    "url", ["http://sandbox.example.test:8787", "http://203.0.113.7", "HTTP://[2001:db8::1]:80"]
)
def test_warns_when_the_token_goes_over_plain_http_elsewhere(url: str) -> None:
    with pytest.warns(InsecureTokenWarning, match="plain http://") as caught:
        cfg = resolve_config(url, "pvs_secret_token_value")
    assert len(caught) == 1
    assert "pvs_secret_token_value" not in str(caught[0].message)
    assert cfg.url == url.rstrip("/")
