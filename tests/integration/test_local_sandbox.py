"""Local-backend specifics: fallback decisions, fail-closed contracts, cgroups, disk, cpu."""

from __future__ import annotations

import errno
import json
import os
import socket
import stat
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.cases.model import PhaseContract
from harness.errors import ContractUnenforceableError, SandboxUnavailableError
from harness.sandbox._cgroup import CgroupDriver, detect_cgroups, parse_keyed, parse_proc_cgroup
from harness.sandbox.base import Termination
from harness.sandbox.local import HostCapabilities, LocalSandbox, plan_isolation

HOST = HostCapabilities.detect()
NO_BWRAP = HOST.model_copy(update={"bwrap": None, "bwrap_version": None})
NO_CGROUPS = HOST.model_copy(update={"cgroups": None})
NO_MOUNT = HOST.model_copy(update={"can_mount": False})


def _contract(**kw: object) -> PhaseContract:
    base: dict[str, object] = {"timeout_seconds": 30, "memory_mb": 256, "pids": 64, "disk_mb": 32}
    return PhaseContract.model_validate({**base, **kw})


# -- decisions (pure) --------------------------------------------------------------------


def test_this_host_enforces_everything() -> None:
    # The design was checked on this machine: a silent loss of a mechanism must go red.
    assert HOST.bwrap and HOST.cgroups and HOST.can_mount and HOST.root
    plan = plan_isolation(_contract(cpu_seconds=5), HOST)
    assert (plan.network, plan.read_only_root, plan.memory, plan.pids, plan.disk) == (
        "bwrap",
        True,
        "cgroup",
        "cgroup",
        "tmpfs",
    )
    assert plan.cpu == "rlimit+cgroup" and plan.downgraded == ()


def test_without_bwrap_network_falls_back_to_unshare_and_root_fs_is_unenforceable() -> None:
    with pytest.raises(ContractUnenforceableError) as err:
        plan_isolation(_contract(), NO_BWRAP)
    assert err.value.bound == "read_only_root" and "bwrap" in str(err.value)
    plan = plan_isolation(_contract(), NO_BWRAP, frozenset({"read_only_root"}))
    assert plan.network == "unshare" and not plan.bwrap
    assert plan.downgraded == ("read_only_root",)
    # No bwrap, no sealed view: even a writable-root contract must downgrade explicitly.
    with pytest.raises(ContractUnenforceableError, match="sealed view"):
        plan_isolation(_contract(read_only_root=False), NO_BWRAP)


def test_no_network_isolation_at_all_is_unenforceable() -> None:
    caps = NO_BWRAP.model_copy(update={"unshare": None})
    with pytest.raises(ContractUnenforceableError) as err:
        plan_isolation(_contract(read_only_root=False), caps, frozenset({"read_only_root"}))
    assert err.value.bound == "network"
    plan = plan_isolation(
        _contract(read_only_root=False, network="host"), caps, frozenset({"read_only_root"})
    )
    assert plan.network == "host"


def test_without_cgroups_pids_is_unenforceable_and_memory_uses_rlimit_as() -> None:
    with pytest.raises(ContractUnenforceableError) as err:
        plan_isolation(_contract(), NO_CGROUPS)
    assert err.value.bound == "pids" and "RLIMIT_NPROC" in str(err.value)
    plan = plan_isolation(_contract(), NO_CGROUPS, frozenset({"pids"}))
    assert plan.memory == "rlimit_as" and plan.pids == "none" and plan.downgraded == ("pids",)


def test_without_mount_disk_is_unenforceable_unless_null_or_downgraded() -> None:
    with pytest.raises(ContractUnenforceableError) as err:
        plan_isolation(_contract(), NO_MOUNT)
    assert err.value.bound == "disk"
    assert plan_isolation(_contract(disk_mb=None), NO_MOUNT).disk == "none"
    assert plan_isolation(_contract(), NO_MOUNT, frozenset({"disk"})).downgraded == ("disk",)


def test_unknown_downgrade_name_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="memroy"):
        plan_isolation(_contract(), HOST, frozenset({"memroy"}))


# -- real sessions -----------------------------------------------------------------------


