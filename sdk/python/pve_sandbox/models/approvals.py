"""Approvals: a call a person decides, and waiting for the decision.

The waiting itself is the transport's (``_transport.PollingApprovalWaiter``): an approval
holds the waiter of the client that made it, so this module imports nothing of the SDK's
upper floors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Protocol

from ._json import Json


class ApprovalWaiter(Protocol):
    """What :meth:`Approval.wait` asks: the client that made the approval."""

    def wait(self, approval: "Approval", timeout: Optional[float], poll_interval: float) -> None:
        """Blocks until a person decided ``approval``, updating it in place."""

    async def wait_async(
        self, approval: "Approval", timeout: Optional[float], poll_interval: float
    ) -> None:
        """:meth:`wait` for asyncio code."""


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
    _waiter: Optional[ApprovalWaiter] = field(default=None, repr=False, compare=False)

    @property
    def pending(self) -> bool:
        """True while nobody decided."""
        return self.state == "pending"

    @property
    def approved(self) -> bool:
        """True once a person approved it."""
        return self.state == "approved"

    @classmethod
    def from_json(cls, j: Json, waiter: Optional[ApprovalWaiter] = None) -> "Approval":
        """Parses an approval object (``waiter``: what :meth:`wait` asks)."""
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
            _waiter=waiter,
        )

    def _waiting(self) -> ApprovalWaiter:
        if self._waiter is None:
            raise ValueError("this Approval was not made by a client; use ApprovalsClient.get")
        return self._waiter

    def wait(self, timeout: Optional[float] = None, poll_interval: float = 0.5) -> "Approval":
        """Blocks until a person decided. Returns this approval once approved; raises
        :class:`~pve_sandbox.errors.ApprovalDenied` if denied or expired and ``TimeoutError``
        if still pending after ``timeout`` seconds (``None``: until its deadline)."""
        self._waiting().wait(self, timeout, poll_interval)
        return self

    async def wait_async(
        self, timeout: Optional[float] = None, poll_interval: float = 0.5
    ) -> "Approval":
        """:meth:`wait` for asyncio code."""
        await self._waiting().wait_async(self, timeout, poll_interval)
        return self
