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

import os
import stat
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from harness._safefs import MAX_MTIME
from harness.cases.model import PhaseContract
from harness.errors import ConfigError, ContractUnenforceableError, SandboxUnavailableError
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
from harness.sandbox._docker_exec import CommandContainers, user_ids
from harness.sandbox._docker_host import (
    DockerHostSession,
    engine_sees_host,
    image_table,
    open_host_session,
)
from harness.sandbox._docker_io import first_file, pack_box, pack_file, pack_tree, unpack_tree
from harness.sandbox._docker_sdk import docker
from harness.sandbox._dropbox import read_box_archive
from harness.sandbox._relay import ENDPOINT_SOCKET, RELAY_PYTHON
from harness.sandbox._treebound import TreeCounter
from harness.sandbox.base import (
    DROP_BOX,
    DROP_BOX_MODE,
    IO_MB,
    SANDBOX_IO,
    SANDBOX_WORKSPACE,
    DropBox,
    SealedView,
    lock_plan,
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
FILES_ENV = "HARNESS_DOCKER_FILES"
"""Where sessions keep their files: ``auto`` (default), ``host`` or ``volumes``."""
FILES_MODES = ("auto", "host", "volumes")
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
        files: str | None = None,
        base_dir: Path | str | None = None,
    ) -> None:
        self._client = client if client is not None else connect()
        self.default_image = default_image
        self.run_id = run_id
        self._info: dict[str, Any] | None = None
        self._version: dict[str, Any] | None = None
        files = files or os.environ.get(FILES_ENV) or "auto"
        if files not in FILES_MODES:
            raise ConfigError(
                f"docker: {FILES_ENV}={files!r}: expected one of {', '.join(FILES_MODES)}"
            )
        self.files = files
        """``host``, ``volumes`` or ``auto``: where sessions keep their files (module doc)."""
        self.base_dir = Path(base_dir) if base_dir else Path(tempfile.gettempdir())
        self._user_ids: dict[tuple[str, str | None], tuple[int, int]] = {}

    @property
    def drop_box_owner(self) -> int:
        """Root: commands never run as it, and only root makes a box in either way."""
        return 0

    def host_files(self, image_id: str | None = None) -> bool:
        """Tell whether sessions keep their files in host tmpfs bound in (else volumes).

        ``auto`` asks :func:`~harness.sandbox._docker_host.engine_sees_host` (once per
        engine); ``host`` requires it. An engine that maps users (``userns-remap``, rootless)
        never gets host folders: the uid a command runs as is not the host's, so the files
        the harness hands over would not be the command's.

        Raises:
            SandboxUnavailableError: ``host`` was asked for and the engine cannot see it.
        """
        if self.files == "volumes":
            return False
        if image_id is None:
            with docker_engine("image " + repr(self.default_image), "image_missing"):
                image_id = str(self._client.images.get(self.default_image).id)
        info = self._engine_info()
        options = " ".join(str(o) for o in info.get("SecurityOptions") or ())
        mapped = "name=userns" in options or "name=rootless" in options
        engine = str(info.get("ID", ""))
        seen = not mapped and engine_sees_host(self._client, engine, image_id, self.base_dir)
        if not seen and self.files == "host":
            raise SandboxUnavailableError(
                f"docker: {FILES_ENV}=host, but the engine cannot bind this host's folders "
                "(a remote engine, another mount namespace, an engine that maps users, "
                "or the harness is not root)",
                reason="create_failed",
            )
        return seen

    def _engine_info(self) -> dict[str, Any]:
        if self._info is None:
            with docker_engine("reading engine info", "engine_unreachable"):
                self._info = dict(self._client.info())
        return self._info

    def describe(self) -> Mapping[str, str]:
        """Engine version, API version, cgroup version, default image id, isolation used."""
        with docker_engine("describing the engine", "engine_unreachable"):
            if self._version is None:  # an engine restart ends the run's containers anyway
                self._version = dict(self._client.version())
            ver = self._version
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
            "files": "host tmpfs bound in"
            if image_id != "missing" and self.host_files(image_id)
            else "engine volumes + holder",
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
    ) -> DockerSession | DockerHostSession:
        """Open a session: host tmpfs bound in, or volumes + holder (see the module docstring).

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
        if self.host_files(str(image.id)):
            key = (str(image.id), contract.user)
            if key not in self._user_ids:
                self._user_ids[key] = user_ids(contract.user, image_table(self._client, image.id))
            return open_host_session(
                self._client,
                self.run_id,
                self.base_dir,
                contract,
                str(image.id),
                label,
                skipped,
                dict(image.labels or {}),
                view,
                self._user_ids[key],
            )
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


class DockerSession(CommandContainers):
    """One session on engine volumes: see :class:`DockerSandbox`. Always closed."""

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
        self._start_commands(client, backend.run_id, contract, image_id, label, downgraded, view)
        self._image_labels = image_labels
        self._volumes: list[Any] = []
        self._uid: tuple[int, int] | None = None
        try:
            self._holder, self._holder_started = self._start_holder()
            self._hand_over_workspace()
        except BaseException:
            self.close()
            raise

    # -- lifecycle -------------------------------------------------------------------------
    def _start_holder(self) -> tuple[Any, str]:
        disk = self._contract.disk_mb
        sizes = {_WS: f",size={disk}m" if disk else "", _IO: f",size={IO_MB}m"}
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

    def _alive(self, what: str) -> None:
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

    def close(self) -> None:
        """Remove every container and volume of the session (idempotent, also on error)."""
        self._closed = True
        self._remove_containers()
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

    # -- files -------------------------------------------------------------------------------
    def _owner(self) -> tuple[int, int]:
        """Numeric uid/gid for files we write: the contract's user, resolved in the image."""
        if self._uid is None:
            self._uid = user_ids(
                self._contract.user, lambda table: self.read_file(table, _root_ok=True) or b""
            )
        return self._uid

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
        links: list[tuple[str, str]] = []
        data = pack_tree(src, rel, uid, gid, locked=modes, escaping=links)
        self._put(_WS, data, f"put_tree {src}")
        if links:
            self._make_links(links, uid, gid)
        if not locked:
            return
        # the workspace itself and the folders down to ``dest`` are not the archive's own
        inner = PurePosixPath(dest) if dest else None
        downs = [] if inner is None else [*reversed(inner.parents), inner]
        above = [_WS, *(str(PurePosixPath(_WS) / d) for d in downs if str(d) != ".")]
        self._alive("lock")
        with docker_engine("locking the verifier's files", "transfer_failed"):
            code, out = self._holder.exec_run(
                ["sh", "-c", 'chown 0:0 "$@" && chmod 1777 "$@"', "sh", *above], user="0"
            )
        if code != 0:
            raise SandboxUnavailableError(
                f"docker: could not lock the workspace: {out!r:.300}", reason="transfer_failed"
            )

    def _make_links(self, links: list[tuple[str, str]], uid: int, gid: int) -> None:
        """Make the links the engine refuses in an archive (a relative target climbing out).

        Inside the sandbox they are links like any other: the tree's, as the agent left it.
        A name or target that is no text cannot be passed to a command and is left out.
        """
        args: list[str] = []
        for name, target in links:
            try:
                name.encode(), target.encode()
            except UnicodeEncodeError:
                continue
            args += [target, str(PurePosixPath(_WS) / name)]
        if not args:
            return
        script = (
            'o=$1; shift; while [ $# -gt 1 ]; do ln -s -- "$1" "$2" && chown -h "$o" "$2" '
            "|| exit 1; shift 2; done"
        )
        self._alive("links")
        with docker_engine("making the tree's links", "transfer_failed"):
            code, out = self._holder.exec_run(
                ["sh", "-c", script, "sh", f"{uid}:{gid}", *args], user="0"
            )
        if code != 0:
            raise SandboxUnavailableError(
                f"docker: could not make the tree's links: {out!r:.300}", reason="transfer_failed"
            )

    def _put(self, at: str, data: bytes, what: str) -> None:
        self._alive(what)
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
        self._alive("get_tree")
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
        self._alive(f"read_file {path}")
        try:
            with docker_engine(f"read_file {path}", "transfer_failed"):
                try:
                    stream, _ = self._holder.get_archive(path, chunk_size=1 << 16)
                except docker.errors.APIError as exc:
                    if _unresolvable(exc):  # what the run made of the path: not a file
                        return None
                    raise
                try:  # streamed: at most ``limit`` bytes are kept, whatever the file's size
                    return first_file(stream, limit)
                finally:
                    close = getattr(stream, "close", None)
                    if close is not None:
                        close()
        except SandboxUnavailableError as exc:
            if exc.reason == "container_gone":  # 404 from get_archive: the path is absent
                self._alive(f"read_file {path}")
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
        self._alive(f"read_drop_box {path}")
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
                self._alive(f"read_drop_box {path}")
                return DropBox(odd=("the drop box is gone",))
            raise

    def remove(self, path: str) -> None:
        """Remove a file or tree at ``path`` (inside the holder, via ``rm -rf``)."""
        path = self._inside(path)
        if path in (_WS, _IO):
            cmd = ["find", path, "-mindepth", "1", "-delete"]
        else:
            cmd = ["rm", "-rf", "--", path]
        self._alive(f"remove {path}")
        with docker_engine(f"remove {path}", "transfer_failed"):
            code, out = self._holder.exec_run(cmd, user="0")
        if code != 0:
            raise SandboxUnavailableError(f"docker: remove {path}: {out!r}", reason="exec_failed")


_UNRESOLVABLE = ("file name too long", "too many links", "not a directory")


def _unresolvable(exc: Exception) -> bool:
    """Tell whether the engine could not resolve a path the sandboxed run shaped.

    A folder turned into a link whose target is one name over 255 bytes, or a link loop,
    is the run's doing: the file is not there to read (red team round twenty-five made
    ``reports`` such a link and blocked the gate).
    """
    text = str(getattr(exc, "explanation", "") or exc).lower()
    return getattr(getattr(exc, "response", None), "status_code", None) == 500 and any(
        m in text for m in _UNRESOLVABLE
    )