@pytest.mark.integration
def test_open_fails_closed_and_reports_downgrades(tmp_path: Path) -> None:
    sandbox = LocalSandbox(tmp_path, capabilities=NO_CGROUPS)
    with pytest.raises(ContractUnenforceableError):
        sandbox.open(_contract(), label="t")
    assert list(tmp_path.iterdir()) == [], "a refused open() left a session dir behind"
    with sandbox.open(_contract(), label="t", downgrade=frozenset({"pids"})) as s:
        assert s.downgraded == ("pids",)
        assert s.exec(["true"]).ok


@pytest.mark.integration
def test_unshare_fallback_still_denies_network(tmp_path: Path) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    code = (
        f"import socket\ntry:\n socket.create_connection(('127.0.0.1',{port}),timeout=3)"
        "\n print('CONNECTED')\nexcept OSError:\n print('DENIED')"
    )
    try:
        sandbox = LocalSandbox(tmp_path, capabilities=NO_BWRAP)
        with sandbox.open(_contract(), label="t", downgrade=frozenset({"read_only_root"})) as s:
            assert s.plan.network == "unshare"
            denied = s.exec(["python3", "-c", code])
        with sandbox.open(
            _contract(network="host", read_only_root=False),
            label="t",
            downgrade=frozenset({"read_only_root"}),
        ) as s:
            allowed = s.exec(["python3", "-c", code])
    finally:
        listener.close()
    assert denied.stdout == b"DENIED\n", denied
    assert allowed.stdout == b"CONNECTED\n", allowed


@pytest.mark.integration
def test_no_cgroup_dirs_left_after_execs_and_close(tmp_path: Path) -> None:
    assert HOST.cgroups is not None
    bases = {Path(b) for b in HOST.cgroups.bases.values()}

    def ours() -> list[Path]:
        return [p for b in bases for p in b.glob(f"harness-{os.getpid()}-*")]

    with LocalSandbox(tmp_path).open(_contract(timeout_seconds=1), label="t") as s:
        assert s.exec(["true"]).ok
        assert s.exec(["sleep", "30"]).termination is Termination.WALL_CLOCK
        assert ours() == []
    assert ours() == []


@pytest.mark.integration
def test_disk_bound_is_a_real_tmpfs_and_reports_disk(tmp_path: Path) -> None:
    write = (
        "import os\nfor i in range(20):\n"
        "    with open(f'f{i}', 'wb') as f: f.write(os.urandom(1 << 20))"
    )
    with LocalSandbox(tmp_path).open(_contract(disk_mb=8), label="t") as s:
        st_ = os.statvfs(s.root / "workspace")
        assert st_.f_blocks * st_.f_frsize == 8 << 20, "session dir is not an 8 MiB tmpfs"
        r = s.exec(["python3", "-c", write])
        assert r.termination is Termination.DISK, r
        assert r.bound is not None and r.bound.limit == 8 and (r.bound.observed or 0) >= 7
        assert b"No space left" in r.stderr
        # The disk is still full, but a failure that wrote nothing is not blamed on it.
        again = s.exec(["python3", "-c", "raise SystemExit(4)"])
        assert again.termination is Termination.EXIT and again.exit_code == 4


@pytest.mark.integration
def test_cpu_bound_per_process_and_tree_wide(tmp_path: Path) -> None:
    spin = "while True: pass"
    tree = (
        "import subprocess, sys\n"
        "ps = [subprocess.Popen([sys.executable, '-c', 'import time\\n"
        "t=time.process_time()\\nwhile time.process_time()-t < 0.7: pass'])"
        " for _ in range(4)]\n[p.wait() for p in ps]"
    )
    with LocalSandbox(tmp_path).open(_contract(cpu_seconds=1), label="t") as s:
        single = s.exec(["python3", "-c", spin])
        spread = s.exec(["python3", "-c", tree])
    assert single.termination is Termination.CPU and single.bound is not None, single
    # The process really spent CPU before the bound fired (not a wall-clock kill). RLIMIT_CPU
    # fires at 1 s but the accounting read back can lag by a tick or more under load (0.89 s
    # was seen on a busy CI machine), so the margin is wide: half the limit.
    assert single.bound.limit == 1 and (single.cpu_s or 0) >= 0.5
    # Four children of 0.7 s each stay under RLIMIT_CPU; only the cgroup total catches them.
    assert spread.termination is Termination.CPU, spread
    assert (spread.cpu_s or 0) >= 1.0


