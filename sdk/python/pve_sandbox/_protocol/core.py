"""What every call shares: :class:`Call`, paths, approval headers, the error of a reply."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, Tuple, TypeVar, Union
from urllib.parse import quote

from .._config import ClientConfig
from ..errors import ApprovalRequired, PvsError, error_for
from ..models import Approval, VolumeMount
from ..models.approvals import ApprovalWaiter

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


def path_segment(segment: str) -> str:
    """One path segment, escaped."""
    return quote(segment, safe="")


def sb_path(sandbox_id: str, *rest: str) -> str:
    """``/sandboxes/<id>/<rest...>`` with each segment escaped."""
    return "/sandboxes/" + "/".join([path_segment(sandbox_id), *(path_segment(r) for r in rest)])


def approval_headers(approval: ApprovalArg, config: ClientConfig) -> Dict[str, str]:
    """Headers of a call a policy may judge: ``Approval:`` and ``Prefer: respond-async``."""
    h: Dict[str, str] = {}
    if not config.approval_wait:
        h["Prefer"] = "respond-async"
    if approval is not None:
        h["Approval"] = approval if isinstance(approval, str) else approval.id
    return h


def no_reply(_: Any) -> None:
    """The parser of a reply with nothing to read."""
    return None


def internet_body(internet: Internet) -> Any:
    """The API's form of an egress request (a bool or an allowlist object)."""
    if internet is None or isinstance(internet, bool):
        return bool(internet)
    return dict(internet)


def error_from_reply(
    status: int, headers: Mapping[str, str], content: bytes, waiter: Optional[ApprovalWaiter]
) -> PvsError:
    """The typed error for a reply that is not a success (202 included); an approval in it
    waits with ``waiter``."""
    request_id = headers.get("x-request-id")
    try:
        body = json.loads(content.decode("utf-8")) if content else {}
    except (ValueError, UnicodeDecodeError):
        body = {}
    if status == 202 and isinstance(body, dict) and isinstance(body.get("approval"), dict):
        return ApprovalRequired(Approval.from_json(body["approval"], waiter), request_id=request_id)
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
