"""What the blocking client does its own way, written by hand: a background command runs on a
thread, file bodies and downloads are iterators, ``Sandbox.create`` returns the sandbox.
``_io_async.py`` has the same names for asyncio; the rest of the blocking client is generated
from the asyncio one (``scripts/gen-sync-sdk``)."""

from __future__ import annotations

import threading
from typing import Iterator, Optional, TypeVar, Union

import httpx

from . import _protocol as P
from ._protocol import OutputCallback
from ._shared import BackgroundWrapper, FileData, HandleOutput, body_chunks, kill_call
from ._transport import SyncTransport
from .errors import ConnectionFailed
from .models import CommandResult

__all__ = ["CommandHandle", "FileData", "creating", "request_body", "response_bytes"]

T = TypeVar("T")


def creating(made: T) -> T:
    """``Sandbox.create``'s result: the sandbox itself (the asyncio client's is awaitable)."""
    return made


def request_body(data: FileData) -> Union[bytes, Iterator[bytes]]:
    """``data`` as one ``bytes`` (small, replayable) or an iterator of chunks (streamed)."""
    return body_chunks(data)


def response_bytes(r: httpx.Response) -> Iterator[bytes]:
    """A download's bytes as they come; a reset is an error, never a short file."""
    try:
        for piece in r.iter_bytes():
            yield piece
    except httpx.TransportError as e:
        raise ConnectionFailed(f"download broke off: {e}") from e
    finally:
        r.close()


class CommandHandle(HandleOutput):
    """A command started with ``run(..., background=True)``: ``wait()`` for its result or
    ``kill()`` it. Its output so far is in ``stdout`` / ``stderr``."""

    def __init__(self, transport: SyncTransport, sandbox_id: str, wrapper: BackgroundWrapper):
        super().__init__()
        self._t = transport
        self._sandbox_id = sandbox_id
        self._wrapper = wrapper
        self._started = threading.Event()
        self._done = threading.Event()
        self._result: Optional[CommandResult] = None
        self._error: Optional[BaseException] = None

    @property
    def done(self) -> bool:
        """True once the command ended (or its stream failed)."""
        return self._done.is_set()

    def start(
        self,
        call: "P.Call[CommandResult]",
        on_stdout: Optional[OutputCallback],
        on_stderr: Optional[OutputCallback],
    ) -> None:
        """Runs ``call`` on a thread of its own; returns once the command started, or raises
        what refused it (the policy, a sandbox not found, ...)."""
        events = self._events(on_stdout, on_stderr, self._started.set)
        threading.Thread(target=self._run, args=(call, events), daemon=True).start()
        self._started.wait()
        if self._error is not None:
            raise self._error

    def _run(self, call: "P.Call[CommandResult]", events: "P.ExecEvents") -> None:
        try:
            self._result = self._t.exec_stream(call, events)
        except BaseException as e:  # handed to wait()
            self._error = e
        finally:
            self._started.set()
            self._done.set()

    def wait(self, timeout: Optional[float] = None) -> CommandResult:
        """Blocks until the command ended and returns its result; ``TimeoutError`` if it still
        runs after ``timeout`` seconds."""
        if not self._done.wait(timeout):
            raise TimeoutError("the background command is still running")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def kill(self) -> bool:
        """Kills the command's process group (SIGKILL). False if it had already ended."""
        if self._done.is_set():
            return False
        r = self._t.call(kill_call(self._t.config, self._sandbox_id, self._wrapper))
        return r.exit_code == 0
