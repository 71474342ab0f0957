"""Typed errors: one class per error code of the REST API (docs/api.md, "Errors").

Every error the controller answers with is a :class:`PvsError` carrying the HTTP status, the
API's ``code``, its ``message`` and the reply's ``X-Request-Id`` (the same id is in the
controller's audit and service logs). Catch a subclass for one case, ``PvsError`` for all.
"""

from __future__ import annotations

from typing import Dict, Optional, Type

from .models.approvals import Approval


class PvsError(Exception):
    """Base of every error this SDK raises for an API reply or a failed connection."""

    status: int
    """HTTP status of the reply (0 when no reply came)."""
    code: str
    """The API's error code, e.g. ``"not_found"``."""
    message: str
    """The API's message, e.g. ``"no sandbox sb-4f2a9c1e0b7d"``."""
    request_id: Optional[str]
    """The reply's ``X-Request-Id``, to find the call in the controller's logs."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        code: str = "",
        request_id: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.request_id = request_id

    def __str__(self) -> str:
        where = f"{self.status} {self.code}".strip()
        return f"{where}: {self.message}" if where else self.message


class ConnectionFailed(PvsError):
    """The controller could not be reached, or the connection broke before a reply."""


class InvalidArgument(PvsError):
    """400 ``invalid_argument``: a malformed or out-of-range argument; the message names it."""


class Unauthenticated(PvsError):
    """401 ``unauthenticated``: no token, or one the controller does not know."""


class PermissionDenied(PvsError):
    """403 ``permission_denied``: refused by a policy rule (the message is the rule's), a
    person's denial of an approval, the token's egress caps, or the sandbox's filesystem.
    """


class ApprovalDenied(PermissionDenied):
    """403 after an approval was denied by a person or expired (see :meth:`Approval.wait`)."""


class NotFound(PvsError):
    """404 ``not_found``: no such sandbox (or not yours), file, snapshot, terminal, approval."""


class MethodNotAllowed(PvsError):
    """405 ``method_not_allowed``: the path exists with other methods."""


class Conflict(PvsError):
    """409 ``conflict``: locked, in the wrong state, a limit on snapshots, ..."""


class AlreadyExists(Conflict):
    """409 ``already_exists``: the name is taken."""


class TooLarge(PvsError):
    """413 ``too_large``: a body or a file over the controller's limit."""


class UnsupportedMediaType(PvsError):
    """415 ``unsupported_media_type``: the body's content type was refused."""


class TerminalInputRefused(PvsError):
    """422 ``terminal_input_not_modelled``: input the ``terminal.input`` policy cannot follow
    (cursor keys, history, completion, escape sequences other than F1-F4) while rules judge
    this token's typed lines. Type text, Backspace, C-w, C-u or Enter instead."""


class EditFailed(PvsError):
    """422: :meth:`Files.edit` could not apply the edit (see the subclasses)."""


class NoMatch(EditFailed):
    """422 ``no_match``: the text to replace is not in the file."""


class AmbiguousMatch(EditFailed):
    """422 ``ambiguous_match``: the text occurs more than once (pass ``replace_all=True`` or
    more surrounding lines)."""


class BinaryFile(EditFailed):
    """422 ``binary_file``: the file holds NUL bytes."""


class LimitExceeded(PvsError):
    """429 ``limit_exceeded``: a per-token limit (sandboxes, requests, streams, terminals).

    The SDK retries such calls itself (``max_retries`` times, waiting ``Retry-After``) when
    the request can be sent again; this is raised when the retries are used up."""

    retry_after: Optional[float]
    """Seconds the controller asked to wait (``Retry-After``), if it said."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 429,
        code: str = "limit_exceeded",
        request_id: Optional[str] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(message, status=status, code=code, request_id=request_id)
        self.retry_after = retry_after


class Internal(PvsError):
    """500 ``internal``: a bug in the controller; its log has the request id."""


class Unavailable(PvsError):
    """503 ``unavailable``: Proxmox, the agent or the sandbox's SSH unreachable, no capacity,
    or the controller is starting."""


class Timeout(PvsError):
    """504 ``timeout``: a deadline passed on the controller's side (e.g. SSH connect)."""


class InsufficientStorage(PvsError):
    """507 ``insufficient_storage``: the sandbox's disk is full."""


class ApprovalRequired(PvsError):
    """202: a policy rule sends this call to a person.

    ``approval`` is the pending :class:`~pve_sandbox.models.Approval`. Wait for it
    (``e.approval.wait()``, or ``await e.approval.wait_async()``), then make the same call again
    with ``approval=e.approval``: it goes through once."""

    approval: "Approval"
    """The approval a person decides."""

    def __init__(self, approval: "Approval", *, request_id: Optional[str] = None) -> None:
        super().__init__(
            f"waiting for a person to approve {approval.action} ({approval.id}): "
            f"{approval.message or approval.summary}",
            status=202,
            code="approval_required",
            request_id=request_id,
        )
        self.approval = approval


_BY_CODE: Dict[str, Type[PvsError]] = {
    "invalid_argument": InvalidArgument,
    "unauthenticated": Unauthenticated,
    "permission_denied": PermissionDenied,
    "not_found": NotFound,
    "method_not_allowed": MethodNotAllowed,
    "conflict": Conflict,
    "already_exists": AlreadyExists,
    "too_large": TooLarge,
    "unsupported_media_type": UnsupportedMediaType,
    "no_match": NoMatch,
    "ambiguous_match": AmbiguousMatch,
    "binary_file": BinaryFile,
    "terminal_input_not_modelled": TerminalInputRefused,
    "limit_exceeded": LimitExceeded,
    "internal": Internal,
    "unavailable": Unavailable,
    "timeout": Timeout,
    "insufficient_storage": InsufficientStorage,
}

_BY_STATUS: Dict[int, Type[PvsError]] = {
    400: InvalidArgument,
    401: Unauthenticated,
    403: PermissionDenied,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    413: TooLarge,
    415: UnsupportedMediaType,
    422: EditFailed,
    429: LimitExceeded,
    500: Internal,
    503: Unavailable,
    504: Timeout,
    507: InsufficientStorage,
}


def error_for(
    status: int,
    code: str,
    message: str,
    request_id: Optional[str] = None,
    retry_after: Optional[float] = None,
) -> PvsError:
    """The typed error for an API error reply (by ``code``, else by HTTP status)."""
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status) or PvsError
    if status == 403 and ("approval" in message and "denied" in message):
        cls = ApprovalDenied
    if issubclass(cls, LimitExceeded):
        return cls(
            message,
            status=status,
            code=code,
            request_id=request_id,
            retry_after=retry_after,
        )
    return cls(message, status=status, code=code, request_id=request_id)
