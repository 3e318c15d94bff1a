"""One command of a Docker session: its bounds as engine options, its run, its evidence.

:func:`bound_options` turns a contract into the engine options of a command container
(cgroup memory+swap, pids and cpu, ``RLIMIT_CPU``, a sized ``/tmp``); :func:`run_command`
starts the created container, feeds its stdin, waits until the deadline and reads what
the engine saw. The session that creates and removes the container is
:class:`harness.sandbox.docker.DockerSession`.

Which bound fired comes from the engine's evidence, never from the command's own words:

* ``memory``: ``State.OOMKilled`` of the command's container, with a non-zero status;
* ``wall_clock``: the harness's own deadline; the container is killed (``SIGKILL``);
* ``pids``: at the deadline the engine's stats show ``pids_stats.current`` at the limit
  (a fork bomb); or (heuristic: the container and its cgroup's ``pids.events`` are gone by
  the time we look) the command failed and its stderr carries the kernel's ``EAGAIN`` from
  ``fork``/``clone`` (``fork: Resource temporarily unavailable``, Python's
  ``BlockingIOError: [Errno 11]``, ``pthread_create``);
* ``cpu``: exit status ``128+SIGXCPU`` while ``cpu_seconds`` is set (``RLIMIT_CPU``);
* ``disk``: a failed command whose stderr reports ``ENOSPC`` (the tmpfs is full).

The evidence goes to :func:`harness.sandbox.classify.classify`. A command killed from
outside (the engine logged a ``kill``/``stop`` we did not send) raises
:class:`~harness.errors.SandboxUnavailableError`. Exit statuses are reported as the engine
gives them (``--init`` reports a child killed by signal ``N`` as ``128+N``; the engine
cannot tell that apart from ``exit(128+N)``).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.cases.model import PhaseContract
from harness.errors import ContractUnenforceableError, SandboxUnavailableError
from harness.sandbox._docker_engine import (
    ENGINE_ERRORS,
    LABEL,
    docker_engine,
    engine_unavailable,
    owner_labels,
)
from harness.sandbox._docker_io import Capture
from harness.sandbox._docker_sdk import docker, requests
from harness.sandbox._relay import relay_argv
from harness.sandbox.base import (
    SANDBOX_GID,
    SANDBOX_IO,
    SANDBOX_UID,
    SANDBOX_WORKSPACE,
    Bound,
    ExecResult,
    SandboxPaths,
    SealedView,
    Termination,
    session_env,
)
from harness.sandbox.classify import Evidence, classify

__all__ = ["CommandContainers", "bound_options", "run_command", "user_ids"]

_NOT_FOUND = re.compile(
    r"executable file not found|no such file or directory|"
    r"permission denied",
    re.I,
)


def bound_options(contract: PhaseContract, downgraded: tuple[str, ...]) -> dict[str, Any]:
    """Engine options that bound one command container, less the ``downgraded`` bounds."""
    c = contract
    mem = c.memory_mb * 1024 * 1024
    opts: dict[str, Any] = {}
    if "memory" not in downgraded:
        opts.update(mem_limit=mem, memswap_limit=mem)
    if "pids" not in downgraded:
        opts["pids_limit"] = c.pids
    if c.cpus is not None and "cpu" not in downgraded:
        opts["nano_cpus"] = int(c.cpus * 1e9)
    # No core dumps: nothing of a crashed process is written or handed to a helper.
    opts["ulimits"] = [docker.types.Ulimit(name="core", soft=0, hard=0)]
    if c.cpu_seconds is not None:
        soft = math.ceil(c.cpu_seconds)
        opts["ulimits"].append(docker.types.Ulimit(name="cpu", soft=soft, hard=soft + 1))
    tmp = f"rw,exec,nosuid,nodev,mode=1777{f',size={c.disk_mb}m' if c.disk_mb else ''}"
    opts["tmpfs"] = {"/tmp": tmp}
    return opts


def user_ids(user: str | None, table: Callable[[str], bytes]) -> tuple[int, int]:
    """Resolve a contract's ``user`` (``name``, ``uid``, ``name:group``, …) to numbers.

    ``None`` or empty is the sandbox user. ``table(path)`` gives the image's
    ``/etc/passwd`` or ``/etc/group``.

    Raises:
        ContractUnenforceableError: a name the image's tables do not hold.
    """
    if not user:
        return SANDBOX_UID, SANDBOX_GID

    def lookup(path: str, name: str, field: int = 2) -> int:
        for line in table(path).decode(errors="replace").splitlines():
            parts = line.split(":")
            if parts[0] == name and len(parts) > field and parts[field].isdigit():
                return int(parts[field])
        raise ContractUnenforceableError(
            f"docker: contract user {user!r}: {name!r} not found in the image's {path}",
            bound="user",
        )

    name, _, group = user.partition(":")
    uid = int(name) if name.isdigit() else lookup("/etc/passwd", name)
    if group:
        return uid, int(group) if group.isdigit() else lookup("/etc/group", group)
    return uid, uid if name.isdigit() else lookup("/etc/passwd", name, field=3)


def run_command(
    client: Any,
    ctr: Any,
    argv: tuple[str, ...],
    contract: PhaseContract,
    limit_s: float,
    stdin: bytes | None,
    holder_alive: Callable[[str], None],
    *,
    interrupted: Callable[[], bool] = lambda: False,
) -> ExecResult:
    """Start the created command container ``ctr``, wait up to ``limit_s``, read its evidence.

    ``holder_alive`` is called once the command is over: a lost workspace raises rather
    than being reported as the command's result. ``interrupted()`` says the session killed
    the command itself (:meth:`DockerSession.interrupt`), which is no kill from outside.
    See the module docstring for how the termination and the bound are told.

    Raises:
        SandboxUnavailableError: the container could not be started, was killed or removed
            from outside, the engine went away, or ``holder_alive`` raised.

    """
    c = contract
    params = {"stdout": 1, "stderr": 1, "stream": 1, "stdin": int(stdin is not None)}
    with docker_engine("attaching to the command container", "start_failed"):
        sock = ctr.attach_socket(params=params)
    raw = getattr(sock, "_sock", sock)
    out = Capture(raw, c.output_bytes, sock)
    try:
        not_found = _start(ctr, argv)
        if not_found is not None:
            return not_found
        t0 = time.monotonic()
        wall0 = time.time()
        out.start()
        if stdin is not None:
            with contextlib.suppress(OSError):
                raw.sendall(stdin)
            with contextlib.suppress(OSError):
                raw.shutdown(socket.SHUT_WR)
        we_killed, killed_pids = _wait_or_kill(ctr, limit_s, t0)
        duration = time.monotonic() - t0
        out.join(10.0)
        with docker_engine("inspecting the finished command", "container_gone"):
            ctr.reload()
    finally:
        out.close()
    state = ctr.attrs["State"]
    status = int(state.get("ExitCode", -1))
    holder_alive("after exec")
    code: int | None = status
    sig: int | None = None
    if we_killed:
        code, sig = None, signal.SIGKILL.value
    elif 128 < status <= 192:  # --init reports a child killed by signal N as 128+N
        code, sig = None, status - 128
    term, bound = _classify(
        c,
        code,
        sig,
        bool(state.get("OOMKilled")),
        we_killed,
        killed_pids,
        limit_s,
        duration,
        bytes(out.err),
    )
    if sig is not None and not we_killed and term is not Termination.MEMORY and not interrupted():
        _check_external_kill(client, ctr, wall0)
    return ExecResult(
        argv=argv,
        exit_code=code,
        signal=sig,
        termination=term,
        bound=bound,
        stdout=bytes(out.out),
        stderr=bytes(out.err),
        stdout_truncated=out.totals[1] > len(out.out),
        stdout_total=out.totals[1],
        stderr_truncated=out.totals[2] > len(out.err),
        stderr_total=out.totals[2],
        duration_s=duration,
    )


def _start(ctr: Any, argv: tuple[str, ...]) -> ExecResult | None:
    """Start the command container; return exit 127 when the engine finds no such command.

    Raises:
        SandboxUnavailableError: the engine could not start the container.
    """
    try:
        ctr.start()
    except docker.errors.APIError as exc:
        if not _NOT_FOUND.search(str(exc.explanation or exc)):
            raise engine_unavailable("starting the command container", exc, "start_failed") from exc
        msg = f"{argv[0]}: command not found ({exc.explanation})\n".encode()
        return ExecResult(
            argv=argv,
            exit_code=127,
            termination=Termination.EXIT,
            stderr=msg,
            stderr_total=len(msg),
            duration_s=0.0,
        )
    except ENGINE_ERRORS as exc:
        raise engine_unavailable("starting the command container", exc, "start_failed") from exc
    return None


def _wait_or_kill(ctr: Any, limit_s: float, t0: float) -> tuple[bool, float | None]:
    """Wait for the command until ``t0 + limit_s``, else kill it.

    Returns whether we killed it and, if so, how many pids it held right before.

    Raises:
        SandboxUnavailableError: the engine went away before the deadline.
    """
    try:
        with docker_engine("waiting for the command", "engine_lost"):
            ctr.wait(timeout=max(limit_s - (time.monotonic() - t0), 0.01))
    except SandboxUnavailableError as exc:
        if not isinstance(
            exc.__cause__,
            requests.exceptions.ReadTimeout | (requests.exceptions.ConnectionError),
        ) or (time.monotonic() - t0 < limit_s - 0.05):
            raise
        killed_pids = _pids_now(ctr)
        with docker_engine("killing the command at its deadline", "engine_lost"):
            with contextlib.suppress(docker.errors.APIError):
                ctr.kill()
            ctr.wait(timeout=60)
        return True, killed_pids
    return False, None


def _pids_now(ctr: Any) -> float | None:
    """Engine stats right before our kill: how many pids the command held."""
    try:
        stats = ctr.stats(stream=False, one_shot=True)
        return float((stats.get("pids_stats") or {})["current"])
    except (KeyError, TypeError, ValueError, *ENGINE_ERRORS):
        return None


def _classify(
    contract: PhaseContract,
    code: int | None,
    sig: int | None,
    oom: bool,
    we_killed: bool,
    pids_at_kill: float | None,
    limit_s: float,
    duration: float,
    stderr: bytes,
) -> tuple[Termination, Bound | None]:
    return classify(
        Evidence(
            exit_code=code,
            signal=None if we_killed else sig,
            killed="wall_clock" if we_killed else None,
            oom=oom,
            pids_observed=pids_at_kill,
            stderr=stderr,
            duration_s=duration,
            timeout_s=limit_s,
            cpu_seconds=contract.cpu_seconds,
            memory_mb=contract.memory_mb,
            pids=contract.pids,
            disk_mb=contract.disk_mb,
        )
    )


def _check_external_kill(client: Any, ctr: Any, since: float) -> None:
    """Raise when the engine logged a ``kill``/``stop`` of the command we did not send."""
    with docker_engine("reading engine events", "engine_lost"):
        stream = client.events(
            since=f"{since - 1:.6f}",
            until=f"{time.time():.6f}",
            decode=True,
            filters={"container": ctr.id, "event": ["kill", "stop"]},
        )
        try:
            events = list(stream)
        finally:
            stream.close()
    if events:
        sig = events[0].get("Actor", {}).get("Attributes", {}).get("signal", "?")
        raise SandboxUnavailableError(
            f"docker: command container {ctr.name} was killed from outside (signal "
            f"{sig}); the command did not finish on its own",
            reason="killed_externally",
        )


class CommandContainers:
    """What every Docker session does alike: one fresh container per command.

    A session (:class:`harness.sandbox.docker.DockerSession`, whose files live in engine
    volumes, or :class:`harness.sandbox._docker_host.DockerHostSession`, whose files are host
    folders bound in) calls :meth:`_start_commands` first, sets ``_mounts`` (what every command
    container mounts) and implements :meth:`_alive` (raise when the workspace is lost).
    """

    _mounts: list[Any]

    def _start_commands(
        self,
        client: Any,
        run_id: str,
        contract: PhaseContract,
        image_id: str,
        label: str,
        downgraded: tuple[str, ...],
        view: SealedView | None,
    ) -> None:
        self._client = client
        self._contract = contract
        self._image_id = image_id
        self._downgraded = downgraded
        self._view = view
        self._sid = uuid.uuid4().hex[:12]
        self._labels = {
            "harness.run": run_id,
            "harness.session": self._sid,
            "harness.label": label[:200],
            LABEL: "1",
            **owner_labels(),
        }
        self._containers: dict[str, Any] = {}
        self._running: dict[str, Any] = {}
        """Command containers of ``exec`` calls under way (what :meth:`interrupt` kills)."""
        self._interrupted: set[str] = set()
        self._n = 0
        self._closed = False

    def _alive(self, what: str) -> None:
        """Raise :class:`SandboxUnavailableError` when the session's workspace is lost."""
        raise NotImplementedError

    @property
    def paths(self) -> SandboxPaths:
        """``/workspace`` and ``/harness/io``."""
        return SandboxPaths(workspace=SANDBOX_WORKSPACE, io=SANDBOX_IO)

    @property
    def downgraded(self) -> tuple[str, ...]:
        """Bounds the caller allowed this session not to enforce (and it did not)."""
        return self._downgraded

    @property
    def image_id(self) -> str | None:
        """The image's content id (``sha256:…``) every container of the session runs."""
        return self._image_id

    @property
    def session_id(self) -> str:
        """The ``harness.session`` label of every container (and volume) of the session."""
        return self._sid

    @property
    def container_names(self) -> tuple[str, ...]:
        """Names of the session's live containers (a holder, if any, and running commands)."""
        return tuple(c.name for c in self._containers.values())

    def interrupt(self) -> None:
        """Kill the command containers running now; see :meth:`SandboxSession.interrupt`."""
        for cid, ctr in list(self._running.items()):
            self._interrupted.add(cid)  # our own kill: not one "from outside"
            with contextlib.suppress(*ENGINE_ERRORS):
                ctr.kill()

    def _remove_containers(self) -> None:
        for cid, c in list(self._containers.items()):
            with contextlib.suppress(*ENGINE_ERRORS):
                c.remove(force=True)
            self._containers.pop(cid, None)

    def exec(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        """Run ``argv`` in a fresh container of the session; see :func:`run_command`.

        Raises:
            SandboxUnavailableError: the container could not be created/started, was killed
                or removed from outside, the engine went away, or the workspace was lost.

        """
        if not argv:
            raise ValueError("exec() needs a non-empty argv")
        self._alive("exec")
        c = self._contract
        limit_s = min(c.timeout_seconds, timeout) if timeout is not None else c.timeout_seconds
        base = {"HOME": "/tmp", "LANG": "C.UTF-8", "TMPDIR": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"}
        full_env = session_env(base, c, self._view, env, os.environ)
        self._n += 1
        run = list(argv)
        if self._view is not None and self._view.endpoint is not None:
            run = relay_argv(argv)
        with docker_engine("creating the command container", "create_failed"):
            ctr = self._client.containers.create(
                self._image_id,
                run[1:],
                entrypoint=[run[0]],
                init=True,
                name=f"harness-{self._sid}-x{self._n}",
                environment=full_env,
                working_dir=cwd or SANDBOX_WORKSPACE,
                user=c.user or f"{SANDBOX_UID}:{SANDBOX_GID}",
                cap_drop=["ALL"],
                mounts=self._mounts,
                read_only=c.read_only_root,
                network_mode="host" if c.network == "host" else "none",
                labels={**self._labels, "harness.role": "exec"},
                log_config=docker.types.LogConfig(type="none"),
                security_opt=["no-new-privileges"],
                stdin_open=stdin is not None,
                **bound_options(c, self._downgraded),
            )
        self._containers[ctr.id] = ctr
        self._running[ctr.id] = ctr
        try:
            return run_command(
                self._client,
                ctr,
                tuple(argv),
                c,
                limit_s,
                stdin,
                self._alive,
                interrupted=lambda: ctr.id in self._interrupted,
            )
        finally:
            self._running.pop(ctr.id, None)
            self._interrupted.discard(ctr.id)
            with contextlib.suppress(*ENGINE_ERRORS):
                ctr.remove(force=True)
            self._containers.pop(ctr.id, None)
