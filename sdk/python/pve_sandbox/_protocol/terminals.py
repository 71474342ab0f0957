"""Terminals: open, type, read the screen, wait for text."""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence

from .._config import ClientConfig
from ..models import Screen, TerminalInfo, WaitResult
from .core import Json, ApprovalArg, Call, sb_path, approval_headers, no_reply


def open_terminal(
    sandbox_id: str,
    command: Optional[str],
    cols: Optional[int],
    rows: Optional[int],
    env: Optional[Mapping[str, str]],
    cwd: Optional[str],
) -> Call[TerminalInfo]:
    """``POST /sandboxes/{id}/terminals``."""
    body: Json = {}
    if command is not None:
        body["command"] = command
    if cols is not None:
        body["cols"] = cols
    if rows is not None:
        body["rows"] = rows
    if env:
        body["env"] = dict(env)
    if cwd is not None:
        body["cwd"] = cwd
    return Call(
        "POST",
        sb_path(sandbox_id, "terminals"),
        TerminalInfo.from_json,
        body=body,
        ok=(201,),
    )


def list_terminals(sandbox_id: str) -> Call[List[TerminalInfo]]:
    """``GET /sandboxes/{id}/terminals``."""
    return Call(
        "GET",
        sb_path(sandbox_id, "terminals"),
        lambda j: [TerminalInfo.from_json(t) for t in j.get("terminals", [])],
    )


def get_terminal(sandbox_id: str, tid: str) -> Call[TerminalInfo]:
    """``GET /sandboxes/{id}/terminals/{tid}``."""
    return Call("GET", sb_path(sandbox_id, "terminals", tid), TerminalInfo.from_json)


def close_terminal(sandbox_id: str, tid: str) -> Call[None]:
    """``DELETE /sandboxes/{id}/terminals/{tid}``."""
    return Call("DELETE", sb_path(sandbox_id, "terminals", tid), no_reply, ok=(204,))


def resize_terminal(sandbox_id: str, tid: str, cols: int, rows: int) -> Call[TerminalInfo]:
    """``POST .../terminals/{tid}/resize``."""
    return Call(
        "POST",
        sb_path(sandbox_id, "terminals", tid, "resize"),
        TerminalInfo.from_json,
        body={"cols": cols, "rows": rows},
    )


def terminal_input(
    config: ClientConfig,
    sandbox_id: str,
    tid: str,
    items: Sequence[Mapping[str, str]],
    approval: ApprovalArg,
) -> Call[TerminalInfo]:
    """``POST .../terminals/{tid}/input`` with ``[{"text": ...} | {"key": ...}]``."""
    return Call(
        "POST",
        sb_path(sandbox_id, "terminals", tid, "input"),
        TerminalInfo.from_json,
        body={"input": [dict(i) for i in items]},
        headers=approval_headers(approval, config),
        judged=True,
    )


def terminal_screen(sandbox_id: str, tid: str, scrollback: int) -> Call[Screen]:
    """``GET .../terminals/{tid}/screen``."""
    return Call(
        "GET",
        sb_path(sandbox_id, "terminals", tid, "screen"),
        Screen.from_json,
        params=[("scrollback", str(scrollback))] if scrollback else [],
    )


def terminal_wait(
    sandbox_id: str,
    tid: str,
    pattern: Optional[str],
    quiet_ms: Optional[int],
    timeout: Optional[float],
    scrollback: int,
) -> Call[WaitResult]:
    """``POST .../terminals/{tid}/wait``."""
    body: Json = {}
    if pattern is not None:
        body["pattern"] = pattern
    if quiet_ms is not None:
        body["quiet_ms"] = quiet_ms
    timeout_ms = 10000 if timeout is None else int(timeout * 1000)
    body["timeout_ms"] = timeout_ms
    if scrollback:
        body["scrollback"] = scrollback
    return Call(
        "POST",
        sb_path(sandbox_id, "terminals", tid, "wait"),
        WaitResult.from_json,
        body=body,
        timeout=timeout_ms / 1000.0 + 30.0,
    )


def terminal_ws_url(config: ClientConfig, sandbox_id: str, tid: str, watch: bool) -> str:
    """The terminal's WebSocket URL (``ws://`` or ``wss://``)."""
    base = config.api
    if base.startswith("https://"):
        base = "wss://" + base[len("https://") :]
    elif base.startswith("http://"):
        base = "ws://" + base[len("http://") :]
    return base + sb_path(sandbox_id, "terminals", tid, "ws") + ("?mode=watch" if watch else "")


def key_items(keys: Sequence[str]) -> List[Dict[str, str]]:
    """Input items for named keys (``"Enter"``, ``"C-c"``, ``"Escape"``, ...)."""
    return [{"key": k} for k in keys]
