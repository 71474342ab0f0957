"""The asyncio client: :class:`AsyncSandbox` and its parts (commands, files, terminals,
internet, snapshots), :class:`AsyncApprovalsClient` for the people who decide approvals, and
:class:`AsyncVolumesClient`. The blocking client (``sandbox.py``) is generated from this file by
``scripts/gen-sync-sdk``: change this one, then run the script."""

from __future__ import annotations

from typing import List, Mapping, Optional, Sequence, TypeVar, Union

from . import _protocol as P
from ._aio_parts import (
    AsyncCommands,
    AsyncFiles,
    AsyncInternetAccess,
    AsyncSnapshots,
    AsyncTerminals,
)
from ._config import ClientConfig, resolve_config
from ._io_async import Creating, creating  # sync: from ._io_sync import creating
from ._protocol import ApprovalArg, Internet, VolumeArg
from ._transport import AsyncTransport
from .errors import NotFound
from .models import (
    Approval,
    Health,
    PortInfo,
    PreviewLink,
    SandboxInfo,
    TemplateInfo,
    UsageSample,
    VolumeInfo,
)


class AsyncSandbox:
    """A sandbox: a disposable LXC container. Make one with :meth:`create` (``async with``
    destroys it on exit unless ``keep=True``) or reach one with :meth:`connect`."""

    def __init__(self, info: SandboxInfo, transport: AsyncTransport, *, keep: bool = False) -> None:
        self.info = info
        """The sandbox as last seen (refresh with :meth:`get_info`)."""
        self.keep = keep
        """When True, leaving the ``async with`` block (or :meth:`close`) keeps the sandbox."""
        self._t = transport
        self.commands = AsyncCommands(transport, info.id)
        """Run commands."""
        self.files = AsyncFiles(transport, info.id, self.commands)
        """Read, write, list and edit files."""
        self.terminals = AsyncTerminals(transport, info.id)
        """Interactive programs."""
        self.internet = AsyncInternetAccess(transport, info.id)
        """Egress: on, off, an allowlist."""
        self.snapshots = AsyncSnapshots(transport, info.id)
        """Snapshots."""

    @property
    def id(self) -> str:
        """``sb-`` and 12 hex digits."""
        return self.info.id

    @property
    def sandbox_id(self) -> str:
        """The id (E2B's name for it)."""
        return self.info.id

    @property
    def config(self) -> ClientConfig:
        """Where this sandbox's calls go."""
        return self._t.config

    @classmethod
    def create(
        cls,
        *,
        cpus: Optional[int] = None,
        memory_mb: Optional[int] = None,
        disk_gb: Optional[int] = None,
        internet: Internet = None,
        labels: Optional[Mapping[str, str]] = None,
        ttl: Optional[int] = None,
        on_expiry: Optional[str] = None,
        auto_resume: Optional[bool] = None,
        hostname: Optional[str] = None,
        profile: Optional[str] = None,
        template: Optional[str] = None,
        node: Optional[str] = None,
        node_selector: Optional[Mapping[str, str]] = None,
        volumes: Optional[Sequence[VolumeArg]] = None,
        keep: bool = False,
        approval: ApprovalArg = None,
        url: Optional[str] = None,
        token: Optional[str] = None,
        request_timeout: Optional[float] = None,
        max_retries: Optional[int] = None,
        approval_wait: Optional[bool] = None,
    ) -> "Creating[AsyncSandbox]":  # sync: ) -> "Sandbox":
        """Creates a sandbox and returns when it is ready.

        ``internet``: ``True``, ``False`` or ``{"allow": ["example.org"], "ports": [443]}`` /
        ``{"list": "name"}``; ``ttl``: seconds until it is destroyed (or, with
        ``on_expiry="pause"``, paused with its files kept; ``auto_resume=True`` then lets the
        next call on it resume it); ``labels``: for
        :meth:`list`; ``template``: a custom template's name (an operator's, or one of your
        :meth:`capture` s); ``volumes``: your volumes to mount (:class:`VolumeMount`,
        :class:`VolumesClient`). ``url``/``token`` default to ``PVS_URL``/``PVS_TOKEN`` (or
        ``SANDBOXCTL_URL``/``SANDBOXCTL_TOKEN``)."""
        config = resolve_config(
            url,
            token,
            request_timeout=request_timeout,
            max_retries=max_retries,
            approval_wait=approval_wait,
        )

        async def make() -> "AsyncSandbox":
            t = AsyncTransport(config)
            try:
                info = await t.call(
                    P.create_sandbox(
                        config,
                        cpus=cpus,
                        memory_mb=memory_mb,
                        disk_gb=disk_gb,
                        internet=internet,
                        ttl=ttl,
                        on_expiry=on_expiry,
                        auto_resume=auto_resume,
                        labels=labels,
                        hostname=hostname,
                        profile=profile,
                        template=template,
                        volumes=volumes,
                        node=node,
                        node_selector=node_selector,
                        approval=approval,
                    )
                )
            except BaseException:
                await t.close()
                raise
            return cls(info, t, keep=keep)

        return creating(make())

    @classmethod
    async def connect(
        cls,
        sandbox_id: str,
        *,
        keep: bool = True,
        url: Optional[str] = None,
        token: Optional[str] = None,
        request_timeout: Optional[float] = None,
        max_retries: Optional[int] = None,
        approval_wait: Optional[bool] = None,
    ) -> "AsyncSandbox":
        """An existing sandbox by id (:class:`NotFound` if there is none, or not yours).
        ``keep`` defaults to True here: leaving ``async with`` only closes the connections."""
        config = resolve_config(
            url,
            token,
            request_timeout=request_timeout,
            max_retries=max_retries,
            approval_wait=approval_wait,
        )
        t = AsyncTransport(config)
        try:
            info = await t.call(P.get_sandbox(sandbox_id))
        except BaseException:
            await t.close()
            raise
        return cls(info, t, keep=keep)

    @staticmethod
    async def list(
        labels: Optional[Mapping[str, str]] = None,
        *,
        url: Optional[str] = None,
        token: Optional[str] = None,
    ) -> List[SandboxInfo]:
        """Your sandboxes (an admin token: all), oldest first; ``labels`` must all match."""
        async with AsyncTransport(resolve_config(url, token)) as t:
            return await t.call(P.list_sandboxes(labels))

    async def get_info(self) -> SandboxInfo:
        """Fetches the sandbox's state (and updates :attr:`info`)."""
        self.info = await self._t.call(P.get_sandbox(self.id))
        return self.info

    async def is_running(self) -> bool:
        """True while the sandbox exists and its container runs."""
        try:
            return (await self.get_info()).status == "running"
        except NotFound:
            return False

    async def set_ttl(self, seconds: int) -> SandboxInfo:
        """The sandbox now expires ``seconds`` from now."""
        self.info = await self._t.call(P.set_ttl(self.id, seconds))
        return self.info

    async def set_timeout(self, seconds: int) -> SandboxInfo:
        """:meth:`set_ttl` under E2B's name."""
        return await self.set_ttl(seconds)

    async def ports(self) -> List[PortInfo]:
        """What listens in the sandbox: each TCP port with its addresses and preview URL."""
        return await self._t.call(P.list_ports(self._t.config, self.id))

    def get_host(self, port: int) -> str:
        """The preview URL of ``port`` on the controller (E2B's ``get_host`` gives a host
        name; here the port is reached through the API with the bearer token)."""
        return P.preview_url(self._t.config, self.id, port)

    async def preview(self, port: int, expires_in: Optional[int] = None) -> PreviewLink:
        """A link to ``port`` a browser opens without the token, for ``expires_in`` seconds
        (default an hour). Anyone holding the link reaches that port until it expires."""
        return await self._t.call(P.make_preview(self._t.config, self.id, port, expires_in))

    async def usage(
        self, since: Optional[int] = None, until: Optional[int] = None
    ) -> List[UsageSample]:
        """What it used over time, oldest first: Proxmox's history of its container (a sample
        a minute over the last hour, coarser further back) since it was created, then the live
        sample. ``since``/``until``: unix seconds (``until`` before now leaves the live one out)."""
        return await self._t.call(P.get_usage(self.id, since, until))

    async def pause(self) -> SandboxInfo:
        """Stops it with its files kept (processes end); ``state`` becomes ``"paused"``."""
        self.info = await self._t.call(P.pause_sandbox(self.id))
        return self.info

    async def resume(self, ttl: Optional[int] = None) -> SandboxInfo:
        """Starts a paused sandbox again; returns once its SSH answers. ``ttl``: its new
        lifetime (default: what it had left, or its TTL of creation after an expiry pause)."""
        self.info = await self._t.call(P.resume_sandbox(self.id, ttl))
        return self.info

    async def capture(self, name: Optional[str] = None) -> TemplateInfo:
        """A template of its files as they are now (processes and memory are not kept), owned
        by your token: ``Sandbox.create(template=name)`` starts from it. ``name``: 1-32 of
        ``[a-z0-9-]``, a letter first (default: ``snap-`` and 12 hex digits). E2B's snapshot."""
        return await self._t.call(P.capture_sandbox(self.id, name))

    async def fork(
        self, count: int = 1, *, ttl: Optional[int] = None, approval: ApprovalArg = None
    ) -> List["AsyncSandbox"]:
        """``count`` new sandboxes of its files as they are now, with its size, labels and
        internet (all or none); each is yours to destroy (``async with`` each, or ``destroy()``)."""
        infos = await self._t.call(P.fork_sandbox(self._t.config, self.id, count, ttl, approval))
        return [AsyncSandbox(info, AsyncTransport(self._t.config)) for info in infos]

    async def destroy(self) -> None:
        """Destroys the sandbox (internet revoked first, container purged). Idempotent."""
        try:
            await self._t.call(P.destroy_sandbox(self.id))
        except NotFound:
            pass

    async def kill(self) -> None:
        """:meth:`destroy` under E2B's name."""
        await self.destroy()

    async def health(self) -> Health:
        """The controller's health (with this token: its peers too)."""
        return await self._t.call(P.health())

    async def close(self) -> None:
        """Destroys the sandbox unless :attr:`keep`, then closes the connections."""
        try:
            if not self.keep:
                await self.destroy()
        finally:
            await self._t.close()

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncSandbox({self.id!r}, address={self.info.address!r})"


