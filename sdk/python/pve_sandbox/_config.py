"""Where the controller is and which token to use: arguments first, then the environment."""

from __future__ import annotations

import ipaddress
import os
import warnings
from dataclasses import dataclass, field
from typing import Optional
from urllib.parse import urlsplit

DEFAULT_URL = "http://127.0.0.1:8787"


class InsecureTokenWarning(UserWarning):
    """A token is about to be sent over plain ``http://`` to a host other than loopback."""


def _is_loopback(host: str) -> bool:
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped.is_loopback
    return addr.is_loopback


def _safe_for_token(url: str) -> bool:
    """True unless ``url`` is plain ``http://`` to a host other than loopback."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "http":
        return True
    return _is_loopback(parts.hostname or "")


@dataclass(frozen=True)
class ClientConfig:
    """Connection settings shared by every call of one sandbox (or approvals client).

    Build it with :func:`resolve_config`; the fields are read-only."""

    url: str
    """Base URL of the controller, without ``/v1`` (e.g. ``http://127.0.0.1:8787``)."""
    token: str = field(repr=False)
    """The bearer token (never in the ``repr``)."""
    request_timeout: float = 60.0
    """Seconds to wait for a reply to an ordinary call (commands get their own timeout)."""
    max_retries: int = 3
    """How often a call refused with 429 (``Retry-After``) is tried again."""
    approval_wait: bool = False
    """False (default): a call that needs a person's approval raises ``ApprovalRequired`` at
    once (``Prefer: respond-async``). True: the controller holds the call up to
    ``policy.approval_wait_seconds`` for a decision first."""

    def __post_init__(self) -> None:
        if self.token and not _safe_for_token(self.url):
            warnings.warn(
                f"pve_sandbox: the token goes in clear text over plain http:// to "
                f"{urlsplit(self.url).hostname!r}, which is not this machine (use https://, "
                "or http:// only to 127.0.0.1, ::1 or localhost)",
                InsecureTokenWarning,
                stacklevel=3,
            )

    @property
    def api(self) -> str:
        """The ``/v1`` base URL."""
        return self.url.rstrip("/") + "/v1"


def resolve_config(
    url: Optional[str] = None,
    token: Optional[str] = None,
    *,
    request_timeout: Optional[float] = None,
    max_retries: Optional[int] = None,
    approval_wait: Optional[bool] = None,
) -> ClientConfig:
    """Settings from the arguments, else ``PVS_URL``/``PVS_TOKEN``, else
    ``SANDBOXCTL_URL``/``SANDBOXCTL_TOKEN`` (what ``sandboxctl`` and ``scripts/demo --keep``
    use), else the default URL. A missing token raises ``ValueError``."""
    env = os.environ
    url = url or env.get("PVS_URL") or env.get("SANDBOXCTL_URL") or DEFAULT_URL
    token = token or env.get("PVS_TOKEN") or env.get("SANDBOXCTL_TOKEN")
    if not token:
        raise ValueError(
            "pve_sandbox: no token (pass token=, or set PVS_TOKEN or SANDBOXCTL_TOKEN)"
        )
    return ClientConfig(
        url=url.rstrip("/"),
        token=token,
        request_timeout=60.0 if request_timeout is None else request_timeout,
        max_retries=3 if max_retries is None else max_retries,
        approval_wait=bool(approval_wait),
    )
