"""pve-sandbox's Python SDK: disposable LXC sandboxes on Proxmox VE, for agents.

    from pve_sandbox import Sandbox

    with Sandbox.create(ttl=900) as sb:
        print(sb.commands.run("uname -a").stdout)

Configuration comes from ``PVS_URL``/``PVS_TOKEN`` (or ``SANDBOXCTL_URL``/
``SANDBOXCTL_TOKEN``) unless given as arguments. See docs/python.md.
"""

from ._config import ClientConfig, resolve_config
from ._terminal_ws import AsyncTerminalConnection, TerminalConnection
from ._version import VERSION as __version__
from .aio import (
    AsyncApprovalsClient,
    AsyncCommandHandle,
    AsyncCommands,
    AsyncFiles,
    AsyncInternetAccess,
    AsyncSandbox,
    AsyncSnapshots,
    AsyncTerminal,
    AsyncTerminals,
)
from .errors import (
    AlreadyExists,
    AmbiguousMatch,
    ApprovalDenied,
    ApprovalRequired,
    BinaryFile,
    Conflict,
    ConnectionFailed,
    EditFailed,
    InsufficientStorage,
    Internal,
    InvalidArgument,
    LimitExceeded,
    MethodNotAllowed,
    NoMatch,
    NotFound,
    PermissionDenied,
    PvsError,
    Timeout,
    TooLarge,
    Unauthenticated,
    Unavailable,
    UnsupportedMediaType,
)
from .models import (
    Approval,
    CommandResult,
    Cursor,
    DirListing,
    EditResult,
    EntryInfo,
    Health,
    SandboxInfo,
    Screen,
    SnapshotInfo,
    TerminalInfo,
    WaitResult,
    WriteInfo,
)
from .sandbox import (
    ApprovalsClient,
    CommandHandle,
    Commands,
    Files,
    InternetAccess,
    Sandbox,
    Snapshots,
    Terminal,
    Terminals,
)

__all__ = [name for name in dir() if not name.startswith("_")]
