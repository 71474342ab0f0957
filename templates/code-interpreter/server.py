"""The code interpreter of pve-sandbox's code-interpreter-v1 template.

Speaks the HTTP API that E2B's code interpreter SDKs (`@e2b/code-interpreter`,
`e2b-code-interpreter`) call on port 49999 of a sandbox, over Jupyter kernels (Debian's
python3-ipykernel, driven by python3-jupyter-client): each context is a kernel of its own.

    GET    /health                  200 "OK" once the default context's kernel is ready
    POST   /execute                 {code, context_id?, language?, env_vars?}: NDJSON, one
                                    message a line (stdout, stderr, result, error,
                                    number_of_executions, end_of_execution)
    POST   /contexts                {language?, cwd?} -> {id, language, cwd}
    GET    /contexts                [{id, language, cwd}, ...]
    DELETE /contexts/{id}           204
    POST   /contexts/{id}/restart   204 (a new kernel; its variables are gone)

A client that goes away while its cell runs interrupts the cell (KeyboardInterrupt in the
kernel). It listens on the sandbox's loopback only: the controller's port proxy reaches it
through SSH (docs/e2b.md). Python 3 standard library and jupyter_client only.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import select
import socket
import sys
import threading
import time
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from jupyter_client.manager import KernelManager

PORT = int(os.environ.get("PVS_CODE_INTERPRETER_PORT", "49999"))
LANGUAGES = {"python": "python3"}
MAX_BODY = 16 << 20
# The MIME types of a Jupyter display bundle, as E2B's result fields name them.
MIME_FIELDS = {
    "text/plain": "text",
    "text/html": "html",
    "text/markdown": "markdown",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "application/pdf": "pdf",
    "text/latex": "latex",
    "application/json": "json",
    "application/javascript": "javascript",
}
# What a cell the kernel aborted (its reply status "aborted") returns instead of outputs.
ABORTED = {
    "type": "error",
    "name": "CellAborted",
    "value": "the kernel aborted the cell before it ran",
    "traceback": "",
}
# What a cell of a context removed meanwhile returns.
REMOVED = {
    "type": "error",
    "name": "ContextRemoved",
    "value": "the context was removed; its kernel has stopped",
    "traceback": "",
}
# Run once at a kernel's start, before the server says it is ready: the first plot of a session
# does not pay for matplotlib's import, nor its first cell for the first formatting of a result.
WARM_UP = "import matplotlib\nimport matplotlib.pyplot\nget_ipython().display_formatter.format(0)\n"


class ClientGone(Exception):
    """The HTTP client closed its connection while a cell ran."""


class Context:
    """One Jupyter kernel and the lock that runs one cell of it at a time."""

    def __init__(self, language: str, cwd: str) -> None:
        self.id = str(uuid.uuid4())
        self.language = language
        self.cwd = cwd
        self.lock = threading.Lock()
        # Held to replace a dead kernel (its warm-up runs cells, so re-entered) or to end it.
        self._life = threading.RLock()
        self.removed = False
        self._start()

    def _start(self) -> None:
        self.manager = KernelManager(kernel_name=LANGUAGES[self.language])
        self.manager.start_kernel(cwd=self.cwd)
        self.client: Any = self.manager.client()  # its sync methods are made at run time
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)
        self.quietly(WARM_UP)
        # A cell that is not silent takes paths a silent one skips (execute_input, the run-cell
        # hooks); out of the history, it leaves the execution count at 1 for the first cell.
        self.run("pass", lambda _msg: None, lambda: False, history=False)

    def describe(self) -> dict[str, str]:
        return {"id": self.id, "language": self.language, "cwd": self.cwd}

    def restart(self) -> None:
        with self.lock:
            self._replace()

    def _replace(self) -> None:
        """A new kernel in place of the current one; none for a removed context."""
        with self._life:
            if not self.removed:
                self.shutdown()
                self._start()

    def ended(self, when: str) -> dict[str, Any] | None:
        """None while the kernel runs; else the error that tells a cell's client: the context
        was removed, or its kernel's process ended (`when`), and a new kernel took its place (as
        Jupyter's own restarter does)."""
        with self._life:
            if self.removed:
                return REMOVED
            if self.manager.is_alive():
                return None
            process = getattr(self.manager.provisioner, "process", None)
            status = getattr(process, "returncode", None)
            how = "ended"
            if status is not None and status < 0:
                how = f"was killed by signal {-status}"
            elif status is not None:
                how = f"exited with status {status}"
            self._replace()
        return {
            "type": "error",
            "name": "DeadKernelError",
            "value": f"the kernel {how} {when}; a new kernel has started "
            "(the context's variables and imports are gone)",
            "traceback": "",
        }

    def shutdown(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)

    def remove(self) -> None:
        """Stops the kernel for good; a cell running in it ends with REMOVED."""
        with self._life:
            self.removed = True
            self.shutdown()

    def quietly(self, code: str) -> None:
        """Runs the server's own `code`: no output, no execution count, no history."""
        self.run(code, lambda _msg: None, lambda: False, silent=True, history=False)

    def run(
        self,
        code: str,
        emit: Callable[[dict[str, Any]], None],
        gone: Callable[[], bool],
        silent: bool = False,
        history: bool = True,
    ) -> None:
        """Runs `code`, passing each output to `emit` as E2B's messages; interrupts the cell
        when `gone()` says the client left, and raises ClientGone once the kernel is idle.
        A kernel that dies meanwhile is replaced; that (or the context's removal) is then the
        cell's error and last output."""
        # stop_on_error=False: each request is a cell of its own (the lock orders them), so one
        # cell's error must not make the kernel abort the next one (ipykernel aborts what reaches
        # it before it ends the error's abort window, a race a loaded machine loses).
        msg_id = self.client.execute(
            code, silent=silent, store_history=history, allow_stdin=False, stop_on_error=False
        )
        interrupted = False
        while True:
            try:
                msg = self.client.get_iopub_msg(timeout=0.5)
            # queue.Empty; once removed, what its stopped channels raise (CancelledError here)
            except (Exception, asyncio.CancelledError) as e:
                if not isinstance(e, queue.Empty) and not self.removed:
                    raise
                ended = self.ended("while the cell ran")
                if ended is not None:
                    if interrupted:
                        raise ClientGone() from None
                    emit(ended)
                    return
                if not interrupted and gone():
                    self.manager.interrupt_kernel()
                    interrupted = True
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "status" and content.get("execution_state") == "idle":
                break
            out = to_e2b(kind, content)
            if out is not None and not interrupted:
                try:
                    emit(out)
                except OSError:
                    self.manager.interrupt_kernel()
                    interrupted = True
        reply = self.client.get_shell_msg(timeout=30)
        while reply.get("parent_header", {}).get("msg_id") != msg_id:  # an earlier one's
            reply = self.client.get_shell_msg(timeout=30)
        if interrupted:
            raise ClientGone()
        if reply["content"].get("status") == "aborted":  # never ran: say so, not an empty result
            emit(ABORTED)
            return
        count = reply["content"].get("execution_count")
        if count is not None:
            emit({"type": "number_of_executions", "execution_count": count})


