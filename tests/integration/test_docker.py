"""The Docker backend against a real engine (``ci/docker-up.sh`` brings one up).

With ``HARNESS_REQUIRE_DOCKER=1`` a missing engine or base image FAILS these tests; without
it they skip with the reason.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.cases.model import PhaseContract
from harness.env.images import build_case_image, case_image_tag
from harness.errors import ConfigError, SandboxUnavailableError
from harness.sandbox._docker_engine import _created
from harness.sandbox.base import Sandbox, SandboxSession, Termination
from harness.sandbox.classify import EAGAIN_FORK as _EAGAIN_FORK
from harness.sandbox.docker import (
    DEFAULT_IMAGE,
    LABEL,
    DockerSandbox,
    DockerSession,
    connect,
    find_image,
    prune,
)


@pytest.fixture(scope="module")
def client(docker_client: Any) -> Any:
    return docker_client


@pytest.fixture(scope="module")
def backend(client: Any) -> DockerSandbox:
    return DockerSandbox(client, run_id="pytest")


def _contract(**kw: Any) -> PhaseContract:
    base: dict[str, Any] = {"timeout_seconds": 20, "memory_mb": 128, "pids": 64, "disk_mb": 32}
    return PhaseContract(**{**base, **kw})


@pytest.fixture(scope="module")
def volumes(client: Any) -> DockerSandbox:
    """Sessions on engine volumes + a holder: the way for an engine that is not local."""
    return DockerSandbox(client, run_id="pytest", files="volumes")


@pytest.fixture
def session(backend: DockerSandbox) -> Iterator[SandboxSession]:
    with backend.open(_contract(), label="pytest") as s:
        yield s


def _mine(client: Any, **labels: str) -> list[Any]:
    flt = [f"{LABEL}=1", *(f"{k}={v}" for k, v in labels.items())]
    return list(client.containers.list(all=True, filters={"label": flt}))


# -- pure helpers (no engine) ------------------------------------------------------------------
@given(
    st.datetimes(min_value=dt.datetime(1971, 1, 1), max_value=dt.datetime(2200, 1, 1)),
    st.integers(0, 999),
)
def test_engine_timestamps_parse_to_epoch(when: dt.datetime, nanos: int) -> None:
    stamp = when.replace(tzinfo=dt.UTC)
    text = stamp.strftime("%Y-%m-%dT%H:%M:%S.%f") + f"{nanos:03d}Z"
    assert _created(text) == pytest.approx(stamp.timestamp(), abs=1e-5)


def test_pids_heuristic_matches_fork_failures_not_other_eagain() -> None:
    assert _EAGAIN_FORK.search(b"bash: fork: retry: Resource temporarily unavailable")
    assert _EAGAIN_FORK.search(b"BlockingIOError: [Errno 11] Resource temporarily unavailable")
    assert not _EAGAIN_FORK.search(b"OSError: [Errno 101] Network is unreachable")


# -- protocol + bounds ---------------------------------------------------------------------------


@pytest.mark.docker
@pytest.mark.integration
def test_backend_satisfies_protocol(backend: DockerSandbox, session: SandboxSession) -> None:
    assert isinstance(backend, Sandbox) and isinstance(session, SandboxSession)
    facts = backend.describe()
    assert facts["engine_version"] not in ("", "?")
    assert facts["default_image_id"].startswith("sha256:")
    assert session.image_id == facts["default_image_id"]


@pytest.mark.docker
@pytest.mark.integration
def test_exec_output_status_stdin_and_truncation(backend: DockerSandbox) -> None:
    with backend.open(_contract(output_bytes=1024), label="pytest") as s:
        r = s.exec(["sh", "-c", "echo out; echo err >&2; exit 3"])
        assert (r.exit_code, r.termination, r.stdout, r.stderr) == (
            3,
            Termination.EXIT,
            b"out\n",
            b"err\n",
        )
        assert s.exec(["cat"], stdin=b"fed").stdout == b"fed"
        big = s.exec(["sh", "-c", "head -c 5000 /dev/zero"])
        assert (len(big.stdout), big.stdout_total, big.stdout_truncated) == (1024, 5000, True)
        missing = s.exec(["no-such-program"])
        assert missing.exit_code == 127 and missing.termination is Termination.EXIT


@pytest.mark.docker
@pytest.mark.integration
def test_files_roundtrip_and_persist_between_commands(
    session: SandboxSession, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "mod.py").write_text("X = 1\n")
    (src / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (src / "run.sh").chmod(0o755)
    session.put_tree(src)
    session.write_file("/harness/io/request.md", b"do it")
    assert session.exec(["./run.sh"]).stdout == b"ran\n"
    assert session.exec(["sh", "-c", "echo new > made.txt"]).ok
    assert session.read_file("/workspace/made.txt") == b"new\n"
    assert session.read_file("/harness/io/request.md", limit=2) == b"do"
    assert session.read_file("/workspace/absent") is None
    out = tmp_path / "out"
    session.get_tree(out)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "made.txt",
        "pkg/mod.py",
        "run.sh",
    ]
    assert os.access(out / "run.sh", os.X_OK)
    session.remove("/workspace/pkg")
    assert session.read_file("/workspace/pkg/mod.py") is None
    with pytest.raises(ValueError, match="under /workspace"):
        session.write_file("/etc/passwd", b"x")


@pytest.mark.docker
@pytest.mark.integration
def test_network_is_denied(session: SandboxSession) -> None:
    r = session.exec(
        [
            "python3",
            "-c",
            "import socket; socket.create_connection(('deb.debian.org', 80), timeout=3)",
        ]
    )
    assert r.exit_code != 0
    assert (
        b"Network is unreachable" in r.stderr
        or b"Name or service" in r.stderr
        or (b"Temporary failure in name resolution" in r.stderr)
    )
    ifaces = session.exec(["cat", "/proc/net/dev"]).stdout
    assert b"eth0" not in ifaces and b"lo:" in ifaces


@pytest.mark.docker
@pytest.mark.integration
def test_read_only_root_holds_workspace_and_tmp_writable(session: SandboxSession) -> None:
    r = session.exec(["sh", "-c", "touch /etc/evil || touch /usr/bin/evil"])
    assert r.exit_code != 0 and b"Read-only file system" in r.stderr
    assert session.exec(["sh", "-c", "touch /tmp/ok /workspace/ok"]).ok
    assert session.exec(["sh", "-c", "test ! -e /tmp/ok"]).ok  # /tmp is per command


@pytest.mark.docker
@pytest.mark.integration
def test_memory_bound_reports_memory_from_oomkilled(session: SandboxSession) -> None:
    r = session.exec(["python3", "-c", "x = bytearray(400 * 1024 * 1024); print('alive')"])
    assert r.termination is Termination.MEMORY
    assert r.bound is not None and r.bound.limit == 128
    assert b"alive" not in r.stdout


@pytest.mark.docker
@pytest.mark.integration
@pytest.mark.slow
def test_fork_bomb_hits_pids_bound(backend: DockerSandbox) -> None:
    with backend.open(_contract(timeout_seconds=6, pids=32), label="pytest") as s:
        r = s.exec(["bash", "-c", "bomb() { bomb | bomb & }; bomb; sleep 60"])
    assert r.termination is Termination.PIDS
    assert r.bound is not None and r.bound.limit == 32


@pytest.mark.docker
@pytest.mark.integration
def test_wall_clock_kills_and_session_survives(session: SandboxSession) -> None:
    t0 = time.monotonic()
    r = session.exec(["sleep", "60"], timeout=1.5)
    assert time.monotonic() - t0 < 15
    assert r.termination is Termination.WALL_CLOCK and r.signal == 9 and r.exit_code is None
    assert r.bound is not None and r.bound.limit == 1.5
    assert session.exec(["true"]).ok


@pytest.mark.docker
@pytest.mark.integration
def test_disk_bound_reports_disk(session: SandboxSession) -> None:
    r = session.exec(["sh", "-c", "head -c 64000000 /dev/zero > /workspace/big"])
    assert r.termination is Termination.DISK
    assert r.bound is not None and r.bound.limit == 32


@pytest.mark.docker
@pytest.mark.integration
def test_cpu_seconds_bound(backend: DockerSandbox) -> None:
    with backend.open(_contract(cpu_seconds=1), label="pytest") as s:
        r = s.exec(["python3", "-c", "while True: pass"])
    assert r.termination is Termination.CPU


# -- infrastructure faults --------------------------------------------------------------------
@pytest.mark.docker
@pytest.mark.integration
def test_container_killed_from_outside_is_infra(client: Any, session: Any) -> None:
    sid = session.session_id
    got: list[BaseException | object] = []

    def run() -> None:
        try:
            got.append(session.exec(["sleep", "30"]))
        except BaseException as exc:
            got.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        running = [
            c
            for c in _mine(client, **{"harness.session": sid, "harness.role": "exec"})
            if c.status == "running"
        ]
        if running:
            running[0].kill()
            break
        time.sleep(0.1)
    worker.join(30)
    assert len(got) == 1 and isinstance(got[0], SandboxUnavailableError), got
    assert got[0].reason == "killed_externally"


@pytest.mark.docker
@pytest.mark.integration
def test_holder_killed_from_outside_is_infra(client: Any, volumes: DockerSandbox) -> None:
    with volumes.open(_contract(), label="pytest") as session:
        assert isinstance(session, DockerSession)
        holder = client.containers.get(session.container_names[0])
        holder.kill()
        with pytest.raises(SandboxUnavailableError) as info:
            session.exec(["true"])
    assert info.value.reason == "killed_externally"


def test_missing_engine_is_infra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")
    with pytest.raises(SandboxUnavailableError) as info:
        connect(timeout=5)
    assert info.value.reason == "engine_unreachable"


@pytest.mark.docker
@pytest.mark.integration
def test_missing_image_is_infra(backend: DockerSandbox) -> None:
    with pytest.raises(SandboxUnavailableError) as info:
        backend.open(_contract(image="harness-no-such-image:0"), label="pytest")
    assert info.value.reason == "image_missing"


# -- no orphans -------------------------------------------------------------------------------
@pytest.mark.docker
@pytest.mark.integration
def test_close_and_prune_leave_no_labelled_objects(client: Any, volumes: DockerSandbox) -> None:
    s = volumes.open(_contract(), label="pytest")
    sid = s.session_id
    assert _mine(client, **{"harness.session": sid})
    s.close()
    assert not _mine(client, **{"harness.session": sid})
    assert not client.volumes.list(filters={"label": f"harness.session={sid}"})
    run = f"pytest-prune-{os.getpid()}-{time.time_ns()}"
    leftover = DockerSandbox(client, run_id=run, files="volumes").open(
        _contract(), label="pytest"
    )  # "killed"
    sid = leftover.session_id
    assert prune(client, older_than=3600, run_id=run).containers == ()  # too young
    assert prune(client, run_id=run).containers == ()  # owner (us) alive
    report = prune(client, orphans_only=False, run_id=run)
    assert report.containers == (f"harness-{sid}-holder",) and len(report.volumes) == 2
    assert not _mine(client, **{"harness.run": run})
    assert not client.volumes.list(filters={"label": f"harness.run={run}"})
    # The "killed" session object still holds its engine connections; release them so
    # they are not garbage-collected as unclosed sockets in a later test.
    with contextlib.suppress(Exception):
        leftover.close()


@pytest.mark.docker
@pytest.mark.integration
def test_a_container_removed_while_prune_lists_it_is_no_error(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI: a run's sweep found a container that another process removed before the sweep
    inspected it; the engine's "no such container" blocked the run (exit 4)."""
    run = f"pytest-gone-{os.getpid()}-{time.time_ns()}"
    ctr = client.containers.create(DEFAULT_IMAGE, ["true"], labels={LABEL: "1", "harness.run": run})
    inspect = client.api.inspect_container

    def removed_first(cid: str) -> Any:  # the real engine, with the other process first
        client.api.remove_container(cid, force=True)
        return inspect(cid)

    monkeypatch.setattr(client.api, "inspect_container", removed_first)
    assert prune(client, orphans_only=False, run_id=run).containers == ()
    monkeypatch.undo()
    assert ctr.id not in {c.id for c in client.containers.list(all=True)}