C = TypeVar("C", bound="AsyncServiceClient")


class AsyncServiceClient:
    """A client of the service itself rather than of one sandbox: its connections, closed by
    :meth:`close` or on leaving ``async with``."""

    def __init__(self, *, url: Optional[str] = None, token: Optional[str] = None) -> None:
        self._t = AsyncTransport(resolve_config(url, token))

    async def __aenter__(self: C) -> C:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the connections."""
        await self._t.close()


class AsyncApprovalsClient(AsyncServiceClient):
    """For the people who decide approvals (an admin token or one with ``approver: true``);
    any token may list and read its own."""

    async def list(self, state: Optional[str] = None) -> List[Approval]:
        """Approvals (``state="pending"``: only those waiting)."""
        return await self._t.call(P.list_approvals(self._t.approvals, state))

    async def get(self, approval_id: str) -> Approval:
        """One approval."""
        return await self._t.call(P.get_approval(approval_id, self._t.approvals))

    async def approve(
        self, approval: Union[Approval, str], *, reason: Optional[str] = None
    ) -> Approval:
        """Approves (``Conflict`` if it is no longer pending)."""
        aid = approval if isinstance(approval, str) else approval.id
        return await self._t.call(P.decide_approval(self._t.approvals, aid, True, reason))

    async def deny(
        self, approval: Union[Approval, str], *, reason: Optional[str] = None
    ) -> Approval:
        """Denies, with a reason the caller sees."""
        aid = approval if isinstance(approval, str) else approval.id
        return await self._t.call(P.decide_approval(self._t.approvals, aid, False, reason))


class AsyncVolumesClient(AsyncServiceClient):
    """Your volumes: named disks that outlive the sandboxes that mount them
    (``Sandbox.create(volumes=[VolumeMount("work", "/mnt/work")])``). One sandbox at a time
    holds a volume, from its create until it is destroyed."""

    async def create(
        self, name: str, *, size_gb: Optional[int] = None, node: Optional[str] = None
    ) -> VolumeInfo:
        """A new volume: ``name`` 1-63 of ``[a-z0-9_-]`` (``Conflict`` if yours has it),
        ``size_gb`` the controller's default if None."""
        return await self._t.call(P.create_volume(name, size_gb, node))

    async def list(self) -> List[VolumeInfo]:
        """Your volumes, oldest first."""
        return await self._t.call(P.list_volumes())

    async def get(self, volume_id: str) -> VolumeInfo:
        """One volume."""
        return await self._t.call(P.get_volume(volume_id))

    async def delete(self, volume_id: str) -> None:
        """Deletes it and its files (``Conflict`` while a sandbox holds it)."""
        await self._t.call(P.delete_volume(volume_id))

    async def resize(self, volume_id: str, size_gb: int) -> VolumeInfo:
        """Grows it (``Conflict`` while a sandbox holds it)."""
        return await self._t.call(P.resize_volume(volume_id, size_gb))
