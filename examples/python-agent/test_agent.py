"""The example agent against a stand-in chat endpoint (a fixed transcript of tool calls served
by http.server on loopback) and a real sandbox: checks what happened in the sandbox and what
the model was sent back. Run through tests/python/stack.sh (see tests/python/CMakeLists.txt)."""

from __future__ import annotations

import http.server
import json
import os
import sys
import threading
from typing import Any, Dict, Iterator, List

import httpx
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "sdk", "python"))
sys.path.insert(0, HERE)

import agent  # noqa: E402
from pve_sandbox import Sandbox  # noqa: E402


def tool_call(n: int, name: str, **args: Any) -> Dict[str, Any]:
    return {
        "id": f"call_{n}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def transcript(d: str) -> List[Dict[str, Any]]:
    """What the stand-in model answers, turn by turn."""
    return [
        {
            "tool_calls": [
                tool_call(1, "write_file", path=f"{d}/hello.py", content="print('hello', 6*7)\n")
            ]
        },
        {"tool_calls": [tool_call(2, "run_command", command=f"cd {d} && python3 hello.py")]},
        {
            "tool_calls": [
                tool_call(
                    3, "write_file", path=f"{d}/hello.py", old_string="6*7", new_string="6*9"
                ),
                tool_call(4, "read_file", path=f"{d}/hello.py"),
            ]
        },
        {"tool_calls": [tool_call(5, "run_command", command=f"python3 {d}/hello.py")]},
        {"tool_calls": [tool_call(6, "read_file", path=f"{d}/missing.txt")]},
        {"content": "hello.py prints hello 54 now."},
    ]


class StandIn(http.server.BaseHTTPRequestHandler):
    answers: List[Dict[str, Any]] = []
    seen: List[Dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body["_auth"] = self.headers.get("Authorization")
        body["_path"] = self.path
        StandIn.seen.append(body)
        message = {"role": "assistant", "content": None, **StandIn.answers.pop(0)}
        out = json.dumps({"choices": [{"index": 0, "message": message}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_agent_runs_the_transcript_in_a_real_sandbox(endpoint: str) -> None:
    for name in ("PVS_URL", "PVS_TOKEN", "PVS_STACK_HOME"):
        if not os.environ.get(name):
            pytest.fail(f"{name} unset: run through tests/python/stack.sh", pytrace=False)
    with Sandbox.create(ttl=600) as sb:
        d = os.path.join(os.environ["PVS_STACK_HOME"], "agent-" + sb.id)
        StandIn.answers = transcript(d)
        StandIn.seen = []
        log: List[str] = []
        with httpx.Client(base_url=endpoint, headers={"Authorization": "Bearer k-1"}) as client:
            answer = agent.run_agent("make hello.py print 54", sb, client, "m-1", log=log.append)
        assert answer == "hello.py prints hello 54 now."
        assert sb.files.read(f"{d}/hello.py") == "print('hello', 6*9)\n"
    seen = StandIn.seen
    assert len(seen) == 6 and len(log) == 6
    assert {s["_auth"] for s in seen} == {"Bearer k-1"} and seen[0][
        "_path"
    ] == "/v1/chat/completions"
    assert seen[0]["model"] == "m-1" and len(seen[0]["tools"]) == 3
    assert seen[0]["messages"][1] == {"role": "user", "content": "make hello.py print 54"}

    def tool_results(turn: int) -> List[str]:
        return [m["content"] for m in seen[turn]["messages"] if m["role"] == "tool"]

    assert tool_results(1)[-1] == f"wrote 20 bytes to {d}/hello.py"
    assert json.loads(tool_results(2)[-1]) == {"exit_code": 0, "stdout": "hello 42\n", "stderr": ""}
    edited, read = tool_results(3)[-2:]
    assert "-print('hello', 6*7)" in edited and read == "print('hello', 6*9)\n"
    assert json.loads(tool_results(4)[-1])["stdout"] == "hello 54\n"
    assert tool_results(5)[-1].startswith("error: NotFound")  # errors go back to the model
