"""The parts of an :class:`AsyncSandbox`: its commands, files, terminals, internet access and
snapshots (``sb.commands``, ``sb.files``, ...). ``_sandbox_parts.py`` is generated from this
file by ``scripts/gen-sync-sdk``: change this one, then run the script."""

from __future__ import annotations

from typing import AsyncIterator, List, Literal, Mapping, Optional, Sequence, Union, overload

from . import _protocol as P
from ._io_async import AsyncCommandHandle, AsyncFileData, request_body, response_bytes
from ._protocol import ApprovalArg, OutputCallback
from ._shared import BackgroundWrapper
from ._terminal_ws import AsyncTerminalConnection
from ._transport import AsyncTransport
from .errors import InvalidArgument, NotFound, PvsError, TooLarge
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


class AsyncCommands:
    """``sb.commands``: run commands in the sandbox (``sh -c``)."""

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
        """Runs ``cmd`` with ``sh -c`` and returns its :class:`CommandResult` (a non-zero exit
        is a result, not an error).

        ``cwd``: absolute directory; ``env`` (or E2B's ``envs``): variables; ``stdin``: text
        written to its stdin; ``timeout``: seconds, then its process group is killed
        (``timed_out``). With ``on_stdout``/``on_stderr`` the output is streamed (NDJSON) and
        each piece is passed on as it arrives. ``background=True`` returns a
        :class:`CommandHandle` at once. ``approval``: see :class:`ApprovalRequired`."""
        env = env if env is not None else envs
        if background:
            wrapper = BackgroundWrapper(cmd)
            handle = AsyncCommandHandle(self._t, self._sandbox_id, wrapper)
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
            await handle.start(call, on_stdout, on_stderr)
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
    """``sb.files``: read, write, list and edit files in the sandbox (absolute paths)."""

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
        """Writes ``data`` to ``path`` atomically, creating parent directories. ``data`` is
        text, bytes, a file object or an iterable of byte chunks; the last two are streamed
        (64 KiB pieces, chunked upload), never held whole. ``mode``: e.g. ``0o755``."""
        body = request_body(data)
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
        """Reads ``path``: as text (UTF-8), bytes, or ``format="stream"``: an async iterator of
        chunks as they arrive (a missing file raises before the first chunk)."""
        r = await self._t.send(P.get_file(self._sandbox_id, path), stream=True)
        if format == "stream":
            return response_bytes(r)
        try:
            data = await r.aread()
        finally:
            await r.aclose()
        return data.decode("utf-8") if format == "text" else data

    async def iter_bytes(self, path: str) -> AsyncIterator[bytes]:
        """``read(path, format="stream")``."""
        return await self.read(path, format="stream")

    async def list(self, path: str, *, limit: Optional[int] = None) -> DirListing:
        """Lists a directory (at most ``limit`` entries; ``truncated`` says when cut)."""
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
        """Removes a file or a directory tree (``rm -rf``; the API has no delete call, so this
        runs a command and the policy judges it as ``exec``)."""
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
        """Replaces the text ``old`` by ``new`` in a text file (exactly once unless
        ``replace_all``); raises :class:`NoMatch` / :class:`AmbiguousMatch` /
        :class:`BinaryFile` when it cannot. Returns the diff."""
        return await self._t.call(
            P.edit_file(self._t.config, self._sandbox_id, path, old, new, replace_all, approval)
        )


