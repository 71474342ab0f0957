"""Dataclasses for every reply of the REST API (docs/api.md).

Each has ``from_json`` (the API's JSON object) and keeps fields the SDK does not know in
``raw``, so a newer controller's additions are never lost.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Union

from ._config import ClientConfig

Json = Dict[str, Any]


def _opt_int(v: Any) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass
class SandboxInfo:
    """A sandbox as ``GET /v1/sandboxes/{id}`` shows it."""

    id: str
    """``sb-`` and 12 hex digits."""
    state: str
    """The controller's state, e.g. ``"ready"``."""
    status: str
    """Proxmox's status, e.g. ``"running"`` (``"unreachable"`` when its node is offline)."""
    vmid: int
    """The container's Proxmox VMID."""
    node: str
    """The Proxmox node it runs on."""
    hostname: str
    """The container's hostname."""
    address: str
    """Its IPv4 address on the sandbox bridge."""
    internet: Union[bool, Json]
    """Effective egress: ``False``, ``True`` or ``{"allow": [...], "ports": [...]}``."""
    egress: str
    """``"off"``, ``"on"`` or ``"allowlist"``."""
    cpus: int
    """CPU cores."""
    memory_mb: int
    """Memory in MiB."""
    disk_gb: int
    """Root disk in GiB."""
    created_at: str
    """RFC 3339 UTC."""
    expires_at: str
    """RFC 3339 UTC: the sandbox is destroyed (or paused, see ``on_expiry``) then (see
    ``set_ttl``)."""
    labels: Dict[str, str]
    """Labels given at create."""
    owner: str
    """Name of the token that created it."""
    host_key: Optional[str] = None
    """SHA256 fingerprint of the sandbox's own SSH host key, if it has one."""
    on_expiry: str = "destroy"
    """What the TTL's end does: ``"destroy"`` or ``"pause"``."""
    auto_resume: bool = False
    """With ``on_expiry="pause"``: a call on it while paused resumes it first."""
    volumes: List["VolumeMount"] = field(default_factory=list)
    """The volumes mounted in it (``create(volumes=...)``)."""
    raw: Json = field(default_factory=dict, repr=False)
    """The reply as sent."""

    @classmethod
    def from_json(cls, j: Json) -> "SandboxInfo":
        """Parses the API's sandbox object."""
        return cls(
            id=str(j.get("id", "")),
            state=str(j.get("state", "")),
            status=str(j.get("status", "")),
            vmid=int(j.get("vmid", 0)),
            node=str(j.get("node", "")),
            hostname=str(j.get("hostname", "")),
            address=str(j.get("address", "")),
            internet=j.get("internet", False),
            egress=str(j.get("egress", "")),
            cpus=int(j.get("cpus", 0)),
            memory_mb=int(j.get("memory_mb", 0)),
            disk_gb=int(j.get("disk_gb", 0)),
            created_at=str(j.get("created_at", "")),
            expires_at=str(j.get("expires_at", "")),
            labels={str(k): str(v) for k, v in (j.get("labels") or {}).items()},
            owner=str(j.get("owner", "")),
            host_key=j.get("host_key"),
            on_expiry=str(j.get("on_expiry", "destroy")),
            auto_resume=bool(j.get("auto_resume", False)),
            volumes=[VolumeMount.from_json(v) for v in (j.get("volumes") or [])],
            raw=j,
        )


@dataclass
class VolumeMount:
    """A volume mounted in a sandbox: ``Sandbox.create(volumes=[VolumeMount("work", "/mnt/w")])``
    (``volume``: a name or id of your volumes; a sandbox shows ids)."""

    volume: str
    """The volume's name or id (``vol-`` and 12 hex digits)."""
    path: str
    """Where it is mounted: absolute, not a system directory."""
    read_only: bool = False
    """Mounted read-only."""

    @classmethod
    def from_json(cls, j: Json) -> "VolumeMount":
        """Parses one item of a sandbox's ``volumes``."""
        return cls(
            volume=str(j.get("id", j.get("volume", ""))),
            path=str(j.get("path", "")),
            read_only=bool(j.get("read_only", False)),
        )

    def to_json(self) -> Json:
        """The item of a create's ``volumes``."""
        body: Json = {"volume": self.volume, "path": self.path}
        if self.read_only:
            body["read_only"] = True
        return body