@pytest.mark.docker
@pytest.mark.integration
@pytest.mark.parametrize("files", ["host", "volumes"])
def test_a_tree_whose_links_climb_out_is_put_as_it_is(
    client: Any, files: str, tmp_path: Path
) -> None:
    """An outside red team (round fifteen): a first attempt left ``lnk -> ../../../../etc/
    passwd``; handing that candidate to the next attempt's session on engine volumes was
    refused by the engine ("invalid symlink"): infra_error, a blocked gate. The links are
    the agent's, inert on the host and links like any other inside the sandbox."""
    src = tmp_path / "tree"
    (src / "sub").mkdir(parents=True)
    (src / "calc.py").write_text("X = 1\n")
    os.symlink("../../../../etc/passwd", src / "up")
    os.symlink("../../../x", src / "sub" / "up2")
    os.symlink("calc.py", src / "in")
    backend = DockerSandbox(client, run_id="pytest", files=files)
    with backend.open(_contract(), label="pytest") as s:
        s.put_tree(src)
        out = s.exec(["sh", "-c", "readlink up sub/up2 in; stat -c %u up"])
        assert out.ok, out
        assert out.stdout.decode().split() == [
            "../../../../etc/passwd",
            "../../../x",
            "calc.py",
            "65534",
        ]


