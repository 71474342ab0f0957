"""AsyncSandbox against the real stack: the same surface as the blocking client, awaited."""

from __future__ import annotations

import asyncio
import hashlib
from typing import AsyncIterator, Awaitable, Callable, List, Optional, TypeVar

import pytest

from conftest import Stack
from pve_sandbox import (
    ApprovalRequired,
    AsyncApprovalsClient,
    AsyncSandbox,
    AsyncTerminal,
    AsyncVolumesClient,
    Conflict,
    LimitExceeded,
    NoMatch,
    NotFound,
    PermissionDenied,
    Unavailable,
    VolumeMount,
)

T = TypeVar("T")


async def open_terminal(sb: AsyncSandbox, command: Optional[str] = None) -> AsyncTerminal:
    """sb.terminals.open, tried again once when the controller found no free SSH channel within
    its 10 s: seen about once in six runs on the loaded 2-core test machine, never reproduced
    alone (40 downloads closed early, 12 killed background commands, then a terminal: fine);
    reported as a controller issue, not hidden from it."""
    try:
        return await sb.terminals.open(command, cols=80, rows=24)
    except Unavailable as e:
        if "no free channel" not in e.message:
            raise
        return await sb.terminals.open(command, cols=80, rows=24)


def run(fn: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(fn())  # type: ignore[arg-type]


def test_lifecycle_list_connect(stack: Stack) -> None:
    async def go() -> None:
        async with AsyncSandbox.create(cpus=1, memory_mb=128, labels={"case": "async"}) as sb:
            assert sb.id.startswith("sb-") and await sb.is_running()
            assert [s.id for s in await AsyncSandbox.list(labels={"case": "async"})] == [sb.id]
            async with await AsyncSandbox.connect(sb.id) as again:
                assert (await again.get_info()).id == sb.id
            assert (await sb.set_ttl(1200)).expires_at
            assert (await sb.set_timeout(1300)).expires_at
            assert (await sb.health()).status == "ok"
            gone = sb.id
        with pytest.raises(NotFound):
            await AsyncSandbox.connect(gone)
        sb2 = await AsyncSandbox.create(ttl=300, on_expiry="pause")
        assert (await sb2.pause()).state == "paused"
        assert (await sb2.resume()).state == "ready"
        await sb2.kill()
        assert not await sb2.is_running()
        await sb2.close()

    run(go)


def test_commands_files(stack: Stack) -> None:
    async def go() -> None:
        async with AsyncSandbox.create(ttl=900) as sb:
            d = f"{stack.home}/async-{sb.id}"
            await sb.files.make_dir(d)
            r = await sb.commands.run("echo $X; cat; exit 4", env={"X": "1"}, stdin="s", cwd=d)
            assert (r.stdout, r.exit_code) == ("1\ns", 4)
            seen: List[str] = []
            r = await sb.commands.run("echo a; sleep 0.2; echo b", on_stdout=seen.append)
            assert "".join(seen) == "a\nb\n" and r.ok
            h = await sb.commands.run("echo bg; sleep 0.3", background=True)
            assert (await h.wait(30)).stdout == "bg\n" and h.done and not await h.kill()
            started = asyncio.Event()  # the kill comes once the command runs
            h = await sb.commands.run(
                "echo started; sleep 300", background=True, on_stdout=lambda _: started.set()
            )
            await asyncio.wait_for(started.wait(), 30)
            with pytest.raises(TimeoutError):
                await h.wait(0.2)
            assert await h.kill() and (await h.wait(30)).exit_code != 0
            with pytest.raises(PermissionDenied):
                await sb.commands.run("echo deny-me")

            async def chunks() -> AsyncIterator[bytes]:
                for i in range(64):
                    yield bytes([i]) * 65536

            w = await sb.files.write(f"{d}/f.bin", chunks(), mode="0640")
            assert w.size == 64 * 65536 and w.mode == "0640"
            h2 = hashlib.sha256()
            async for piece in await sb.files.read(f"{d}/f.bin", format="stream"):
                h2.update(piece)
            assert (
                h2.digest()
                == hashlib.sha256(b"".join(bytes([i]) * 65536 for i in range(64))).digest()
            )
            await sb.files.write(f"{d}/t.txt", "a = 1\n")
            assert await sb.files.read(f"{d}/t.txt") == "a = 1\n"
            assert await sb.files.read(f"{d}/t.txt", format="bytes") == b"a = 1\n"
            assert (await sb.files.edit(f"{d}/t.txt", "1", "2")).replaced == 1
            with pytest.raises(NoMatch):
                await sb.files.edit(f"{d}/t.txt", "zzz", "y")
            assert sorted((await sb.files.list(d)).names()) == ["f.bin", "t.txt"]
            assert await sb.files.exists(f"{d}/t.txt") and await sb.files.exists(d)
            await sb.files.remove(f"{d}/t.txt")
            assert not await sb.files.exists(f"{d}/t.txt")
            b = b""
            async for piece in await sb.files.iter_bytes(f"{d}/f.bin"):
                b += piece[:1]
            assert b[:1] == b"\x00"

    run(go)


def test_terminals(stack: Stack) -> None:
    async def go() -> None:
        # A sandbox of its own: on one that just ran the commands and transfers above, a pty
        # sometimes finds no free SSH channel (see open_terminal).
        # The admin token: no terminal.input rule judges it, so vi's Escape may be typed.
        async with AsyncSandbox.create(ttl=900, token=stack.admin_token) as sb:
            d = f"{stack.home}/async-{sb.id}"
            await sb.files.make_dir(d)
            async with await open_terminal(sb, f"vi {d}/v.txt") as t:
                assert (await t.wait(r"^~")).matched
                await t.type("iasync vi")
                await t.press("Escape")
                assert (await t.wait("async vi")).matched
                assert (await t.screen()).lines[0] == "async vi"
                await t.type(":wq\r")
                assert (await t.wait()).outcome == "exited"
            assert await sb.files.read(f"{d}/v.txt") == "async vi\n"
            t = await open_terminal(sb)
            assert (await t.wait(r"\$$")).matched
            await t.type("echo hi-$((2*3))\r")
            assert (await t.wait("hi-6$")).matched
            await t.press("C-c")
            await t.send([{"key": "C-u"}])
            assert (await t.resize(81, 25)).cols == 81
            assert t.id in [x.id for x in await sb.terminals.list()]
            assert (await sb.terminals.get(t.id)).id == t.id
            async with t.attach() as conn:
                await conn.send(b"echo aws-$((7*7))\r")
                await conn.expect("aws-49", timeout=10)
                await conn.resize(70, 20)
            async with t.attach(watch=True) as watcher:
                await watcher.send(b"x")  # refused: read-only
                for _ in range(40):
                    if watcher.errors:
                        break
                    try:
                        await watcher.recv(timeout=0.25)
                    except asyncio.TimeoutError:
                        pass
                assert watcher.errors
            assert (await t.refresh()).state == "running"
            await t.close()

    run(go)


def test_internet_snapshots(stack: Stack) -> None:
    async def go() -> None:
        async with AsyncSandbox.create(ttl=900) as sb:
            assert (await sb.internet.on()).egress == "on"
            assert (await sb.internet.allow(["example.org"])).egress == "allowlist"
            assert (await sb.internet.use_list("python-packages")).egress == "allowlist"
            assert (await sb.internet.off()).egress == "off"
            assert (await sb.snapshots.create("s1")).name == "s1"
            assert [s.name for s in await sb.snapshots.list()] == ["s1"]
            assert (await sb.snapshots.rollback("s1")).id == sb.id
            await sb.snapshots.delete("s1")
            usage = await sb.usage()
            assert usage and usage[-1].live and usage[-1].maxdisk > 0

    run(go)


def test_volumes(stack: Stack) -> None:
    async def go() -> None:
        async with AsyncVolumesClient() as volumes:
            vol = await volumes.create("py-async")
            sb = await AsyncSandbox.create(ttl=600, volumes=[VolumeMount("py-async", "/srv/a")])
            try:
                assert [m.path for m in sb.info.volumes] == ["/srv/a"]
                with pytest.raises(Conflict):
                    await volumes.resize(vol.id, 2)
            finally:
                await sb.destroy()
                await sb.close()
            await volumes.delete(vol.id)
            with pytest.raises(NotFound):
                await volumes.get(vol.id)

    run(go)


def test_approvals_and_limits(stack: Stack) -> None:
    async def go() -> None:
        async with AsyncSandbox.create(ttl=600) as sb, AsyncApprovalsClient(
            token=stack.admin_token
        ) as admin:
            with pytest.raises(ApprovalRequired) as ar:
                await sb.commands.run("echo approve-me async")
            a = ar.value.approval
            assert a.id in [x.id for x in await admin.list(state="pending")]
            assert (await admin.get(a.id)).pending

            async def later() -> None:
                await asyncio.sleep(0.3)
                await admin.approve(a, reason="ok")

            task = asyncio.ensure_future(later())
            assert (await a.wait_async(timeout=30)).approved
            await task
            r = await sb.commands.run("echo approve-me async", approval=a.id)
            assert r.stdout == "approve-me async\n"
            with pytest.raises(ApprovalRequired) as ar:
                await sb.commands.run("echo approve-me denied")
            await admin.deny(ar.value.approval.id, reason="nope")
            with pytest.raises(PermissionDenied):
                await ar.value.approval.wait_async(timeout=10)
        async with AsyncSandbox.create(token=stack.limited_token):
            with pytest.raises(LimitExceeded):
                await AsyncSandbox.create(token=stack.limited_token)

    run(go)