@pytest.mark.integration
def test_host_secrets_absent_and_python_is_the_systems_not_the_harness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter2-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret")
    with LocalSandbox(tmp_path).open(_contract(), label="t") as s:
        r = s.exec(
            [
                "python3",
                "-c",
                "import os, sys; print(sorted(os.environ)); "
                "print(sys.executable); print(os.environ['HOME'])",
            ]
        )
    assert r.ok, r
    names, exe, home = r.stdout.decode().splitlines()
    assert "AWS_SECRET_ACCESS_KEY" not in names and "GITHUB_TOKEN" not in names
    assert b"hunter2" not in r.stdout and b"ghp_" not in r.stdout
    # The harness's own interpreter (and its site-packages) never reaches a sandbox.
    assert os.path.dirname(exe) != os.path.dirname(sys.executable), exe
    assert exe.startswith("/usr/"), exe
    assert home == s.paths.io


@pytest.mark.integration
def test_command_not_found_is_a_result_not_an_error(tmp_path: Path) -> None:
    with LocalSandbox(tmp_path).open(_contract(), label="t") as s:
        r = s.exec(["no-such-command-xyz"])
        shell = s.exec(["sh", "-c", "no-such-command-xyz"])
    assert not r.ok and r.termination is Termination.EXIT and r.exit_code not in (None, 0)
    assert shell.exit_code == 127


@pytest.mark.integration
def test_paths_outside_and_symlinks_out_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "host-file"
    outside.write_text("host")
    with LocalSandbox(tmp_path / "sb").open(_contract(), label="t") as s:
        ws, inner = s.root / "workspace", s.paths.workspace
        with pytest.raises(ValueError):
            s.read_file(str(outside))
        with pytest.raises(ValueError):
            s.read_file(str(ws / "a"))  # a host path is not a sandbox path
        with pytest.raises(ValueError):
            s.write_file(f"{s.paths.workspace}/../../escape", b"x")
        (ws / "link").symlink_to(outside)
        assert s.read_file(f"{inner}/link") is None
        s.write_file(f"{inner}/link", b"inside")
        assert outside.read_text() == "host" and not (ws / "link").is_symlink()
        (ws / "dirlink").symlink_to(tmp_path)
        with pytest.raises(ValueError):
            s.write_file(f"{inner}/dirlink/x", b"x")
        os.mkfifo(ws / "fifo")
        s.get_tree(tmp_path / "out")
    assert (tmp_path / "out" / "dirlink").is_symlink(), "get_tree followed a symlink out"
    assert not (tmp_path / "out" / "fifo").exists()


@pytest.mark.integration
def test_cgroup_setup_failure_is_sandbox_unavailable(tmp_path: Path) -> None:
    broken = CgroupDriver(
        version="v1",
        bases={"memory": str(tmp_path / "nope"), "pids": str(tmp_path / "nope")},
        swap_accounted=True,
    )
    sandbox = LocalSandbox(tmp_path, capabilities=HOST.model_copy(update={"cgroups": broken}))
    with (
        sandbox.open(_contract(), label="t") as s,
        pytest.raises(SandboxUnavailableError, match="cgroup"),
    ):
        s.exec(["true"])


