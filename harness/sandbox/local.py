"""The local sandbox backend: bubblewrap + per-exec cgroups + rlimits, no daemon.

A session is a fresh directory (``<base>/harness-<label>-XXXX``) holding ``workspace/``,
``io/`` and ``tmp/``; :class:`~harness.sandbox.base.SandboxPaths` are its real host paths.
As root the directory is a ``tmpfs`` of ``disk_mb`` so a full disk is a real ``ENOSPC``.

Every command is launched without ``preexec_fn`` (unsafe next to threads) through a tiny
``sh`` gate that blocks reading one line of its stdin. Meanwhile the parent moves it into a
fresh cgroup (memory incl. swap, pids, CPU accounting) and sets its rlimits with ``prlimit(2)``;
then it releases the gate and ``sh`` execs ``bwrap`` (read-only root, private ``/tmp``,
``/dev``, ``/proc``, new pid/ipc/net namespaces, all capabilities dropped, a seccomp filter
from :mod:`harness.sandbox._seccomp`) which runs the command. Everything the command spawns
therefore starts inside the cgroup.

Mechanisms are chosen per contract by :func:`plan_isolation` from the detected
:class:`HostCapabilities`; a bound that cannot be enforced raises
:class:`~harness.errors.ContractUnenforceableError` unless downgraded (fail closed).

Path arguments of ``read_file``/``write_file``/``remove``/``exec(cwd=)`` are absolute
host paths inside the session directory; a path outside it is a programming error and
raises :class:`ValueError`. Symlinks are never followed out of the session: ``read_file``
reports such a path as absent (``None``), ``write_file`` replaces a symlink at the target
instead of writing through it and refuses (``ValueError``) a parent that resolves outside.

Host detection and planning (:class:`HostCapabilities`, :func:`plan_isolation`) live in
:mod:`harness.sandbox._host`; this module re-exports them.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness._proc import Captured, capture
from harness._safefs import rmtree
from harness.cases.model import PhaseContract
from harness.errors import SandboxUnavailableError
from harness.sandbox._cgroup import CgroupStats, ExecCgroup
from harness.sandbox._host import (
    BOUND_NAMES,
    HostCapabilities,
    IsolationPlan,
    mount_tmpfs,
    plan_isolation,
    umount,
)
from harness.sandbox._hostfiles import HostFiles
from harness.sandbox._relay import ENDPOINT_SOCKET, relay_argv
from harness.sandbox._seccomp import filter_fd
from harness.sandbox._view import check_view, mount_parents, system_binds
from harness.sandbox.base import (
    IO_MB,
    SANDBOX_GID,
    SANDBOX_IO,
    SANDBOX_UID,
    SANDBOX_WORKSPACE,
    SYSTEM_PATH,
    ExecResult,
    SandboxPaths,
    SealedView,
    session_env,
)
from harness.sandbox.classify import Evidence, classify
from harness.sandbox.owner import owned_prefix

__all__ = [
    "BOUND_NAMES",
    "HostCapabilities",
    "IsolationPlan",
    "LocalSandbox",
    "LocalSession",
    "plan_isolation",
]

SANE_PATH = SYSTEM_PATH
# umask 022: the folders bwrap creates for mount points (/etc, /harness) must be
# traversable by the unprivileged command, whatever the harness's own umask is.
# $1 = how many cgroup files follow: the gate joins each (writes 0, itself) once released,
# before anything of the command runs; a refusal ends it with 125 before bwrap starts.
_GATE = (
    'umask 022; read -r _ || exit 125; n=$1; shift; while [ "$n" -gt 0 ]; do '
    'echo 0 > "$1" || exit 125; shift; n=$((n - 1)); done; exec "$@"'
)


_PROC_RO = [
    arg
    for p in ("/proc/sys", "/proc/sysrq-trigger")
    if os.path.exists(p)
    for arg in ("--ro-bind", p, p)
]
"""bwrap arguments that cover the kernel's writable proc entries read-only."""

_DROP_CAPS = ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
"""What setpriv needs to empty the bounding set and leave uid 0; all gone before argv."""


