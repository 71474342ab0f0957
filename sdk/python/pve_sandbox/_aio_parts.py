"""The parts of an :class:`~pve_sandbox.AsyncSandbox`: its commands, files, terminals,
internet access and snapshots, as in ``_sandbox_parts.py`` with ``await``."""


from __future__ import annotations

import asyncio
from typing import (
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
from ._protocol import ApprovalArg, OutputCallback
from ._shared import BackgroundWrapper, FileData, body_chunks
from ._terminal_ws import AsyncTerminalConnection
from ._transport import AsyncTransport
from .errors import ConnectionFailed, InvalidArgument, NotFound, PvsError, TooLarge
from .models import (
    CommandResult,
    DirListing,
    EditResult,
    SandboxInfo,
    Screen,
    SnapshotInfo,
    TerminalInfo,
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

            events = P.ExecEvents(out, err, on_start=handle._started.set)
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
            return await self._t.exec_stream(call, P.ExecEvents(on_stdout, on_stderr))
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
