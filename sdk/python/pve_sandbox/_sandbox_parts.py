# Generated from _aio_parts.py by scripts/gen-sync-sdk: change that file and run the
# script; do not edit this one.
"""The parts of a :class:`Sandbox`: its commands, files, terminals, internet access and
snapshots (``sb.commands``, ``sb.files``, ...)."""

from __future__ import annotations

from typing import Iterator, List, Literal, Mapping, Optional, Sequence, Union, overload

from . import _protocol as P
from ._io_sync import CommandHandle, FileData, request_body, response_bytes
from ._protocol import ApprovalArg, OutputCallback
from ._shared import BackgroundWrapper
from ._terminal_ws import TerminalConnection
from ._transport import SyncTransport
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


class Commands:
    """``sb.commands``: run commands in the sandbox (``sh -c``)."""

    def __init__(self, transport: SyncTransport, sandbox_id: str) -> None:
        self._t = transport
        self._sandbox_id = sandbox_id

    @overload
    def run(
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
    def run(
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
    ) -> CommandHandle:
        """Starts the command in the background: its handle."""

    def run(
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
    ) -> Union[CommandResult, CommandHandle]:
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
            handle = CommandHandle(self._t, self._sandbox_id, wrapper)
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
            handle.start(call, on_stdout, on_stderr)
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
            return self._t.exec_stream(call, P.ExecEvents(on_stdout, on_stderr))
        result: CommandResult = self._t.call(call)
        return result


class Files:
    """``sb.files``: read, write, list and edit files in the sandbox (absolute paths)."""

    def __init__(self, transport: SyncTransport, sandbox_id: str, commands: Commands) -> None:
        self._t = transport
        self._sandbox_id = sandbox_id
        self._commands = commands

    def write(
        self,
        path: str,
        data: FileData,
        *,
        mode: Union[int, str, None] = None,
        approval: ApprovalArg = None,
    ) -> WriteInfo:
        """Writes ``data`` to ``path`` atomically, creating parent directories. ``data`` is
        text, bytes, a file object or an iterable of byte chunks; the last two are streamed
        (64 KiB pieces, chunked upload), never held whole. ``mode``: e.g. ``0o755``."""
        body = request_body(data)
        call = P.put_file(self._t.config, self._sandbox_id, path, mode, approval, body)
        return self._t.call(call, body)

    @overload
    def read(self, path: str, format: Literal["text"] = "text") -> str:
        """The file as UTF-8 text."""

    @overload
    def read(self, path: str, format: Literal["bytes"]) -> bytes:
        """The file as bytes."""

    @overload
    def read(self, path: str, format: Literal["stream"]) -> Iterator[bytes]:
        """The file as an iterator of chunks."""

    def read(
        self, path: str, format: Literal["text", "bytes", "stream"] = "text"
    ) -> Union[str, bytes, Iterator[bytes]]:
        """Reads ``path``: as text (UTF-8), bytes, or ``format="stream"``: an iterator of
        chunks as they arrive (a missing file raises before the first chunk)."""
        r = self._t.send(P.get_file(self._sandbox_id, path), stream=True)
        if format == "stream":
            return response_bytes(r)
        try:
            data = r.read()
        finally:
            r.close()
        return data.decode("utf-8") if format == "text" else data

    def iter_bytes(self, path: str) -> Iterator[bytes]:
        """``read(path, format="stream")``."""
        return self.read(path, format="stream")

    def list(self, path: str, *, limit: Optional[int] = None) -> DirListing:
        """Lists a directory (at most ``limit`` entries; ``truncated`` says when cut)."""
        return self._t.call(P.list_dir(self._sandbox_id, path, limit))

    def exists(self, path: str) -> bool:
        """True if ``path`` is a file or a directory."""
        try:
            r = self._t.send(P.get_file(self._sandbox_id, path), stream=True)
            r.close()
            return True
        except NotFound:
            return False
        except TooLarge:
            return True
        except InvalidArgument:
            try:
                self._t.call(P.list_dir(self._sandbox_id, path, 1))
                return True
            except NotFound:
                return False

    def remove(self, path: str, *, approval: ApprovalArg = None) -> None:
        """Removes a file or a directory tree (``rm -rf``; the API has no delete call, so this
        runs a command and the policy judges it as ``exec``)."""
        self._run(f"rm -rf -- {P.shell_quote(path)}", approval)

    def make_dir(self, path: str, *, approval: ApprovalArg = None) -> None:
        """Creates a directory and its parents (``mkdir -p``, run as a command)."""
        self._run(f"mkdir -p -- {P.shell_quote(path)}", approval)

    def _run(self, command: str, approval: ApprovalArg) -> None:
        r = self._commands.run(command, approval=approval)
        if r.exit_code != 0:
            raise PvsError(f"{command}: exit {r.exit_code}: {r.stderr.strip()}")

    def edit(
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
        return self._t.call(
            P.edit_file(self._t.config, self._sandbox_id, path, old, new, replace_all, approval)
        )


class Terminal:
    """An interactive program on a pseudo-terminal in the sandbox (``sb.terminals.open``)."""

    def __init__(self, transport: SyncTransport, info: TerminalInfo) -> None:
        self._t = transport
        self.info = info
        """The terminal as last seen."""

    @property
    def id(self) -> str:
        """``t-`` and 12 hex digits."""
        return self.info.id

    def __enter__(self) -> "Terminal":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(
        self, items: Sequence[Mapping[str, str]], *, approval: ApprovalArg = None
    ) -> TerminalInfo:
        """Sends input items (``{"text": ...}`` or ``{"key": ...}``) in one write."""
        self.info = self._t.call(
            P.terminal_input(self._t.config, self.info.sandbox, self.id, items, approval)
        )
        return self.info

    def type(self, text: str, *, approval: ApprovalArg = None) -> TerminalInfo:
        """Types ``text`` as is (``\\r`` is Enter)."""
        return self.send([{"text": text}], approval=approval)

    def press(self, *keys: str, approval: ApprovalArg = None) -> TerminalInfo:
        """Presses named keys: ``"Enter"``, ``"Escape"``, ``"C-c"``, ``"Up"``, ``"F1"``, ..."""
        return self.send(P.key_items(keys), approval=approval)

    def wait(
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
        r = self._t.call(
            P.terminal_wait(self.info.sandbox, self.id, pattern, quiet_ms, timeout, scrollback)
        )
        self.info = r.terminal
        return r

    def screen(self, *, scrollback: int = 0) -> Screen:
        """The screen now: ``lines``, ``cursor``, ``title``, ``alternate_screen``."""
        return self._t.call(P.terminal_screen(self.info.sandbox, self.id, scrollback))

    def resize(self, cols: int, rows: int) -> TerminalInfo:
        """Changes the terminal's size."""
        self.info = self._t.call(P.resize_terminal(self.info.sandbox, self.id, cols, rows))
        return self.info

    def refresh(self) -> TerminalInfo:
        """Fetches the terminal's state (``state``, ``exit_code``, ...)."""
        self.info = self._t.call(P.get_terminal(self.info.sandbox, self.id))
        return self.info

    def close(self) -> None:
        """Hangs up (SIGHUP to its session, SIGKILL 2 s later). Closing twice is fine."""
        try:
            self._t.call(P.close_terminal(self.info.sandbox, self.id))
        except NotFound:
            pass

    def attach(self, *, watch: bool = False) -> TerminalConnection:
        """Attaches over the WebSocket (raw pty bytes both ways); ``watch``: read-only.
        Use as a context manager."""
        return TerminalConnection(
            P.terminal_ws_url(self._t.config, self.info.sandbox, self.id, watch),
            self._t.config.token,
        )


class Terminals:
    """``sb.terminals``: interactive programs on pseudo-terminals."""

    def __init__(self, transport: SyncTransport, sandbox_id: str) -> None:
        self._t = transport
        self._sandbox_id = sandbox_id

    def open(
        self,
        command: Optional[str] = None,
        *,
        cols: Optional[int] = None,
        rows: Optional[int] = None,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
    ) -> Terminal:
        """Starts ``command`` (default: the login shell) on a new terminal."""
        info = self._t.call(P.open_terminal(self._sandbox_id, command, cols, rows, env, cwd))
        return Terminal(self._t, info)

    def list(self) -> List[TerminalInfo]:
        """The sandbox's terminals, oldest first (ended ones stay listed for a while)."""
        return self._t.call(P.list_terminals(self._sandbox_id))

    def get(self, terminal_id: str) -> Terminal:
        """An existing terminal by id."""
        return Terminal(self._t, self._t.call(P.get_terminal(self._sandbox_id, terminal_id)))


class InternetAccess:
    """``sb.internet``: the sandbox's egress (all HTTP/HTTPS, an allowlist, or none)."""

    def __init__(self, transport: SyncTransport, sandbox_id: str) -> None:
        self._t = transport
        self._sandbox_id = sandbox_id

    def _set(self, body: P.Json, approval: ApprovalArg) -> SandboxInfo:
        return self._t.call(P.set_internet(self._t.config, self._sandbox_id, body, approval))

    def on(self, *, approval: ApprovalArg = None) -> SandboxInfo:
        """All HTTP/HTTPS egress."""
        return self._set({"enabled": True}, approval)

    def off(self, *, approval: ApprovalArg = None) -> SandboxInfo:
        """No egress."""
        return self._set({"enabled": False}, approval)

    def allow(
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
        return self._set(body, approval)

    def use_list(self, name: str, *, approval: ApprovalArg = None) -> SandboxInfo:
        """An operator's named allowlist (``egress.lists``)."""
        return self._set({"list": name}, approval)


class Snapshots:
    """``sb.snapshots``: save and restore the sandbox's state."""

    def __init__(self, transport: SyncTransport, sandbox_id: str) -> None:
        self._t = transport
        self._sandbox_id = sandbox_id

    def create(self, name: str, *, description: Optional[str] = None) -> SnapshotInfo:
        """Takes a snapshot (a letter, then 1-39 of ``[A-Za-z0-9_-]``)."""
        return self._t.call(P.create_snapshot(self._sandbox_id, name, description))

    def list(self) -> List[SnapshotInfo]:
        """The sandbox's snapshots."""
        return self._t.call(P.list_snapshots(self._sandbox_id))

    def rollback(self, name: str) -> SandboxInfo:
        """Restores a snapshot (the sandbox restarts; commands work again when it returns)."""
        return self._t.call(P.rollback_snapshot(self._sandbox_id, name))

    def delete(self, name: str) -> None:
        """Deletes a snapshot."""
        self._t.call(P.delete_snapshot(self._sandbox_id, name))
