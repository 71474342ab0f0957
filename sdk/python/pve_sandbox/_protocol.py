"""The REST API as data, shared by the sync and the async clients.

Each API call is a :class:`Call`: the request (method, path, query, JSON body, headers) and
a parser from the reply's JSON to a dataclass. The transports (``_transport.py``) only send
calls and map errors; everything that knows the API lives here, once.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import (
    Any,
    Callable,
    Dict,
    Generic,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
)
from typing import Union
from urllib.parse import quote

from ._config import ClientConfig
from .errors import ApprovalRequired, PvsError, error_for
from .models import (
    Approval,
    CommandResult,
    DirListing,
    EditResult,
    Health,
    PortInfo,
    PreviewLink,
    SandboxInfo,
    Screen,
    SnapshotInfo,
    TemplateInfo,
    TerminalInfo,
    UsageSample,
    VolumeInfo,
    VolumeMount,
    WaitResult,
    WriteInfo,
)

T = TypeVar("T")
Json = Dict[str, Any]
ApprovalArg = Union[Approval, str, None]
"""An approval to present: the :class:`Approval` from ``ApprovalRequired``, or its id."""
Internet = Union[bool, Mapping[str, Any], None]
"""``True``/``False``, ``{"allow": [names], "ports": [ports]}`` or ``{"list": "name"}``."""
VolumeArg = Union[VolumeMount, Mapping[str, Any]]
"""A volume to mount: a :class:`VolumeMount` or ``{"volume": name, "path": "/mnt/w"}``."""


@dataclass
class Call(Generic[T]):
    """One API call: what to send and how to read the reply."""

    method: str
    path: str
    parse: Callable[[Any], T]
    params: List[Tuple[str, str]] = field(default_factory=list)
    body: Any = None
    headers: Dict[str, str] = field(default_factory=dict)
    ok: Tuple[int, ...] = (200,)
    timeout: Optional[float] = -1.0  # read timeout; -1: the client's request_timeout; None: none
    judged: bool = False  # a policy may send it to a person (202)


def _q(segment: str) -> str:
    return quote(segment, safe="")


def sb_path(sandbox_id: str, *rest: str) -> str:
    """``/sandboxes/<id>/<rest...>`` with each segment escaped."""
    return "/sandboxes/" + "/".join([_q(sandbox_id), *(_q(r) for r in rest)])


def approval_headers(approval: ApprovalArg, config: ClientConfig) -> Dict[str, str]:
    """Headers of a call a policy may judge: ``Approval:`` and ``Prefer: respond-async``."""
    h: Dict[str, str] = {}
    if not config.approval_wait:
        h["Prefer"] = "respond-async"
    if approval is not None:
        h["Approval"] = approval if isinstance(approval, str) else approval.id
    return h


def _none(_: Any) -> None:
    return None


def internet_body(internet: Internet) -> Any:
    """The API's form of an egress request (a bool or an allowlist object)."""
    if internet is None or isinstance(internet, bool):
        return bool(internet)
    return dict(internet)


def error_from_reply(
    status: int, headers: Mapping[str, str], content: bytes, config: ClientConfig
) -> PvsError:
    """The typed error for a reply that is not a success (202 included)."""
    request_id = headers.get("x-request-id")
    try:
        body = json.loads(content.decode("utf-8")) if content else {}
    except (ValueError, UnicodeDecodeError):
        body = {}
    if status == 202 and isinstance(body, dict) and isinstance(body.get("approval"), dict):
        return ApprovalRequired(Approval.from_json(body["approval"], config), request_id=request_id)
    err = body.get("error") if isinstance(body, dict) else None
    code = str(err.get("code", "")) if isinstance(err, dict) else ""
    message = str(err.get("message", "")) if isinstance(err, dict) else ""
    if not message:
        message = content.decode("utf-8", "replace")[:500] or f"HTTP {status}"
    retry_after: Optional[float] = None
    ra = headers.get("retry-after")
    if ra:
        try:
            retry_after = float(ra)
        except ValueError:
            retry_after = None
    return error_for(status, code, message, request_id, retry_after)


# --- sandboxes -------------------------------------------------------------------------------


