"""The asyncio client: :class:`AsyncSandbox`, the same surface as :class:`~pve_sandbox.Sandbox`
with ``async with`` and ``await``. Requests and replies are the same :mod:`._protocol` calls;
only the transport differs."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, Union


from . import _protocol as P
from ._config import ClientConfig, resolve_config
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
    VolumeInfo,
    UsageSample,
)
from ._aio_parts import (
    AsyncCommands,
    AsyncFiles,
    AsyncTerminals,
    AsyncInternetAccess,
    AsyncSnapshots,
)


class AsyncSandbox:
    """A sandbox for asyncio code: ``async with await AsyncSandbox.create() as sb`` (or
    ``async with AsyncSandbox.create() as sb``)."""

    def __init__(self, info: SandboxInfo, transport: AsyncTransport, *, keep: bool = False) -> None:
        self.info = info
        """The sandbox as last seen."""
        self.keep = keep
        """When True, leaving ``async with`` keeps the sandbox."""
        self._t = transport
        self.commands = AsyncCommands(transport, info.id)
        """Run commands."""
        self.files = AsyncFiles(transport, info.id, self.commands)
        """Files."""
        self.terminals = AsyncTerminals(transport, info.id)
        """Terminals."""
        self.internet = AsyncInternetAccess(transport, info.id)
        """Egress."""
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
    ) -> "_Creating":
        """Creates a sandbox (see :meth:`pve_sandbox.Sandbox.create`). Await it, or use it
        directly in ``async with``."""
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

        return _Creating(make())

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
        """An existing sandbox by id."""
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
        """Your sandboxes, oldest first."""
        async with AsyncTransport(resolve_config(url, token)) as t:
            return await t.call(P.list_sandboxes(labels))

    async def get_info(self) -> SandboxInfo:
        """Fetches the sandbox's state."""
        self.info = await self._t.call(P.get_sandbox(self.id))
        return self.info

    async def is_running(self) -> bool:
        """True while it exists and runs."""
        try:
            return (await self.get_info()).status == "running"
        except NotFound:
            return False

    async def set_ttl(self, seconds: int) -> SandboxInfo:
        """Expires ``seconds`` from now."""
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
        """A link to ``port`` a browser opens without the token (see the sync client)."""
        return await self._t.call(P.make_preview(self._t.config, self.id, port, expires_in))

    async def usage(
        self, since: Optional[int] = None, until: Optional[int] = None
    ) -> List[UsageSample]:
        """What it used over time, oldest first (see the blocking ``Sandbox.usage``)."""
        return await self._t.call(P.get_usage(self.id, since, until))

    async def pause(self) -> SandboxInfo:
        """Stops it with its files kept (processes end)."""
        self.info = await self._t.call(P.pause_sandbox(self.id))
        return self.info

    async def resume(self, ttl: Optional[int] = None) -> SandboxInfo:
        """Starts a paused sandbox again; returns once its SSH answers."""
        self.info = await self._t.call(P.resume_sandbox(self.id, ttl))
        return self.info

    async def capture(self, name: Optional[str] = None) -> TemplateInfo:
        """A template of its files as they are now, owned by your token (see
        :meth:`pve_sandbox.Sandbox.capture`)."""
        return await self._t.call(P.capture_sandbox(self.id, name))

    async def fork(
        self, count: int = 1, *, ttl: Optional[int] = None, approval: ApprovalArg = None
    ) -> List["AsyncSandbox"]:
        """``count`` new sandboxes of its files as they are now (all or none)."""
        infos = await self._t.call(P.fork_sandbox(self._t.config, self.id, count, ttl, approval))
        return [AsyncSandbox(info, AsyncTransport(self._t.config)) for info in infos]

    async def destroy(self) -> None:
        """Destroys the sandbox. Idempotent."""
        try:
            await self._t.call(P.destroy_sandbox(self.id))
        except NotFound:
            pass

    async def kill(self) -> None:
        """:meth:`destroy` under E2B's name."""
        await self.destroy()

    async def health(self) -> Health:
        """The controller's health."""
        return await self._t.call(P.health())

    async def close(self) -> None:
        """Destroys unless :attr:`keep`, then closes the connections."""
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


class _Creating:
    """``AsyncSandbox.create(...)``: awaitable, and an async context manager."""

    def __init__(self, coro: Any) -> None:
        self._coro = coro
        self._sb: Optional[AsyncSandbox] = None

    def __await__(self) -> Any:
        return self._coro.__await__()

    async def __aenter__(self) -> AsyncSandbox:
        sb: AsyncSandbox = await self._coro
        self._sb = sb
        return sb

    async def __aexit__(self, *exc: object) -> None:
        if self._sb is not None:
            await self._sb.close()


class AsyncApprovalsClient:
    """:class:`pve_sandbox.ApprovalsClient` for asyncio code."""

    def __init__(self, *, url: Optional[str] = None, token: Optional[str] = None) -> None:
        self._t = AsyncTransport(resolve_config(url, token))

    async def __aenter__(self) -> "AsyncApprovalsClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the connections."""
        await self._t.close()

    async def list(self, state: Optional[str] = None) -> List[Approval]:
        """Approvals (``state="pending"``: those waiting)."""
        return await self._t.call(P.list_approvals(self._t.approvals, state))

    async def get(self, approval_id: str) -> Approval:
        """One approval."""
        return await self._t.call(P.get_approval(approval_id, self._t.approvals))

    async def approve(
        self, approval: Union[Approval, str], *, reason: Optional[str] = None
    ) -> Approval:
        """Approves."""
        aid = approval if isinstance(approval, str) else approval.id
        return await self._t.call(P.decide_approval(self._t.approvals, aid, True, reason))

    async def deny(
        self, approval: Union[Approval, str], *, reason: Optional[str] = None
    ) -> Approval:
        """Denies."""
        aid = approval if isinstance(approval, str) else approval.id
        return await self._t.call(P.decide_approval(self._t.approvals, aid, False, reason))


class AsyncVolumesClient:
    """:class:`pve_sandbox.VolumesClient` for asyncio code."""

    def __init__(self, *, url: Optional[str] = None, token: Optional[str] = None) -> None:
        self._t = AsyncTransport(resolve_config(url, token))

    async def __aenter__(self) -> "AsyncVolumesClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the connections."""
        await self._t.close()

    async def create(
        self, name: str, *, size_gb: Optional[int] = None, node: Optional[str] = None
    ) -> VolumeInfo:
        """A new volume of yours (see :meth:`pve_sandbox.VolumesClient.create`)."""
        return await self._t.call(P.create_volume(name, size_gb, node))

    async def list(self) -> List[VolumeInfo]:
        """Your volumes, oldest first."""
        return await self._t.call(P.list_volumes())

    async def get(self, volume_id: str) -> VolumeInfo:
        """One volume."""
        return await self._t.call(P.get_volume(volume_id))

    async def delete(self, volume_id: str) -> None:
        """Deletes it (``Conflict`` while a sandbox holds it)."""
        await self._t.call(P.delete_volume(volume_id))

    async def resize(self, volume_id: str, size_gb: int) -> VolumeInfo:
        """Grows it (``Conflict`` while a sandbox holds it)."""
        return await self._t.call(P.resize_volume(volume_id, size_gb))
