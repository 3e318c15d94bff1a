"""Byte plumbing of the Docker backend: the attach-stream reader and the tar archives.

:class:`Capture` demultiplexes a command container's attach socket (the engine's 8-byte
frame headers) keeping the head of stdout and stderr. The ``pack_*`` / ``unpack_tree`` /
``first_file`` helpers build and read the tar archives that ``put_archive`` and
``get_archive`` move between the host and a session's holder container; extraction is
:func:`harness._safefs.safe_extract` (no set-uid/set-gid bits, nothing out of the tree).
"""

from __future__ import annotations

import contextlib
import io
import os
import posixpath
import tarfile
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from harness._safefs import safe_extract, tree_entries
from harness.sandbox._treebound import TreeCounter
from harness.sandbox.base import DROP_BOX_MODE


class Capture:
    """Demultiplex the engine's attach stream, keeping the head of each stream."""

    def __init__(self, raw: Any, cap: int, wrapper: Any) -> None:
        self._raw, self._cap, self._wrapper = raw, cap, wrapper
        self.out, self.err = bytearray(), bytearray()
        self.totals = {1: 0, 2: 0}
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def close(self) -> None:
        for obj in (getattr(self._wrapper, "_response", None), self._wrapper, self._raw):
            if obj is not None:
                with contextlib.suppress(OSError, AttributeError, ValueError):
                    obj.close()

    def _read(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            got = self._raw.recv(min(n - len(chunks), 1 << 16))
            if not got:
                break
            chunks += got
        return bytes(chunks)

    def _loop(self) -> None:
        with contextlib.suppress(OSError):
            while len(head := self._read(8)) == 8:
                kind, size = head[0], int.from_bytes(head[4:8], "big")
                payload = self._read(size)
                if kind not in (1, 2):
                    continue
                buf = self.out if kind == 1 else self.err
                self.totals[kind] += len(payload)
                room = self._cap - len(buf)
                if room > 0:
                    buf += payload[:room]


def _add_parents(tar: tarfile.TarFile, rel: PurePosixPath, uid: int, gid: int) -> None:
    for parent in reversed([p for p in (rel, *rel.parents) if str(p) not in ("", ".")]):
        info = tarfile.TarInfo(str(parent))
        info.type, info.mode, info.uid, info.gid = tarfile.DIRTYPE, 0o755, uid, gid
        info.mtime = int(time.time())
        tar.addfile(info)


def pack_tree(
    src: Path,
    rel: PurePosixPath,
    uid: int,
    gid: int,
    *,
    locked: Mapping[str, int] | None = None,
    escaping: list[tuple[str, str]] | None = None,
) -> bytes:
    """Tar host directory ``src`` as ``rel`` (parents included), owned by ``uid:gid``.

    ``escaping``: where a relative symlink that climbs out of the archive's folder goes
    instead of the archive, as ``(name, target)`` (the engine refuses such a member; the
    caller makes the link itself). Without it such links are sent.

    ``locked``: entries (relative to ``src``) owned by root instead, with the given mode.
    A hard link is sent as a copy of its file, as the local backend's copy makes it: no
    path of the tree is lost, and no locked file shares its inode (and owner) with one
    that is not.
    """
    buf = io.BytesIO()
    locked = locked or {}
    with tarfile.open(fileobj=buf, mode="w") as tar:
        _add_parents(tar, rel, uid, gid)
        for entry in tree_entries(src):
            inner = entry.relative_to(src).as_posix()
            info = tar.gettarinfo(str(entry), str(rel / inner))
            if info.islnk():  # every path on its own: a copy, never a hard-link member
                info.type, info.linkname, info.size = tarfile.REGTYPE, "", entry.lstat().st_size
            info.uid, info.gid, info.uname, info.gname = uid, gid, "", ""
            if inner in locked and not info.issym():
                mode = locked[inner]
                info.uid, info.gid = 0, 0
                runnable = info.isdir() or (info.isreg() and info.mode & 0o111)
                info.mode = 0o755 if runnable and mode == 0o644 else mode  # a script stays runnable
            if info.isreg():
                with entry.open("rb") as fh:
                    tar.addfile(info, fh)
            elif info.issym() and escaping is not None and _climbs_out(info):
                escaping.append((info.name, info.linkname))
            elif info.isdir() or info.issym():
                tar.addfile(info)
    return buf.getvalue()


def _climbs_out(info: tarfile.TarInfo) -> bool:
    """Tell whether a relative link's target leaves the folder the archive is put into."""
    if info.linkname.startswith("/"):
        return False
    target = posixpath.normpath(posixpath.join(posixpath.dirname(info.name), info.linkname))
    return target == ".." or target.startswith("../")


def pack_box(rel: PurePosixPath, uid: int, gid: int) -> bytes:
    """Tar one root-owned drop-box folder ``rel`` (parents ``uid``:``gid``, as written)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        _add_parents(tar, rel.parent, uid, gid)
        info = tarfile.TarInfo(str(rel))
        info.type, info.mode, info.uid, info.gid, info.mtime = (
            tarfile.DIRTYPE,
            DROP_BOX_MODE,
            0,
            0,
            int(time.time()),
        )
        tar.addfile(info)
    return buf.getvalue()


def pack_file(rel: PurePosixPath, data: bytes, uid: int, gid: int) -> bytes:
    """Tar one regular file ``rel`` (mode 0644, parents included) holding ``data``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        _add_parents(tar, rel.parent, uid, gid)
        info = tarfile.TarInfo(str(rel))
        info.size, info.mode, info.uid, info.gid, info.mtime = (
            len(data),
            0o644,
            uid,
            gid,
            int(time.time()),
        )
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class _StreamReader(io.RawIOBase):
    """A file object over the engine's chunk iterator that keeps what it read (if ``keep``)."""

    def __init__(self, chunks: Iterable[bytes], *, keep: bool = True) -> None:
        self._it, self._buf = iter(chunks), memoryview(b"")
        self.seen: list[bytes] = []
        self._keep = keep

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not len(self._buf):
            try:
                chunk = next(self._it)
            except StopIteration:
                return 0
            if self._keep:
                self.seen.append(chunk)
            self._buf = memoryview(chunk)
        n = min(len(b), len(self._buf))
        b[:n], self._buf = self._buf[:n], self._buf[n:]
        return n


def unpack_tree(
    data: bytes | Iterable[bytes], dest: Path, counter: TreeCounter | None = None
) -> None:
    """Extract a ``get_archive`` of a folder into ``dest``, dropping its top component.

    The archive is first read as a stream, member headers only: ``counter`` sees every
    member, so an archive over its bound stops there, before anything is extracted (the
    extraction, not the transfer, is what costs). A hard link counts the full size of its
    file, as :func:`~harness.sandbox._treebound.check_host_tree` counts every path of it:
    each later step (the digest, the diff, the copies) reads the tree path by path, so a
    thousand links to one file cost what a thousand copies would. A folder deeper than
    :data:`~harness._safefs.MAX_TREE_DEPTH` stops it too, with or without ``counter``.
    A path longer than :data:`~harness._safefs.MAX_PATH_BYTES` stops it too. FIFOs,
    sockets and devices are no part of a snapshot and are left out, as the local backend
    does, and so is a hard link to one of them (on the host it is the same FIFO).
    Names are kept as bytes, odd ones too. Extraction is :func:`~harness._safefs.safe_extract`
    (any 3.11): a symlink leaving the tree is kept inert, as the command left it.
    """
    raw = _StreamReader([data] if isinstance(data, bytes) else data)
    counter = counter if counter is not None else TreeCounter(None, None)
    sizes: dict[str, int] = {}  # member name -> bytes of its file, for hard links to it
    with tarfile.open(fileobj=io.BufferedReader(raw, 1 << 20), mode="r|") as tar:
        for m in tar:
            size = m.size if m.isreg() else sizes.get(m.linkname, 0) if m.islnk() else 0
            if m.isreg() or m.islnk():
                sizes[m.name] = size
            parts = PurePosixPath(m.name).parts[1:]
            if parts:
                rel_bytes = len(os.fsencode(str(PurePosixPath(*parts))))
                counter.add(size, depth=len(parts), path_bytes=rel_bytes)
    with tarfile.open(fileobj=io.BytesIO(b"".join(raw.seen))) as tar:
        members = []
        dropped: set[str] = set()  # FIFOs, sockets, devices: no part of a snapshot
        for m in tar.getmembers():
            parts = PurePosixPath(m.name).parts[1:]  # strip the top "workspace/"
            if not parts:
                continue
            m.name = str(PurePosixPath(*parts))
            if m.islnk():
                m.linkname = str(PurePosixPath(*PurePosixPath(m.linkname).parts[1:]))
                if m.linkname in dropped:  # a hard link to a FIFO is that FIFO: left out too
                    dropped.add(m.name)
                    continue
            if not (m.isreg() or m.isdir() or m.issym() or m.islnk()):
                dropped.add(m.name)
                continue
            members.append(m)
        safe_extract(tar, dest, members, outside_links="keep")


def first_file(data: bytes | Iterable[bytes], limit: int | None) -> bytes | None:
    """Up to ``limit`` bytes of the archive's first member; ``None`` unless a regular file.

    ``data`` may be the engine's chunk stream: it is read as a stream and only up to the
    bound is kept (a 1 GiB sparse file never sits in memory), the rest is never read.
    """
    raw = _StreamReader([data] if isinstance(data, bytes) else data, keep=False)
    with tarfile.open(fileobj=io.BufferedReader(raw, 1 << 16), mode="r|") as tar:
        first = tar.next()
        if first is None or not first.isreg():
            return None
        fh = tar.extractfile(first)
        return None if fh is None else (fh.read() if limit is None else fh.read(limit))
