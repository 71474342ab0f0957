"""The asyncio client: :class:`AsyncSandbox`, the same surface as :class:`~pve_sandbox.Sandbox`
with ``async with`` and ``await``. Requests and replies are the same :mod:`._protocol` calls;
only the transport differs."""

from __future__ import annotations

import asyncio
from typing import (
    Any,
    AsyncIterable,
    AsyncIterator,
    Iterable,
    List,
    Literal,
    Mapping,
    Optional,
    Sequence,
    Union,
    overload,
)

import httpx

from . import _protocol as P
from ._config import ClientConfig, resolve_config
from ._protocol import ApprovalArg, Internet, OutputCallback, VolumeArg
from ._shared import BackgroundWrapper, FileData, body_chunks
from ._terminal_ws import AsyncTerminalConnection
from ._transport import AsyncTransport
from .errors import ConnectionFailed, InvalidArgument, NotFound, PvsError, TooLarge
from .models import (
    Approval,
    CommandResult,
    DirListing,
    EditResult,
    Health,
    PortInfo,
    PreviewLink,
    SandboxInfo,
    Screen,
    SnapshotInfo,
    TemplateInfo,
    VolumeInfo,
    TerminalInfo,
    UsageSample,
    WaitResult,
    WriteInfo,
)

AsyncFileData = Union[FileData, AsyncIterable[bytes]]
"""What ``files.write`` takes here: as for the blocking client, or an async iterable."""


async def _async_body(data: AsyncFileData) -> Union[bytes, AsyncIterator[bytes]]:
    if hasattr(data, "__aiter__"):
        src: AsyncIterable[bytes] = data  # type: ignore[assignment]

        async def pieces() -> AsyncIterator[bytes]:
            async for piece in src:
                if piece:
                    yield bytes(piece)

        return pieces()
    body = body_chunks(data)
    if isinstance(body, bytes):
        return body
    sync_pieces: Iterable[bytes] = body

    async def from_sync() -> AsyncIterator[bytes]:
        for piece in sync_pieces:
            yield piece

    return from_sync()


