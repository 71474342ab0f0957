"""Dataclasses for every reply of the REST API (docs/api.md).

Each has ``from_json`` (the API's JSON object) and keeps fields the SDK does not know in
``raw``, so a newer controller's additions are never lost.

One module per room: sandboxes, commands, files, terminals, approvals.
"""

from .approvals import Approval
from .commands import CommandResult
from .files import (
    DirListing,
    EditResult,
    EntryInfo,
    WriteInfo,
)
from .sandboxes import (
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
from .terminals import (
    Cursor,
    Screen,
    TerminalInfo,
    WaitResult,
)

__all__ = [
    "Approval",
    "CommandResult",
    "Cursor",
    "DirListing",
    "EditResult",
    "EntryInfo",
    "Health",
    "PortInfo",
    "PreviewLink",
    "SandboxInfo",
    "Screen",
    "SnapshotInfo",
    "TemplateInfo",
    "TerminalInfo",
    "UsageSample",
    "VolumeInfo",
    "VolumeMount",
    "WaitResult",
    "WriteInfo",
]
