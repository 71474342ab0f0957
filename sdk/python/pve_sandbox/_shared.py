"""Pieces both clients use that are not API calls: background command wrappers and their
output, file bodies."""

from __future__ import annotations

import secrets
from typing import IO, Any, Callable, Iterable, Iterator, List, Optional, Union

from . import _protocol as P
from ._config import ClientConfig
from ._protocol import OutputCallback, shell_quote
from .models import CommandResult

CHUNK = 64 * 1024
"""Upload and download piece size (the controller's SFTP piece is 64 KiB too)."""

FileData = Union[str, bytes, bytearray, memoryview, IO[Any], Iterable[bytes]]
"""What ``files.write`` takes: text, bytes, a binary (or text) file object, or an iterable of
byte chunks (e.g. a generator): streamed, never read whole."""


def body_chunks(data: FileData) -> Union[bytes, Iterator[bytes]]:
    """``data`` as one ``bytes`` (small, replayable) or an iterator of chunks (streamed)."""
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if hasattr(data, "read"):
        f: IO[Any] = data  # type: ignore[assignment]

        def read_file() -> Iterator[bytes]:
            while True:
                piece = f.read(CHUNK)
                if not piece:
                    return
                yield piece.encode("utf-8") if isinstance(piece, str) else bytes(piece)

        return read_file()

    chunks: Iterable[bytes] = data

    def pieces() -> Iterator[bytes]:
        for piece in chunks:
            if piece:
                yield bytes(piece)

    return pieces()


class BackgroundWrapper:
    """How a background command is started and killed (the API has no kill call).

    The command runs under a small ``sh`` wrapper that writes its PID to a marker file in
    ``/tmp`` and removes it when the command ends. ``kill`` runs a second command that reads
    the marker and sends SIGKILL (`kill -9 -PGID`, which dash, bash and busybox sh all take) to
    the wrapper's process group (the exec's own session, so nothing outside it) and removes the
    marker."""

    def __init__(self, command: str) -> None:
        self.marker = f"/tmp/.pvs-bg-{secrets.token_hex(8)}"
        m = self.marker
        self.command = f"echo $$ > {m}; sh -c {shell_quote(command)}; rc=$?; rm -f {m}; exit $rc"
        self.kill_command = (
            f"f={m}; i=0; while [ ! -s $f ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; "
            "[ -s $f ] || exit 3; p=$(cat $f); rm -f $f; "
            "g=$(cut -d' ' -f5 /proc/$p/stat 2>/dev/null); "
            'if [ -n "$g" ] && [ "$g" -gt 1 ]; then kill -9 -$g || kill -9 $p; '
            "else kill -9 $p; fi"
        )


def kill_call(
    config: ClientConfig, sandbox_id: str, wrapper: BackgroundWrapper
) -> "P.Call[CommandResult]":
    """The exec that kills a background command (see :class:`BackgroundWrapper`)."""
    return P.exec_call(
        config,
        sandbox_id,
        wrapper.kill_command,
        cwd=None,
        env=None,
        stdin=None,
        timeout=30,
        approval=None,
        stream=False,
    )


class HandleOutput:
    """A background command's output so far, as both clients' handles keep it."""

    def __init__(self) -> None:
        self._out: List[str] = []
        self._err: List[str] = []

    @property
    def stdout(self) -> str:
        """Standard output so far."""
        return "".join(self._out)

    @property
    def stderr(self) -> str:
        """Standard error so far."""
        return "".join(self._err)

    def _events(
        self,
        on_stdout: Optional[OutputCallback],
        on_stderr: Optional[OutputCallback],
        on_start: Callable[[], None],
    ) -> P.ExecEvents:
        """The stream's events, kept here and passed on to the callbacks."""

        def out(s: str) -> None:
            self._out.append(s)
            if on_stdout:
                on_stdout(s)

        def err(s: str) -> None:
            self._err.append(s)
            if on_stderr:
                on_stderr(s)

        return P.ExecEvents(out, err, on_start=on_start)
