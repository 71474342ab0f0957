"""The blocking client against the real stack: every public method, streaming, error mapping,
approvals, terminals (vi through the SDK) and a 256 MiB file with bounded memory."""

from __future__ import annotations

import hashlib
import io
import os
import threading
import time
import tracemalloc
from typing import Iterator, List

import httpx
import pytest

from conftest import Stack
from pve_sandbox import (
    AmbiguousMatch,
    ApprovalDenied,
    ApprovalRequired,
    ApprovalsClient,
    Conflict,
    InvalidArgument,
    LimitExceeded,
    NoMatch,
    NotFound,
    PermissionDenied,
    Sandbox,
    TerminalInputRefused,
    Unauthenticated,
    VolumeMount,
    VolumesClient,
    __version__,
)


def test_version_is_the_projects() -> None:
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "CMakeLists.txt")) as f:
        assert f"VERSION {__version__} " in f.read()


def test_create_with_destroys_on_exit_and_keep_keeps(stack: Stack) -> None:
    with Sandbox.create(cpus=2, memory_mb=256, labels={"case": "lifecycle"}, ttl=600) as sb:
        assert sb.id.startswith("sb-") and sb.sandbox_id == sb.id
        assert (sb.info.cpus, sb.info.memory_mb) == (2, 256)
        assert sb.info.labels == {"case": "lifecycle"}
        assert sb.is_running()
        assert [s.id for s in Sandbox.list(labels={"case": "lifecycle"})] == [sb.id]
        gone = sb.id
    with pytest.raises(NotFound):
        Sandbox.connect(gone)
    with Sandbox.create(keep=True) as kept:
        pass
    killed = Sandbox.create()
    killed.kill()  # E2B's name for destroy
    assert not killed.is_running()
    killed.close()
    with Sandbox.connect(kept.id) as again:  # connect keeps by default
        assert again.info.id == kept.id
    Sandbox.connect(kept.id, keep=False).close()
    assert kept.id not in [s.id for s in Sandbox.list()]