def to_e2b(kind: str, content: dict[str, Any]) -> dict[str, Any] | None:
    """One iopub message as E2B's code interpreter sends it, or None for one it does not."""
    now = time.time()
    if kind == "stream":
        return {"type": content["name"], "text": content["text"], "timestamp": now}
    if kind in ("execute_result", "display_data"):
        out: dict[str, Any] = {"type": "result", "is_main_result": kind == "execute_result"}
        extra = {}
        for mime, value in content.get("data", {}).items():
            field = MIME_FIELDS.get(mime)
            if field is None:
                extra[mime] = value
            else:
                out[field] = value
        text = out.get("text")
        if isinstance(text, str) and len(text) >= 2 and text[0] == text[-1] == "'":
            out["text"] = text[1:-1]  # a str's repr, as E2B shows it
        if extra:
            out["extra"] = extra
        return out
    if kind == "error":
        return {
            "type": "error",
            "name": content.get("ename", ""),
            "value": content.get("evalue", ""),
            "traceback": "\n".join(content.get("traceback", [])),
        }
    return None


def env_prologue(env: dict[str, str]) -> tuple[str, str]:
    """Code that sets `env` in the kernel for one cell, and the code that puts it back."""
    names = json.dumps(sorted(env))
    values = json.dumps(env)
    before = (
        "import os as _pvs_os, json as _pvs_json\n"
        f"_pvs_saved = {{k: _pvs_os.environ.get(k) for k in _pvs_json.loads({names!r})}}\n"
        f"_pvs_os.environ.update(_pvs_json.loads({values!r}))\n"
    )
    after = (
        "for _pvs_k, _pvs_v in _pvs_saved.items():\n"
        "    _pvs_os.environ.pop(_pvs_k, None) if _pvs_v is None "
        "else _pvs_os.environ.__setitem__(_pvs_k, _pvs_v)\n"
        "del _pvs_saved\n"
    )
    return before, after


