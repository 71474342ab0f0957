"""Terminals: their state, a screen with its cursor, what a wait saw."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from ._json import Json, opt_int


@dataclass
class TerminalInfo:
    """A terminal as the API shows it."""

    id: str
    """``t-`` and 12 hex digits."""
    sandbox: str
    """The sandbox it runs in."""
    command: str
    """What it runs (empty: the login shell)."""
    state: str
    """``"running"`` or ``"exited"``."""
    cols: int
    """Width in cells."""
    rows: int
    """Height in cells."""
    exit_code: Optional[int] = None
    """Once exited: its status (``None`` for a signal or a lost connection)."""
    signal: Optional[str] = None
    """Once exited by a signal: which."""
    hung_up: bool = False
    """True when it was closed (DELETE or the idle reaper)."""
    raw: Json = field(default_factory=dict, repr=False)
    """The reply as sent."""

    @classmethod
    def from_json(cls, j: Json) -> "TerminalInfo":
        """Parses a terminal object."""
        return cls(
            id=str(j.get("id", "")),
            sandbox=str(j.get("sandbox", "")),
            command=str(j.get("command", "") or ""),
            state=str(j.get("state", "")),
            cols=int(j.get("cols", 0)),
            rows=int(j.get("rows", 0)),
            exit_code=opt_int(j.get("exit_code")),
            signal=j.get("signal"),
            hung_up=bool(j.get("hung_up", False)),
            raw=j,
        )


@dataclass
class Cursor:
    """Where the cursor is (0-based)."""

    row: int
    """Row, 0 at the top."""
    col: int
    """Column, 0 at the left."""
    visible: bool = True
    """False while the program hides it."""


@dataclass
class Screen:
    """A terminal's screen as a person sees it (rendered, no escape bytes)."""

    cols: int
    """Width in cells."""
    rows: int
    """Height in cells."""
    lines: List[str]
    """Exactly ``rows`` strings, trailing spaces trimmed."""
    cursor: Cursor
    """The cursor."""
    title: str = ""
    """The window title the program set."""
    alternate_screen: bool = False
    """True while a full-screen program (vi, less, top) draws."""
    scrollback: List[str] = field(default_factory=list)
    """Lines that scrolled off the top, oldest first (as many as asked for)."""

    @property
    def text(self) -> str:
        """The lines joined with newlines."""
        return "\n".join(self.lines)

    @classmethod
    def from_json(cls, j: Json) -> "Screen":
        """Parses a screen object."""
        c = j.get("cursor") or {}
        return cls(
            cols=int(j.get("cols", 0)),
            rows=int(j.get("rows", 0)),
            lines=[str(s) for s in j.get("lines", [])],
            cursor=Cursor(int(c.get("row", 0)), int(c.get("col", 0)), bool(c.get("visible", True))),
            title=str(j.get("title", "") or ""),
            alternate_screen=bool(j.get("alternate_screen", False)),
            scrollback=[str(s) for s in j.get("scrollback", []) or []],
        )


@dataclass
class WaitResult:
    """What ``Terminal.wait`` saw."""

    outcome: str
    """``"matched"``, ``"exited"``, ``"quiet"`` or ``"timeout"``."""
    waited_ms: float
    """How long it waited."""
    match: Optional[str]
    """The text the pattern matched (``outcome == "matched"``)."""
    terminal: TerminalInfo
    """The terminal afterwards."""
    screen: Screen
    """The screen afterwards."""

    @property
    def matched(self) -> bool:
        """True when the pattern matched."""
        return self.outcome == "matched"

    @classmethod
    def from_json(cls, j: Json) -> "WaitResult":
        """Parses the wait reply."""
        return cls(
            outcome=str(j.get("outcome", "")),
            waited_ms=float(j.get("waited_ms", 0)),
            match=j.get("match"),
            terminal=TerminalInfo.from_json(j.get("terminal") or {}),
            screen=Screen.from_json(j.get("screen") or {}),
        )