def create_sandbox(
    config: ClientConfig,
    *,
    cpus: Optional[int],
    memory_mb: Optional[int],
    disk_gb: Optional[int],
    internet: Internet,
    ttl: Optional[int],
    on_expiry: Optional[str],
    auto_resume: Optional[bool],
    labels: Optional[Mapping[str, str]],
    hostname: Optional[str],
    profile: Optional[str],
    node: Optional[str],
    node_selector: Optional[Mapping[str, str]],
    approval: ApprovalArg,
    template: Optional[str] = None,
    volumes: Optional[Sequence[VolumeArg]] = None,
) -> Call[SandboxInfo]:
    """``POST /sandboxes``."""
    body: Json = {}
    if volumes:
        body["volumes"] = [volume_mount_body(v) for v in volumes]
    for k, v in (("cpus", cpus), ("memory_mb", memory_mb), ("disk_gb", disk_gb)):
        if v is not None:
            body[k] = v
    if internet is not None:
        body["internet"] = internet_body(internet)
    if ttl is not None:
        body["ttl_seconds"] = int(ttl)
    if on_expiry is not None:
        body["on_expiry"] = on_expiry
    if auto_resume is not None:
        body["auto_resume"] = bool(auto_resume)
    if labels:
        body["labels"] = dict(labels)
    for k2, s in (
        ("hostname", hostname),
        ("profile", profile),
        ("template", template),
        ("node", node),
    ):
        if s is not None:
            body[k2] = s
    if node_selector:
        body["node_selector"] = dict(node_selector)
    return Call(
        "POST",
        "/sandboxes",
        SandboxInfo.from_json,
        body=body,
        ok=(201,),
        headers=approval_headers(approval, config),
        timeout=max(config.request_timeout, 300.0),
        judged=True,
    )


def list_sandboxes(labels: Optional[Mapping[str, str]]) -> Call[List[SandboxInfo]]:
    """``GET /sandboxes?label=k=v...``."""
    return Call(
        "GET",
        "/sandboxes",
        lambda j: [SandboxInfo.from_json(s) for s in j.get("sandboxes", [])],
        params=[("label", f"{k}={v}") for k, v in (labels or {}).items()],
    )


def get_sandbox(sandbox_id: str) -> Call[SandboxInfo]:
    """``GET /sandboxes/{id}``."""
    return Call("GET", sb_path(sandbox_id), SandboxInfo.from_json)


def list_ports(config: ClientConfig, sandbox_id: str) -> Call[List[PortInfo]]:
    """``GET /sandboxes/{id}/ports``: what listens in the sandbox."""

    def parse(j: Json) -> List[PortInfo]:
        return [PortInfo.from_json(p, config.url) for p in j.get("ports") or []]

    return Call("GET", sb_path(sandbox_id, "ports"), parse)


def get_usage(
    sandbox_id: str, since: Optional[int], until: Optional[int]
) -> Call[List[UsageSample]]:
    """``GET /sandboxes/{id}/usage``: samples oldest first, in a window of unix seconds."""
    params = [(k, str(v)) for k, v in (("since", since), ("until", until)) if v is not None]
    return Call(
        "GET",
        sb_path(sandbox_id, "usage"),
        lambda j: [UsageSample.from_json(s) for s in j.get("samples") or []],
        params=params,
    )


def make_preview(
    config: ClientConfig, sandbox_id: str, port: int, expires_in: Optional[int]
) -> Call[PreviewLink]:
    """``POST /sandboxes/{id}/previews``: a link to ``port`` that opens without the token."""
    body: Json = {"port": int(port)}
    if expires_in is not None:
        body["expires_in_seconds"] = int(expires_in)

    def parse(j: Json) -> PreviewLink:
        return PreviewLink.from_json(j, config.url)

    return Call("POST", sb_path(sandbox_id, "previews"), parse, body=body, ok=(201,))


def preview_url(config: ClientConfig, sandbox_id: str, port: int) -> str:
    """The URL of ``port`` in the sandbox on the controller (the bearer token goes with it)."""
    return f"{config.url.rstrip('/')}/v1/sandboxes/{quote(sandbox_id)}/ports/{int(port)}/"


def destroy_sandbox(sandbox_id: str) -> Call[None]:
    """``DELETE /sandboxes/{id}``."""
    return Call("DELETE", sb_path(sandbox_id), _none, ok=(204,), timeout=300.0)


def pause_sandbox(sandbox_id: str) -> Call[SandboxInfo]:
    """``POST /sandboxes/{id}/pause`` (the filesystem mode, the only one)."""
    return Call(
        "POST",
        sb_path(sandbox_id, "pause"),
        SandboxInfo.from_json,
        body={"mode": "filesystem"},
        timeout=300.0,
    )


def resume_sandbox(sandbox_id: str, ttl: Optional[int]) -> Call[SandboxInfo]:
    """``POST /sandboxes/{id}/resume``."""
    return Call(
        "POST",
        sb_path(sandbox_id, "resume"),
        SandboxInfo.from_json,
        body={} if ttl is None else {"ttl_seconds": int(ttl)},
        timeout=300.0,
    )


def capture_sandbox(sandbox_id: str, name: Optional[str]) -> Call[TemplateInfo]:
    """``POST /sandboxes/{id}/capture``: a template of its files now, owned by the token."""
    return Call(
        "POST",
        sb_path(sandbox_id, "capture"),
        TemplateInfo.from_json,
        body={} if name is None else {"name": name},
        ok=(201,),
        timeout=600.0,
    )


