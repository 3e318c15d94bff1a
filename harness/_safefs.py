"""Bounded, non-blocking file primitives for anything the agent or candidate code wrote.

Every path under a workspace or protocol folder is the adversary's: it may be a FIFO (an
``open`` blocks forever), a socket, a device, a symlink, a 1 GiB sparse file, a folder
1,200 levels deep (Python's recursive helpers raise ``RecursionError``) or a JSON text of
100,000 ``[`` (the same). The helpers here never block, never follow a link, never recurse
and read at most what they are told, so what the agent causes stays the agent's failure:

* :func:`read_regular` reads a bounded prefix of a regular file, opened with
  ``O_NONBLOCK | O_NOFOLLOW`` and checked with ``fstat`` (anything else reads as absent);
* :func:`rmtree` removes a tree of any depth or path length iteratively, never following
  links;
* :func:`loads_json` refuses nesting deeper than a bound before parsing;
* :func:`safe_extract` extracts a tar archive member by member on every Python 3.11
  (``extractall(filter=...)`` needs 3.11.4): no absolute names, no ``..``, no devices or
  FIFOs, no hard link out of the archive, nothing written through a link; a symlink leaving
  the tree is refused or kept as an inert link (never followed), as the caller chooses.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tarfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any, Literal

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_PATH_BYTES",
    "MAX_TREE_DEPTH",
    "UnsafeArchive",
    "loads_json",
    "read_regular",
    "rmtree",
    "safe_extract",
]

MAX_TREE_DEPTH = 128
"""Deepest folder nesting a candidate tree may have (the workspace's top level is depth 1).

Far above real repositories, far below Python's recursion limit (1,000), which
``shutil.copytree``, ``Path.rglob`` and ``os.walk`` of 3.11 spend one or two frames per
level of."""

MAX_PATH_BYTES = 1024
"""Longest path a candidate tree may hold, in bytes, relative to the workspace.

Far above real repositories, far below ``PATH_MAX`` (4,096 on Linux) once a host folder
(``/tmp/harness-...``) or the sandbox's ``/workspace`` is put in front of it: every copy,
tar and walk of the tree on either backend handles it."""

MAX_JSON_DEPTH = 200
"""Deepest nesting of arrays and objects accepted in JSON the agent or candidate controls."""

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def read_regular(path: str | os.PathLike[str], limit: int | None) -> bytes | None:
    """Read at most ``limit`` bytes of the regular file ``path``; ``None`` for anything else.

    Opened without following a final symlink and without blocking (a FIFO opens at once and
    is then refused by ``fstat``); a missing path, a folder, a FIFO, a socket, a device or a
    symlink all read as ``None``. ``limit=None`` reads the whole file (only for files the
    harness itself bounded).
    """
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EISDIR, errno.ENXIO):
            return None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        left = limit
        while left is None or left > 0:
            chunk = os.read(fd, 1 << 20 if left is None else min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            if left is not None:
                left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_SHORT_PATH = 3072  # bytes: named whole below this, one folder at a time above (PATH_MAX)


def _open_dir(path: str) -> int:
    """Open the folder ``path`` of any length, never following a link in its long tail.

    A path under :data:`_SHORT_PATH` bytes is opened whole; a longer one (a command can
    nest folders past ``PATH_MAX``, which no call accepts whole) from its longest short
    ancestor, then one folder at a time relative to the last.
    """
    if len(os.fsencode(path)) < _SHORT_PATH:
        return os.open(path, _DIR_FLAGS)
    head, tail = path, []
    while len(os.fsencode(head)) >= _SHORT_PATH:
        head, name = os.path.split(head)
        tail.append(name)
    fd = os.open(head, _DIR_FLAGS)
    try:
        for name in reversed(tail):
            below = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = below
    except BaseException:
        os.close(fd)
        raise
    return fd


def rmtree(path: str | os.PathLike[str]) -> None:
    """Remove ``path`` and everything below it, at any depth, never following a link.

    Iterative (no ``RecursionError`` on a 1,200-deep folder) and relative to an open
    folder (a path longer than ``PATH_MAX`` goes too); errors are ignored, like
    ``shutil.rmtree(ignore_errors=True)``: what cannot be removed stays.
    """
    top = os.fspath(path)
    try:
        if not stat.S_ISDIR(os.lstat(top).st_mode):
            os.unlink(top)
            return
    except OSError:
        return
    # Depth-first, post-order: a folder is removed after its entries.
    stack: list[tuple[str, bool]] = [(top, False)]
    while stack:
        d, listed = stack.pop()
        if listed:
            with contextlib.suppress(OSError):
                if d == top:
                    os.rmdir(d)
                else:
                    parent = _open_dir(os.path.dirname(d))
                    try:
                        os.rmdir(os.path.basename(d), dir_fd=parent)
                    finally:
                        os.close(parent)
            continue
        stack.append((d, True))
        try:
            fd = _open_dir(d)
        except OSError:
            continue
        try:
            with os.scandir(fd) as it:
                entries = list(it)
            for entry in entries:
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    is_dir = False
                if is_dir:
                    stack.append((os.path.join(d, entry.name), False))
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.name, dir_fd=fd)
        except OSError:
            continue
        finally:
            os.close(fd)


def tree_too_deep(root: str | os.PathLike[str], max_depth: int = MAX_TREE_DEPTH) -> int | None:
    """Return a depth over ``max_depth`` found under ``root`` (links unfollowed), else ``None``."""
    stack = [(os.fspath(root), 0)]
    while stack:
        d, depth = stack.pop()
        try:
            with os.scandir(d) as it:
                for entry in it:
                    if entry.is_dir(follow_symlinks=False):
                        if depth + 1 > max_depth:
                            return depth + 1
                        stack.append((entry.path, depth + 1))
        except OSError:
            continue
    return None


def _json_depth_over(text: str | bytes, max_depth: int) -> bool:
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    depth, in_str, escaped = 0, False, False
    for byte in data:
        if in_str:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_str = False
        elif byte == 0x22:
            in_str = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > max_depth:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False


def loads_json(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH, **kwargs: Any) -> Any:
    """``json.loads`` that refuses nesting deeper than ``max_depth`` with a ``ValueError``.

    The depth is counted in one linear pass before parsing, so a document of 100,000 ``[``
    is refused without recursion (``json`` recurses once per level).
    """
    if _json_depth_over(text, max_depth):
        raise ValueError(f"JSON nested deeper than {max_depth} levels")
    try:
        return json.loads(text, **kwargs)
    except RecursionError as exc:  # a bound above the interpreter's limit: still a ValueError
        raise ValueError("JSON nested too deep to parse") from exc


class UnsafeArchive(ValueError):
    """An archive member that cannot be extracted safely (the message names it)."""


def _norm_name(name: str) -> str | None:
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts:
        return None
    parts = [x for x in p.parts if x not in ("", ".")]
    return "/".join(parts)


def _link_leaves(rel: str, target: str) -> bool:
    if os.path.isabs(target):
        return True
    joined = os.path.normpath(os.path.join(os.path.dirname(rel), target))
    return joined == ".." or joined.startswith("../")


def _real_parent(dest: Path, rel: str) -> Path:
    """Create ``rel``'s parent folders under ``dest``; refuse one that is not a real folder."""
    cur = dest
    for part in rel.split("/")[:-1]:
        cur = cur / part
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            os.mkdir(cur, 0o755)
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafeArchive(f"archive member {rel!r} would be written through {part!r}")
    return cur


def safe_extract(
    tar: tarfile.TarFile,
    dest: Path,
    members: Iterable[tarfile.TarInfo] | None = None,
    *,
    outside_links: Literal["refuse", "keep"] = "refuse",
    max_depth: int | None = None,
) -> None:
    """Extract ``members`` (default: all) of ``tar`` into ``dest``, safely on any 3.11.

    Regular files, folders, symlinks and hard links only. Refused with
    :class:`UnsafeArchive`: an absolute name or one with ``..``, a device, FIFO or other
    special member, a hard link to anything but an earlier regular member, a member whose
    parent is not a real folder (nothing is written through a link), a folder deeper than
    ``max_depth``. A symlink whose target leaves ``dest`` is refused, or with
    ``outside_links="keep"`` created as an inert link (no later member is written through
    it and the harness never follows it). Modes keep the permission bits only (no set-uid,
    set-gid or sticky bit, no group/other write); owners are not restored.
    """
    dest.mkdir(parents=True, exist_ok=True)
    extracted: dict[str, Path] = {}
    for m in tar.getmembers() if members is None else members:
        rel = _norm_name(m.name)
        if rel is None:
            raise UnsafeArchive(f"archive member {m.name!r} has an absolute name or '..'")
        if not rel:
            continue
        if max_depth is not None and rel.count("/") + 1 > max_depth:
            raise UnsafeArchive(f"archive member {m.name[:200]!r} is over {max_depth} deep")
        parent = _real_parent(dest, rel)
        target = parent / rel.rsplit("/", 1)[-1]
        with contextlib.suppress(FileNotFoundError):
            st = os.lstat(target)
            if stat.S_ISDIR(st.st_mode) and m.isdir():
                continue
            if stat.S_ISDIR(st.st_mode):
                rmtree(target)
            else:
                os.unlink(target)
        mode = (m.mode or 0o644) & 0o755
        if m.isdir():
            os.mkdir(target, mode | 0o700)
        elif m.issym():
            if _link_leaves(rel, m.linkname) and outside_links == "refuse":
                raise UnsafeArchive(f"symlink {m.name!r} -> {m.linkname!r} leaves the tree")
            os.symlink(m.linkname, target)
        elif m.islnk():
            src = extracted.get(_norm_name(m.linkname) or "\0")
            if src is None:
                raise UnsafeArchive(f"hard link {m.name!r} -> {m.linkname!r} is not in the tree")
            os.link(src, target, follow_symlinks=False)
        elif m.isreg():
            fh = tar.extractfile(m)
            if fh is None:
                raise UnsafeArchive(f"archive member {m.name!r} has no data")
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out:
                while chunk := fh.read(1 << 20):
                    out.write(chunk)
            os.chmod(target, mode)
            extracted[rel] = target
        else:
            raise UnsafeArchive(f"archive member {m.name!r} is a device, FIFO or other special")