@pytest.mark.integration
def test_a_refused_cgroup_join_runs_nothing_and_is_infra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command joins its cgroup itself before bwrap starts; a refusal fails closed."""
    from harness.sandbox._cgroup import ExecCgroup

    monkeypatch.setattr(ExecCgroup, "self_join_files", lambda self: (tmp_path / "no" / "tasks",))
    with LocalSandbox(tmp_path).open(_contract(), label="t") as s:
        with pytest.raises(SandboxUnavailableError) as info:
            s.exec(["sh", "-c", "echo ran > /workspace/ran"])
        assert s.read_file("/workspace/ran") is None
    assert info.value.reason == "bwrap_setup" and "cgroup join" in str(info.value)


@pytest.mark.integration
def test_describe_names_the_mechanisms() -> None:
    facts = LocalSandbox().describe()
    assert facts["backend"] == "local" and facts["bwrap"] == HOST.bwrap_version
    assert facts["cgroup"] in ("v1", "v2") and facts["disk"] == "tmpfs"


# -- cgroup file parsing and v2 layout (no real cgroup needed) ---------------------------

_KEY = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)


@given(st.dictionaries(_KEY, st.integers(min_value=0, max_value=2**63)))
def test_parse_keyed_round_trips(values: dict[str, int]) -> None:
    text = "".join(f"{k} {v}\n" for k, v in values.items()) + "garbage line here\nx y\n"
    parsed = parse_keyed(text)
    assert {k: parsed[k] for k in values} == values


@given(
    st.lists(st.sampled_from(["memory", "pids", "cpu,cpuacct", "name=systemd"]), unique=True),
    st.text(alphabet="abc/", max_size=10),
)
def test_parse_proc_cgroup(controllers: list[str], path: str) -> None:
    lines = [f"{i + 1}:{c}:/{path}" for i, c in enumerate(controllers)] + ["0::/v2"]
    parsed = parse_proc_cgroup("\n".join(lines))
    assert parsed[""] == "/v2"
    for c in controllers:
        for name in c.split(","):
            assert parsed[name] == f"/{path}"


def test_v2_layout_detected_and_limits_written(tmp_path: Path) -> None:
    mnt = tmp_path / "cg2"
    mnt.mkdir()
    (mnt / "cgroup.controllers").write_text("cpu memory pids\n")
    (mnt / "cgroup.subtree_control").write_text("")
    proc = tmp_path / "proc" / "self"
    proc.mkdir(parents=True)
    (proc / "mountinfo").write_text(f"41 31 0:38 / {mnt} rw - cgroup2 cgroup2 rw\n")
    (proc / "cgroup").write_text("0::/\n")
    driver = detect_cgroups(tmp_path / "proc")
    assert driver is not None and driver.version == "v2"
    assert (mnt / "harness" / "cgroup.subtree_control").read_text() == "+memory +pids"
    group = driver.create(memory_mb=64, pids=10)
    d = group.dirs["memory"]
    assert (d / "memory.max").read_text() == str(64 << 20)
    assert (d / "pids.max").read_text() == "10"
    (d / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    (d / "pids.events").write_text("max 7\n")
    (d / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1\n")
    stats = group.stats()
    assert (stats.oom_kills, stats.pids_max_events, stats.cpu_s) == (1, 7, 1.5)


@pytest.mark.integration
def test_a_bwrap_setup_failure_is_infra_never_the_commands_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bwrap failing to build the sandbox must not look like the command exiting 1.

    Seen for real: a recursive bind of / raced with another session's tmpfs being
    unmounted, bwrap exited 1, and a correct candidate was judged test_failure.
    """
    import harness.sandbox.local as local

    real = local.system_binds
    with LocalSandbox(tmp_path).open(PhaseContract(), label="setup-fails") as s:
        assert s.exec(["sh", "-c", "exit 1"]).exit_code == 1  # a real exit 1 stays a result
        monkeypatch.setattr(
            local,
            "system_binds",
            lambda *a: ["--ro-bind", "/nonexistent-src", "/x", *real(*a)],
        )
        with pytest.raises(SandboxUnavailableError) as info:
            s.exec(["true"])
    assert info.value.reason == "bwrap_setup"
    assert "nonexistent-src" in str(info.value)


@pytest.mark.integration
def test_the_host_root_is_not_bound_recursively_over_other_sessions(tmp_path: Path) -> None:
    """Other sessions' tmpfs mounts live under the temp dir: binding / recursively would
    re-mount them during setup and race with their unmounting (seen as bwrap failures)."""
    with LocalSandbox(tmp_path).open(PhaseContract(), label="binds") as s:
        cmd = s._command(["true"], s.root / "workspace")
    pairs = list(zip(cmd, cmd[1:], cmd[2:], strict=False))
    assert ("--ro-bind", "/", "/") not in pairs
    assert ("--ro-bind", "/usr", "/usr") in pairs
    # The one bind from the temp dir is this process's staged /etc: a plain folder.
    from_tmp = [(b, c) for a, b, c in pairs if a == "--ro-bind" and b.startswith("/tmp")]
    assert [c for _, c in from_tmp] == ["/etc"], from_tmp
    assert not any(
        os.path.ismount(os.path.join(r, d)) for r, ds, _ in os.walk(from_tmp[0][0]) for d in ds
    )
    assert cmd[cmd.index("--remount-ro") + 1] == "/"