def fork_sandbox(
    config: ClientConfig,
    sandbox_id: str,
    count: int,
    ttl: Optional[int],
    approval: ApprovalArg,
) -> Call[List[SandboxInfo]]:
    """``POST /sandboxes/{id}/fork``: ``count`` sandboxes of its files now, all or none."""
    body: Json = {"count": int(count)}
    if ttl is not None:
        body["ttl_seconds"] = int(ttl)
    return Call(
        "POST",
        sb_path(sandbox_id, "fork"),
        lambda j: [SandboxInfo.from_json(s) for s in j.get("sandboxes", [])],
        body=body,
        ok=(201,),
        headers=approval_headers(approval, config),
        timeout=max(config.request_timeout, 600.0),
        judged=True,
    )


def set_ttl(sandbox_id: str, seconds: int) -> Call[SandboxInfo]:
    """``POST /sandboxes/{id}/ttl``."""
    return Call(
        "POST",
        sb_path(sandbox_id, "ttl"),
        SandboxInfo.from_json,
        body={"ttl_seconds": seconds},
    )


def set_internet(
    config: ClientConfig, sandbox_id: str, body: Json, approval: ApprovalArg
) -> Call[SandboxInfo]:
    """``PUT /sandboxes/{id}/internet``."""
    return Call(
        "PUT",
        sb_path(sandbox_id, "internet"),
        SandboxInfo.from_json,
        body=body,
        headers=approval_headers(approval, config),
        judged=True,
    )


def health() -> Call[Health]:
    """``GET /health`` (503 is an answer too: degraded or starting)."""
    return Call("GET", "/health", Health.from_json, ok=(200, 503))


# --- commands --------------------------------------------------------------------------------


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
        config: ClientConfig,
        on_start: Optional[Callable[[], None]] = None,
    ) -> None:
        self._on = {"stdout": on_stdout, "stderr": on_stderr}
        self._on_start = on_start
        self._out: Dict[str, List[str]] = {"stdout": [], "stderr": []}
        self._config = config
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
            from .errors import ConnectionFailed

            raise ConnectionFailed("the exec stream ended before the command's exit event")
        return self.result


# --- files -----------------------------------------------------------------------------------


def files_params(path: str, **extra: str) -> List[Tuple[str, str]]:
    """``?path=...&...``."""
    return [("path", path), *extra.items()]


def put_file(
    config: ClientConfig,
    sandbox_id: str,
    path: str,
    mode: Union[int, str, None],
    approval: ApprovalArg,
    body: Union[bytes, Any] = None,
) -> Call[WriteInfo]:
    """``PUT /sandboxes/{id}/files`` (the body is the transport's: bytes or a stream). A body
    in bytes is sent with its ``Content-Digest`` (RFC 9530), so an upload that needs a person's
    approval can be approved: the approval covers exactly this content."""
    params = files_params(path)
    if mode is not None:
        params.append(("mode", mode if isinstance(mode, str) else format(mode, "04o")))
    headers = approval_headers(approval, config)
    headers["Content-Type"] = "application/octet-stream"
    if isinstance(body, bytes):
        digest = base64.b64encode(hashlib.sha256(body).digest()).decode("ascii")
        headers["Content-Digest"] = f"sha-256=:{digest}:"
    return Call(
        "PUT",
        sb_path(sandbox_id, "files"),
        WriteInfo.from_json,
        params=params,
        headers=headers,
        timeout=max(config.request_timeout, 600.0),
        judged=True,
    )


def get_file(sandbox_id: str, path: str) -> Call[None]:
    """``GET /sandboxes/{id}/files`` (the transports stream the body)."""
    return Call("GET", sb_path(sandbox_id, "files"), _none, params=files_params(path))


def list_dir(sandbox_id: str, path: str, limit: Optional[int]) -> Call[DirListing]:
    """``GET /sandboxes/{id}/files?list=true``."""
    params = files_params(path, list="true")
    if limit is not None:
        params.append(("limit", str(limit)))
    return Call("GET", sb_path(sandbox_id, "files"), DirListing.from_json, params=params)


def edit_file(
    config: ClientConfig,
    sandbox_id: str,
    path: str,
    old: str,
    new: str,
    replace_all: bool,
    approval: ApprovalArg,
) -> Call[EditResult]:
    """``POST /sandboxes/{id}/files/edit``."""
    return Call(
        "POST",
        sb_path(sandbox_id, "files", "edit"),
        EditResult.from_json,
        body={
            "path": path,
            "old_string": old,
            "new_string": new,
            "replace_all": replace_all,
        },
        headers=approval_headers(approval, config),
        judged=True,
    )


def shell_quote(s: str) -> str:
    """Quotes ``s`` for ``sh``."""
    return "'" + s.replace("'", "'\"'\"'") + "'"


