"""The blocking client: :class:`Sandbox` and its parts (commands, files, terminals, internet,
snapshots), plus :class:`ApprovalsClient` for the people who decide approvals."""

from __future__ import annotations

import threading
from typing import Iterator, List, Literal, Mapping, Optional, Sequence, Union, overload

import httpx

from . import _protocol as P
from ._config import ClientConfig, resolve_config
from ._protocol import ApprovalArg, Internet, OutputCallback, VolumeArg
from ._shared import BackgroundWrapper, FileData, body_chunks
from ._terminal_ws import TerminalConnection
from .errors import NotFound, InvalidArgument, PvsError, TooLarge
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
from ._transport import SyncTransport


class CommandHandle:
    """A command started with ``run(..., background=True)``: ``wait()`` for its result or
    ``kill()`` it. Its output so far is in ``stdout`` / ``stderr``."""

    def __init__(self, commands: "Commands", wrapper: BackgroundWrapper) -> None:
        self._commands = commands
        self._wrapper = wrapper
        self._started = threading.Event()
        self._done = threading.Event()
        self._result: Optional[CommandResult] = None
        self._error: Optional[BaseException] = None
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
        """True once the command ended (or its stream failed)."""
        return self._done.is_set()

    def _run(self, call: "P.Call[CommandResult]", events: "P.ExecEvents") -> None:
        try:
            self._result = self._commands._t.exec_stream(call, events)
        except BaseException as e:  # handed to wait()
            self._error = e
        finally:
            self._started.set()
            self._done.set()

    def wait(self, timeout: Optional[float] = None) -> CommandResult:
        """Blocks until the command ended and returns its result; ``TimeoutError`` if it still
        runs after ``timeout`` seconds."""
        if not self._done.wait(timeout):
            raise TimeoutError("the background command is still running")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def kill(self) -> bool:
        """Kills the command's process group (SIGKILL). False if it had already ended."""
        if self._done.is_set():
            return False
        r = self._commands._t.call(
            P.exec_call(
                self._commands._t.config,
                self._commands._sandbox_id,
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
            handle = CommandHandle(self, wrapper)
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
            threading.Thread(target=handle._run, args=(call, events), daemon=True).start()
            handle._started.wait()
            if handle._error is not None:
                raise handle._error  # refused before it started: policy, not found, ...
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
            return self._t.exec_stream(call, P.ExecEvents(on_stdout, on_stderr, self._t.config))
        return self._t.call(call)


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
        body = body_chunks(data)
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
            return _iter_response(r)
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
        except InvalidArgument:  # a directory is not a file to download
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


def _iter_response(r: httpx.Response) -> Iterator[bytes]:
    try:
        for piece in r.iter_bytes():
            yield piece
    except httpx.TransportError as e:  # the server reset: never a partial file as a whole
        from .errors import ConnectionFailed

        raise ConnectionFailed(f"download broke off: {e}") from e
    finally:
        r.close()


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


class Sandbox:
    """A sandbox: a disposable LXC container. Make one with :meth:`create` (``with`` destroys
    it on exit unless ``keep=True``) or reach one with :meth:`connect`."""

    def __init__(self, info: SandboxInfo, transport: SyncTransport, *, keep: bool = False) -> None:
        self.info = info
        """The sandbox as last seen (refresh with :meth:`get_info`)."""
        self.keep = keep
        """When True, leaving the ``with`` block (or :meth:`close`) keeps the sandbox."""
        self._t = transport
        self.commands = Commands(transport, info.id)
        """Run commands."""
        self.files = Files(transport, info.id, self.commands)
        """Read, write, list and edit files."""
        self.terminals = Terminals(transport, info.id)
        """Interactive programs."""
        self.internet = InternetAccess(transport, info.id)
        """Egress: on, off, an allowlist."""
        self.snapshots = Snapshots(transport, info.id)
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
    ) -> "Sandbox":
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
        t = SyncTransport(config)
        try:
            info = t.call(
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
            t.close()
            raise
        return cls(info, t, keep=keep)

    @classmethod
    def connect(
        cls,
        sandbox_id: str,
        *,
        keep: bool = True,
        url: Optional[str] = None,
        token: Optional[str] = None,
        request_timeout: Optional[float] = None,
        max_retries: Optional[int] = None,
        approval_wait: Optional[bool] = None,
    ) -> "Sandbox":
        """An existing sandbox by id (:class:`NotFound` if there is none, or not yours).
        ``keep`` defaults to True here: leaving ``with`` only closes the connections."""
        config = resolve_config(
            url,
            token,
            request_timeout=request_timeout,
            max_retries=max_retries,
            approval_wait=approval_wait,
        )
        t = SyncTransport(config)
        try:
            info = t.call(P.get_sandbox(sandbox_id))
        except BaseException:
            t.close()
            raise
        return cls(info, t, keep=keep)

    @staticmethod
    def list(
        labels: Optional[Mapping[str, str]] = None,
        *,
        url: Optional[str] = None,
        token: Optional[str] = None,
    ) -> List[SandboxInfo]:
        """Your sandboxes (an admin token: all), oldest first; ``labels`` must all match."""
        with SyncTransport(resolve_config(url, token)) as t:
            return t.call(P.list_sandboxes(labels))

    def get_info(self) -> SandboxInfo:
        """Fetches the sandbox's state (and updates :attr:`info`)."""
        self.info = self._t.call(P.get_sandbox(self.id))
        return self.info

    def is_running(self) -> bool:
        """True while the sandbox exists and its container runs."""
        try:
            return self.get_info().status == "running"
        except NotFound:
            return False

    def set_ttl(self, seconds: int) -> SandboxInfo:
        """The sandbox now expires ``seconds`` from now."""
        self.info = self._t.call(P.set_ttl(self.id, seconds))
        return self.info

    def set_timeout(self, seconds: int) -> SandboxInfo:
        """:meth:`set_ttl` under E2B's name."""
        return self.set_ttl(seconds)

    def ports(self) -> List[PortInfo]:
        """What listens in the sandbox: each TCP port with its addresses and preview URL."""
        return self._t.call(P.list_ports(self._t.config, self.id))

    def usage(self, since: Optional[int] = None, until: Optional[int] = None) -> List[UsageSample]:
        """What it used over time, oldest first: Proxmox's history of its container (a sample
        a minute over the last hour, coarser further back) since it was created, then the live
        sample. ``since``/``until``: unix seconds (``until`` before now leaves the live one out)."""
        return self._t.call(P.get_usage(self.id, since, until))

    def get_host(self, port: int) -> str:
        """The preview URL of ``port`` on the controller (E2B's ``get_host`` gives a host
        name; here the port is reached through the API with the bearer token)."""
        return P.preview_url(self._t.config, self.id, port)

    def preview(self, port: int, expires_in: Optional[int] = None) -> PreviewLink:
        """A link to ``port`` a browser opens without the token, for ``expires_in`` seconds
        (default an hour). Anyone holding the link reaches that port until it expires."""
        return self._t.call(P.make_preview(self._t.config, self.id, port, expires_in))

    def pause(self) -> SandboxInfo:
        """Stops it with its files kept (processes end); ``state`` becomes ``"paused"``."""
        self.info = self._t.call(P.pause_sandbox(self.id))
        return self.info

    def resume(self, ttl: Optional[int] = None) -> SandboxInfo:
        """Starts a paused sandbox again; returns once its SSH answers. ``ttl``: its new
        lifetime (default: what it had left, or its TTL of creation after an expiry pause)."""
        self.info = self._t.call(P.resume_sandbox(self.id, ttl))
        return self.info

    def capture(self, name: Optional[str] = None) -> TemplateInfo:
        """A template of its files as they are now (processes and memory are not kept), owned
        by your token: ``Sandbox.create(template=name)`` starts from it. ``name``: 1-32 of
        ``[a-z0-9-]``, a letter first (default: ``snap-`` and 12 hex digits). E2B's snapshot."""
        return self._t.call(P.capture_sandbox(self.id, name))

    def fork(
        self, count: int = 1, *, ttl: Optional[int] = None, approval: ApprovalArg = None
    ) -> List["Sandbox"]:
        """``count`` new sandboxes of its files as they are now, with its size, labels and
        internet (all or none); each is yours to destroy (``with`` each, or ``destroy()``)."""
        infos = self._t.call(P.fork_sandbox(self._t.config, self.id, count, ttl, approval))
        return [Sandbox(info, SyncTransport(self._t.config)) for info in infos]

    def destroy(self) -> None:
        """Destroys the sandbox (internet revoked first, container purged). Idempotent."""
        try:
            self._t.call(P.destroy_sandbox(self.id))
        except NotFound:
            pass

    def kill(self) -> None:
        """:meth:`destroy` under E2B's name."""
        self.destroy()

    def health(self) -> Health:
        """The controller's health (with this token: its peers too)."""
        return self._t.call(P.health())

    def close(self) -> None:
        """Destroys the sandbox unless :attr:`keep`, then closes the connections."""
        try:
            if not self.keep:
                self.destroy()
        finally:
            self._t.close()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Sandbox({self.id!r}, address={self.info.address!r})"


class ApprovalsClient:
    """For the people who decide approvals (an admin token or one with ``approver: true``);
    any token may list and read its own."""

    def __init__(self, *, url: Optional[str] = None, token: Optional[str] = None) -> None:
        self._t = SyncTransport(resolve_config(url, token))

    def __enter__(self) -> "ApprovalsClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connections."""
        self._t.close()

    def list(self, state: Optional[str] = None) -> List[Approval]:
        """Approvals (``state="pending"``: only those waiting)."""
        return self._t.call(P.list_approvals(self._t.config, state))

    def get(self, approval_id: str) -> Approval:
        """One approval."""
        return self._t.call(P.get_approval(approval_id, self._t.config))

    def approve(self, approval: Union[Approval, str], *, reason: Optional[str] = None) -> Approval:
        """Approves (``Conflict`` if it is no longer pending)."""
        aid = approval if isinstance(approval, str) else approval.id
        return self._t.call(P.decide_approval(self._t.config, aid, True, reason))

    def deny(self, approval: Union[Approval, str], *, reason: Optional[str] = None) -> Approval:
        """Denies, with a reason the caller sees."""
        aid = approval if isinstance(approval, str) else approval.id
        return self._t.call(P.decide_approval(self._t.config, aid, False, reason))


class VolumesClient:
    """Your volumes: named disks that outlive the sandboxes that mount them
    (``Sandbox.create(volumes=[VolumeMount("work", "/mnt/work")])``). One sandbox at a time
    holds a volume, from its create until it is destroyed."""

    def __init__(self, *, url: Optional[str] = None, token: Optional[str] = None) -> None:
        self._t = SyncTransport(resolve_config(url, token))

    def __enter__(self) -> "VolumesClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connections."""
        self._t.close()

    def create(
        self, name: str, *, size_gb: Optional[int] = None, node: Optional[str] = None
    ) -> VolumeInfo:
        """A new volume: ``name`` 1-63 of ``[a-z0-9_-]`` (``Conflict`` if yours has it),
        ``size_gb`` the controller's default if None."""
        return self._t.call(P.create_volume(name, size_gb, node))

    def list(self) -> List[VolumeInfo]:
        """Your volumes, oldest first."""
        return self._t.call(P.list_volumes())

    def get(self, volume_id: str) -> VolumeInfo:
        """One volume."""
        return self._t.call(P.get_volume(volume_id))

    def delete(self, volume_id: str) -> None:
        """Deletes it and its files (``Conflict`` while a sandbox holds it)."""
        self._t.call(P.delete_volume(volume_id))

    def resize(self, volume_id: str, size_gb: int) -> VolumeInfo:
        """Grows it (``Conflict`` while a sandbox holds it)."""
        return self._t.call(P.resize_volume(volume_id, size_gb))
