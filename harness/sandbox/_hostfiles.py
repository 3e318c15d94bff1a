"""The session files of a backend whose workspace is a folder on the harness's own host.

:class:`HostFiles` is what the local backend's sessions and the Docker backend's sessions on
a local engine (:class:`harness.sandbox.docker.DockerHostSession`) share: the workspace and
io folder are host folders (``_host``) that commands see at sandbox paths (``_paths``), and
every file operation of :class:`~harness.sandbox.base.SandboxSession` is done by the harness
directly on them: never following a link out of the session, never opening anything but a
regular file or a folder, handing what it writes to the sandbox's user.

Path arguments are sandbox paths (``paths.workspace``/``paths.io`` and below); a path
outside them is a programming error and raises :class:`ValueError`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path

from harness._safefs import UnreadableEntry, copy_tree, read_regular, rmtree
from harness.errors import CandidateTooLarge, SandboxUnavailableError
from harness.sandbox._dropbox import make_host_box, read_host_box
from harness.sandbox._treebound import check_host_tree
from harness.sandbox.base import DropBox, SandboxPaths, lock_plan

__all__ = ["HostFiles", "chown_tree", "no_space", "why"]


def chown_tree(top: Path, uid: int, gid: int) -> None:
    """Hand ``top`` and everything under it to ``uid``:``gid`` (links never followed)."""
    os.lchown(top, uid, gid)
    for dirpath, dirnames, filenames in os.walk(top):
        for name in (*dirnames, *filenames):
            os.lchown(os.path.join(dirpath, name), uid, gid)


def no_space(exc: OSError | shutil.Error) -> bool:
    """Tell whether a failed copy ran out of space (``copytree`` gathers its errors)."""
    if isinstance(exc, OSError) and not isinstance(exc, shutil.Error):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return any(
        isinstance(e, tuple) and len(e) == 3 and "No space left" in str(e[2]) for e in exc.args[0]
    )


def why(exc: OSError | shutil.Error) -> str:
    """Name the cause of a failed copy without the host paths it holds."""
    if isinstance(exc, OSError) and not isinstance(exc, shutil.Error) and exc.strerror:
        return exc.strerror
    return type(exc).__name__


class HostFiles:
    """File operations of a session whose workspace and io folder are host folders.

    A subclass sets, before any call: ``label``; ``_root`` (the session folder, which
    every path must resolve inside); ``_host`` (``{"workspace": Path, "io": Path}``);
    ``_paths`` (where commands see them); ``_owner_ids`` (the uid/gid the sandboxed user
    runs as, to hand written files to, or ``None`` when it is the harness's own user);
    ``_tmpfs_disk`` (the workspace is a sized tmpfs, so ``ENOSPC`` is the disk bound);
    ``_what`` (the backend's name in messages).
    """

    label: str
    _root: Path
    _host: dict[str, Path]
    _paths: SandboxPaths
    _owner_ids: tuple[int, int] | None
    _tmpfs_disk: bool
    _what: str

    # -- files ---------------------------------------------------------------------------

    def _inside(self, path: str) -> Path:
        """Map a sandbox path (``paths.workspace``/``paths.io`` and below) to the host."""
        p = Path(os.path.normpath(path))
        if p.is_absolute():
            for key, inner in (("workspace", self._paths.workspace), ("io", self._paths.io)):
                top = Path(inner)
                if p == top or top in p.parents:
                    return self._host[key] / p.relative_to(top)
        raise ValueError(f"path {path!r} is not under {self._paths.workspace} or {self._paths.io}")

    def _sandbox_path(self, host: Path) -> str:
        """Invert :meth:`_inside`: where a host path of the session appears."""
        for key, inner in (("workspace", self._paths.workspace), ("io", self._paths.io)):
            top = self._host[key]
            if host == top or top in host.parents:
                return str(Path(inner) / host.relative_to(top))
        raise ValueError(f"{host} is not in the workspace or io folder of {self._root}")

    def _own(self, path: Path, *, tree: bool = False) -> None:
        """Give what the harness wrote to the sandbox uid, so the command may change it."""
        if self._owner_ids is None:
            return
        if tree:
            chown_tree(path, *self._owner_ids)
        else:
            os.lchown(path, *self._owner_ids)

    def _lock_entries(self, dest: str, locked: Sequence[str]) -> None:
        files, folders = lock_plan(dest, locked)
        ws = self._host["workspace"]
        for rel, mode in [*((f, 0o644) for f in files), *((d, 0o1777) for d in folders)]:
            path = ws / rel if rel else ws
            if mode == 0o644 and path.is_dir() and not path.is_symlink():
                mode = 0o755
            elif mode == 0o644 and os.lstat(path).st_mode & 0o111:
                mode = 0o755  # a script stays runnable
            if not self._resolves_inside(path) or (rel and path.is_symlink()):
                raise SandboxUnavailableError(
                    f"{self._what} {self.label}: cannot lock {rel!r}: not inside the workspace",
                    reason="infra",
                )
            if self._owner_ids is not None:
                os.lchown(path, 0, 0)
            os.chmod(path, mode)

    def _resolves_inside(self, p: Path) -> bool:
        real, root = os.path.realpath(p), os.path.realpath(self._root)
        return real == root or real.startswith(root + os.sep)

    def put_tree(self, src: Path, dest: str = "", *, locked: Sequence[str] = ()) -> None:
        """Copy host dir ``src`` into the workspace at ``dest``, keeping modes and symlinks.

        ``locked`` files end owned by root, read-only, in root-owned sticky folders
        (:func:`~harness.sandbox.base.lock_plan`); run without root, the modes are set but
        the sandboxed user (the same user) could change them back.

        Raises:
            SandboxUnavailableError: the copy failed (missing source, disk full, ...).

        """
        target = self._inside(os.path.join(self._paths.workspace, dest))
        try:
            # An existing folder is the session's: its mode is never the tree's (an agent's
            # ``chmod 000`` of its workspace must not lock the next session out of its own).
            st = os.lstat(target) if os.path.isdir(target) else None
            copy_tree(src, target)  # contents, links and modes: never the tree's xattrs
            if st is not None and not stat.S_ISLNK(st.st_mode):
                os.chmod(target, stat.S_IMODE(st.st_mode))
            self._own(target, tree=True)
            self._lock_entries(dest, locked)
        except (OSError, shutil.Error) as exc:
            full = no_space(exc) and self._tmpfs_disk
            raise SandboxUnavailableError(
                f"{self._what} {self.label}: could not copy a tree into the workspace "
                f"at {dest or '.'!r}: {'the disk bound is full' if full else why(exc)}",
                reason="disk_full" if full else "infra",
            ) from exc

    def get_tree(
        self, dest: Path, *, max_files: int | None = None, max_bytes: int | None = None
    ) -> None:
        """Copy the workspace out to ``dest`` (symlinks copied as links, never followed).

        Fifos, sockets and device nodes cannot be part of a tree snapshot and are skipped.

        Raises:
            SandboxUnavailableError: the copy failed.
            CandidateTooLarge: the workspace is over ``max_files`` or ``max_bytes``.

        """
        check_host_tree(str(self._host["workspace"]), max_files, max_bytes)
        try:
            # contents, links, modes and clamped times: no metadata the agent set (xattrs,
            # set-id bits, a date past 9999) travels, so none can fail the copy on the host
            copy_tree(self._host["workspace"], dest)
        except UnreadableEntry as exc:  # the agent made it unreadable: its tree's fault
            raise CandidateTooLarge(
                f"the workspace cannot be copied: {exc.strerror}",
                kind="unreadable",
                limit=0,
                observed=1,
            ) from exc
        except OSError as exc:
            raise SandboxUnavailableError(
                f"{self._what} {self.label}: could not copy the workspace out: {why(exc)}"
            ) from exc

    def write_file(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path``, creating parents; a symlink there is replaced.

        Raises:
            ValueError: ``path`` is outside the session or its parent resolves outside.
            SandboxUnavailableError: the write failed (e.g. disk bound reached).

        """
        p = self._inside(path)
        try:
            missing = [d for d in (p.parent, *p.parent.parents) if not d.exists()]
            p.parent.mkdir(parents=True, exist_ok=True)
            if not self._resolves_inside(p.parent):
                raise ValueError(f"parent of {path!r} resolves outside the sandbox session")
            if p.is_symlink():
                p.unlink()
            p.write_bytes(data)
            for d in (p, *missing):
                self._own(d)
        except OSError as exc:
            raise SandboxUnavailableError(
                f"{self._what} {self.label}: could not write {path}: {exc}"
            ) from exc

    def read_file(self, path: str, limit: int | None = None) -> bytes | None:
        """Read up to ``limit`` bytes of a regular file; ``None`` for anything else.

        ``None`` when absent, not a regular file (a FIFO, a socket, a device, a symlink:
        never opened blocking) or when its folder resolves outside the session.
        """
        p = self._inside(path)
        if not self._resolves_inside(p.parent):
            return None
        return read_regular(p, limit)

    def make_drop_box(self, path: str) -> None:
        """Create a drop box at ``path``: see :meth:`SandboxSession.make_drop_box`.

        Raises:
            SandboxUnavailableError: the folder could not be made.
        """
        p = self._inside(path)
        try:
            if not self._resolves_inside(p.parent):
                raise ValueError(f"parent of {path!r} resolves outside the sandbox session")
            make_host_box(p, 0 if self._owner_ids is not None else None)
        except (OSError, ValueError) as exc:
            raise SandboxUnavailableError(
                f"{self._what} {self.label}: could not make the drop box {path}: {exc}"
            ) from exc

    def read_drop_box(self, path: str, *, max_files: int, max_bytes: int) -> DropBox:
        """Read a drop box back: see :meth:`SandboxSession.read_drop_box`."""
        p = self._inside(path)
        if not self._resolves_inside(p.parent):
            return DropBox(odd=("the drop box's folder was replaced by a link",))
        owner = 0 if self._owner_ids is not None else os.geteuid()
        return read_host_box(p, owner=owner, max_files=max_files, max_bytes=max_bytes)

    def remove(self, path: str) -> None:
        """Remove the file, symlink or tree at ``path`` (a symlink itself, not its target)."""
        p = self._inside(path)
        if not self._resolves_inside(p.parent):
            raise ValueError(f"parent of {path!r} resolves outside the sandbox session")
        if p.is_dir() and not p.is_symlink():
            rmtree(p)
        else:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