# --- snapshots -------------------------------------------------------------------------------


def create_snapshot(sandbox_id: str, name: str, description: Optional[str]) -> Call[SnapshotInfo]:
    """``POST /sandboxes/{id}/snapshots``."""
    body: Json = {"name": name}
    if description:
        body["description"] = description

    def parse(j: Any) -> SnapshotInfo:
        info = SnapshotInfo.from_json(j if isinstance(j, dict) and "name" in j else body)
        return info

    return Call(
        "POST",
        sb_path(sandbox_id, "snapshots"),
        parse,
        body=body,
        ok=(200, 201),
        timeout=600.0,
    )


def list_snapshots(sandbox_id: str) -> Call[List[SnapshotInfo]]:
    """``GET /sandboxes/{id}/snapshots``."""
    return Call(
        "GET",
        sb_path(sandbox_id, "snapshots"),
        lambda j: [SnapshotInfo.from_json(s) for s in j.get("snapshots", [])],
    )


def rollback_snapshot(sandbox_id: str, name: str) -> Call[SandboxInfo]:
    """``POST /sandboxes/{id}/snapshots/{name}/rollback``."""
    return Call(
        "POST",
        sb_path(sandbox_id, "snapshots", name, "rollback"),
        SandboxInfo.from_json,
        body={},
        timeout=600.0,
    )


def delete_snapshot(sandbox_id: str, name: str) -> Call[None]:
    """``DELETE /sandboxes/{id}/snapshots/{name}``."""
    return Call(
        "DELETE",
        sb_path(sandbox_id, "snapshots", name),
        _none,
        ok=(204,),
        timeout=600.0,
    )


# --- terminals -------------------------------------------------------------------------------


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
    return Call("DELETE", sb_path(sandbox_id, "terminals", tid), _none, ok=(204,))


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


# --- approvals -------------------------------------------------------------------------------


def volume_mount_body(v: VolumeArg) -> Json:
    """One item of a create's ``volumes``: a :class:`VolumeMount`, or a mapping as the API takes
    it (``{"volume", "path", "read_only"}``)."""
    if isinstance(v, VolumeMount):
        return v.to_json()
    return dict(v)


def create_volume(name: str, size_gb: Optional[int], node: Optional[str]) -> Call[VolumeInfo]:
    """``POST /volumes``."""
    body: Json = {"name": name}
    if size_gb is not None:
        body["size_gb"] = int(size_gb)
    if node is not None:
        body["node"] = node
    return Call("POST", "/volumes", VolumeInfo.from_json, body=body, ok=(201,), timeout=300.0)


def list_volumes() -> Call[List[VolumeInfo]]:
    """``GET /volumes``: yours (an admin token: everyone's)."""
    return Call("GET", "/volumes", lambda j: [VolumeInfo.from_json(v) for v in j["volumes"]])


def get_volume(volume_id: str) -> Call[VolumeInfo]:
    """``GET /volumes/{id}``."""
    return Call("GET", "/volumes/" + _q(volume_id), VolumeInfo.from_json)


def delete_volume(volume_id: str) -> Call[None]:
    """``DELETE /volumes/{id}`` (409 while a sandbox holds it)."""
    return Call("DELETE", "/volumes/" + _q(volume_id), lambda j: None, ok=(204,), timeout=300.0)


def resize_volume(volume_id: str, size_gb: int) -> Call[VolumeInfo]:
    """``POST /volumes/{id}/resize``: grows it (409 while a sandbox holds it)."""
    return Call(
        "POST",
        "/volumes/" + _q(volume_id) + "/resize",
        VolumeInfo.from_json,
        body={"size_gb": int(size_gb)},
        timeout=300.0,
    )


def list_approvals(config: ClientConfig, state: Optional[str]) -> Call[List[Approval]]:
    """``GET /approvals[?state=...]``."""
    return Call(
        "GET",
        "/approvals",
        lambda j: [Approval.from_json(a, config) for a in j.get("approvals", [])],
        params=[("state", state)] if state else [],
    )


def get_approval(approval_id: str, config: ClientConfig) -> Call[Approval]:
    """``GET /approvals/{id}``."""
    return Call("GET", "/approvals/" + _q(approval_id), lambda j: Approval.from_json(j, config))


def decide_approval(
    config: ClientConfig, approval_id: str, approve: bool, reason: Optional[str]
) -> Call[Approval]:
    """``POST /approvals/{id}/approve`` or ``.../deny``."""
    return Call(
        "POST",
        "/approvals/" + _q(approval_id) + ("/approve" if approve else "/deny"),
        lambda j: Approval.from_json(j.get("approval", j) if isinstance(j, dict) else {}, config),
        body={"reason": reason} if reason else {},
    )
