"""Approvals: list, read and decide the calls a policy sent to a person."""

from __future__ import annotations

from typing import List, Optional

from ..models import Approval
from ..models.approvals import ApprovalWaiter
from .core import Call, path_segment


def list_approvals(waiter: ApprovalWaiter, state: Optional[str]) -> Call[List[Approval]]:
    """``GET /approvals[?state=...]``."""
    return Call(
        "GET",
        "/approvals",
        lambda j: [Approval.from_json(a, waiter) for a in j.get("approvals", [])],
        params=[("state", state)] if state else [],
    )


def get_approval(approval_id: str, waiter: ApprovalWaiter) -> Call[Approval]:
    """``GET /approvals/{id}``."""
    return Call(
        "GET", "/approvals/" + path_segment(approval_id), lambda j: Approval.from_json(j, waiter)
    )


def decide_approval(
    waiter: ApprovalWaiter, approval_id: str, approve: bool, reason: Optional[str]
) -> Call[Approval]:
    """``POST /approvals/{id}/approve`` or ``.../deny``."""
    return Call(
        "POST",
        "/approvals/" + path_segment(approval_id) + ("/approve" if approve else "/deny"),
        lambda j: Approval.from_json(j.get("approval", j) if isinstance(j, dict) else {}, waiter),
        body={"reason": reason} if reason else {},
    )