@dataclass
class VolumeInfo:
    """A volume: a named disk of your token that outlives its sandboxes (``VolumesClient``)."""

    id: str
    """``vol-`` and 12 hex digits."""
    name: str
    """Unique among your volumes."""
    size_gb: int = 0
    """Its size; writes past it fail with "No space left on device"."""
    owner: str = ""
    """The token that made it."""
    node: str = ""
    """Where it lives (sandboxes that mount it are placed there)."""
    storage: str = ""
    """The Proxmox storage."""
    mounted_by: Optional[str] = None
    """The sandbox that holds it (one at a time), or None."""
    created_at: int = 0
    """Unix seconds."""

    @classmethod
    def from_json(cls, j: Json) -> "VolumeInfo":
        """Parses a volume object."""
        return cls(
            id=str(j.get("id", "")),
            name=str(j.get("name", "")),
            size_gb=int(j.get("size_gb", 0) or 0),
            owner=str(j.get("owner", "") or ""),
            node=str(j.get("node", "") or ""),
            storage=str(j.get("storage", "") or ""),
            mounted_by=j.get("mounted_by") or None,
            created_at=int(j.get("created_at", 0) or 0),
        )


@dataclass
class PortInfo:
    """A TCP port something listens on in the sandbox (``Sandbox.ports()``)."""

    port: int
    """The port number."""
    addresses: List[str]
    """Where it listens: ``"0.0.0.0"``, ``"127.0.0.1"``, ``"::"``, ..."""
    url: str
    """Its preview URL on the controller (send the bearer token with it)."""

    @classmethod
    def from_json(cls, j: Json, base_url: str) -> "PortInfo":
        """Parses one item of ``GET /v1/sandboxes/{id}/ports``."""
        return cls(
            port=int(j.get("port", 0)),
            addresses=[str(a) for a in j.get("addresses") or []],
            url=base_url.rstrip("/") + str(j.get("url", "")),
        )


@dataclass
class UsageSample:
    """What a sandbox used over one step of Proxmox's history, or now (``Sandbox.usage()``)."""

    time: int
    """Unix seconds: the end of the step averaged, or the moment of the live sample."""
    cpu: float
    """The share of ``cpus`` in use, 0..1."""
    cpus: float
    """Cores it may use."""
    mem: int
    """Memory in use, bytes."""
    maxmem: int
    """Its memory limit, bytes."""
    disk: int
    """Bytes used on its root file system."""
    maxdisk: int
    """The root file system's size, bytes."""
    live: bool = False
    """The current status rather than a step of the history."""

    @classmethod
    def from_json(cls, j: Json) -> "UsageSample":
        """Parses one item of ``GET /v1/sandboxes/{id}/usage``."""
        return cls(
            time=int(j.get("time", 0)),
            cpu=float(j.get("cpu", 0)),
            cpus=float(j.get("cpus", 0)),
            mem=int(j.get("mem", 0)),
            maxmem=int(j.get("maxmem", 0)),
            disk=int(j.get("disk", 0)),
            maxdisk=int(j.get("maxdisk", 0)),
            live=bool(j.get("live", False)),
        )


@dataclass
class PreviewLink:
    """A link to a sandbox's port that opens without the token (``Sandbox.preview()``)."""

    port: int
    """The port it reaches."""
    url: str
    """The full URL: open it in a browser; anyone holding it reaches the port."""
    expires_at: str
    """When it stops working (RFC 3339, UTC)."""

    @classmethod
    def from_json(cls, j: Json, base_url: str) -> "PreviewLink":
        """Parses the reply of ``POST /v1/sandboxes/{id}/previews``."""
        return cls(
            port=int(j.get("port", 0)),
            url=base_url.rstrip("/") + str(j.get("path", "")),
            expires_at=str(j.get("expires_at", "")),
        )


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
            stdout_bytes=_opt_int(j.get("stdout_bytes")),
            stderr_bytes=_opt_int(j.get("stderr_bytes")),
        )


@dataclass
class WriteInfo:
    """The reply to a file upload."""

    path: str
    """Where the file is."""
    mode: str
    """Its mode, e.g. ``"0644"``."""
    size: int
    """Bytes written."""

    @classmethod
    def from_json(cls, j: Json) -> "WriteInfo":
        """Parses the upload reply."""
        return cls(
            path=str(j.get("path", "")),
            mode=str(j.get("mode", "")),
            size=int(j["size"]),
        )