def test_config_from_sandboxctl_variables(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PVS_URL")
    monkeypatch.delenv("PVS_TOKEN")
    monkeypatch.setenv("SANDBOXCTL_URL", stack.url)
    monkeypatch.setenv("SANDBOXCTL_TOKEN", stack.token)
    assert isinstance(Sandbox.list(), list)
    with pytest.raises(Unauthenticated):
        Sandbox.list(token="pvs_wrong")


def test_info_ttl_health(sb: Sandbox) -> None:
    before = sb.get_info().expires_at
    time.sleep(1.1)
    assert sb.set_ttl(3600).expires_at > before
    assert sb.set_timeout(3000).expires_at != ""
    assert sb.health().status == "ok"


def test_usage(sb: Sandbox) -> None:
    now = sb.usage()  # the stack's Proxmox steps a minute: the live sample at least
    assert now and now[-1].live and now[-1].cpus >= 1 and now[-1].maxmem > 0
    assert sb.usage(since=1, until=2) == []  # before it began
    with pytest.raises(InvalidArgument):
        sb.usage(since=5, until=4)


def test_pause_and_auto_resume(stack: Stack) -> None:
    with Sandbox.create(ttl=600, on_expiry="pause", auto_resume=True) as sb:
        assert (sb.info.on_expiry, sb.info.auto_resume) == ("pause", True)
        home = sb.commands.run('printf %s "$HOME"').stdout
        sb.files.write(f"{home}/kept-{sb.id}", "kept")
        assert sb.pause().state == "paused"
        # auto_resume: the next call resumes it first.
        assert sb.commands.run(f"cat {home}/kept-{sb.id}").stdout == "kept"
        assert sb.get_info().state == "ready"
        assert sb.pause().state == "paused"
        assert sb.resume(ttl=300).state == "ready"
    with Sandbox.create(ttl=600) as plain:
        assert (plain.info.on_expiry, plain.info.auto_resume) == ("destroy", False)


def test_capture_and_fork(stack: Stack) -> None:
    with Sandbox.create(ttl=600, labels={"case": "fork"}) as sb:
        t = sb.capture("py-capture")
        assert (t.name, t.source) == ("py-capture", sb.id) and t.owner != ""
        with Sandbox.create(template="py-capture", ttl=600) as from_it:
            assert from_it.info.labels["pve-sandbox/template-name"] == "py-capture"
        forks = sb.fork(2, ttl=300)
        try:
            assert len(forks) == 2
            assert all(f.info.labels["case"] == "fork" for f in forks)
            assert forks[0].commands.run("echo hi").stdout == "hi\n"
        finally:
            for f in forks:
                f.destroy()
                f.close()
    gone = httpx.delete(
        stack.url + "/v1/templates/py-capture",
        headers={"Authorization": "Bearer " + stack.token},
        timeout=60,  # httpx's own default is 5 s; the SDK's is 60
    )
    assert gone.status_code == 204, gone.text


def test_volumes(stack: Stack) -> None:
    with VolumesClient() as volumes:
        vol = volumes.create("py-work", size_gb=1)
        assert (vol.name, vol.size_gb, vol.mounted_by) == ("py-work", 1, None)
        with pytest.raises(Conflict):
            volumes.create("py-work")
        with Sandbox.create(
            ttl=600, volumes=[VolumeMount("py-work", "/mnt/w", read_only=True)]
        ) as sb:
            assert sb.info.volumes == [VolumeMount(vol.id, "/mnt/w", True)]
            assert volumes.get(vol.id).mounted_by == sb.id
            with pytest.raises(Conflict):
                volumes.delete(vol.id)
            with pytest.raises(Conflict):
                Sandbox.create(volumes=[{"volume": "py-work", "path": "/mnt/x"}])
        assert volumes.resize(vol.id, 2).size_gb == 2
        assert [v.id for v in volumes.list()] == [vol.id]
        volumes.delete(vol.id)
        with pytest.raises(NotFound):
            volumes.get(vol.id)


def test_ports_and_preview_url(sb: Sandbox, stack: Stack) -> None:
    pid = sb.commands.run(
        "setsid python3 -m http.server 8123 --bind 127.0.0.1 >/dev/null 2>&1 </dev/null & echo $!"
    ).stdout.strip()
    assert pid.isdigit()
    try:
        found = None
        for _ in range(200):  # until it listens (at most 20 s)
            found = next((p for p in sb.ports() if p.port == 8123), None)
            if found:
                break
            time.sleep(0.1)
        assert found and found.addresses == ["127.0.0.1"]
        assert found.url == sb.get_host(8123)
        r = httpx.get(found.url, headers={"Authorization": f"Bearer {stack.token}"}, timeout=60)
        assert r.status_code == 200 and "Directory listing" in r.text
        link = sb.preview(8123, expires_in=120)
        assert link.port == 8123 and link.url.startswith(stack.url.rstrip("/") + "/v1/previews/")
        r = httpx.get(link.url, timeout=60)  # no token: the link is the credential
        assert r.status_code == 200 and "Directory listing" in r.text
    finally:
        sb.commands.run(f"kill {pid}")


def test_run(sb: Sandbox, workdir: str) -> None:
    r = sb.commands.run("echo out; echo err >&2; exit 3")
    assert (r.exit_code, r.stdout, r.stderr, r.ok) == (3, "out\n", "err\n", False)
    r = sb.commands.run("pwd; echo $A$B; cat", cwd=workdir, env={"A": "x"}, envs=None, stdin="in")
    assert r.stdout == f"{workdir}\nx\nin"
    r = sb.commands.run("sleep 30", timeout=1)
    assert r.timed_out


def test_run_streams_with_callbacks(sb: Sandbox) -> None:
    seen: List[str] = []
    errs: List[str] = []
    r = sb.commands.run(
        "for i in 1 2 3; do echo $i; sleep 0.2; done; echo e >&2",
        on_stdout=seen.append,
        on_stderr=errs.append,
    )
    assert "".join(seen) == "1\n2\n3\n" and len(seen) >= 2  # pieces, as they came
    assert errs == ["e\n"] and r.stdout == "1\n2\n3\n" and r.exit_code == 0


def test_background_wait_and_kill(sb: Sandbox, workdir: str) -> None:
    h = sb.commands.run("echo started; sleep 0.5; echo done", background=True)
    r = h.wait(timeout=30)
    assert r.stdout == "started\ndone\n" and r.exit_code == 0 and h.done
    assert h.kill() is False
    started = threading.Event()  # the kill comes once the command runs, however slow the start
    h = sb.commands.run(
        "echo started; sleep 299.25", background=True, on_stdout=lambda _: started.set()
    )
    assert started.wait(30)
    with pytest.raises(TimeoutError):
        h.wait(timeout=0.2)
    assert h.kill() is True
    r = h.wait(timeout=30)
    assert r.exit_code != 0 and not r.timed_out
    # The group died: its sleep may take a moment longer than the shell whose end we saw.
    gone = "for i in $(seq 50); do pgrep -x -f 'sleep 299.25' >/dev/null || exit 0; sleep 0.1; done"
    assert sb.commands.run(gone + "; echo alive").stdout == ""


def test_files_write_read_list_exists_remove(sb: Sandbox, workdir: str) -> None:
    p = f"{workdir}/a/b.txt"
    w = sb.files.write(p, "héllo\n", mode=0o600)
    assert (w.path, w.size, w.mode) == (p, 7, "0600")
    assert sb.files.read(p) == "héllo\n"
    assert sb.files.read(p, format="bytes") == "héllo\n".encode()
    assert b"".join(sb.files.read(p, format="stream")) == "héllo\n".encode()
    sb.files.write(f"{workdir}/bin", io.BytesIO(b"\x00\x01" * 100000))
    assert sb.files.read(f"{workdir}/bin", format="bytes") == b"\x00\x01" * 100000
    sb.files.write(f"{workdir}/gen", (bytes([i]) * 1000 for i in range(10)))
    assert len(b"".join(sb.files.iter_bytes(f"{workdir}/gen"))) == 10000
    listing = sb.files.list(workdir)
    assert sorted(listing.names()) == ["a", "bin", "gen"] and not listing.truncated
    assert {e.name: e.type for e in listing}["a"] == "dir"
    assert len(sb.files.list(workdir, limit=1)) == 1
    assert sb.files.exists(p) and sb.files.exists(f"{workdir}/a")
    assert not sb.files.exists(f"{workdir}/nope")
    sb.files.remove(f"{workdir}/a")
    assert not sb.files.exists(p)
    with pytest.raises(NotFound):
        sb.files.read(p)
    with pytest.raises(NotFound):
        sb.files.read(p, format="stream")


def test_files_edit(sb: Sandbox, workdir: str) -> None:
    p = f"{workdir}/app.py"
    sb.files.write(p, "x = 1\ny = 1\n")
    e = sb.files.edit(p, "x = 1", "x = 2")
    assert e.replaced == 1 and "-x = 1" in e.diff and "+x = 2" in e.diff
    with pytest.raises(NoMatch):
        sb.files.edit(p, "z = 9", "z = 0")
    with pytest.raises(AmbiguousMatch):
        sb.files.edit(p, "= ", "== ")
    assert sb.files.edit(p, " = ", " := ", replace_all=True).replaced == 2
    assert sb.files.read(p) == "x := 2\ny := 1\n"
    with pytest.raises(InvalidArgument):
        sb.files.edit(p, "", "a")


def test_errors_map_to_types(stack: Stack, sb: Sandbox) -> None:
    with pytest.raises(NotFound) as nf:
        Sandbox.connect("sb-000000000000")
    assert nf.value.status == 404 and nf.value.code == "not_found" and nf.value.request_id
    with pytest.raises(InvalidArgument):
        sb.commands.run("true", cwd="relative")
    with pytest.raises(PermissionDenied) as pd:
        sb.commands.run("echo deny-me")
    assert "deny-me is not allowed" in str(pd.value)
    with Sandbox.create(token=stack.limited_token) as one:
        with pytest.raises(LimitExceeded) as le:
            Sandbox.create(token=stack.limited_token)
        assert le.value.status == 429
        assert one.id


def test_limit_exceeded_honours_retry_after(sb: Sandbox) -> None:
    held = [sb.commands.run("sleep 300", background=True) for _ in range(4)]  # the stream cap
    try:
        no_retry = Sandbox.connect(sb.id, max_retries=0)
        with pytest.raises(LimitExceeded) as le:
            no_retry.commands.run("echo x", on_stdout=lambda s: None)
        assert le.value.retry_after == 1.0
        threading.Timer(0.3, lambda: [h.kill() for h in held]).start()
        patient = Sandbox.connect(sb.id, max_retries=20)
        r = patient.commands.run("echo through", on_stdout=lambda s: None)
        assert r.stdout == "through\n"
        no_retry.close()
        patient.close()
    finally:
        for h in held:
            h.kill()
            h.wait(timeout=30)


def test_internet(sb: Sandbox) -> None:
    assert sb.internet.on().egress == "on"
    info = sb.internet.allow(["example.org", "*.example.net"], ports=[443])
    assert info.egress == "allowlist"
    assert isinstance(info.internet, dict) and info.internet["ports"] == [443]
    info = sb.internet.use_list("python-packages")
    assert info.egress == "allowlist" and isinstance(info.internet, dict)
    assert info.internet["list"] == "python-packages" and info.internet["ports"] == [443]
    assert sb.internet.off().egress == "off"
    with pytest.raises(InvalidArgument):
        sb.internet.allow(["not a name"])


def test_snapshots(sb: Sandbox, workdir: str) -> None:
    snap = sb.snapshots.create("before", description="py")
    assert snap.name == "before"
    assert [s.name for s in sb.snapshots.list()] == ["before"]
    assert sb.snapshots.rollback("before").id == sb.id
    assert sb.commands.run("echo back").stdout == "back\n"
    sb.snapshots.delete("before")
    assert sb.snapshots.list() == []
    with pytest.raises(NotFound):
        sb.snapshots.delete("before")


def test_approvals(stack: Stack, sb: Sandbox, workdir: str) -> None:
    admin = ApprovalsClient(token=stack.admin_token)
    with pytest.raises(ApprovalRequired) as ar:
        sb.commands.run("echo approve-me")
    a = ar.value.approval
    assert a.pending and a.action == "exec" and a.message == "a person approves this"
    assert a.id in [p.id for p in admin.list(state="pending")]
    threading.Timer(0.3, lambda: admin.approve(a.id, reason="fine")).start()
    assert a.wait(timeout=30).approved
    assert sb.commands.run("echo approve-me", approval=a).stdout == "approve-me\n"
    with pytest.raises(PermissionDenied):  # once
        sb.commands.run("echo approve-me", approval=a)
    # denied: wait raises, with who and why
    with pytest.raises(ApprovalRequired) as ar:
        sb.files.write(f"{workdir}/needs-ok/f", "x")
    assert admin.get(ar.value.approval.id).action == "files.write"
    admin.deny(ar.value.approval, reason="no")
    with pytest.raises(ApprovalDenied) as dn:
        ar.value.approval.wait(timeout=10)
    assert "admin" in str(dn.value) and "no" in str(dn.value)
    # approved: the approval covers the content (the SDK sends its Content-Digest), once
    with pytest.raises(ApprovalRequired) as ar:
        sb.files.write(f"{workdir}/needs-ok/g", "approved bytes")
    admin.approve(ar.value.approval)
    sb.files.write(f"{workdir}/needs-ok/g", "approved bytes", approval=ar.value.approval)
    assert sb.files.read(f"{workdir}/needs-ok/g") == "approved bytes"
    # still pending after the timeout
    with pytest.raises(ApprovalRequired) as ar:
        sb.internet.allow(["approve.example"])
    with pytest.raises(TimeoutError):
        ar.value.approval.wait(timeout=0.3)
    admin.approve(ar.value.approval)
    assert sb.internet.allow(["approve.example"], approval=ar.value.approval).egress == "allowlist"
    sb.internet.off()
    admin.close()


def test_approval_wait_held_by_the_server_then_202(sb: Sandbox) -> None:
    # Without Prefer: respond-async the controller holds the call approval_wait_seconds (1 s
    # here) for a decision, then answers 202 as with it.
    with Sandbox.connect(sb.id, approval_wait=True) as waiting:
        with pytest.raises(ApprovalRequired) as ar:
            waiting.commands.run("echo approve-me held")
    assert ar.value.approval.pending


def test_terminal_escape_is_refused_under_input_rules(sb: Sandbox) -> None:
    # The agent token has terminal.input rules: a key the line model cannot follow is refused.
    with sb.terminals.open(cols=80, rows=24) as t:
        with pytest.raises(TerminalInputRefused) as refused:
            t.press("Escape")
        assert refused.value.status == 422 and refused.value.code == "terminal_input_not_modelled"


def test_terminal_vi_through_the_sdk(typist_sb: Sandbox, stack: Stack) -> None:
    sb = typist_sb
    path = f"{stack.home}/vi-{sb.id}.txt"
    with sb.terminals.open(f"vi {path}", cols=80, rows=24) as t:
        assert t.id.startswith("t-") and t.info.state == "running"
        assert t.wait(r"^~", timeout=10).matched  # vi drew its empty buffer
        assert t.screen().alternate_screen
        t.type("ihello from vi")
        t.press("Escape")
        assert t.wait("hello from vi", timeout=10).matched
        scr = t.screen()
        assert scr.lines[0] == "hello from vi" and scr.cursor.row == 0 and len(scr.lines) == 24
        t.type(":wq")
        t.press("Enter")
        w = t.wait(timeout=10)
        assert w.outcome == "exited" and w.terminal.exit_code == 0
    assert sb.files.read(path) == "hello from vi\n"


def test_terminal_shell_keys_resize_list_attach(sb: Sandbox) -> None:
    t = sb.terminals.open(cols=100, rows=30)
    try:
        assert t.wait(r"\$$", timeout=10).matched  # the prompt
        t.type("echo sleeping; sleep 100\r")
        assert t.wait(r"^sleeping$", timeout=10).matched  # sleep is (about to be) in front
        for _ in range(10):  # a C-c that lands before sleep took the terminal is lost: again
            t.press("C-c")
            if t.wait(r"\$$", timeout=2).matched:  # the prompt is back
                break
        else:
            pytest.fail("C-c did not stop sleep")
        t.send([{"text": "echo typed-$((6*7))"}, {"key": "Enter"}])
        assert t.wait(r"typed-42$", timeout=10).matched
        assert t.resize(120, 40).cols == 120
        assert t.id in [x.id for x in sb.terminals.list()]
        assert sb.terminals.get(t.id).info.rows == 40
        with t.attach() as conn:
            conn.send("echo ws-$((5*5))\r")
            assert b"ws-25" in conn.expect(rb"ws-25\r?\n", timeout=10)
            conn.resize(90, 20)
        with t.attach(watch=True) as watcher:
            watcher.send(b"x")  # refused: read-only
            for _ in range(40):
                if watcher.errors:
                    break
                try:
                    watcher.recv(timeout=0.25)
                except TimeoutError:
                    pass
            assert watcher.errors
        assert t.refresh().state == "running"
        with pytest.raises(ApprovalRequired) as ar:
            t.type("echo approve-typed\r")
        assert ar.value.approval.action == "terminal.input"
    finally:
        t.close()
    with pytest.raises(NotFound):  # a closed terminal is gone
        t.refresh()
    t.close()  # twice is fine


def test_large_file_streams_with_bounded_memory(sb: Sandbox, workdir: str) -> None:
    size = 256 << 20
    piece = hashlib.sha256(b"pvs").digest() * 2048  # 64 KiB
    want = hashlib.sha256()

    def gen() -> Iterator[bytes]:
        for _ in range(size // len(piece)):
            want.update(piece)
            yield piece

    tracemalloc.start()
    try:
        w = sb.files.write(f"{workdir}/big", gen())
        got = hashlib.sha256()
        n = 0
        for chunk in sb.files.read(f"{workdir}/big", format="stream"):
            got.update(chunk)
            n += len(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert w.size == size and n == size and got.hexdigest() == want.hexdigest()
    assert peak < 16 << 20, f"peak {peak} bytes traced for a {size} byte file"
    sb.files.remove(f"{workdir}/big")