# -- sessions on host folders (a local engine) ------------------------------------------------
def _mounted(path: Path) -> list[str]:
    """Mount points at or under ``path`` in this process's mount table."""
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    return [p for p in (line.split()[4] for line in lines) if p.startswith(str(path))]


@pytest.mark.docker
@pytest.mark.integration
def test_a_local_engine_session_is_host_tmpfs_with_no_holder(
    client: Any, backend: DockerSandbox
) -> None:
    assert backend.host_files() and backend.describe()["files"] == "host tmpfs bound in"
    s = backend.open(_contract(), label="pytest")
    root = Path(s.paths.workspace)  # the sandbox's view: /workspace
    assert root == Path("/workspace") and s.container_names == ()
    host_root = s._root  # type: ignore[union-attr]
    assert (host_root.stat().st_mode & 0o777) == 0o700
    assert len(_mounted(host_root)) == 3  # the folder, its workspace and io tmpfs
    out = s.exec(["sh", "-c", "head -c 40m /dev/zero > /workspace/big"])
    assert out.termination is Termination.DISK, out  # the workspace tmpfs has its size
    s.close()
    assert not host_root.exists() and _mounted(host_root) == []
    assert not _mine(client, **{"harness.session": s.session_id})


@pytest.mark.docker
@pytest.mark.integration
def test_a_killed_runs_host_session_is_pruned(tmp_path: Path) -> None:
    from harness.sandbox.prune import prune_local

    code = (
        "import sys, time; from harness.sandbox.docker import DockerSandbox; "
        "from harness.cases.model import PhaseContract as C; "
        f"s = DockerSandbox(files='host', base_dir={str(tmp_path)!r}).open(C(), label='orphan'); "
        "print(s._root, flush=True); time.sleep(120)"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=Path.cwd()
    ) as proc:
        try:
            assert proc.stdout is not None
            root = Path(proc.stdout.readline().strip())
            assert root.parent == tmp_path and len(_mounted(root)) == 3
        finally:
            proc.kill()
            proc.wait(30)
    removed = prune_local(tmp_path)
    assert str(root) in removed and not root.exists() and _mounted(root) == []