@pytest.mark.integration
def test_the_curated_etc_is_one_staged_bind_with_what_the_sandbox_user_could_read(
    tmp_path: Path,
) -> None:
    """One read-only bind of a copy made once per process: the curated entries the sandbox
    user can read, nothing else (no ssl/private, no shadow); per-entry binds when no copy."""
    from harness.sandbox._view import _SYSTEM_ETC, staged_etc, system_binds

    etc = staged_etc(tmp_path)
    assert etc is not None and staged_etc(tmp_path) == etc  # made once
    assert etc.parent.name.startswith(f"harness-etc-p{os.getpid()}-")
    assert oct(etc.parent.stat().st_mode & 0o777) == "0o700"
    assert set(os.listdir(etc)) <= set(_SYSTEM_ETC)
    assert {n for n in _SYSTEM_ETC if os.path.lexists(f"/etc/{n}")} == set(os.listdir(etc))
    for root, dirs, files in os.walk(etc):
        for name in dirs + files:
            st = os.lstat(os.path.join(root, name))
            if not stat.S_ISLNK(st.st_mode):
                assert st.st_mode & 0o004, f"{name} is not world-readable, yet staged"
    assert not (etc / "ssl" / "private").exists()
    args = system_binds(tmp_path)
    assert args.count("/etc") == 1 and args[args.index("/etc") - 2 : args.index("/etc")] == [
        "--ro-bind",
        str(etc),
    ]
    with LocalSandbox(tmp_path).open(_contract(), label="etc") as s:
        r = s.exec(["sh", "-c", "cat /etc/passwd; ls /etc/ssl; touch /etc/x || echo refused"])
    assert r.stdout.decode().startswith(Path("/etc/passwd").read_text()), r
    assert "private" not in r.stdout.decode().splitlines()
    assert r.stdout.decode().rstrip().endswith("refused")
    # A base dir where no copy can be made: the same entries, bound one by one.
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("")
    fallback = system_binds(blocked)
    assert ("--ro-bind", "/etc/passwd", "/etc/passwd") in list(
        zip(fallback, fallback[1:], fallback[2:], strict=False)
    )


@pytest.mark.integration
def test_sealed_view_shows_a_minimal_system_and_nothing_else(tmp_path: Path) -> None:
    """Only /usr (+ /bin, /lib*), a curated /etc, private /tmp and the session are there."""
    marker = Path("/var/tmp") / f"harness-seal-probe-{os.getpid()}"
    marker.write_text("host var tmp")
    project_file = Path(__file__).resolve()
    hidden = [
        "/etc/shadow",
        "/etc/gshadow",
        "/etc/ssh",
        "/etc/machine-id",
        "/root",
        "/home",
        "/opt",
        "/srv",
        "/work",
        "/mnt",
        str(marker),
        str(project_file),
        os.path.dirname(sys.executable),
        str(tmp_path / "other-trial"),  # a sibling of this session: another trial's dir
    ]
    (tmp_path / "other-trial").mkdir()
    code = (
        "import os, sys, json\n"
        f"print(json.dumps([p for p in {hidden!r} if os.path.lexists(p)]))\n"
        "print(json.dumps([os.path.exists(p) for p in ("
        "'/usr/bin/python3', '/usr/bin/git', '/etc/ssl/certs', '/etc/passwd', '/tmp')]))\n"
    )
    try:
        with LocalSandbox(tmp_path / "sb").open(_contract(), label="t") as s:
            r = s.exec(["/usr/bin/python3", "-c", code])
            git = s.exec(["git", "--version"])
    finally:
        marker.unlink()
    assert r.ok, r
    seen, present = r.stdout.decode().splitlines()
    assert seen == "[]", f"visible inside the sandbox: {seen}"
    assert present == "[true, true, true, true, true]", present
    assert git.ok, git


