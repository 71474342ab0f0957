"""Sandboxes: create, list, pause, fork, time to live, internet; their snapshots and volumes."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence
from urllib.parse import quote

from .._config import ClientConfig
from ..models import (
    Health,
    PortInfo,
    PreviewLink,
    SandboxInfo,
    SnapshotInfo,
    TemplateInfo,
    UsageSample,
    VolumeInfo,
    VolumeMount,
)
from .core import (
    Json,
    ApprovalArg,
    Internet,
    VolumeArg,
    Call,
    path_segment,
    sb_path,
    approval_headers,
    no_reply,
    internet_body,
)


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
    return Call("DELETE", sb_path(sandbox_id), no_reply, ok=(204,), timeout=300.0)


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
        no_reply,
        ok=(204,),
        timeout=600.0,
    )


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
    return Call("GET", "/volumes/" + path_segment(volume_id), VolumeInfo.from_json)


def delete_volume(volume_id: str) -> Call[None]:
    """``DELETE /volumes/{id}`` (409 while a sandbox holds it)."""
    return Call(
        "DELETE", "/volumes/" + path_segment(volume_id), lambda j: None, ok=(204,), timeout=300.0
    )


def resize_volume(volume_id: str, size_gb: int) -> Call[VolumeInfo]:
    """``POST /volumes/{id}/resize``: grows it (409 while a sandbox holds it)."""
    return Call(
        "POST",
        "/volumes/" + path_segment(volume_id) + "/resize",
        VolumeInfo.from_json,
        body={"size_gb": int(size_gb)},
        timeout=300.0,
    )