def test_files_mode_is_checked(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_DOCKER_FILES", "shared")
    with pytest.raises(ConfigError, match="HARNESS_DOCKER_FILES='shared'"):
        DockerSandbox(client)
    monkeypatch.setenv("HARNESS_DOCKER_FILES", "host")
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")  # the client is made already
    with pytest.raises(SandboxUnavailableError, match="cannot bind this host's folders"):
        DockerSandbox(client).host_files("sha256:any")


@pytest.mark.docker
@pytest.mark.integration
def test_an_engine_that_maps_users_keeps_files_in_volumes(client: Any) -> None:
    """Under ``userns-remap`` (or rootless) the command's uid is not the host's: files the
    harness hands to 65534 on the host would not be the command's."""
    backend = DockerSandbox(client, files="auto")
    assert backend.host_files()  # this engine maps nobody
    info = dict(client.info())
    info["SecurityOptions"] = [*info.get("SecurityOptions", []), "name=userns"]
    backend._info = info  # what `docker info` says of a remapping engine
    assert not backend.host_files()
    with backend.open(_contract(), label="pytest") as s:
        assert isinstance(s, DockerSession) and s.exec(["true"]).ok
    strict = DockerSandbox(client, files="host")
    strict._info = info
    with pytest.raises(SandboxUnavailableError, match="maps users"):
        strict.host_files()


# -- per-case images --------------------------------------------------------------------------
@pytest.mark.docker
@pytest.mark.integration
def test_case_image_on_a_missing_base_is_image_missing(client: Any, tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailableError) as info:
        build_case_image(client, "harness-no-such-image:0", tmp_path, "sha256:" + "0" * 64)
    assert info.value.reason == "image_missing"
    assert "base image 'harness-no-such-image:0' is missing" in str(info.value)


@pytest.mark.docker
@pytest.mark.integration
def test_case_image_seeds_workspace_and_rebuild_is_noop(
    client: Any, backend: DockerSandbox, tmp_path: Path
) -> None:
    tree = tmp_path / "start"
    tree.mkdir()
    (tree / "lib.py").write_text("VALUE = 41\n")
    digest = "sha256:" + "ab" * 32
    try:
        first = build_case_image(client, DEFAULT_IMAGE, tree, digest)
        assert build_case_image(client, DEFAULT_IMAGE, tree, digest) == first
        with backend.open(_contract(image=case_image_tag(digest)), label="pytest") as s:
            assert s.image_id == first
            assert s.read_file("/workspace/lib.py") == b"VALUE = 41\n"
            assert s.exec(["python3", "-c", "import lib; print(lib.VALUE + 1)"]).stdout == b"42\n"
        (tree / "lib.py").write_text("VALUE = 0\n")
        assert build_case_image(client, DEFAULT_IMAGE, tree, digest) != first
    finally:
        for ref in (case_image_tag(digest), first if "first" in locals() else None):
            if ref and find_image(client, ref) is not None:
                client.images.remove(ref, force=True)


@pytest.mark.docker
def test_a_remote_engine_cannot_relay_the_endpoint(
    backend: DockerSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The relay binds a host socket: a remote engine cannot see it, so refuse (infra)."""
    import socket

    from harness.sandbox.base import SealedView

    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "gw.sock"))
    try:
        monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.1:2375")
        with pytest.raises(SandboxUnavailableError) as info:
            backend.open(_contract(), label="relay", view=SealedView(endpoint=sock.getsockname()))
        assert info.value.reason == "relay_unavailable"
        monkeypatch.delenv("DOCKER_HOST")
        with pytest.raises(SandboxUnavailableError, match="not a unix socket"):
            backend.open(
                _contract(), label="relay", view=SealedView(endpoint=str(tmp_path / "absent"))
            )
    finally:
        sock.close()
