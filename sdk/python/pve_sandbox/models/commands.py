"""What a command left: its exit code and output."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ._json import Json, opt_int


@dataclass
class CommandResult:
    """What a finished command left: ``exit_code``, ``stdout``, ``stderr`` and more."""

    exit_code: int
    """The exit status; ``-1`` when it died of a signal (see ``signal``)."""
    stdout: str
    """Its standard output (head and tail only when ``truncated``)."""
    stderr: str
    """Its standard error (head and tail only when ``truncated``)."""
    timed_out: bool = False
    """True when ``timeout`` passed and its process group was killed."""
    truncated: bool = False
    """True when output beyond the controller's limit was dropped."""
    duration_ms: int = 0
    """How long it ran, as the controller measured."""
    signal: Optional[str] = None
    """The signal it died of, e.g. ``"KILL"``."""
    stdout_bytes: Optional[int] = None
    """All bytes it wrote to stdout, kept or not (buffered calls only)."""
    stderr_bytes: Optional[int] = None
    """All bytes it wrote to stderr, kept or not (buffered calls only)."""

    @property
    def ok(self) -> bool:
        """True when it exited 0."""
        return self.exit_code == 0

    @classmethod
    def from_json(cls, j: Json) -> "CommandResult":
        """Parses the buffered exec reply."""
        return cls(
            exit_code=int(j.get("exit_code", -1)),
            stdout=str(j.get("stdout", "")),
            stderr=str(j.get("stderr", "")),
            timed_out=bool(j.get("timed_out", False)),
            truncated=bool(j.get("truncated", False)),
            duration_ms=int(j.get("duration_ms", 0)),
            signal=j.get("signal"),
            stdout_bytes=opt_int(j.get("stdout_bytes")),
            stderr_bytes=opt_int(j.get("stderr_bytes")),
        )
