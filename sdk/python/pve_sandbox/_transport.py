"""Two thin transports over httpx, one blocking and one asyncio, sending :class:`Call` s.

They share everything but the I/O: request assembly, error mapping and the 429 retry policy
are the functions below; the API itself is in ``_protocol.py``. Waiting for an approval
(:class:`PollingApprovalWaiter`) is here too: it is the one thing a reply keeps of its client.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any, AsyncIterator, Dict, Iterator, Optional, TypeVar, Union

import httpx

from ._config import ClientConfig
from ._protocol import Call, ExecEvents, error_from_reply, get_approval
from .errors import ApprovalDenied, ConnectionFailed, LimitExceeded, PvsError
from .models import Approval, CommandResult

T = TypeVar("T")
SyncBody = Union[bytes, Iterator[bytes], None]
AsyncBody = Union[bytes, AsyncIterator[bytes], None]

USER_AGENT = "pve-sandbox-python"


def _nodelay(stream: Any) -> Any:
    sock = stream.get_extra_info("socket")
    if isinstance(sock, socket.socket) and sock.family in (
        socket.AF_INET,
        socket.AF_INET6,
    ):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return stream


class _NoDelay:
    """Wraps httpcore's network backend to set TCP_NODELAY on each connection.

    h11 writes a request's headers and its body in two sends; with Nagle's algorithm on, the
    second waits for the server's delayed ACK of the first (40 ms on Linux) whenever a call
    has a body. httpx 0.23 (Debian 12) has no socket options, hence this wrapper."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
        return _nodelay(self._inner.connect_tcp(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _AsyncNoDelay(_NoDelay):
    async def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
        return _nodelay(await self._inner.connect_tcp(*args, **kwargs))


def _with_nodelay(transport: Any, wrapper: Any) -> Any:
    pool: Any = getattr(transport, "_pool", None)
    inner = getattr(pool, "_network_backend", None)
    if inner is not None:
        pool._network_backend = wrapper(inner)
    return transport


def _client_kwargs(config: ClientConfig, asynchronous: bool = False) -> Dict[str, Any]:
    transport = (
        _with_nodelay(httpx.AsyncHTTPTransport(), _AsyncNoDelay)
        if asynchronous
        else _with_nodelay(httpx.HTTPTransport(), _NoDelay)
    )
    return {
        "transport": transport,
        "base_url": config.api,
        "headers": {
            "Authorization": "Bearer " + config.token,
            "User-Agent": USER_AGENT,
        },
        "timeout": httpx.Timeout(config.request_timeout, connect=10.0),
    }


def _request_kwargs(c: "Call[Any]", config: ClientConfig, content: Any) -> Dict[str, Any]:
    headers = dict(c.headers)
    if c.body is not None and content is None:
        content = json.dumps(c.body).encode("utf-8")
        headers["Content-Type"] = "application/json"
    read = config.request_timeout if c.timeout == -1.0 else c.timeout
    return {
        "method": c.method,
        "url": c.path,
        "params": c.params or None,
        "headers": headers,
        "content": content,
        "timeout": httpx.Timeout(config.request_timeout, connect=10.0, read=read),
    }


def _retry_after(err: PvsError, attempt: int, config: ClientConfig, replayable: bool) -> float:
    """Seconds to wait before trying a refused call again, or -1 for "raise"."""
    if not isinstance(err, LimitExceeded) or err.retry_after is None:
        return -1.0  # no Retry-After (e.g. max_sandboxes): waiting would not help
    if not replayable or attempt >= config.max_retries:
        return -1.0
    return min(max(err.retry_after, 0.0), 30.0)


def _parse(c: "Call[T]", r: httpx.Response) -> T:
    if r.status_code == 204 or not r.content:
        return c.parse({})
    return c.parse(r.json())


class SyncTransport:
    """Blocking transport: one ``httpx.Client`` (one pool of keep-alive connections)."""

    def __init__(self, config: ClientConfig, client: Optional[httpx.Client] = None) -> None:
        self.config = config
        self.client = client or httpx.Client(**_client_kwargs(config))
        self.approvals = PollingApprovalWaiter(config)

    def __enter__(self) -> "SyncTransport":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connections."""
        self.client.close()

    def send(
        self, c: "Call[Any]", content: SyncBody = None, stream: bool = False
    ) -> httpx.Response:
        """Sends ``c``; returns a reply with one of ``c.ok``'s statuses or raises the typed
        error (retrying 429 replies when the body can be sent again)."""
        replayable = not (content is not None and not isinstance(content, bytes))
        attempt = 0
        while True:
            try:
                req = self.client.build_request(**_request_kwargs(c, self.config, content))
                r = self.client.send(req, stream=stream)
            except httpx.TransportError as e:
                raise ConnectionFailed(f"{c.method} {c.path}: {e}") from e
            if r.status_code in c.ok:
                return r
            try:
                r.read()
            finally:
                r.close()
            err = error_from_reply(r.status_code, r.headers, r.content, self.approvals)
            wait = _retry_after(err, attempt, self.config, replayable)
            if wait < 0:
                raise err
            time.sleep(wait)
            attempt += 1

    def call(self, c: "Call[T]", content: SyncBody = None) -> T:
        """Sends ``c`` and parses its reply."""
        return _parse(c, self.send(c, content))

    def exec_stream(self, c: "Call[CommandResult]", events: ExecEvents) -> CommandResult:
        """Runs a streamed exec, feeding ``events`` line by line."""
        r = self.send(c, stream=True)
        try:
            for line in r.iter_lines():
                events.feed_line(line)
        except httpx.TransportError as e:
            raise ConnectionFailed(f"exec stream broke: {e}") from e
        finally:
            r.close()
        return events.finish()


class AsyncTransport:
    """asyncio transport: one ``httpx.AsyncClient``."""

    def __init__(self, config: ClientConfig, client: Optional[httpx.AsyncClient] = None) -> None:
        self.config = config
        self.client = client or httpx.AsyncClient(**_client_kwargs(config, True))
        self.approvals = PollingApprovalWaiter(config)

    async def __aenter__(self) -> "AsyncTransport":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the connections."""
        await self.client.aclose()

    async def send(
        self, c: "Call[Any]", content: AsyncBody = None, stream: bool = False
    ) -> httpx.Response:
        """As :meth:`SyncTransport.send`."""
        replayable = not (content is not None and not isinstance(content, bytes))
        attempt = 0
        while True:
            try:
                req = self.client.build_request(**_request_kwargs(c, self.config, content))
                r = await self.client.send(req, stream=stream)
            except httpx.TransportError as e:
                raise ConnectionFailed(f"{c.method} {c.path}: {e}") from e
            if r.status_code in c.ok:
                return r
            try:
                await r.aread()
            finally:
                await r.aclose()
            err = error_from_reply(r.status_code, r.headers, r.content, self.approvals)
            wait = _retry_after(err, attempt, self.config, replayable)
            if wait < 0:
                raise err
            await asyncio.sleep(wait)
            attempt += 1

    async def call(self, c: "Call[T]", content: AsyncBody = None) -> T:
        """Sends ``c`` and parses its reply."""
        return _parse(c, await self.send(c, content))

    async def exec_stream(self, c: "Call[CommandResult]", events: ExecEvents) -> CommandResult:
        """As :meth:`SyncTransport.exec_stream`."""
        r = await self.send(c, stream=True)
        try:
            async for line in r.aiter_lines():
                events.feed_line(line)
        except httpx.TransportError as e:
            raise ConnectionFailed(f"exec stream broke: {e}") from e
        finally:
            await r.aclose()
        return events.finish()


def _settled(approval: Approval, fresh: Approval, deadline: float) -> bool:
    """Takes ``fresh``'s state into ``approval``: True once approved, False while pending;
    raises when denied (or expired) or past ``deadline``."""
    approval.__dict__.update({k: v for k, v in fresh.__dict__.items() if k != "_waiter"})
    if approval.state == "approved":
        return True
    if approval.state != "pending":
        who = f" by {approval.decided_by}" if approval.decided_by else ""
        why = f": {approval.reason}" if approval.reason else ""
        raise ApprovalDenied(
            f"approval {approval.id} was {approval.state}{who}{why}",
            status=403,
            code="permission_denied",
        )
    if time.monotonic() >= deadline:
        raise TimeoutError(f"approval {approval.id} is still pending")
    return False


class PollingApprovalWaiter:
    """Waits for a person's decision: ``GET /approvals/{id}`` every ``poll_interval`` seconds,
    on connections of its own with the config of the client that got the approval."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config

    def wait(self, approval: Approval, timeout: Optional[float], poll_interval: float) -> None:
        """Blocks until ``approval`` is approved (see :meth:`Approval.wait`)."""
        deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
        with SyncTransport(self.config) as t:
            while not _settled(approval, t.call(get_approval(approval.id, self)), deadline):
                time.sleep(min(poll_interval, max(0.0, deadline - time.monotonic())))

    async def wait_async(
        self, approval: Approval, timeout: Optional[float], poll_interval: float
    ) -> None:
        """:meth:`wait` for asyncio code."""
        deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
        async with AsyncTransport(self.config) as t:
            while not _settled(approval, await t.call(get_approval(approval.id, self)), deadline):
                await asyncio.sleep(min(poll_interval, max(0.0, deadline - time.monotonic())))
