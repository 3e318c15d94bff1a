"""Drop boxes: folders sandboxed commands may add files to but never list.

A box is owned by root (the harness's user when the harness runs without root) with mode
:data:`~harness.sandbox.base.DROP_BOX_MODE` (``1733``): the sandboxed user may create a
file it names itself, and no more: it cannot list the folder, so it cannot find, read,
replace or remove a file whose name it was not told. The harness reads the box back after
the command (:func:`read_host_box` on the host's own folder, :func:`read_box_archive` on
the engine's ``get_archive`` stream of it), never following a link, never opening anything
but a regular file, bounded in count and size. Anything else found there (the box replaced
by a folder the sandboxed user owns, a link, a FIFO, a file too big, too many files) only
sandboxed code can have made: it is reported in :attr:`~harness.sandbox.base.DropBox.odd`,
never raised.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from harness.sandbox.base import DROP_BOX_MODE, DropBox

__all__ = ["make_host_box", "read_box_archive", "read_host_box"]


def make_host_box(path: Path, owner: int | None) -> None:
    """Create ``path`` as a drop box (``owner``: its uid, or ``None`` to keep the creator)."""
    os.mkdir(path, 0o700)
    if owner is not None:
        os.lchown(path, owner, owner)
    os.chmod(path, DROP_BOX_MODE)


def _box_problem(st: os.stat_result, owner: int) -> str | None:
    if not stat.S_ISDIR(st.st_mode):
        return "the drop box is not a folder"
    if st.st_uid != owner or stat.S_IMODE(st.st_mode) != DROP_BOX_MODE:
        return (
            f"the drop box was replaced (owner {st.st_uid}, mode "
            f"{stat.S_IMODE(st.st_mode):o}; the harness made it {owner}, {DROP_BOX_MODE:o})"
        )
    return None


def read_host_box(path: Path, *, owner: int, max_files: int, max_bytes: int) -> DropBox:
    """Read the box at host ``path`` (see the module docstring)."""
    try:
        box = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        return DropBox(odd=(f"the drop box is gone or not a folder ({exc.strerror})",))
    odd: list[str] = []
    files: dict[str, bytes] = {}
    try:
        problem = _box_problem(os.fstat(box), owner)
        if problem is not None:
            return DropBox(odd=(problem,))
        for seen, name in enumerate(sorted(os.listdir(box))):
            if seen >= max_files:
                odd.append(f"more than {max_files} entries in the drop box")
                break
            try:
                st = os.stat(name, dir_fd=box, follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):
                    odd.append(f"{name[:80]!r} in the drop box is not a regular file")
                    continue
                if st.st_size > max_bytes:
                    odd.append(f"{name[:80]!r} in the drop box is over {max_bytes} bytes")
                    continue
                flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                fd = os.open(name, flags, dir_fd=box)
                try:
                    files[name] = os.read(fd, max_bytes + 1)[:max_bytes]
                finally:
                    os.close(fd)
            except OSError as exc:
                odd.append(f"{name[:80]!r} in the drop box could not be read ({exc.strerror})")
    finally:
        os.close(box)
    return DropBox(files=files, odd=tuple(odd))


def read_box_archive(
    chunks: Iterable[bytes], *, owner: int, max_files: int, max_bytes: int
) -> DropBox:
    """Read the box from the engine's tar stream of it (its first member is the box)."""
    from harness.sandbox._docker_io import _StreamReader

    raw = io.BufferedReader(_StreamReader(chunks, keep=False), 1 << 16)
    try:
        return _read_archive(raw, owner, max_files, max_bytes)
    except tarfile.TarError as exc:
        return DropBox(odd=(f"the drop box's archive could not be read ({exc})",))


def _read_archive(raw: IO[bytes], owner: int, max_files: int, max_bytes: int) -> DropBox:
    odd: list[str] = []
    files: dict[str, bytes] = {}
    with tarfile.open(fileobj=raw, mode="r|") as tar:
        top = tar.next()
        if top is None or not top.isdir():
            return DropBox(odd=("the drop box is not a folder",))
        mode = stat.S_IFDIR | (top.mode & 0o7777)
        fake = os.stat_result((mode, 0, 0, 0, top.uid, top.gid, 0, 0, 0, 0))
        problem = _box_problem(fake, owner)
        if problem is not None:
            return DropBox(odd=(problem,))
        seen = 0
        while (member := tar.next()) is not None:  # iterating would yield ``top`` again
            seen += 1
            if seen > max_files:
                odd.append(f"more than {max_files} entries in the drop box")
                break
            name = member.name.split("/", 1)[1] if "/" in member.name else ""
            if not name or "/" in name:
                odd.append(f"{member.name[:80]!r} in the drop box is not a file of its own")
                continue
            if not member.isreg():
                odd.append(f"{name[:80]!r} in the drop box is not a regular file")
                continue
            if member.size > max_bytes:
                odd.append(f"{name[:80]!r} in the drop box is over {max_bytes} bytes")
                continue
            fh = tar.extractfile(member)
            files[name] = b"" if fh is None else fh.read(max_bytes)
    return DropBox(files=files, odd=tuple(odd))
