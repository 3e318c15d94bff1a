"""Docker sandbox backend: one holder container per session, one container per command.

Layout of a session (everything labelled ``harness.managed=1`` + run/session/role/owner):

* two named volumes on the ``local`` driver backed by ``tmpfs`` with ``size=`` (the disk
  bound): the workspace (``/workspace``, ``disk_mb``) and the protocol folder
  (``/harness/io``, 16 MiB). When the image carries the ``harness.seed`` label (per-case
  images, :mod:`harness.env.images`), the holder copies that folder into the fresh workspace
  inside the engine, so the starting state never travels through the API;
* a *holder* container (``sleep infinity`` under ``--init``, no network, tiny memory) that
  keeps the tmpfs volumes mounted between commands and serves ``put_archive`` /
  ``get_archive``, so file transfer also works with a remote ``DOCKER_HOST``;
* for each :meth:`DockerSession.exec`, a fresh container from the same image with the
  volumes, ``--init``, ``--network none`` (unless the contract says ``host``), read-only
  root, ``/tmp`` tmpfs of ``disk_mb``, ``mem_limit == memswap_limit``, ``pids_limit``,
  ``nano_cpus``, ``RLIMIT_CPU`` for ``cpu_seconds``, ``no-new-privileges``, optional user.

A command's bounds and the engine's evidence of which one fired (``memory`` from
``OOMKilled``, ``wall_clock`` from the harness's own deadline, ``pids``, ``cpu``, ``disk``)
live in :mod:`harness.sandbox._docker_exec`: never the command's own words. A command killed
from outside (``docker kill``/``stop``/``rm -f``), a lost holder (the workspace is gone) or
an engine that went away mid-command raise :class:`~harness.errors.SandboxUnavailableError`:
an ``infra_error``, never a ``fail``.

Engine-level helpers (:func:`connect`, :func:`find_image`, :func:`engine_errors`,
:func:`prune`) live in :mod:`harness.sandbox._docker_engine`, the attach-stream reader and
tar helpers in :mod:`harness.sandbox._docker_io`; this module re-exports the public names.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from harness._safefs import MAX_MTIME
from harness.cases.model import PhaseContract
from harness.errors import ContractUnenforceableError, SandboxUnavailableError
from harness.sandbox._docker_engine import (
    BOOT_LABEL,
    DEFAULT_IMAGE,
    ENGINE_ERRORS,
    LABEL,
    OWNER_LABEL,
    SEED_LABEL,
    PruneReport,
    connect,
    docker_engine,
    engine_errors,
    find_image,
    owner_labels,
    owner_state,
    prune,
)
from harness.sandbox._docker_exec import bound_options, run_command
from harness.sandbox._docker_io import first_file, pack_box, pack_file, pack_tree, unpack_tree
from harness.sandbox._docker_sdk import docker
from harness.sandbox._dropbox import read_box_archive
from harness.sandbox._relay import ENDPOINT_SOCKET, RELAY_PYTHON, relay_argv
from harness.sandbox._treebound import TreeCounter
from harness.sandbox.base import (
    DROP_BOX,
    DROP_BOX_MODE,
    SANDBOX_GID,
    SANDBOX_IO,
    SANDBOX_UID,
    SANDBOX_WORKSPACE,
    DropBox,
    ExecResult,
    SandboxPaths,
    SealedView,
    lock_plan,
    session_env,
)

__all__ = [
    "BOOT_LABEL",
    "DEFAULT_IMAGE",
    "LABEL",
    "OWNER_LABEL",
    "SEED_LABEL",
    "DockerSandbox",
    "DockerSession",
    "PruneReport",
    "connect",
    "engine_errors",
    "find_image",
    "owner_labels",
    "owner_state",
    "prune",
]

_WS, _IO = SANDBOX_WORKSPACE, SANDBOX_IO

# Before ``get_archive``: the engine marshals the folder's own stat (as JSON) and refuses a
# year past 9999, so the workspace folder is touched to now and every time the agent set
# outside 1970-9999 is clamped into it (``MAX_MTIME``), as the local backend's copy does.
# Its status is not checked: an image without ``find`` leaves the inner times, which the
# archive carries anyway.
_CLAMP_TIMES = (
    'touch -c "$1"; '
    f'find "$1" -mindepth 1 -newermt @{MAX_MTIME} -exec touch -c -h -d @{MAX_MTIME} {{}} +; '
    'find "$1" -mindepth 1 ! -newermt @0 -exec touch -c -h -d @0 {} +; exit 0'
)
_IO_MB = 16
_HOLDER_MEM = 32 * 1024 * 1024


def _check_relay(endpoint: str) -> None:
    """Check the endpoint can be bound into containers: a unix socket, a local engine.

    Raises:
        SandboxUnavailableError: a remote engine, or no unix socket at ``endpoint``.
    """
    host = os.environ.get("DOCKER_HOST", "unix://")
    if not host.startswith("unix://"):
        raise SandboxUnavailableError(
            f"docker: cannot relay endpoint {endpoint} to a remote engine ({host}); "
            "the endpoint relay binds a host unix socket and needs a local engine",
            reason="relay_unavailable",
        )
    try:
        is_socket = stat.S_ISSOCK(os.stat(endpoint).st_mode)
    except OSError:
        is_socket = False
    if not is_socket:
        raise SandboxUnavailableError(
            f"docker: endpoint {endpoint} is not a unix socket; cannot relay it",
            reason="relay_unavailable",
        )


class DockerSandbox:
    """The ``docker`` backend (docker SDK for Python); see the module docstring.

    ``client`` defaults to :func:`connect` (``DOCKER_HOST`` and friends are honoured);
    ``run_id`` labels every object of this run; with :func:`owner_labels` it lets
    :func:`prune` find what a dead run left behind.
    """

    name = "docker"

    def __init__(
        self,
        client: Any | None = None,
        *,
        default_image: str = DEFAULT_IMAGE,
        run_id: str = "adhoc",
    ) -> None:
        self._client = client if client is not None else connect()
        self.default_image = default_image
        self.run_id = run_id
        self._info: dict[str, Any] | None = None

    def _engine_info(self) -> dict[str, Any]:
        if self._info is None:
            with docker_engine("reading engine info", "engine_unreachable"):
                self._info = dict(self._client.info())
        return self._info

    def describe(self) -> Mapping[str, str]:
        """Engine version, API version, cgroup version, default image id, isolation used."""
        with docker_engine("describing the engine", "engine_unreachable"):
            ver = self._client.version()
            try:
                image_id = str(self._client.images.get(self.default_image).id)
            except docker.errors.ImageNotFound:
                image_id = "missing"
        info = self._engine_info()
        return {
            "backend": self.name,
            "engine_version": str(ver.get("Version", "?")),
            "api_version": str(ver.get("ApiVersion", "?")),
            "cgroup_version": str(info.get("CgroupVersion", "?")),
            "storage_driver": str(info.get("Driver", "?")),
            "default_image": self.default_image,
            "default_image_id": image_id,
            "isolation": "container per command; network none; read-only root; tmpfs "
            "workspace/io//tmp with size; cgroup memory+swap, pids, cpu; RLIMIT_CPU",
        }

    def _check(self, contract: PhaseContract, downgrade: frozenset[str]) -> tuple[str, ...]:
        info = self._engine_info()
        wanted = {
            "memory": bool(info.get("MemoryLimit")) and bool(info.get("SwapLimit")),
            "pids": bool(info.get("PidsLimit")),
            "cpu": contract.cpus is None or bool(info.get("CpuCfsQuota")),
        }
        skipped: list[str] = []
        for bound, ok in wanted.items():
            if ok:
                continue
            if bound not in downgrade:
                raise ContractUnenforceableError(
                    f"docker engine cannot enforce the {bound} bound (docker info reports "
                    "the cgroup controller missing); fix the engine or downgrade explicitly",
                    bound=bound,
                )
            skipped.append(bound)
        return tuple(skipped)

    def open(
        self,
        contract: PhaseContract,
        *,
        label: str,
        downgrade: frozenset[str] = frozenset(),
        view: SealedView | None = None,
    ) -> DockerSession:
        """Open a session: volumes + holder container from the contract's image.

        ``view``'s mounts are copied (through the API, so a remote engine works too) into
        one volume each, mounted read-only at the target in every command container.

        Raises:
            ContractUnenforceableError: the engine lacks a cgroup controller a bound needs.
            SandboxUnavailableError: engine unreachable, image missing, create/start failure,
                a view mount source that is not a directory.

        """
        if view is not None and view.endpoint is not None:
            _check_relay(view.endpoint)
        for m in view.mounts if view is not None else ():
            if not os.path.isdir(m.source):
                raise SandboxUnavailableError(
                    f"docker: view mount source {m.source} is not a directory",
                    reason="view_unavailable",
                )
        skipped = self._check(contract, downgrade)
        image_ref = contract.image or self.default_image
        with docker_engine(
            f"image {image_ref!r} (build it: ci/docker-up.sh / harness images build)",
            "image_missing",
        ):
            image = self._client.images.get(image_ref)
        return DockerSession(
            self._client,
            self,
            contract,
            image.id,
            label,
            skipped,
            dict(image.labels or {}),
            view,
        )


class DockerSession:
    """One session: see :class:`DockerSandbox`. Use as a context manager; always closed."""

    def __init__(
        self,
        client: Any,
        backend: DockerSandbox,
        contract: PhaseContract,
        image_id: str,
        label: str,
        downgraded: tuple[str, ...],
        image_labels: dict[str, str] | None = None,
        view: SealedView | None = None,
    ) -> None:
        self._client = client
        self._view = view
        self._image_labels = image_labels
        self._contract = contract
        self._image_id = image_id
        self._downgraded = downgraded
        self._sid = uuid.uuid4().hex[:12]
        self._labels = {
            LABEL: "1",
            "harness.run": backend.run_id,
            "harness.session": self._sid,
            "harness.label": label[:200],
            **owner_labels(),
        }
        self._volumes: list[Any] = []
        self._containers: dict[str, Any] = {}
        self._running: dict[str, Any] = {}
        """Command containers of ``exec`` calls under way (what :meth:`interrupt` kills)."""
        self._interrupted: set[str] = set()
        self._n = 0
        self._uid: tuple[int, int] | None = None
        self._closed = False
        try:
            self._holder, self._holder_started = self._start_holder()
            self._hand_over_workspace()
        except BaseException:
            self.close()
            raise

    # -- lifecycle -------------------------------------------------------------------------
    def _start_holder(self) -> tuple[Any, str]:
        disk = self._contract.disk_mb
        sizes = {_WS: f",size={disk}m" if disk else "", _IO: f",size={_IO_MB}m"}
        mounts = []
        for target, size in sizes.items():
            name = f"harness-{self._sid}-{'ws' if target == _WS else 'io'}"
            with docker_engine(f"creating volume {name}", "create_failed"):
                vol = self._client.volumes.create(
                    name=name,
                    driver="local",
                    labels=self._labels,
                    driver_opts={"type": "tmpfs", "device": "tmpfs", "o": f"mode=1777{size}"},
                )
            self._volumes.append(vol)
            mounts.append(docker.types.Mount(target, name, type="volume", no_copy=True))
        view_mounts = []
        for i, vm in enumerate(self._view.mounts if self._view is not None else ()):
            name = f"harness-{self._sid}-view{i}"
            with docker_engine(f"creating volume {name}", "create_failed"):
                self._volumes.append(
                    self._client.volumes.create(name=name, driver="local", labels=self._labels)
                )
            view_mounts.append((vm, name))
        # Commands: never re-seed an emptied workspace from the image; view volumes read-only.
        self._mounts = mounts + [
            docker.types.Mount(vm.target, name, type="volume", no_copy=True, read_only=True)
            for vm, name in view_mounts
        ]
        if self._view is not None and self._view.endpoint is not None:
            self._mounts.append(
                docker.types.Mount(
                    ENDPOINT_SOCKET, self._view.endpoint, type="bind", read_only=True
                )
            )
        holder_volumes = {m["Source"]: {"bind": m["Target"], "mode": "rw"} for m in mounts}
        holder_volumes.update({name: {"bind": vm.target, "mode": "rw"} for vm, name in view_mounts})
        with docker_engine("creating/starting the holder container", "create_failed"):
            holder = self._client.containers.run(
                self._image_id,
                ["infinity"],
                entrypoint=["sleep"],
                detach=True,
                init=True,
                name=f"harness-{self._sid}-holder",
                labels={**self._labels, "harness.role": "holder"},
                network_mode="none",
                read_only=True,
                volumes=holder_volumes,
                mem_limit=_HOLDER_MEM,
                memswap_limit=_HOLDER_MEM,
                pids_limit=16,
                log_config=docker.types.LogConfig(type="none"),
                user="0",
            )
            self._containers[holder.id] = holder
            holder.reload()
        if holder.attrs["State"].get("Status") != "running":
            raise SandboxUnavailableError(
                f"docker: holder container of image {self._image_id} did not stay up "
                f"(state {holder.attrs['State']}); the image needs `sleep`",
                reason="start_failed",
            )
        for vm, _name in view_mounts:
            data = pack_tree(Path(vm.source), PurePosixPath("."), 0, 0)
            with docker_engine(f"copying view mount {vm.source}", "transfer_failed"):
                if not holder.put_archive(vm.target, data):
                    raise SandboxUnavailableError(
                        f"docker: the engine refused view mount {vm.source}",
                        reason="transfer_failed",
                    )
        if self._view is not None and self._view.endpoint is not None:
            with docker_engine(
                "checking the image can run the endpoint relay", "relay_unavailable"
            ):
                code, _ = holder.exec_run(["test", "-x", RELAY_PYTHON], user="0")
            if code != 0:
                raise SandboxUnavailableError(
                    f"docker: image {self._image_id} has no {RELAY_PYTHON}, which the "
                    "endpoint relay needs",
                    reason="relay_unavailable",
                )
        seed = (self._image_labels or {}).get(SEED_LABEL)
        if seed:
            with docker_engine(f"seeding the workspace from {seed}", "seed_failed"):
                code, out = holder.exec_run(["cp", "-a", f"{seed}/.", _WS + "/"], user="0")
            if code != 0:
                raise SandboxUnavailableError(
                    f"docker: seeding the workspace from the image's {seed} failed: {out!r}",
                    reason="seed_failed",
                )
        return holder, str(holder.attrs["State"].get("StartedAt"))

    def _hand_over_workspace(self) -> None:
        """Give the seeded workspace to the command's unprivileged user.

        The same root command makes the session's drop box (:data:`DROP_BOX`), so that
        :meth:`make_drop_box` of it costs no call to the engine.
        """
        uid, gid = self._owner()
        mode = f"{DROP_BOX_MODE:o}"
        cmd = ["sh", "-c", 'chown -R "$1" "$2" && mkdir -m "$3" "$4"', "sh"]
        cmd += [f"{uid}:{gid}", _WS, mode, DROP_BOX]
        with docker_engine("handing the workspace to the sandbox user", "seed_failed"):
            code, out = self._holder.exec_run(cmd, user="0")
        if code != 0:
            raise SandboxUnavailableError(
                f"docker: could not hand the workspace to uid {uid}: {out!r}",
                reason="seed_failed",
            )

    def _holder_alive(self, what: str) -> None:
        if self._closed:
            raise SandboxUnavailableError(f"docker: {what}: session is closed", reason="closed")
        with docker_engine(f"{what}: checking the workspace holder", "container_gone"):
            self._holder.reload()
        state = self._holder.attrs["State"]
        if not state.get("Running") or str(state.get("StartedAt")) != self._holder_started:
            raise SandboxUnavailableError(
                f"docker: {what}: the workspace holder container was stopped or restarted "
                "from outside (engine restart or `docker kill`); the workspace is lost",
                reason="killed_externally",
            )

    def interrupt(self) -> None:
        """Kill the command containers running now; see :meth:`SandboxSession.interrupt`."""
        for cid, ctr in list(self._running.items()):
            self._interrupted.add(cid)  # our own kill: not one "from outside"
            with contextlib.suppress(*ENGINE_ERRORS):
                ctr.kill()

    def close(self) -> None:
        """Remove every container and volume of the session (idempotent, also on error)."""
        self._closed = True
        for cid, c in list(self._containers.items()):
            with contextlib.suppress(*ENGINE_ERRORS):
                c.remove(force=True)
            self._containers.pop(cid, None)
        for vol in list(self._volumes):
            for attempt in range(10):
                try:
                    vol.remove(force=True)
                    break
                except docker.errors.NotFound:
                    break
                except ENGINE_ERRORS:
                    time.sleep(0.1 * (attempt + 1))
            self._volumes.remove(vol)

    def __enter__(self) -> DockerSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- protocol properties -----------------------------------------------------------------
    @property
    def paths(self) -> SandboxPaths:
        """``/workspace`` and ``/harness/io``."""
        return SandboxPaths(workspace=_WS, io=_IO)

    @property
    def downgraded(self) -> tuple[str, ...]:
        """Bounds the caller allowed this session not to enforce (and it did not)."""
        return self._downgraded

    @property
    def image_id(self) -> str | None:
        """The image's content id (``sha256:…``) every container of the session runs."""
        return self._image_id

    @property
    def container_names(self) -> tuple[str, ...]:
        """Names of the session's live containers (holder + any running command)."""
        return tuple(c.name for c in self._containers.values())

    # -- files -------------------------------------------------------------------------------
    def _owner(self) -> tuple[int, int]:
        """Numeric uid/gid for files we write: the contract's user, resolved in the image."""
        if self._uid is None:
            user = self._contract.user
            if not user:
                self._uid = (SANDBOX_UID, SANDBOX_GID)
            else:
                name, _, group = user.partition(":")
                uid = int(name) if name.isdigit() else self._lookup("/etc/passwd", name)
                gid = (
                    int(group)
                    if group.isdigit()
                    else (
                        self._lookup("/etc/group", group)
                        if group
                        else self._lookup("/etc/passwd", name, field=3)
                        if not name.isdigit()
                        else uid
                    )
                )
                self._uid = (uid, gid)
        return self._uid

    def _lookup(self, table: str, name: str, field: int = 2) -> int:
        data = self.read_file(table, _root_ok=True) or b""
        for line in data.decode(errors="replace").splitlines():
            parts = line.split(":")
            if parts[0] == name and len(parts) > field and parts[field].isdigit():
                return int(parts[field])
        raise ContractUnenforceableError(
            f"docker: contract user {self._contract.user!r}: {name!r} not found in the "
            f"image's {table}",
            bound="user",
        )

    def _inside(self, path: str) -> str:
        p = PurePosixPath(path)
        if (
            not p.is_absolute()
            or ".." in p.parts
            or not any(p == PurePosixPath(r) or PurePosixPath(r) in p.parents for r in (_WS, _IO))
        ):
            raise ValueError(f"sandbox path {path!r} must be absolute under {_WS} or {_IO}")
        return str(p)

    def put_tree(self, src: Path, dest: str = "", *, locked: Sequence[str] = ()) -> None:
        """Copy host directory ``src`` into the workspace at ``dest`` (tar via the API).

        ``locked`` entries are root-owned in the archive (:func:`~harness.sandbox.base.lock_plan`).
        """
        target = self._inside(str(PurePosixPath(_WS) / dest))
        rel = PurePosixPath(target).relative_to(_WS)
        uid, gid = self._owner()
        files, folders = lock_plan("", locked)
        modes = {**{f: 0o644 for f in files}, **{d: 0o1777 for d in folders if d}}
        self._put(_WS, pack_tree(src, rel, uid, gid, locked=modes), f"put_tree {src}")
        if not locked:
            return
        # the workspace itself and the folders down to ``dest`` are not the archive's own
        inner = PurePosixPath(dest) if dest else None
        downs = [] if inner is None else [*reversed(inner.parents), inner]
        above = [_WS, *(str(PurePosixPath(_WS) / d) for d in downs if str(d) != ".")]
        self._holder_alive("lock")
        with docker_engine("locking the verifier's files", "transfer_failed"):
            code, out = self._holder.exec_run(
                ["sh", "-c", 'chown 0:0 "$@" && chmod 1777 "$@"', "sh", *above], user="0"
            )
        if code != 0:
            raise SandboxUnavailableError(
                f"docker: could not lock the workspace: {out!r:.300}", reason="transfer_failed"
            )

    def _put(self, at: str, data: bytes, what: str) -> None:
        self._holder_alive(what)
        with docker_engine(what, "transfer_failed"):
            if not self._holder.put_archive(at, data):
                raise SandboxUnavailableError(
                    f"docker: {what}: engine refused the archive", reason="transfer_failed"
                )

    def get_tree(
        self, dest: Path, *, max_files: int | None = None, max_bytes: int | None = None
    ) -> None:
        """Copy the workspace out into ``dest`` (empty or missing), via ``get_archive``.

        The archive is read as a stream and counted member by member: a candidate over
        ``max_files`` or ``max_bytes`` raises ``CandidateTooLarge`` after reading no more
        than the bound.
        """
        self._holder_alive("get_tree")
        dest.mkdir(parents=True, exist_ok=True)
        with docker_engine("get_tree", "transfer_failed"):
            self._holder.exec_run(["sh", "-c", _CLAMP_TIMES, "sh", _WS], user="0")
            stream, _ = self._holder.get_archive(_WS, chunk_size=1 << 20)
            try:
                unpack_tree(stream, dest, TreeCounter(max_files, max_bytes))
            finally:
                close = getattr(stream, "close", None)
                if close is not None:
                    close()

    def write_file(self, path: str, data: bytes) -> None:
        """Write ``data`` at absolute ``path`` under the workspace or io folder."""
        p = PurePosixPath(self._inside(path))
        root = PurePosixPath(_IO if PurePosixPath(_IO) in p.parents else _WS)
        uid, gid = self._owner()
        self._put(str(root), pack_file(p.relative_to(root), data, uid, gid), f"write_file {path}")

    def read_file(
        self, path: str, limit: int | None = None, *, _root_ok: bool = False
    ) -> bytes | None:
        """Read up to ``limit`` bytes of ``path``; ``None`` when absent or not a file."""
        path = path if _root_ok else self._inside(path)
        self._holder_alive(f"read_file {path}")
        try:
            with docker_engine(f"read_file {path}", "transfer_failed"):
                stream, _ = self._holder.get_archive(path, chunk_size=1 << 16)
                try:  # streamed: at most ``limit`` bytes are kept, whatever the file's size
                    return first_file(stream, limit)
                finally:
                    close = getattr(stream, "close", None)
                    if close is not None:
                        close()
        except SandboxUnavailableError as exc:
            if exc.reason == "container_gone":  # 404 from get_archive: the path is absent
                self._holder_alive(f"read_file {path}")
                return None
            raise

    def make_drop_box(self, path: str) -> None:
        """Create a drop box at ``path``: a root-owned folder in the archive, no command.

        :data:`DROP_BOX` was made when the session opened: nothing to do.
        """
        if os.path.normpath(path) == DROP_BOX:
            return
        p = PurePosixPath(self._inside(path))
        root = PurePosixPath(_IO if PurePosixPath(_IO) in p.parents else _WS)
        self._put(str(root), pack_box(p.relative_to(root), *self._owner()), f"drop box {path}")

    def read_drop_box(self, path: str, *, max_files: int, max_bytes: int) -> DropBox:
        """Read a drop box back through ``get_archive`` (streamed, bounded)."""
        path = self._inside(path)
        self._holder_alive(f"read_drop_box {path}")
        try:
            with docker_engine(f"read_drop_box {path}", "transfer_failed"):
                stream, _ = self._holder.get_archive(path, chunk_size=1 << 16)
                try:
                    return read_box_archive(
                        stream, owner=0, max_files=max_files, max_bytes=max_bytes
                    )
                finally:
                    close = getattr(stream, "close", None)
                    if close is not None:
                        close()
        except SandboxUnavailableError as exc:
            if exc.reason == "container_gone":  # 404: the box is gone
                self._holder_alive(f"read_drop_box {path}")
                return DropBox(odd=("the drop box is gone",))
            raise

    def remove(self, path: str) -> None:
        """Remove a file or tree at ``path`` (inside the holder, via ``rm -rf``)."""
        path = self._inside(path)
        if path in (_WS, _IO):
            cmd = ["find", path, "-mindepth", "1", "-delete"]
        else:
            cmd = ["rm", "-rf", "--", path]
        self._holder_alive(f"remove {path}")
        with docker_engine(f"remove {path}", "transfer_failed"):
            code, out = self._holder.exec_run(cmd, user="0")
        if code != 0:
            raise SandboxUnavailableError(f"docker: remove {path}: {out!r}", reason="exec_failed")

    # -- commands ----------------------------------------------------------------------------
    def exec(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        """Run ``argv`` in a fresh container of the session; see the module docstring.

        Raises:
            SandboxUnavailableError: the container could not be created/started, was killed
                or removed from outside, the engine went away, or the workspace was lost.

        """
        if not argv:
            raise ValueError("exec() needs a non-empty argv")
        self._holder_alive("exec")
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
                working_dir=cwd or _WS,
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
                self._holder_alive,
                interrupted=lambda: ctr.id in self._interrupted,
            )
        finally:
            self._running.pop(ctr.id, None)
            self._interrupted.discard(ctr.id)
            with contextlib.suppress(*ENGINE_ERRORS):
                ctr.remove(force=True)
            self._containers.pop(ctr.id, None)
