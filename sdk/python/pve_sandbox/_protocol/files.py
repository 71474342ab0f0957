"""Files: write, read, list and edit."""

from __future__ import annotations

import base64
import hashlib
from typing import Any, List, Optional, Tuple, Union

from .._config import ClientConfig
from ..models import DirListing, EditResult, WriteInfo
from .core import ApprovalArg, Call, sb_path, approval_headers, no_reply


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
    return Call("GET", sb_path(sandbox_id, "files"), no_reply, params=files_params(path))


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