class AsyncCommandHandle:
    """A background command: ``await wait()`` or ``await kill()``."""

    def __init__(self, commands: "AsyncCommands", wrapper: BackgroundWrapper) -> None:
        self._commands = commands
        self._wrapper = wrapper
        self._task: Optional["asyncio.Task[CommandResult]"] = None
        self._started = asyncio.Event()
        self._out: List[str] = []
        self._err: List[str] = []

    @property
    def stdout(self) -> str:
        """Standard output so far."""
        return "".join(self._out)

    @property
    def stderr(self) -> str:
        """Standard error so far."""
        return "".join(self._err)

    @property
    def done(self) -> bool:
        """True once the command ended."""
        return self._task is not None and self._task.done()

    async def wait(self, timeout: Optional[float] = None) -> CommandResult:
        """Its result once it ended; ``TimeoutError`` after ``timeout`` seconds."""
        assert self._task is not None
        try:
            return await asyncio.wait_for(asyncio.shield(self._task), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError("the background command is still running") from None

    async def kill(self) -> bool:
        """Kills its process group (SIGKILL). False if it had already ended."""
        if self.done:
            return False
        c = self._commands
        r = await c._t.call(
            P.exec_call(
                c._t.config,
                c._sandbox_id,
                self._wrapper.kill_command,
                cwd=None,
                env=None,
                stdin=None,
                timeout=30,
                approval=None,
                stream=False,
            )
        )
        return r.exit_code == 0


class AsyncCommands:
    """``sb.commands``: see :class:`pve_sandbox.sandbox.Commands`."""

    def __init__(self, transport: AsyncTransport, sandbox_id: str) -> None:
        self._t = transport
        self._sandbox_id = sandbox_id

    @overload
    async def run(
        self,
        cmd: str,
        *,
        background: Literal[False] = False,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        envs: Optional[Mapping[str, str]] = None,
        stdin: Optional[str] = None,
        timeout: Optional[float] = None,
        on_stdout: Optional[OutputCallback] = None,
        on_stderr: Optional[OutputCallback] = None,
        approval: ApprovalArg = None,
    ) -> CommandResult:
        """Waits for the command: its result."""

    @overload
    async def run(
        self,
        cmd: str,
        *,
        background: Literal[True],
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        envs: Optional[Mapping[str, str]] = None,
        stdin: Optional[str] = None,
        timeout: Optional[float] = None,
        on_stdout: Optional[OutputCallback] = None,
        on_stderr: Optional[OutputCallback] = None,
        approval: ApprovalArg = None,
    ) -> AsyncCommandHandle:
        """Starts the command in the background: its handle."""

    async def run(
        self,
        cmd: str,
        *,
        background: bool = False,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        envs: Optional[Mapping[str, str]] = None,
        stdin: Optional[str] = None,
        timeout: Optional[float] = None,
        on_stdout: Optional[OutputCallback] = None,
        on_stderr: Optional[OutputCallback] = None,
        approval: ApprovalArg = None,
    ) -> Union[CommandResult, AsyncCommandHandle]:
        """Runs ``cmd``; see :meth:`pve_sandbox.sandbox.Commands.run`."""
        env = env if env is not None else envs
        if background:
            wrapper = BackgroundWrapper(cmd)
            handle = AsyncCommandHandle(self, wrapper)
            call = P.exec_call(
                self._t.config,
                self._sandbox_id,
                wrapper.command,
                cwd=cwd,
                env=env,
                stdin=stdin,
                timeout=timeout,
                approval=approval,
                stream=True,
            )

            def out(s: str) -> None:
                handle._out.append(s)
                if on_stdout:
                    on_stdout(s)

            def err(s: str) -> None:
                handle._err.append(s)
                if on_stderr:
                    on_stderr(s)

            events = P.ExecEvents(out, err, self._t.config, on_start=handle._started.set)
            task = asyncio.ensure_future(self._t.exec_stream(call, events))
            handle._task = task
            started = asyncio.ensure_future(handle._started.wait())
            await asyncio.wait([task, started], return_when=asyncio.FIRST_COMPLETED)
            started.cancel()
            if task.done() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
            return handle
        stream = on_stdout is not None or on_stderr is not None
        call = P.exec_call(
            self._t.config,
            self._sandbox_id,
            cmd,
            cwd=cwd,
            env=env,
            stdin=stdin,
            timeout=timeout,
            approval=approval,
            stream=stream,
        )
        if stream:
            return await self._t.exec_stream(
                call, P.ExecEvents(on_stdout, on_stderr, self._t.config)
            )
        result: CommandResult = await self._t.call(call)
        return result


class AsyncFiles:
    """``sb.files``: see :class:`pve_sandbox.sandbox.Files`."""

    def __init__(self, transport: AsyncTransport, sandbox_id: str, commands: AsyncCommands) -> None:
        self._t = transport
        self._sandbox_id = sandbox_id
        self._commands = commands

    async def write(
        self,
        path: str,
        data: AsyncFileData,
        *,
        mode: Union[int, str, None] = None,
        approval: ApprovalArg = None,
    ) -> WriteInfo:
        """Writes ``data`` (text, bytes, a file object, an iterable or async iterable of
        chunks: streamed) to ``path`` atomically."""
        body = await _async_body(data)
        call = P.put_file(self._t.config, self._sandbox_id, path, mode, approval, body)
        return await self._t.call(call, body)

    @overload
    async def read(self, path: str, format: Literal["text"] = "text") -> str:
        """The file as UTF-8 text."""

    @overload
    async def read(self, path: str, format: Literal["bytes"]) -> bytes:
        """The file as bytes."""

    @overload
    async def read(self, path: str, format: Literal["stream"]) -> AsyncIterator[bytes]:
        """The file as an async iterator of chunks."""

    async def read(
        self, path: str, format: Literal["text", "bytes", "stream"] = "text"
    ) -> Union[str, bytes, AsyncIterator[bytes]]:
        """Reads ``path`` as text, bytes, or ``format="stream"``: an async iterator of chunks."""
        r = await self._t.send(P.get_file(self._sandbox_id, path), stream=True)
        if format == "stream":
            return _aiter_response(r)
        try:
            data = await r.aread()
        finally:
            await r.aclose()
        return data.decode("utf-8") if format == "text" else data

    async def iter_bytes(self, path: str) -> AsyncIterator[bytes]:
        """``await read(path, format="stream")``."""
        return await self.read(path, format="stream")

    async def list(self, path: str, *, limit: Optional[int] = None) -> DirListing:
        """Lists a directory."""
        return await self._t.call(P.list_dir(self._sandbox_id, path, limit))

    async def exists(self, path: str) -> bool:
        """True if ``path`` is a file or a directory."""
        try:
            r = await self._t.send(P.get_file(self._sandbox_id, path), stream=True)
            await r.aclose()
            return True
        except NotFound:
            return False
        except TooLarge:
            return True
        except InvalidArgument:
            try:
                await self._t.call(P.list_dir(self._sandbox_id, path, 1))
                return True
            except NotFound:
                return False

    async def remove(self, path: str, *, approval: ApprovalArg = None) -> None:
        """Removes a file or directory tree (``rm -rf``, run as a command)."""
        await self._run(f"rm -rf -- {P.shell_quote(path)}", approval)

    async def make_dir(self, path: str, *, approval: ApprovalArg = None) -> None:
        """Creates a directory and its parents (``mkdir -p``, run as a command)."""
        await self._run(f"mkdir -p -- {P.shell_quote(path)}", approval)

    async def _run(self, command: str, approval: ApprovalArg) -> None:
        r = await self._commands.run(command, approval=approval)
        if r.exit_code != 0:
            raise PvsError(f"{command}: exit {r.exit_code}: {r.stderr.strip()}")

    async def edit(
        self,
        path: str,
        old: str,
        new: str,
        *,
        replace_all: bool = False,
        approval: ApprovalArg = None,
    ) -> EditResult:
        """Replaces ``old`` by ``new`` in a text file; returns the diff."""
        return await self._t.call(
            P.edit_file(self._t.config, self._sandbox_id, path, old, new, replace_all, approval)
        )


async def _aiter_response(r: httpx.Response) -> AsyncIterator[bytes]:
    try:
        async for piece in r.aiter_bytes():
            yield piece
    except httpx.TransportError as e:
        raise ConnectionFailed(f"download broke off: {e}") from e
    finally:
        await r.aclose()


class AsyncTerminal:
    """A terminal: see :class:`pve_sandbox.sandbox.Terminal`."""

    def __init__(self, transport: AsyncTransport, info: TerminalInfo) -> None:
        self._t = transport
        self.info = info
        """The terminal as last seen."""

    @property
    def id(self) -> str:
        """``t-`` and 12 hex digits."""
        return self.info.id

    async def __aenter__(self) -> "AsyncTerminal":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def send(
        self, items: Sequence[Mapping[str, str]], *, approval: ApprovalArg = None
    ) -> TerminalInfo:
        """Sends input items in one write."""
        self.info = await self._t.call(
            P.terminal_input(self._t.config, self.info.sandbox, self.id, items, approval)
        )
        return self.info

    async def type(self, text: str, *, approval: ApprovalArg = None) -> TerminalInfo:
        """Types ``text``."""
        return await self.send([{"text": text}], approval=approval)

    async def press(self, *keys: str, approval: ApprovalArg = None) -> TerminalInfo:
        """Presses named keys."""
        return await self.send(P.key_items(keys), approval=approval)

    async def wait(
        self,
        pattern: Optional[str] = None,
        *,
        quiet_ms: Optional[int] = None,
        timeout: Optional[float] = None,
        scrollback: int = 0,
    ) -> WaitResult:
        """Waits for ``pattern``, the end, quiet, or the timeout."""
        r = await self._t.call(
            P.terminal_wait(self.info.sandbox, self.id, pattern, quiet_ms, timeout, scrollback)
        )
        self.info = r.terminal
        return r

    async def screen(self, *, scrollback: int = 0) -> Screen:
        """The screen now."""
        return await self._t.call(P.terminal_screen(self.info.sandbox, self.id, scrollback))

    async def resize(self, cols: int, rows: int) -> TerminalInfo:
        """Changes the size."""
        self.info = await self._t.call(P.resize_terminal(self.info.sandbox, self.id, cols, rows))
        return self.info

    async def refresh(self) -> TerminalInfo:
        """Fetches the terminal's state."""
        self.info = await self._t.call(P.get_terminal(self.info.sandbox, self.id))
        return self.info

    async def close(self) -> None:
        """Hangs up."""
        try:
            await self._t.call(P.close_terminal(self.info.sandbox, self.id))
        except NotFound:
            pass

    def attach(self, *, watch: bool = False) -> AsyncTerminalConnection:
        """Attaches over the WebSocket; use as ``async with``."""
        return AsyncTerminalConnection(
            P.terminal_ws_url(self._t.config, self.info.sandbox, self.id, watch),
            self._t.config.token,
        )


class AsyncTerminals:
    """``sb.terminals``."""

    def __init__(self, transport: AsyncTransport, sandbox_id: str) -> None:
        self._t = transport
        self._sandbox_id = sandbox_id

    async def open(
        self,
        command: Optional[str] = None,
        *,
        cols: Optional[int] = None,
        rows: Optional[int] = None,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
    ) -> AsyncTerminal:
        """Starts ``command`` (default: the login shell) on a new terminal."""
        info = await self._t.call(P.open_terminal(self._sandbox_id, command, cols, rows, env, cwd))
        return AsyncTerminal(self._t, info)

    async def list(self) -> List[TerminalInfo]:
        """The sandbox's terminals."""
        return await self._t.call(P.list_terminals(self._sandbox_id))

    async def get(self, terminal_id: str) -> AsyncTerminal:
        """An existing terminal by id."""
        return AsyncTerminal(
            self._t, await self._t.call(P.get_terminal(self._sandbox_id, terminal_id))
        )


class AsyncInternetAccess:
    """``sb.internet``."""

    def __init__(self, transport: AsyncTransport, sandbox_id: str) -> None:
        self._t = transport
        self._sandbox_id = sandbox_id

    async def _set(self, body: P.Json, approval: ApprovalArg) -> SandboxInfo:
        return await self._t.call(P.set_internet(self._t.config, self._sandbox_id, body, approval))

    async def on(self, *, approval: ApprovalArg = None) -> SandboxInfo:
        """All HTTP/HTTPS egress."""
        return await self._set({"enabled": True}, approval)

    async def off(self, *, approval: ApprovalArg = None) -> SandboxInfo:
        """No egress."""
        return await self._set({"enabled": False}, approval)

    async def allow(
        self,
        names: Sequence[str],
        *,
        ports: Optional[Sequence[int]] = None,
        approval: ApprovalArg = None,
    ) -> SandboxInfo:
        """Egress only to these DNS names on ``ports``."""
        body: P.Json = {"allow": list(names)}
        if ports is not None:
            body["ports"] = list(ports)
        return await self._set(body, approval)

    async def use_list(self, name: str, *, approval: ApprovalArg = None) -> SandboxInfo:
        """An operator's named allowlist."""
        return await self._set({"list": name}, approval)


class AsyncSnapshots:
    """``sb.snapshots``."""

    def __init__(self, transport: AsyncTransport, sandbox_id: str) -> None:
        self._t = transport
        self._sandbox_id = sandbox_id

    async def create(self, name: str, *, description: Optional[str] = None) -> SnapshotInfo:
        """Takes a snapshot."""
        return await self._t.call(P.create_snapshot(self._sandbox_id, name, description))

    async def list(self) -> List[SnapshotInfo]:
        """The snapshots."""
        return await self._t.call(P.list_snapshots(self._sandbox_id))

    async def rollback(self, name: str) -> SandboxInfo:
        """Restores a snapshot."""
        return await self._t.call(P.rollback_snapshot(self._sandbox_id, name))

    async def delete(self, name: str) -> None:
        """Deletes a snapshot."""
        await self._t.call(P.delete_snapshot(self._sandbox_id, name))


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
        return await self._t.call(P.list_approvals(self._t.config, state))

    async def get(self, approval_id: str) -> Approval:
        """One approval."""
        return await self._t.call(P.get_approval(approval_id, self._t.config))

    async def approve(
        self, approval: Union[Approval, str], *, reason: Optional[str] = None
    ) -> Approval:
        """Approves."""
        aid = approval if isinstance(approval, str) else approval.id
        return await self._t.call(P.decide_approval(self._t.config, aid, True, reason))

    async def deny(
        self, approval: Union[Approval, str], *, reason: Optional[str] = None
    ) -> Approval:
        """Denies."""
        aid = approval if isinstance(approval, str) else approval.id
        return await self._t.call(P.decide_approval(self._t.config, aid, False, reason))


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
