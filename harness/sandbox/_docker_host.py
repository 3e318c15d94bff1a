"""Docker sessions on an engine of this host: the session's folders are host tmpfs, bound in.

When the engine runs on the harness's own host and sees its mounts (checked once per engine
by :func:`engine_sees_host`) and the harness may mount (root), a session needs no holder
container and no volume. Its folder (``<tmp>/harness-docker-<label>-p<pid>-XXXXXXXX``, mode
0700, itself a small tmpfs) holds two sized tmpfs: the workspace (``disk_mb``) and the
protocol folder (16 MiB), owned by the command's user. Every command container binds them
at ``/workspace`` and ``/harness/io`` and the view's sources read-only at their targets; the
harness reads and writes the files directly (:class:`~harness.sandbox._hostfiles.HostFiles`,
the local backend's code: never following a link, never opening anything but a regular
file). A command costs one container, as a plain ``docker run`` does; nothing travels as a
tar archive through the engine's API.

Everything else is the Docker backend's: the same command containers and bounds
(:class:`~harness.sandbox._docker_exec.CommandContainers`), the same evidence. A session
folder left by a killed run is an orphan :func:`harness.sandbox.prune.prune_local` removes
(its pid is in the name; unmounting the session folder detaches the two inside it).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import secrets
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness._safefs import copy_tree, rmtree
from harness.cases.model import PhaseContract
from harness.errors import SandboxUnavailableError
from harness.sandbox._docker_engine import (
    ENGINE_ERRORS,
    LABEL,
    SEED_LABEL,
    docker_engine,
    owner_labels,
)
from harness.sandbox._docker_exec import CommandContainers
from harness.sandbox._docker_io import first_file, unpack_tree
from harness.sandbox._docker_sdk import docker
from harness.sandbox._host import mount_tmpfs, umount
from harness.sandbox._hostfiles import HostFiles, chown_tree
from harness.sandbox._relay import ENDPOINT_SOCKET
from harness.sandbox.base import IO_MB, SANDBOX_IO, SANDBOX_WORKSPACE, SandboxPaths, SealedView
from harness.sandbox.owner import owned_prefix

__all__ = [
    "DockerHostSession",
    "engine_sees_host",
    "image_table",
    "open_host_session",
]

_ROOT_MB = 1
_seen: dict[tuple[str, str], bool] = {}
_seen_lock = threading.Lock()


def _local_engine() -> bool:
    host = os.environ.get("DOCKER_HOST", "")
    return os.geteuid() == 0 and (not host or host.startswith("unix://"))


def engine_sees_host(client: Any, engine_id: str, image_id: str, base: Path) -> bool:
    """Tell whether the engine sees a tmpfs this process mounts under ``base`` (cached).

    ``False`` without asking the engine when the harness is not root or ``DOCKER_HOST``
    names a remote engine. Otherwise a container of ``image_id`` is created (never
    started) with a fresh tmpfs of ours bound in, holding a random token, and the token is
    read back through the engine: an engine in another mount namespace (a VM, a private
    ``/tmp``) sees an empty folder there and the answer is ``False``.
    """
    if not _local_engine():
        return False
    key = (engine_id, str(base))
    with _seen_lock:
        if key in _seen:
            return _seen[key]
        _seen[key] = answer = _probe(client, image_id, base)
        return answer


@contextlib.contextmanager
def _unstarted(
    client: Any, image_id: str, role: str, mounts: list[Any] | None = None
) -> Iterator[Any]:
    """Yield a container of ``image_id`` to read files through: never started, then removed."""
    ctr = client.containers.create(
        image_id,
        ["true"],
        labels={LABEL: "1", "harness.role": role, **owner_labels()},
        mounts=mounts or [],
        network_mode="none",
    )
    try:
        yield ctr
    finally:
        with contextlib.suppress(*ENGINE_ERRORS):
            ctr.remove(force=True)


def _probe(client: Any, image_id: str, base: Path) -> bool:
    token = secrets.token_hex(16).encode()
    try:
        base.mkdir(parents=True, exist_ok=True)
        root = Path(tempfile.mkdtemp(prefix=owned_prefix("docker-probe"), dir=base))
    except OSError:
        return False
    bind = docker.types.Mount("/harness-probe", str(root), type="bind", read_only=True)
    try:
        mount_tmpfs(root, _ROOT_MB)
        (root / "token").write_bytes(token)
        with _unstarted(client, image_id, "probe", [bind]) as ctr:
            stream, _ = ctr.get_archive("/harness-probe/token")
            return first_file(stream, 64) == token
    except (OSError, *ENGINE_ERRORS):
        return False
    finally:
        umount(root)
        rmtree(root)


def image_table(client: Any, image_id: str) -> Callable[[str], bytes]:
    """Read files of the image (``/etc/passwd``, …) from a created, never started container."""

    def read(path: str) -> bytes:
        with (
            docker_engine(f"reading {path} of image {image_id}", "transfer_failed"),
            _unstarted(client, image_id, "probe") as ctr,
        ):
            try:
                stream, _ = ctr.get_archive(path, chunk_size=1 << 16)
            except docker.errors.NotFound:
                return b""
            return first_file(stream, 1 << 20) or b""

    return read


_seeds: dict[tuple[str, str], Path] = {}
_seed_top: list[Path] = []
_seeds_lock = threading.Lock()


def seed_tree(client: Any, image_id: str, seed: str, base: Path) -> Path:
    """Return the host copy of image ``image_id``'s ``seed`` folder, read once per process.

    An image's content never changes under its id, so the folder is read from a created,
    never started container the first time and kept in a folder of this process
    (``<base>/harness-docker-seeds-p<pid>-…``, mode 0700: removed at exit, or by
    :func:`harness.sandbox.prune.prune_local` once the process is gone).

    Raises:
        SandboxUnavailableError: the engine could not give the folder.
    """
    with _seeds_lock:
        key = (image_id, seed)
        if key in _seeds:
            return _seeds[key]
        if not _seed_top:
            base.mkdir(parents=True, exist_ok=True)
            top = Path(tempfile.mkdtemp(prefix=owned_prefix("docker-seeds"), dir=base))
            atexit.register(rmtree, top)
            _seed_top.append(top)
        dest = Path(tempfile.mkdtemp(dir=_seed_top[0])) / "seed"
        with (
            docker_engine(f"seeding the workspace from {seed}", "seed_failed"),
            _unstarted(client, image_id, "seed") as ctr,
        ):
            stream, _ = ctr.get_archive(seed, chunk_size=1 << 20)
            unpack_tree(stream, dest)
        _seeds[key] = dest
        return dest


def open_host_session(
    client: Any,
    run_id: str,
    base: Path,
    contract: PhaseContract,
    image_id: str,
    label: str,
    downgraded: tuple[str, ...],
    image_labels: dict[str, str],
    view: SealedView | None,
    owner_ids: tuple[int, int],
) -> DockerHostSession:
    """Make the session's folder and its two tmpfs, seed the workspace, return the session.

    Raises:
        SandboxUnavailableError: the folder, a mount or the seed could not be made.
    """
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-")[:40] or "session"
    try:
        base.mkdir(parents=True, exist_ok=True)
        made = tempfile.mkdtemp(prefix=owned_prefix(f"docker-{safe}"), dir=base)
        root = Path(os.path.realpath(made))
    except OSError as exc:
        raise SandboxUnavailableError(
            f"docker: cannot create a session folder under {base}: {exc}", reason="create_failed"
        ) from exc
    try:
        mount_tmpfs(root, _ROOT_MB)
        for sub, size in (("workspace", contract.disk_mb), ("io", IO_MB)):
            (root / sub).mkdir(mode=0o700)
            mount_tmpfs(root / sub, size)
            os.chown(root / sub, *owner_ids)
            os.chmod(root / sub, 0o755)
    except OSError as exc:
        umount(root)
        shutil.rmtree(root, ignore_errors=True)
        raise SandboxUnavailableError(
            f"docker: cannot prepare session folder {root}: {exc}", reason="create_failed"
        ) from exc
    session = DockerHostSession(
        client, run_id, contract, image_id, label, downgraded, view, root, owner_ids
    )
    try:
        seed = image_labels.get(SEED_LABEL)
        if seed:
            session.seed(seed, base)
    except BaseException:
        session.close()
        raise
    return session


class DockerHostSession(HostFiles, CommandContainers):
    """A Docker session whose workspace and io folder are host tmpfs bound into commands."""

    def __init__(
        self,
        client: Any,
        run_id: str,
        contract: PhaseContract,
        image_id: str,
        label: str,
        downgraded: tuple[str, ...],
        view: SealedView | None,
        root: Path,
        owner_ids: tuple[int, int],
    ) -> None:
        self._start_commands(client, run_id, contract, image_id, label, downgraded, view)
        self.label = label
        self._what = "docker session"
        self._root = root
        self._host = {"workspace": root / "workspace", "io": root / "io"}
        self._paths = SandboxPaths(workspace=SANDBOX_WORKSPACE, io=SANDBOX_IO)
        self._owner_ids = owner_ids
        self._tmpfs_disk = contract.disk_mb is not None
        self._mounts = [
            docker.types.Mount(SANDBOX_WORKSPACE, str(self._host["workspace"]), type="bind"),
            docker.types.Mount(SANDBOX_IO, str(self._host["io"]), type="bind"),
            *(
                docker.types.Mount(m.target, m.source, type="bind", read_only=True)
                for m in (view.mounts if view is not None else ())
            ),
        ]
        if view is not None and view.endpoint is not None:
            self._mounts.append(
                docker.types.Mount(ENDPOINT_SOCKET, view.endpoint, type="bind", read_only=True)
            )
        self._close_lock = threading.Lock()

    def seed(self, seed: str, base: Path) -> None:
        """Copy the image's ``seed`` folder into the workspace (see :func:`seed_tree`).

        Raises:
            SandboxUnavailableError: the engine could not give the folder, or the copy failed.
        """
        ws = self._host["workspace"]
        try:
            copy_tree(seed_tree(self._client, self._image_id, seed, base), ws)
        except OSError as exc:
            raise SandboxUnavailableError(
                f"docker: seeding the workspace from the image's {seed} failed: {exc.strerror}",
                reason="seed_failed",
            ) from exc
        if self._owner_ids is not None:
            chown_tree(ws, *self._owner_ids)
        os.chmod(ws, 0o755)

    def _alive(self, what: str) -> None:
        if self._closed:
            raise SandboxUnavailableError(f"docker: {what}: session is closed", reason="closed")

    def close(self) -> None:
        """Remove the session's containers, then its folder and mounts (idempotent)."""
        with self._close_lock:
            if self._closed and not self._root.exists():
                return
            self._closed = True
        self._remove_containers()
        umount(self._root)  # lazily detaches the workspace and io tmpfs inside it too
        rmtree(self._root)

    def __enter__(self) -> DockerHostSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