@pytest.mark.integration
def test_no_bwrap_no_view_no_relay(tmp_path: Path) -> None:
    """Without bwrap neither view mounts nor the endpoint relay exist: refuse, never drop."""
    import socket as sk

    from harness.sandbox.base import SealedView, ViewMount

    sock = sk.socket(sk.AF_UNIX)
    sock.bind(str(tmp_path / "gw.sock"))
    sandbox = LocalSandbox(tmp_path, capabilities=NO_BWRAP)
    views = [
        SealedView(endpoint=str(tmp_path / "gw.sock")),
        SealedView(mounts=(ViewMount(source=str(tmp_path), target="/opt/x"),)),
    ]
    try:
        for view in views:
            with pytest.raises(SandboxUnavailableError, match="bwrap"):
                sandbox.open(
                    _contract(), label="t", downgrade=frozenset({"read_only_root"}), view=view
                )
        with pytest.raises(SandboxUnavailableError, match="not a unix socket"):
            LocalSandbox(tmp_path).open(
                _contract(), label="t", view=SealedView(endpoint=str(tmp_path))
            )
    finally:
        sock.close()


# -- the seccomp filter ------------------------------------------------------------------

_SYSCALL_PROBE = """
import ctypes, errno, json, os, platform, socket, subprocess, sys, threading
from harness_probe import NUMBERS
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if r == 0 and nr == NUMBERS["clone"]:
        os._exit(0)  # a child made without the filter: leave at once
    return errno.errorcode.get(ctypes.get_errno(), str(r)) if r < 0 else "ok"
out = {name: call(NUMBERS[name], *args) for name, args in json.loads(sys.argv[1]).items()}
out["x32"] = call(0x40000000 | NUMBERS["getpid"]) if platform.machine() == "x86_64" else "EPERM"
t = threading.Thread(target=lambda: None)
t.start()
t.join()
a, b = socket.socketpair()
a.sendall(b"x")
out["working"] = [b.recv(1) == b"x", subprocess.run(["true"]).returncode == 0]
out["unshare_cmd"] = subprocess.run(["unshare", "-Ur", "true"], capture_output=True).returncode
print(json.dumps(out))
"""

# Each call with arguments it would accept (or fail on for another reason) without a filter.
_DENIED_CALLS = {
    "add_key": [0, 0, 0, 0, -4],
    "request_key": [0, 0, 0, 0],
    "keyctl": [0, -4, 0],  # KEYCTL_GET_KEYRING_ID of the user keyring
    "unshare": [0x10000000],  # CLONE_NEWUSER
    "clone": [0x10000000 | 17, 0, 0, 0, 0],  # CLONE_NEWUSER | SIGCHLD
    "bpf": [0, 0, 0],
    "perf_event_open": [0, 0, -1, -1, 0],
    "userfaultfd": [0],
    "io_uring_setup": [1, 0],
}


@pytest.mark.integration
def test_seccomp_denies_shared_kernel_state_and_keeps_ordinary_calls(tmp_path: Path) -> None:
    from harness.sandbox import _seccomp

    numbers = {
        **_seccomp._MACHINES[os.uname().machine][2],
        "getpid": {"x86_64": 39, "aarch64": 172}[os.uname().machine],
    }
    with LocalSandbox(tmp_path).open(_contract(), label="t") as s:
        s.write_file(
            os.path.join(s.paths.workspace, "harness_probe.py"), f"NUMBERS = {numbers!r}\n".encode()
        )
        r = s.exec(["python3", "-c", _SYSCALL_PROBE, json.dumps(_DENIED_CALLS)])
        clone3 = s.exec(
            ["python3", "-c", "import ctypes; l = ctypes.CDLL(None, use_errno=True); "
             f"print(l.syscall({numbers['clone3']}, 0, 0), ctypes.get_errno())"]
        )  # fmt: skip
    assert r.ok, r
    got = json.loads(r.stdout.decode().splitlines()[-1])
    for name in [*_DENIED_CALLS, "x32"]:
        assert got[name] == "EPERM", (name, got)
    # Threads, sockets and processes work; a nested user namespace does not.
    assert got["working"] == [True, True], got
    assert got["unshare_cmd"] != 0, got
    # clone3 says "not implemented", so the C library falls back to clone (whose flags the
    # filter can read).
    assert clone3.stdout.split() == [b"-1", str(errno.ENOSYS).encode()], clone3


def test_seccomp_filter_exists_only_for_known_machines() -> None:
    from harness.sandbox import _seccomp

    for machine in ("x86_64", "aarch64"):
        program = _seccomp.filter_program(machine)
        assert len(program) % 8 == 0 and len(program) // 8 < 256
    with pytest.raises(ValueError, match="no seccomp filter for machine 'riscv64'"):
        _seccomp.filter_program("riscv64")
