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
* :func:`loads_json` refuses nesting deeper than a bound before parsing and replaces lone
  surrogates (valid JSON escapes such as U+D800 that UTF-8 cannot store) with U+FFFD, as
  :func:`storable` does for any string;
* :func:`copy_tree` copies a tree's contents, symlinks and permission bits, nothing else:
  no extended attributes, no set-id bits, times clamped into years 1970-9999, so no
  metadata the agent chose can make the copy fail on the host;
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
import re
import stat
import tarfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any, Literal

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_MTIME",
    "MAX_PATH_BYTES",
    "MAX_TREE_DEPTH",
    "UnreadableEntry",
    "UnsafeArchive",
    "copy_tree",
    "loads_json",
    "read_regular",
    "rmtree",
    "safe_extract",
    "storable",
    "tree_entries",
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

MAX_MTIME = 253_402_300_799
"""The last second of the year 9999: the latest time every tool (tar, JSON dates, the Docker
engine) can carry. A copied time is clamped into ``[0, MAX_MTIME]``."""

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def read_regular(path: str | os.PathLike[str], limit: int | None) -> bytes | None:
    """Read at most ``limit`` bytes of the regular file ``path``; ``None`` for anything else.

    Opened without following a final symlink and without blocking (a FIFO opens at once and
    is then refused by ``fstat``); a missing path, a folder, a FIFO, a socket, a device or a
    symlink all read as ``None``, and so does a path that cannot be resolved (a link loop, a
    folder linked to a name too long). ``limit=None`` reads the whole file (only for files
    the harness itself bounded).
    """
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        if exc.errno in (
            errno.ENOENT,
            errno.ENOTDIR,
            errno.ELOOP,
            errno.EISDIR,
            errno.ENXIO,
            errno.ENAMETOOLONG,  # a folder on the way is a link to one name over 255 bytes
        ):
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


def tree_entries(root: str | os.PathLike[str]) -> list[Path]:
    """Every entry under ``root`` (files, folders, links), sorted, never following a link.

    What ``sorted(Path(root).rglob("*"))`` lists, without its pitfalls on a tree an agent
    made: the walk neither recurses (no depth limit) nor stats a link's target (the 3.11.2
    of Debian bookworm raised ``ENAMETOOLONG`` from ``rglob`` on a link whose target was a
    single 300-byte name: outside red team, round twenty-five).
    """
    found: list[Path] = []
    stack = [os.fspath(root)]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                found.append(Path(entry.path))
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return sorted(found)


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
    if data.count(b"[") + data.count(b"{") <= max_depth:
        return False  # fewer openers than the bound: no nesting can pass it (the usual case)
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
    is refused without recursion (``json`` recurses once per level). Lone surrogates in
    the parsed strings are replaced with U+FFFD (:func:`storable`): what the agent or the
    candidate wrote can always be stored.
    """
    if _json_depth_over(text, max_depth):
        raise ValueError(f"JSON nested deeper than {max_depth} levels")
    try:
        value = json.loads(text, **kwargs)
    except RecursionError as exc:  # a bound above the interpreter's limit: still a ValueError
        raise ValueError("JSON nested too deep to parse") from exc
    return value if _has_no_surrogate(text) else storable(value)  # most skip the walk


_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_no_surrogate(text: str | bytes) -> bool:
    """Tell whether parsing ``text`` surely made no lone surrogate.

    In ASCII, JSON can spell one only as a backslash-u escape (other bytes are decoded with
    ``surrogatepass`` and may carry them); a ``str`` may carry them as they are.
    """
    if isinstance(text, bytes):
        return text.isascii() and b"\\u" not in text
    return "\\u" not in text and _SURROGATE.search(text) is None


def storable(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD.

    JSON may spell a lone surrogate (an escape of U+D800) and a name that is not UTF-8 reaches
    Python as surrogate escapes; neither can be written as UTF-8, so a record holding one
    would not serialise. Strings, lists, tuples and dicts are walked without recursion
    (the nesting is the adversary's); anything else is returned as it is.
    """
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if not isinstance(value, (list, tuple, dict)):
        return value
    fixed: dict[int, Any] = {}

    def one(v: Any) -> Any:
        return fixed[id(v)] if isinstance(v, (list, tuple, dict)) else storable(v)

    todo: list[tuple[Any, bool]] = [(value, False)]
    while todo:
        node, children_done = todo.pop()
        if id(node) in fixed and not children_done:
            continue
        kids = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
        inner = [v for _, v in kids if isinstance(v, (list, tuple, dict))]
        if not children_done:
            todo.append((node, True))
            todo.extend((v, False) for v in inner if id(v) not in fixed)
            continue
        if isinstance(node, dict):
            fixed[id(node)] = {storable(k): one(v) for k, v in kids}
        else:
            fixed[id(node)] = type(node)(one(v) for _, v in kids)
    return fixed[id(value)]