def _drop_argv(setpriv: str) -> list[str]:
    """Return the prefix that switches a command to the sandbox uid before it runs.

    Switching every uid from 0 to non-zero clears the permitted, effective and ambient
    capability sets; bwrap's ``no_new_privs`` keeps set-uid programs from regaining any.
    """
    return [
        setpriv,
        f"--reuid={SANDBOX_UID}",
        f"--regid={SANDBOX_GID}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
    ]


def sandbox_env(
    contract: PhaseContract,
    home: str,
    tmpdir: str,
    extra: Mapping[str, str] | None,
    view: SealedView | None = None,
) -> dict[str, str]:
    """Build a command's whole environment (see :func:`~harness.sandbox.base.session_env`).

    ``PATH`` is the view's prefix then the system's: the harness's own interpreter
    directory is never on it.
    """
    base = {"HOME": home, "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": tmpdir}
    return session_env(base, contract, view, extra, os.environ)


def _drain(fd: int) -> bytes:
    """Read what is buffered in a pipe without blocking, then close it."""
    chunks = []
    try:
        os.set_blocking(fd, False)
        while True:
            try:
                chunk = os.read(fd, 4096)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


class LocalSession(HostFiles):
    """One local sandbox session; see the module docstring for the isolation it applies."""

    def __init__(
        self,
        caps: HostCapabilities,
        contract: PhaseContract,
        plan: IsolationPlan,
        root: Path,
        label: str,
        view: SealedView | None = None,
    ) -> None:
        self._caps, self._contract, self._plan = caps, contract, plan
        self._root, self.label = root, label
        self._view = view
        # Inside bwrap the workspace and io folder sit at fixed paths: no host path (the
        # session directory, the store, the project) is visible to the command.
        self._host = {"workspace": root / "workspace", "io": root / "io"}
        if plan.bwrap:
            self._paths = SandboxPaths(workspace=SANDBOX_WORKSPACE, io=SANDBOX_IO)
        else:
            self._paths = SandboxPaths(workspace=str(root / "workspace"), io=str(root / "io"))
        self._owner_ids = (SANDBOX_UID, SANDBOX_GID) if caps.drops_privileges else None
        self._tmpfs_disk = plan.disk == "tmpfs"
        self._what = "local sandbox"
        self._lock = threading.Lock()
        self._running: dict[int, tuple[subprocess.Popen[bytes], ExecCgroup | None]] = {}
        self._closed = False

    @property
    def paths(self) -> SandboxPaths:
        """Host paths of the workspace and the private protocol folder."""
        return self._paths

    @property
    def downgraded(self) -> tuple[str, ...]:
        """Bounds this session was allowed not to enforce."""
        return self._plan.downgraded

    @property
    def image_id(self) -> str | None:
        """Always ``None``: the local backend runs on the host's filesystem."""
        return None

    @property
    def plan(self) -> IsolationPlan:
        """The mechanisms in use."""
        return self._plan

    @property
    def root(self) -> Path:
        """The session directory on the host."""
        return self._root

    # -- exec ----------------------------------------------------------------------------

    def _command(
        self,
        argv: Sequence[str],
        cwd: Path,
        info_fd: int | None = None,
        seccomp_fd: int | None = None,
    ) -> list[str]:
        plan, c = self._plan, self._contract
        drop: list[str] = []
        if self._caps.drops_privileges:
            assert self._caps.setpriv is not None  # plan_isolation refused otherwise
            drop = _drop_argv(self._caps.setpriv)
        if plan.bwrap:
            assert self._caps.bwrap is not None
            cmd = [
                self._caps.bwrap,
                "--die-with-parent",
                "--new-session",
                "--unshare-pid",
                "--unshare-ipc",
                "--unshare-uts",
                "--unshare-cgroup-try",
                "--hostname",
                "sandbox",
                "--cap-drop",
                "ALL",
                # Only what setpriv needs to leave uid 0; gone with the uid switch.
                *(_DROP_CAPS if drop else []),
                *system_binds(self._root.parent),
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                # Kernel tunables read-only (the uid switch already denies writes).
                *_PROC_RO,
            ]
            if c.disk_mb is not None:
                cmd += ["--size", str(c.disk_mb * 1024 * 1024)]
            cmd += ["--perms", "1777", "--tmpfs", "/tmp"]  # writable by the sandbox uid
            mounts = self._view.mounts if self._view is not None else ()
            cmd += mount_parents(
                self._paths.workspace,
                self._paths.io,
                ENDPOINT_SOCKET,
                *(m.target for m in mounts),
            )
            cmd += ["--bind", str(self._host["workspace"]), self._paths.workspace]
            cmd += ["--bind", str(self._host["io"]), self._paths.io]
            for m in mounts:
                cmd += ["--ro-bind", m.source, m.target]
            if self._view is not None and self._view.endpoint is not None:
                # The one endpoint: its socket, and a relay listening before argv starts.
                cmd += ["--ro-bind", self._view.endpoint, ENDPOINT_SOCKET]
                argv = relay_argv(argv)
            argv = [*drop, *argv]
            if plan.read_only_root:
                # The root is bwrap's own tmpfs with the system bound entry by entry: make
                # it read-only too, so nothing can be created at the top level. (Without
                # it the top level is a writable tmpfs; the host's files never are.)
                cmd += ["--remount-ro", "/"]
            if plan.network == "bwrap":
                cmd.append("--unshare-net")
            if seccomp_fd is not None:
                # Denies the calls that reach kernel state shared across runs (keyrings...).
                cmd += ["--seccomp", str(seccomp_fd)]
            if info_fd is not None:
                # Inside the sandbox, once bwrap's setup is done: say so, then become argv.
                marker = f'printf started > /proc/self/fd/{info_fd}; exec "$@"'
                argv = ["/bin/sh", "-c", marker, "sh", *argv]
            return [*cmd, "--chdir", self._sandbox_path(cwd), "--", *argv]
        if plan.network == "unshare":
            assert self._caps.unshare is not None
            return [
                self._caps.unshare,
                "--net",
                *([] if self._caps.root else ["--map-root-user"]),
                "--",
                *drop,
                *argv,
            ]
        return [*drop, *argv]

    def _rlimits(self, pid: int) -> None:
        c = self._contract
        # No core dumps: nothing of a crashed process is written or handed to a helper.
        resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))
        if c.cpu_seconds is not None:
            soft = max(1, int(c.cpu_seconds + 0.999))
            resource.prlimit(pid, resource.RLIMIT_CPU, (soft, soft + 1))
        if self._plan.memory == "rlimit_as":
            mem = c.memory_mb * 1024 * 1024
            resource.prlimit(pid, resource.RLIMIT_AS, (mem, mem))
        if c.disk_mb is not None:
            size = c.disk_mb * 1024 * 1024
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (size, size))

    def exec(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        """Run ``argv`` under the session's contract; see :meth:`SandboxSession.exec`.

        Raises:
            SandboxUnavailableError: the session is closed, ``cwd`` is missing, or the
                cgroup, rlimits or launcher could not be set up.
            ValueError: ``argv`` is empty or ``cwd`` is outside the session.

        """
        if not argv:
            raise ValueError("exec() needs a non-empty argv")
        if self._closed:
            raise SandboxUnavailableError(f"local sandbox {self.label}: session is closed")
        c, caps = self._contract, self._caps
        limit = c.timeout_seconds if timeout is None else min(timeout, c.timeout_seconds)
        host_cwd = self._inside(cwd or self._paths.workspace)
        if not host_cwd.is_dir():
            raise SandboxUnavailableError(
                f"local sandbox {self.label}: cwd {host_cwd} does not exist"
            )
        tmpdir = "/tmp" if self._plan.bwrap else str(self._root / "tmp")
        full_env = sandbox_env(c, self._paths.io, tmpdir, env, self._view)
        group: ExecCgroup | None = None
        if caps.cgroups is not None and (
            self._plan.memory == "cgroup" or self._plan.pids == "cgroup"
        ):
            try:
                group = caps.cgroups.create(memory_mb=c.memory_mb, pids=c.pids)
            except OSError as exc:
                raise SandboxUnavailableError(
                    f"local sandbox {self.label}: could not create a cgroup: {exc}"
                ) from exc
        used_before = self._disk_used_mb()
        start = time.monotonic()
        proc, info_r = self._launch(argv, host_cwd, full_env, group)
        try:
            got = capture(
                proc,
                stdin=stdin,
                deadline=start + limit,
                cap=c.output_bytes,
                cpu_limit=c.cpu_seconds if self._plan.cpu == "rlimit+cgroup" else None,
                cpu_used=group.cpu_s if group else None,
                kill=lambda: self._kill(proc, group),
            )
        finally:
            self._kill(proc, group)
            with self._lock:
                self._running.pop(proc.pid, None)
            stats = group.stats() if group else None
            if group is not None:
                group.remove()
            info = _drain(info_r) if info_r is not None else None
        if info is not None and b"started" not in info:
            # bwrap never started the command: the gate could not join the cgroup, or
            # bwrap's own setup failed (a mount race, a missing path). That is the
            # environment's fault, never the candidate's.
            why = got.stderr[-600:].decode(errors="replace").strip()
            raise SandboxUnavailableError(
                f"local sandbox {self.label}: could not set up the sandbox (cgroup join "
                f"or bwrap): {why}",
                reason="bwrap_setup",
            )
        return self._result(argv, got, stats, limit, start, used_before)

    def _launch(
        self, argv: Sequence[str], cwd: Path, env: dict[str, str], group: ExecCgroup | None
    ) -> tuple[subprocess.Popen[bytes], int | None]:
        """Start the gate, confine it (cgroup, rlimits), then release it to exec ``argv``.

        The gate (``sh``) blocks reading one line from its stdin; the user's stdin follows
        that line on the same pipe (dash's ``read`` consumes byte by byte, never more).
        """
        info_r, info_w = os.pipe() if self._plan.bwrap else (None, None)
        seccomp_fd = None
        if self._plan.bwrap:
            try:
                seccomp_fd = filter_fd()
            except (ValueError, OSError) as exc:
                for fd in (info_r, info_w):
                    if fd is not None:
                        os.close(fd)
                if group is not None:
                    group.remove()
                raise SandboxUnavailableError(
                    f"local sandbox {self.label}: no seccomp filter: {exc}"
                ) from exc
        command = self._command(argv, cwd, info_w, seccomp_fd)
        fds = [fd for fd in (info_w, seccomp_fd) if fd is not None]
        if self._plan.bwrap:
            # bwrap's own options (every host path: binds, session folder) travel in a
            # memfd that bwrap reads and closes, never on a command line the sandboxed
            # process could read from /proc/1/cmdline.
            end = command.index("--")
            args_fd = os.memfd_create("bwrap-args", 0)
            os.write(args_fd, b"".join(a.encode() + b"\0" for a in command[1:end]))
            os.lseek(args_fd, 0, os.SEEK_SET)
            command = [command[0], "--args", str(args_fd), *command[end:]]
            fds.append(args_fd)
        # With bwrap the gate joins the cgroup itself (cheaper: see self_join_files), and
        # bwrap's started marker proves it did; without bwrap we attach it from here.
        joins = group.self_join_files() if group is not None and info_r is not None else ()
        cmd = [self._caps.shell, "-c", _GATE, "sh", str(len(joins)), *map(str, joins), *command]
        try:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env=env,
                cwd=self._root if self._plan.bwrap else cwd,
                pass_fds=tuple(fds),
            )
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            if info_r is not None:
                os.close(info_r)
            if group is not None:
                group.remove()
            raise SandboxUnavailableError(
                f"local sandbox {self.label}: could not start {cmd[0]}: {exc}"
            ) from exc
        for fd in fds:
            os.close(fd)
        with self._lock:
            self._running[proc.pid] = (proc, group)
        try:
            if group is not None and not joins:
                group.attach(proc.pid)
            self._rlimits(proc.pid)
            assert proc.stdin is not None
            os.write(proc.stdin.fileno(), b"go\n")
        except OSError as exc:
            self._kill(proc, group)
            capture(proc, stdin=None, deadline=time.monotonic() + 5, cap=1024)
            with self._lock:
                self._running.pop(proc.pid, None)
            if group is not None:
                group.remove()
            raise SandboxUnavailableError(
                f"local sandbox {self.label}: could not confine the command "
                f"(cgroup attach / prlimit / gate): {exc}"
            ) from exc
        return proc, info_r

    @staticmethod
    def _kill(proc: subprocess.Popen[bytes], group: ExecCgroup | None) -> None:
        if group is not None:
            group.kill_all()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    def _result(
        self,
        argv: Sequence[str],
        got: Captured,
        stats: CgroupStats | None,
        limit: float,
        start: float,
        used_before: float | None,
    ) -> ExecResult:
        c = self._contract
        duration = max(0.0, got.ended - start)
        code: int | None = got.returncode
        sig: int | None = None
        if got.returncode is not None and got.returncode < 0:
            code, sig = None, -got.returncode
        elif self._plan.bwrap and got.returncode is not None and 128 < got.returncode <= 192:
            code, sig = None, got.returncode - 128  # bwrap reports a signalled child as 128+N
        cpu_s = stats.cpu_s if stats and stats.cpu_s is not None else got.cpu_s
        peak = stats.peak_memory_bytes if stats and stats.peak_memory_bytes else got.maxrss
        peak_mb = None if peak is None else peak / (1024 * 1024)
        term, bound = classify(
            Evidence(
                exit_code=code,
                signal=sig,
                killed=got.killed,
                oom=stats is not None and stats.oom_kills > 0,
                pids_events=stats.pids_max_events if stats is not None else 0,
                pids_observed=stats.pids_peak if stats is not None else None,
                disk_full=self._disk_filled_by_this(used_before),
                stderr=got.stderr,
                duration_s=duration,
                cpu_s=cpu_s,
                peak_memory_mb=peak_mb,
                disk_used_mb=self._disk_used_mb(),
                timeout_s=limit,
                cpu_seconds=c.cpu_seconds,
                memory_mb=c.memory_mb,
                pids=c.pids,
                disk_mb=c.disk_mb,
            )
        )
        return ExecResult(
            argv=tuple(argv),
            exit_code=code,
            signal=sig,
            termination=term,
            bound=bound,
            stdout=got.stdout,
            stderr=got.stderr,
            stdout_total=got.stdout_total,
            stderr_total=got.stderr_total,
            stdout_truncated=got.stdout_total > len(got.stdout),
            stderr_truncated=got.stderr_total > len(got.stderr),
            duration_s=duration,
            cpu_s=cpu_s,
            peak_memory_mb=peak_mb,
        )

    def _disk_filled_by_this(self, used_before: float | None) -> bool:
        """Tell whether the session tmpfs is (nearly) full and this command wrote to it.

        A disk already full before the command started is not blamed on it.
        """
        if self._plan.disk != "tmpfs" or used_before is None:
            return False
        st = os.statvfs(self._root)
        free, size = st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
        used_now = (st.f_blocks - st.f_bfree) * st.f_frsize / (1024 * 1024)
        return free < min(1 << 20, size // 50) and used_now > used_before

    def _disk_used_mb(self) -> float | None:
        if self._plan.disk != "tmpfs":
            return None
        st = os.statvfs(self._root)
        return (st.f_blocks - st.f_bfree) * st.f_frsize / (1024 * 1024)

    # -- lifecycle -----------------------------------------------------------------------

    def interrupt(self) -> None:
        """Kill the commands running now; see :meth:`SandboxSession.interrupt`."""
        with self._lock:
            running = list(self._running.values())
        for proc, group in running:
            self._kill(proc, group)

    def close(self) -> None:
        """Kill every running command and remove the session directory (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            running = list(self._running.values())
        for proc, group in running:
            self._kill(proc, group)
        if self._plan.disk == "tmpfs":
            umount(self._root)
        rmtree(self._root)  # any depth: the command may have left a 1,200-deep folder

    def __enter__(self) -> LocalSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


OWNER_FILE = ".harness-owner"
"""Pid of the harness process that opened a session (lets prune find orphans)."""


class LocalSandbox:
    """The ``local`` backend: sessions are host directories confined by bwrap + cgroups."""

    name = "local"

    def __init__(
        self, base_dir: Path | str | None = None, *, capabilities: HostCapabilities | None = None
    ) -> None:
        """Create a backend whose sessions live under ``base_dir`` (default: the temp dir).

        ``capabilities`` overrides detection (tests use it to force a fallback path).
        """
        self.base_dir = Path(base_dir) if base_dir else Path(tempfile.gettempdir())
        self._caps = capabilities

    @property
    def capabilities(self) -> HostCapabilities:
        """The host capabilities in use (detected on first use)."""
        if self._caps is None:
            self._caps = HostCapabilities.detect()
        return self._caps

    @property
    def drop_box_owner(self) -> int:
        """Root when commands are switched to the sandbox uid, else the harness's user."""
        return 0 if self.capabilities.drops_privileges else os.geteuid()

    def open(
        self,
        contract: PhaseContract,
        *,
        label: str,
        downgrade: frozenset[str] = frozenset(),
        view: SealedView | None = None,
    ) -> LocalSession:
        """Open a fresh session; see :meth:`Sandbox.open`.

        Raises:
            ContractUnenforceableError: a bound cannot be enforced and was not downgraded.
            SandboxUnavailableError: the session directory or its tmpfs could not be made,
                or ``view`` cannot be provided (mounts need bwrap; a source is missing).

        """
        caps = self.capabilities
        plan = plan_isolation(contract, caps, downgrade)
        check_view(view, plan)
        safe = re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-")[:40] or "session"
        try:
            self.base_dir.mkdir(parents=True, exist_ok=True)
            root = Path(tempfile.mkdtemp(prefix=owned_prefix(safe), dir=self.base_dir))
        except OSError as exc:
            raise SandboxUnavailableError(
                f"local sandbox: cannot create a session under {self.base_dir}: {exc}"
            ) from exc
        root = Path(os.path.realpath(root))
        try:
            if plan.disk == "tmpfs":
                assert contract.disk_mb is not None
                mount_tmpfs(root, contract.disk_mb)
            for sub in ("workspace", "io", "tmp"):
                (root / sub).mkdir()
                if sub == "io" and plan.disk == "tmpfs":  # room for the harness's files
                    mount_tmpfs(root / sub, IO_MB)
                    os.chmod(root / sub, 0o755)
                if caps.drops_privileges:
                    os.chown(root / sub, SANDBOX_UID, SANDBOX_GID)
            (root / "tmp").chmod(0o1777)
            if caps.drops_privileges and not plan.bwrap:
                root.chmod(0o711)  # the unprivileged command reaches its folders by path
            (root / OWNER_FILE).write_text(f"{os.getpid()}\n")
        except OSError as exc:
            if plan.disk == "tmpfs":
                umount(root)
            shutil.rmtree(root, ignore_errors=True)
            raise SandboxUnavailableError(
                f"local sandbox: cannot prepare session {root} (tmpfs of "
                f"{contract.disk_mb} MiB): {exc}"
            ) from exc
        return LocalSession(caps, contract, plan, root, label, view)

    def describe(self) -> dict[str, str]:
        """Backend facts for the run record."""
        caps = self.capabilities
        facts = {
            "backend": "local",
            "bwrap": caps.bwrap_version or ("present" if caps.bwrap else "absent"),
            "network_isolation": "bwrap" if caps.bwrap else ("unshare" if caps.unshare else "none"),
            "read_only_root": "bwrap" if caps.bwrap else "none",
            "memory": "cgroup" if caps.cgroups else "rlimit_as",
            "pids": "cgroup" if caps.cgroups else "none",
            "disk": "tmpfs" if caps.can_mount else "none",
            "cpu": "rlimit_cpu"
            + ("+cgroup" if caps.cgroups and "cpu" in caps.cgroups.bases else ""),
            "cgroup": "none",
            "root": str(caps.root).lower(),
            "launcher": "sh-gate+prlimit(2)",
            "uid": str(SANDBOX_UID) if caps.drops_privileges else str(os.geteuid()),
        }
        if caps.cgroups:
            facts.update(caps.cgroups.describe())
        return facts
