"""What the asyncio client does its own way, written by hand: a background command is a task,
file bodies and downloads are async iterators, ``AsyncSandbox.create`` is awaitable and an async
context manager. ``_io_sync.py`` has the same names for the blocking client, which is generated
from the asyncio one (``scripts/gen-sync-sdk``)."""

from __future__ import annotations

import asyncio
from typing import (
    Any,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Generator,
    Generic,
    Iterable,
    Optional,
    Protocol,
    TypeVar,
    Union,
)

import httpx

from . import _protocol as P
from ._protocol import OutputCallback
from ._shared import BackgroundWrapper, FileData, HandleOutput, body_chunks, kill_call
from ._transport import AsyncTransport
from .errors import ConnectionFailed
from .models import CommandResult

__all__ = [
    "AsyncCommandHandle",
    "AsyncFileData",
    "Creating",
    "creating",
    "request_body",
    "response_bytes",
]

AsyncFileData = Union[FileData, AsyncIterable[bytes]]
"""What ``files.write`` takes here: as for the blocking client, or an async iterable."""


class _Closable(Protocol):
    async def close(self) -> None:
        """Closes it (a sandbox: destroys it unless kept)."""


S = TypeVar("S", bound=_Closable)


class Creating(Generic[S]):
    """``AsyncSandbox.create(...)``: awaitable, and an async context manager that closes (and
    so destroys, unless kept) what it made."""

    def __init__(self, made: Awaitable[S]) -> None:
        self._made = made
        self._sb: Optional[S] = None

    def __await__(self) -> Generator[Any, None, S]:
        return self._made.__await__()

    async def __aenter__(self) -> S:
        self._sb = await self._made
        return self._sb

    async def __aexit__(self, *exc: object) -> None:
        if self._sb is not None:
            await self._sb.close()


def creating(made: Awaitable[S]) -> Creating[S]:
    """``AsyncSandbox.create``'s result: awaitable, or used directly in ``async with``."""
    return Creating(made)


def request_body(data: AsyncFileData) -> Union[bytes, AsyncIterator[bytes]]:
    """``data`` as one ``bytes`` (small, replayable) or an async iterator of chunks (streamed)."""
    if hasattr(data, "__aiter__"):
        src: AsyncIterable[bytes] = data  # type: ignore[assignment]

        async def pieces() -> AsyncIterator[bytes]:
            async for piece in src:
                if piece:
                    yield bytes(piece)

        return pieces()
    body = body_chunks(data)
    if isinstance(body, bytes):
        return body
    sync_pieces: Iterable[bytes] = body

    async def from_sync() -> AsyncIterator[bytes]:
        for piece in sync_pieces:
            yield piece

    return from_sync()


async def response_bytes(r: httpx.Response) -> AsyncIterator[bytes]:
    """A download's bytes as they come; a reset is an error, never a short file."""
    try:
        async for piece in r.aiter_bytes():
            yield piece
    except httpx.TransportError as e:
        raise ConnectionFailed(f"download broke off: {e}") from e
    finally:
        await r.aclose()


class AsyncCommandHandle(HandleOutput):
    """A command started with ``run(..., background=True)``: ``await wait()`` for its result or
    ``await kill()`` it. Its output so far is in ``stdout`` / ``stderr``."""

    def __init__(self, transport: AsyncTransport, sandbox_id: str, wrapper: BackgroundWrapper):
        super().__init__()
        self._t = transport
        self._sandbox_id = sandbox_id
        self._wrapper = wrapper
        self._task: Optional["asyncio.Task[CommandResult]"] = None
        self._started = asyncio.Event()

    @property
    def done(self) -> bool:
        """True once the command ended (or its stream failed)."""
        return self._task is not None and self._task.done()

    async def start(
        self,
        call: "P.Call[CommandResult]",
        on_stdout: Optional[OutputCallback],
        on_stderr: Optional[OutputCallback],
    ) -> None:
        """Runs ``call`` as a task of its own; returns once the command started, or raises what
        refused it (the policy, a sandbox not found, ...)."""
        events = self._events(on_stdout, on_stderr, self._started.set)
        task = asyncio.ensure_future(self._t.exec_stream(call, events))
        self._task = task
        started = asyncio.ensure_future(self._started.wait())
        await asyncio.wait([task, started], return_when=asyncio.FIRST_COMPLETED)
        started.cancel()
        if task.done() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]

    async def wait(self, timeout: Optional[float] = None) -> CommandResult:
        """Its result once the command ended; ``TimeoutError`` if it still runs after
        ``timeout`` seconds."""
        assert self._task is not None
        try:
            return await asyncio.wait_for(asyncio.shield(self._task), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError("the background command is still running") from None

    async def kill(self) -> bool:
        """Kills the command's process group (SIGKILL). False if it had already ended."""
        if self.done:
            return False
        r = await self._t.call(kill_call(self._t.config, self._sandbox_id, self._wrapper))
        return r.exit_code == 0