@dataclass
class EntryInfo:
    """One directory entry."""

    name: str
    """Its name (no directory part)."""
    type: str
    """``"file"``, ``"dir"``, ``"symlink"``, ..."""
    size: int
    """Size in bytes."""
    mode: str
    """Permission bits, e.g. ``"0644"``."""
    mtime: str
    """Modification time as the API states it."""
    path: str = ""
    """Its absolute path (the listed directory and ``name``)."""

    @classmethod
    def from_json(cls, j: Json, directory: str = "") -> "EntryInfo":
        """Parses one ``entries`` item of a listing of ``directory``."""
        name = str(j.get("name", ""))
        return cls(
            name=name,
            type=str(j.get("type", "")),
            size=int(j.get("size", 0)),
            mode=str(j.get("mode", "")),
            mtime=str(j.get("mtime", "")),
            path=(directory.rstrip("/") + "/" + name) if directory else name,
        )


@dataclass
class DirListing:
    """A directory listing: iterate it like the list of its entries."""

    path: str
    """The directory."""
    entries: List[EntryInfo]
    """Its entries, in the server's order."""
    truncated: bool = False
    """True when the listing stopped at ``limit`` entries (or 30 s)."""

    def __iter__(self) -> Iterator[EntryInfo]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def names(self) -> List[str]:
        """The entries' names."""
        return [e.name for e in self.entries]

    @classmethod
    def from_json(cls, j: Json) -> "DirListing":
        """Parses the ``list=true`` reply."""
        path = str(j.get("path", ""))
        return cls(
            path=path,
            entries=[EntryInfo.from_json(e, path) for e in j.get("entries", [])],
            truncated=bool(j.get("truncated", False)),
        )


@dataclass
class EditResult:
    """The reply to ``files/edit``."""

    path: str
    """The edited file."""
    replaced: int
    """How many occurrences were replaced."""
    size: int
    """The file's new size."""
    crlf: bool
    """True when the file has CRLF line ends (the new text was written with them)."""
    diff: str
    """A unified diff of the change (cut at 4 KiB)."""

    @classmethod
    def from_json(cls, j: Json) -> "EditResult":
        """Parses the edit reply."""
        return cls(
            path=str(j.get("path", "")),
            replaced=int(j.get("replaced", 0)),
            size=int(j.get("size", 0)),
            crlf=bool(j.get("crlf", False)),
            diff=str(j.get("diff", "")),
        )


@dataclass
class SnapshotInfo:
    """A snapshot of a sandbox."""

    name: str
    """Its name."""
    description: str = ""
    """What was given at create."""
    created_at: str = ""
    """RFC 3339 UTC (may be empty for the creation reply)."""

    @classmethod
    def from_json(cls, j: Json) -> "SnapshotInfo":
        """Parses a snapshot object."""
        return cls(
            name=str(j.get("name", "")),
            description=str(j.get("description", "") or ""),
            created_at=str(j.get("created_at", "") or ""),
        )


@dataclass
class TemplateInfo:
    """A custom template: built from a recipe, or captured from a sandbox (:meth:`capture`)."""

    name: str
    """What ``create(template=...)`` names it by."""
    vmid: int = 0
    """Its first copy's VMID."""
    node: str = ""
    """Where its first copy lives."""
    owner: str = ""
    """The token that captured it ("" for an operator's template)."""
    source: str = ""
    """The sandbox it was captured from ("" for a recipe's)."""
    in_use: int = 0
    """Live sandboxes made from it (a template in use is not deleted)."""
    created_at: int = 0
    """Unix seconds."""

    @classmethod
    def from_json(cls, j: Json) -> "TemplateInfo":
        """Parses a template object."""
        return cls(
            name=str(j.get("name", "")),
            vmid=int(j.get("vmid", 0) or 0),
            node=str(j.get("node", "") or ""),
            owner=str(j.get("owner", "") or ""),
            source=str(j.get("source", "") or ""),
            in_use=int(j.get("in_use", 0) or 0),
            created_at=int(j.get("created_at", 0) or 0),
        )


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
            exit_code=_opt_int(j.get("exit_code")),
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


@dataclass
class Health:
    """``GET /v1/health``."""

    status: str
    """``"ok"``, ``"degraded"`` or ``"starting"``."""
    version: str
    """The controller's version."""
    raw: Json = field(default_factory=dict, repr=False)
    """The reply as sent (with a token: the peers' state, sandbox count)."""

    @classmethod
    def from_json(cls, j: Json) -> "Health":
        """Parses the health reply."""
        return cls(status=str(j.get("status", "")), version=str(j.get("version", "")), raw=j)