class Contexts:
    """Every context of the server; the default one is made at start."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self._lock = threading.Lock()
        self._all: dict[str, Context] = {}
        self.default = self.create("python", cwd)

    def create(self, language: str, cwd: str) -> Context:
        context = Context(language, cwd)
        with self._lock:
            self._all[context.id] = context
        return context

    def get(self, context_id: str) -> Context | None:
        with self._lock:
            return self._all.get(context_id)

    def remove(self, context_id: str) -> bool:
        with self._lock:
            context = self._all.pop(context_id, None)
        if context is None:
            return False
        context.remove()
        return True

    def list(self) -> list[dict[str, str]]:
        with self._lock:
            return [c.describe() for c in self._all.values()]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "pve-sandbox-code-interpreter"
    contexts: Contexts

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        sys.stderr.write("%s %s\n" % (self.log_date_time_string(), format % args))

    # -- plumbing -----------------------------------------------------------------------------

    def _reply(self, status: int, body: Any = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        if data:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._reply(status, {"error": message})

    def _body(self) -> dict[str, Any] | None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "request body over 16 MiB")
            return None
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError as e:
            self._error(HTTPStatus.BAD_REQUEST, f"request body: not JSON ({e})")
            return None
        if not isinstance(body, dict):
            self._error(HTTPStatus.BAD_REQUEST, "request body: a JSON object expected")
            return None
        return body

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _gone(self) -> bool:
        sock: socket.socket = self.connection
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        try:
            return sock.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _path(self) -> list[str]:
        return [p for p in self.path.split("?", 1)[0].split("/") if p]

    # -- routes -------------------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        path = self._path()
        if path == ["health"]:
            data = b"OK"
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif path == ["contexts"]:
            self._reply(HTTPStatus.OK, self.contexts.list())
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no route GET {self.path}")

    def do_POST(self) -> None:  # noqa: N802
        path = self._path()
        body = self._body()
        if body is None:
            return
        if path == ["execute"]:
            self._execute(body)
        elif path == ["contexts"]:
            self._create_context(body)
        elif len(path) == 3 and path[0] == "contexts" and path[2] == "restart":
            context = self.contexts.get(path[1])
            if context is None:
                self._error(HTTPStatus.NOT_FOUND, f"context {path[1]} not found")
                return
            context.restart()
            self._reply(HTTPStatus.NO_CONTENT)
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no route POST {self.path}")

    def do_DELETE(self) -> None:  # noqa: N802
        path = self._path()
        if len(path) == 2 and path[0] == "contexts":
            if path[1] == self.contexts.default.id:
                self._error(HTTPStatus.BAD_REQUEST, "the default context cannot be removed")
            elif self.contexts.remove(path[1]):
                self._reply(HTTPStatus.NO_CONTENT)
            else:
                self._error(HTTPStatus.NOT_FOUND, f"context {path[1]} not found")
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no route DELETE {self.path}")

    def _create_context(self, body: dict[str, Any]) -> None:
        language = body.get("language") or "python"
        cwd = body.get("cwd") or self.contexts.cwd
        if language not in LANGUAGES:
            self._error(HTTPStatus.BAD_REQUEST, f"language {language!r}: only python is here")
        elif not isinstance(cwd, str) or not os.path.isdir(cwd):
            self._error(HTTPStatus.BAD_REQUEST, f"cwd {cwd!r}: not a directory")
        else:
            self._reply(HTTPStatus.OK, self.contexts.create(language, cwd).describe())

    def _execute(self, body: dict[str, Any]) -> None:
        code, context_id = body.get("code"), body.get("context_id")
        language, env = body.get("language"), body.get("env_vars") or {}
        if not isinstance(code, str):
            return self._error(HTTPStatus.BAD_REQUEST, "code: a string is required")
        if context_id and language:
            return self._error(HTTPStatus.BAD_REQUEST, "context_id or language, not both")
        if language and language not in LANGUAGES:
            return self._error(HTTPStatus.BAD_REQUEST, f"language {language!r}: only python")
        bad_env = not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        )
        if bad_env:
            return self._error(HTTPStatus.BAD_REQUEST, "env_vars: an object of strings")
        context = self.contexts.get(context_id) if context_id else self.contexts.default
        if context is None:
            return self._error(HTTPStatus.NOT_FOUND, f"context {context_id} not found")
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def emit(message: dict[str, Any]) -> None:
            self._chunk(json.dumps(message).encode() + b"\n")

        with context.lock:
            try:
                ended = context.ended("since the last cell, and this one did not run")
                if ended is not None:
                    emit(ended)
                else:
                    self._run(context, code, env, emit)
                emit({"type": "end_of_execution"})
                self.wfile.write(b"0\r\n\r\n")
            except (ClientGone, OSError):
                self.close_connection = True

    def _run(
        self, context: Context, code: str, env: dict[str, str], emit: Callable[[dict], None]
    ) -> None:
        """Runs `code` in `context` with `env` set for this cell only."""
        if env:
            before, after = env_prologue(env)
            context.quietly(before)
        try:
            context.run(code, emit, self._gone)
        finally:
            if env:
                context.quietly(after)


def main() -> None:
    cwd = os.environ.get("HOME") or "/"
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # the kernel's debugger notice
    Handler.contexts = Contexts(cwd)
    server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
    server.daemon_threads = True
    print(f"code interpreter on 127.0.0.1:{PORT}, default context in {cwd}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
