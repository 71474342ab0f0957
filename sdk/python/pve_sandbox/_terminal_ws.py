"""Attaching to a terminal over its WebSocket (raw pty bytes both ways, JSON control frames).

:class:`AsyncTerminalConnection` is the asyncio client on ``websockets``;
:class:`TerminalConnection` drives it from blocking code on an event loop in a thread of its
own (Debian 12's websockets 10.4 has no blocking client).

Debian 12 has websockets 10.4 (the legacy client, headers as ``extra_headers``), Debian 13 has
15 (the asyncio client, ``additional_headers``): :func:`_ws_connect` is the one place that knows.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import re
import threading
import time
from typing import Any, Coroutine, Dict, List, Optional, TypeVar, Union

from websockets.exceptions import ConnectionClosed

T = TypeVar("T")


def _ws_connect(url: str, headers: Dict[str, str], **options: Any) -> Any:
    """``connect(url, <headers>, **options)`` of the installed websockets: the asyncio client of
    websockets 13 and later, the legacy client before."""
    try:
        client = importlib.import_module("websockets.asyncio.client")
    except ImportError:
        legacy = importlib.import_module("websockets.legacy.client")
        return legacy.connect(url, extra_headers=headers, **options)
    return client.connect(url, additional_headers=headers, **options)


class AsyncTerminalConnection:
    """An attached terminal: ``send`` bytes or text, ``recv`` output, ``resize``, ``expect``.
    ``exit_code``/``exited`` are set when the program ends; ``errors`` holds the server's
    error messages (e.g. refused input). Use as ``async with``."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        """The WebSocket URL."""
        self._token = token
        self._ws: Any = None
        self.exited = False
        """True once the server said the program ended."""
        self.exit_code: Optional[int] = None
        """The program's exit status (None for a signal or before it ended)."""
        self.errors: List[str] = []
        """Error messages the server sent."""
        self.received = bytearray()
        """Everything received so far (for :meth:`expect`)."""

    async def connect(self) -> "AsyncTerminalConnection":
        """Opens the WebSocket (the token goes in the ``Authorization`` header)."""
        self._ws = await _ws_connect(
            self.url,
            {"Authorization": "Bearer " + self._token},
            subprotocols=["pvs-terminal"],
            max_size=None,
        )
        return self

    async def __aenter__(self) -> "AsyncTerminalConnection":
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def send(self, data: Union[bytes, str]) -> None:
        """Sends keystrokes (text is UTF-8; ``"\\r"`` is Enter)."""
        await self._ws.send(data.encode("utf-8") if isinstance(data, str) else bytes(data))

    async def resize(self, cols: int, rows: int) -> None:
        """Resizes the terminal."""
        await self._ws.send(json.dumps({"type": "resize", "cols": cols, "rows": rows}))

    async def recv(self, timeout: Optional[float] = None) -> Optional[bytes]:
        """The next piece of output; ``None`` once the connection closed."""
        while True:
            try:
                msg = await asyncio.wait_for(self._ws.recv(), timeout)
            except ConnectionClosed:
                return None
            if isinstance(msg, bytes):
                self.received += msg
                return msg
            ev = json.loads(msg)
            if ev.get("type") == "exit":
                self.exited = True
                self.exit_code = ev.get("code")
            elif ev.get("type") == "error":
                self.errors.append(str(ev.get("message", "")))

    async def expect(self, pattern: Union[str, bytes], timeout: float = 10.0) -> bytes:
        """Reads until ``pattern`` (a regex) occurs in what was received; returns it all.
        ``TimeoutError`` after ``timeout`` seconds, ``EOFError`` if the connection closed.
        """
        pat = re.compile(pattern.encode("utf-8") if isinstance(pattern, str) else pattern)
        deadline = time.monotonic() + timeout
        while not pat.search(self.received):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{pattern!r} did not appear")
            try:
                piece = await self.recv(left)
            except asyncio.TimeoutError:
                raise TimeoutError(f"{pattern!r} did not appear") from None
            if piece is None:
                raise EOFError(f"the terminal closed before {pattern!r} appeared")
        return bytes(self.received)

    async def close(self) -> None:
        """Detaches (the program keeps running)."""
        if self._ws is not None:
            await self._ws.close()
            self._ws = None


class TerminalConnection:
    """:class:`AsyncTerminalConnection` for blocking code (same methods, not ``async``)."""

    def __init__(self, url: str, token: str) -> None:
        self._conn = AsyncTerminalConnection(url, token)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def _do(self, coro: "Coroutine[Any, Any, T]") -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    @property
    def exited(self) -> bool:
        """True once the server said the program ended."""
        return self._conn.exited

    @property
    def exit_code(self) -> Optional[int]:
        """The program's exit status."""
        return self._conn.exit_code

    @property
    def errors(self) -> List[str]:
        """Error messages the server sent."""
        return self._conn.errors

    @property
    def received(self) -> bytes:
        """Everything received so far."""
        return bytes(self._conn.received)

    def connect(self) -> "TerminalConnection":
        """Opens the WebSocket."""
        self._do(self._conn.connect())
        return self

    def __enter__(self) -> "TerminalConnection":
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, data: Union[bytes, str]) -> None:
        """Sends keystrokes."""
        self._do(self._conn.send(data))

    def resize(self, cols: int, rows: int) -> None:
        """Resizes the terminal."""
        self._do(self._conn.resize(cols, rows))

    def recv(self, timeout: Optional[float] = None) -> Optional[bytes]:
        """The next piece of output; ``None`` once closed."""
        return self._do(self._conn.recv(timeout))

    def expect(self, pattern: Union[str, bytes], timeout: float = 10.0) -> bytes:
        """Reads until ``pattern`` occurs; returns everything received."""
        return self._do(self._conn.expect(pattern, timeout))

    def close(self) -> None:
        """Detaches and stops the connection's thread."""
        try:
            self._do(self._conn.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            self._loop.close()
