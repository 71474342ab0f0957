"""Commands: one exec call, and the stream of a streamed one."""

from __future__ import annotations

import json
import math
from typing import Callable, Dict, List, Mapping, Optional

from .._config import ClientConfig
from ..errors import ConnectionFailed, error_for
from ..models import CommandResult
from .core import Json, ApprovalArg, Call, sb_path, approval_headers


def exec_call(
    config: ClientConfig,
    sandbox_id: str,
    command: str,
    *,
    cwd: Optional[str],
    env: Optional[Mapping[str, str]],
    stdin: Optional[str],
    timeout: Optional[float],
    approval: ApprovalArg,
    stream: bool,
) -> Call[CommandResult]:
    """``POST /sandboxes/{id}/exec`` (``stream``: NDJSON events, see :class:`ExecEvents`)."""
    body: Json = {"command": command}
    if cwd is not None:
        body["cwd"] = cwd
    if env:
        body["env"] = dict(env)
    if stdin is not None:
        body["stdin"] = stdin
    if timeout is not None:
        body["timeout_seconds"] = max(1, int(math.ceil(timeout)))
    headers = approval_headers(approval, config)
    if stream:
        headers["Accept"] = "application/x-ndjson"
    return Call(
        "POST",
        sb_path(sandbox_id, "exec"),
        CommandResult.from_json,
        body=body,
        headers=headers,
        # The reply comes when the command ends: no read timeout beyond the command's own.
        timeout=None if timeout is None else timeout + config.request_timeout,
        judged=True,
    )


OutputCallback = Callable[[str], None]


class ExecEvents:
    """Folds the NDJSON events of a streamed exec into a :class:`CommandResult`, calling
    ``on_stdout``/``on_stderr`` with each piece as it arrives."""

    def __init__(
        self,
        on_stdout: Optional[OutputCallback],
        on_stderr: Optional[OutputCallback],
        on_start: Optional[Callable[[], None]] = None,
    ) -> None:
        self._on = {"stdout": on_stdout, "stderr": on_stderr}
        self._on_start = on_start
        self._out: Dict[str, List[str]] = {"stdout": [], "stderr": []}
        self.result: Optional[CommandResult] = None

    def feed_line(self, line: str) -> None:
        """Takes one line of the stream."""
        if not line.strip():
            return
        ev = json.loads(line)
        kind = ev.get("type")
        if kind == "start" and self._on_start is not None:
            self._on_start()
        elif kind in ("stdout", "stderr"):
            data = str(ev.get("data", ""))
            self._out[kind].append(data)
            cb = self._on[kind]
            if cb is not None:
                cb(data)
        elif kind == "exit":
            ev["stdout"] = "".join(self._out["stdout"])
            ev["stderr"] = "".join(self._out["stderr"])
            self.result = CommandResult.from_json(ev)
        elif kind == "error":
            err = ev.get("error") or {}
            raise error_for(0, str(err.get("code", "")), str(err.get("message", "stream error")))

    def finish(self) -> CommandResult:
        """The result, once the stream ended; an error if it ended without one."""
        if self.result is None:
            raise ConnectionFailed("the exec stream ended before the command's exit event")
        return self.result