class AsyncTerminal:
    """An interactive program on a pseudo-terminal in the sandbox (``sb.terminals.open``)."""

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
        """Sends input items (``{"text": ...}`` or ``{"key": ...}``) in one write."""
        self.info = await self._t.call(
            P.terminal_input(self._t.config, self.info.sandbox, self.id, items, approval)
        )
        return self.info

    async def type(self, text: str, *, approval: ApprovalArg = None) -> TerminalInfo:
        """Types ``text`` as is (``\\r`` is Enter)."""
        return await self.send([{"text": text}], approval=approval)

    async def press(self, *keys: str, approval: ApprovalArg = None) -> TerminalInfo:
        """Presses named keys: ``"Enter"``, ``"Escape"``, ``"C-c"``, ``"Up"``, ``"F1"``, ..."""
        return await self.send(P.key_items(keys), approval=approval)

    async def wait(
        self,
        pattern: Optional[str] = None,
        *,
        quiet_ms: Optional[int] = None,
        timeout: Optional[float] = None,
        scrollback: int = 0,
    ) -> WaitResult:
        """Waits until ``pattern`` (ECMAScript regex, multiline) is on the screen, the program
        ended, no output came for ``quiet_ms``, or ``timeout`` seconds (default 10) passed.
        """
        r = await self._t.call(
            P.terminal_wait(self.info.sandbox, self.id, pattern, quiet_ms, timeout, scrollback)
        )
        self.info = r.terminal
        return r

    async def screen(self, *, scrollback: int = 0) -> Screen:
        """The screen now: ``lines``, ``cursor``, ``title``, ``alternate_screen``."""
        return await self._t.call(P.terminal_screen(self.info.sandbox, self.id, scrollback))

    async def resize(self, cols: int, rows: int) -> TerminalInfo:
        """Changes the terminal's size."""
        self.info = await self._t.call(P.resize_terminal(self.info.sandbox, self.id, cols, rows))
        return self.info

    async def refresh(self) -> TerminalInfo:
        """Fetches the terminal's state (``state``, ``exit_code``, ...)."""
        self.info = await self._t.call(P.get_terminal(self.info.sandbox, self.id))
        return self.info

    async def close(self) -> None:
        """Hangs up (SIGHUP to its session, SIGKILL 2 s later). Closing twice is fine."""
        try:
            await self._t.call(P.close_terminal(self.info.sandbox, self.id))
        except NotFound:
            pass

    def attach(self, *, watch: bool = False) -> AsyncTerminalConnection:
        """Attaches over the WebSocket (raw pty bytes both ways); ``watch``: read-only.
        Use as a context manager."""
        return AsyncTerminalConnection(
            P.terminal_ws_url(self._t.config, self.info.sandbox, self.id, watch),
            self._t.config.token,
        )


class AsyncTerminals:
    """``sb.terminals``: interactive programs on pseudo-terminals."""

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
        """The sandbox's terminals, oldest first (ended ones stay listed for a while)."""
        return await self._t.call(P.list_terminals(self._sandbox_id))

    async def get(self, terminal_id: str) -> AsyncTerminal:
        """An existing terminal by id."""
        return AsyncTerminal(
            self._t, await self._t.call(P.get_terminal(self._sandbox_id, terminal_id))
        )


class AsyncInternetAccess:
    """``sb.internet``: the sandbox's egress (all HTTP/HTTPS, an allowlist, or none)."""

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
        """Egress only to these DNS names (``*.example.org``: its subdomains) on ``ports``
        (default 80 and 443)."""
        body: P.Json = {"allow": list(names)}
        if ports is not None:
            body["ports"] = list(ports)
        return await self._set(body, approval)

    async def use_list(self, name: str, *, approval: ApprovalArg = None) -> SandboxInfo:
        """An operator's named allowlist (``egress.lists``)."""
        return await self._set({"list": name}, approval)


class AsyncSnapshots:
    """``sb.snapshots``: save and restore the sandbox's state."""

    def __init__(self, transport: AsyncTransport, sandbox_id: str) -> None:
        self._t = transport
        self._sandbox_id = sandbox_id

    async def create(self, name: str, *, description: Optional[str] = None) -> SnapshotInfo:
        """Takes a snapshot (a letter, then 1-39 of ``[A-Za-z0-9_-]``)."""
        return await self._t.call(P.create_snapshot(self._sandbox_id, name, description))

    async def list(self) -> List[SnapshotInfo]:
        """The sandbox's snapshots."""
        return await self._t.call(P.list_snapshots(self._sandbox_id))

    async def rollback(self, name: str) -> SandboxInfo:
        """Restores a snapshot (the sandbox restarts; commands work again when it returns)."""
        return await self._t.call(P.rollback_snapshot(self._sandbox_id, name))

    async def delete(self, name: str) -> None:
        """Deletes a snapshot."""
        await self._t.call(P.delete_snapshot(self._sandbox_id, name))