@dataclass
class Approval:
    """A call a policy rule sent to a person (docs/policy.md).

    From :class:`~pve_sandbox.errors.ApprovalRequired`: ``wait()`` (or ``await
    wait_async()``) until a person decided, then repeat the call with ``approval=`` this.
    """

    id: str
    """``ap-...``; the call is repeated with the header ``Approval: <id>``."""
    state: str
    """``"pending"``, ``"approved"`` or ``"denied"``."""
    action: str
    """What was asked: ``exec``, ``files.write``, ``internet``, ..."""
    sandbox: str
    """The sandbox (empty for a create)."""
    summary: str
    """What a person sees, e.g. the command line."""
    rule: str
    """The rule that asked, e.g. ``policy.default[1]``."""
    message: str
    """The rule's message."""
    token: str
    """Name of the token that asked."""
    created_at: str
    """RFC 3339 UTC."""
    deadline: str
    """When it expires undecided (then it counts as denied)."""
    used: bool = False
    """True once the approved call went through."""
    decided_by: Optional[str] = None
    """Who decided (a token name, ``"deadline"`` or ``"restart"``)."""
    reason: Optional[str] = None
    """The reason given with the decision."""
    raw: Json = field(default_factory=dict, repr=False)
    """The reply as sent."""
    _config: Optional[ClientConfig] = field(default=None, repr=False, compare=False)

    @property
    def pending(self) -> bool:
        """True while nobody decided."""
        return self.state == "pending"

    @property
    def approved(self) -> bool:
        """True once a person approved it."""
        return self.state == "approved"

    @classmethod
    def from_json(cls, j: Json, config: Optional[ClientConfig] = None) -> "Approval":
        """Parses an approval object (``config``: where :meth:`wait` asks)."""
        return cls(
            id=str(j.get("id", "")),
            state=str(j.get("state", "")),
            action=str(j.get("action", "")),
            sandbox=str(j.get("sandbox", "") or ""),
            summary=str(j.get("summary", "") or ""),
            rule=str(j.get("rule", "") or ""),
            message=str(j.get("message", "") or ""),
            token=str(j.get("token", "") or ""),
            created_at=str(j.get("created_at", "") or ""),
            deadline=str(j.get("deadline", "") or ""),
            used=bool(j.get("used", False)),
            decided_by=j.get("decided_by"),
            reason=j.get("reason"),
            raw=j,
            _config=config,
        )

    def _settled(self, fresh: "Approval", deadline: float) -> bool:
        self.__dict__.update({k: v for k, v in fresh.__dict__.items() if k != "_config"})
        if self.state == "approved":
            return True
        if self.state != "pending":
            from .errors import ApprovalDenied

            who = f" by {self.decided_by}" if self.decided_by else ""
            why = f": {self.reason}" if self.reason else ""
            raise ApprovalDenied(
                f"approval {self.id} was {self.state}{who}{why}",
                status=403,
                code="permission_denied",
            )
        if time.monotonic() >= deadline:
            raise TimeoutError(f"approval {self.id} is still pending")
        return False

    def wait(self, timeout: Optional[float] = None, poll_interval: float = 0.5) -> "Approval":
        """Blocks until a person decided. Returns this approval once approved; raises
        :class:`~pve_sandbox.errors.ApprovalDenied` if denied or expired and ``TimeoutError``
        if still pending after ``timeout`` seconds (``None``: until its deadline)."""
        from ._transport import SyncTransport
        from ._protocol import get_approval

        if self._config is None:
            raise ValueError("this Approval was not made by a client; use ApprovalsClient.get")
        deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
        with SyncTransport(self._config) as t:
            while not self._settled(t.call(get_approval(self.id, self._config)), deadline):
                time.sleep(min(poll_interval, max(0.0, deadline - time.monotonic())))
        return self

    async def wait_async(
        self, timeout: Optional[float] = None, poll_interval: float = 0.5
    ) -> "Approval":
        """:meth:`wait` for asyncio code."""
        from ._transport import AsyncTransport
        from ._protocol import get_approval

        if self._config is None:
            raise ValueError("this Approval was not made by a client; use ApprovalsClient.get")
        deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
        async with AsyncTransport(self._config) as t:
            while not self._settled(await t.call(get_approval(self.id, self._config)), deadline):
                await asyncio.sleep(min(poll_interval, max(0.0, deadline - time.monotonic())))
        return self
