"""The SDK's tests run against the real stack that tests/python/stack.sh starts (controller,
pvesim with real sshd sandboxes, agent, ruleset) and whose address and tokens it exports.

Run them with:  tests/python/stack.sh BUILD_DIR /usr/bin/python3 -m pytest tests/python
A missing stack is a failure, never a skip.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Iterator

import httpx
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))

from pve_sandbox import Sandbox  # noqa: E402


@dataclass
class Stack:
    """What stack.sh exported."""

    url: str
    token: str
    admin_token: str
    limited_token: str
    home: str
    dir: str


@pytest.fixture(scope="session")
def stack() -> Stack:
    need = [
        "PVS_URL",
        "PVS_TOKEN",
        "PVS_ADMIN_TOKEN",
        "PVS_LIMITED_TOKEN",
        "PVS_STACK_HOME",
    ]
    missing = [n for n in need if not os.environ.get(n)]
    if missing:
        pytest.fail(
            f"no stack: {', '.join(missing)} unset; run the tests through "
            "tests/python/stack.sh BUILD_DIR /usr/bin/python3 -m pytest tests/python",
            pytrace=False,
        )
    s = Stack(
        url=os.environ["PVS_URL"],
        token=os.environ["PVS_TOKEN"],
        admin_token=os.environ["PVS_ADMIN_TOKEN"],
        limited_token=os.environ["PVS_LIMITED_TOKEN"],
        home=os.environ["PVS_STACK_HOME"],
        dir=os.environ.get("PVS_STACK_DIR", ""),
    )
    r = httpx.get(s.url + "/v1/health", headers={"Authorization": "Bearer " + s.token})
    if r.status_code != 200 or not r.json().get("agent", {}).get("ok"):
        pytest.fail(f"the stack is not healthy: {r.status_code} {r.text}", pytrace=False)
    return s


@pytest.fixture
def sb(stack: Stack) -> Iterator[Sandbox]:
    """A sandbox of its own for each test (destroyed at its end), so that one test's SSH
    channels never stand in another's way."""
    with Sandbox.create(ttl=1800, labels={"suite": "python"}) as s:
        yield s


@pytest.fixture
def typist_sb(stack: Stack) -> Iterator[Sandbox]:
    """A sandbox of the admin token, which no terminal.input rule judges: a full-screen program
    (vi: Escape, cursor keys) can be driven there. Under the agent token's rules such keys are
    refused (TerminalInputRefused), since the policy could not follow the typed line."""
    with Sandbox.create(ttl=1800, labels={"suite": "python"}, token=stack.admin_token) as s:
        yield s


@pytest.fixture
def workdir(sb: Sandbox, stack: Stack, request: pytest.FixtureRequest) -> str:
    """A fresh directory in the sandbox user's home for one test."""
    path = os.path.join(stack.home, "t-" + request.node.name.replace("[", "-").strip("]")[:60])
    sb.files.make_dir(path)
    return path
