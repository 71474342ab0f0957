"""Sandboxes, their volumes, ports, usage, preview links, snapshots and templates, and the service's health."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union

from ._json import Json


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