class UnreadableEntry(OSError):
    """An entry of the tree being copied could not be read (the source's side, not the host's).

    ``rel`` is its path relative to the tree's top; the message names it and the cause.
    """

    def __init__(self, rel: str, cause: OSError) -> None:
        super().__init__(cause.errno, f"cannot read {rel!r}: {cause.strerror or cause}")
        self.rel = rel


def _clamped_ns(st: os.stat_result) -> int:
    return min(max(st.st_mtime_ns, 0), MAX_MTIME * 1_000_000_000)


def _clear(path: str, *, keep_dir: bool) -> None:
    """Remove what sits at ``path`` in the destination unless it is a folder to merge into."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        if not keep_dir:
            rmtree(path)
    else:
        os.unlink(path)


def _copy_file(src: str, dst: str, rel: str, st: os.stat_result) -> None:
    try:
        fin = os.open(src, _READ_FLAGS)
    except OSError as exc:
        raise UnreadableEntry(rel, exc) from exc
    try:
        _clear(dst, keep_dir=False)
        fout = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.set_blocking(fin, True)
            while True:
                try:
                    chunk = os.read(fin, 1 << 20)
                except OSError as exc:
                    raise UnreadableEntry(rel, exc) from exc
                if not chunk:
                    break
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fout, view) :]
            os.fchmod(fout, stat.S_IMODE(st.st_mode) & 0o777)
            os.utime(fout, ns=(_clamped_ns(st), _clamped_ns(st)))
        finally:
            os.close(fout)
    finally:
        os.close(fin)


def copy_tree(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Copy the tree ``src`` into ``dst`` (created or merged into), never recursing.

    Copied: the folders, the regular files' contents, symlinks as links (never followed),
    the permission bits (``0o777``: no set-id or sticky bit) and the modification time,
    clamped into ``[0, MAX_MTIME]``. Not copied: extended attributes, ownership, access
    times, FIFOs, sockets and devices. Everything here is what the harness needs and
    nothing the agent could make fail on the host (an 8 KB ``user.*`` attribute a tmpfs
    takes and ext4 refuses, a folder dated in the year 14645). Folders are writable while
    they are filled and get their own mode last.

    Raises:
        UnreadableEntry: an entry of ``src`` could not be read (an ``OSError``).
        OSError: writing ``dst`` failed (e.g. the host's disk is full).

    """
    src, dst = os.fspath(src), os.fspath(dst)
    try:
        top = os.lstat(src)
    except OSError as exc:
        raise UnreadableEntry(".", exc) from exc
    os.makedirs(dst, exist_ok=True)
    os.chmod(dst, 0o700)
    folders: list[tuple[str, os.stat_result]] = [(dst, top)]
    todo = [""]
    while todo:
        rel = todo.pop()
        try:
            with os.scandir(os.path.join(src, rel)) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            raise UnreadableEntry(rel or ".", exc) from exc
        for entry in entries:
            sub = os.path.join(rel, entry.name)
            target = os.path.join(dst, sub)
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                raise UnreadableEntry(sub, exc) from exc
            if stat.S_ISDIR(st.st_mode):
                _clear(target, keep_dir=True)
                os.makedirs(target, mode=0o700, exist_ok=True)
                os.chmod(target, 0o700)
                folders.append((target, st))
                todo.append(sub)
            elif stat.S_ISLNK(st.st_mode):
                try:
                    link = os.readlink(entry.path)
                except OSError as exc:
                    raise UnreadableEntry(sub, exc) from exc
                _clear(target, keep_dir=False)
                os.symlink(link, target)
            elif stat.S_ISREG(st.st_mode):
                _copy_file(entry.path, target, sub, st)
    for path, st in reversed(folders):
        os.chmod(path, stat.S_IMODE(st.st_mode) & 0o777)
        os.utime(path, ns=(_clamped_ns(st), _clamped_ns(st)))


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
    special member, a hard link to anything but an earlier regular or symlink member (a
    hard link to a symlink links the link, never what it points to), a member whose
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
            extracted[rel] = target  # a later hard link to it links the link itself
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
