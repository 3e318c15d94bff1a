"""Ownership of what the harness leaves on the host: who owns a temp folder or a cache entry.

Every temporary folder the harness makes carries its owning process's pid in its name
(:func:`owned_prefix`); :func:`owner_alive` judges whether that owner still lives (a reused
pid does not count). Cache entries shared between processes are held by a :func:`lease`
and removed by :func:`prune_leased` once no live process holds one. The sweeps that use
these helpers across backends live in :mod:`harness.sandbox.prune`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "EXPORTS",
    "OWNED_NAME",
    "lease",
    "owned_prefix",
    "owner_alive",
    "prune_leased",
    "sweep_store_debris",
]


OWNED_NAME = re.compile(r"^harness-.*-p(\d+)-[a-z0-9_]{8}$")
"""``tempfile`` adds 8 characters from ``[a-z0-9_]`` after the prefix."""


def owned_prefix(kind: str) -> str:
    """Return the prefix of a temp folder owned by this process (pass it to ``tempfile``)."""
    return f"harness-{kind}-p{os.getpid()}-"


def _started_at(pid: int) -> float | None:
    """Wall-clock start time of ``pid`` (Linux ``/proc``), or None when unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22 of stat: start time, clock ticks after boot
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def owner_alive(pid: int, made: Path | float | None = None) -> bool:
    """Whether process ``pid`` lives and could own a thing ``made`` at a time.

    ``made`` is a path (its modification time counts) or an epoch time. A process that
    started after that time cannot have made the thing: its pid was reused after the
    owner died.
    """
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if made is not None:
        started = _started_at(pid)
        with contextlib.suppress(OSError):
            stamp = made.stat().st_mtime if isinstance(made, Path) else made
            # 2 s of slack: btime has 1 s resolution and clocks are coarse.
            if started is not None and started > stamp + 2:
                return False
    return True


def sweep_store_debris(root: Path) -> list[Path]:
    """Remove temp files in a store's blob folders whose writer is dead."""
    removed: list[Path] = []
    for tmp in root.glob("blobs/sha256/*/.tmp-p*-*"):
        m = re.match(r"\.tmp-p(\d+)-", tmp.name)
        if m and not owner_alive(int(m.group(1)), tmp):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


EXPORTS = "docker-envs"
"""Cache folder of agent environments copied out of images
(:func:`harness.env.images.export_env`)."""


_LEASE = re.compile(r"^\.lease-([0-9a-f]{12})-p(\d+)$")


_LEASED_ENTRY = re.compile(r"^([0-9a-f]{12})(\.json)?$")


_EXPORT_TMP = re.compile(r"^\.export-p(\d+)-")


@contextlib.contextmanager
def _locked(root: Path, how: int) -> Iterator[bool]:
    """Hold ``root/.lock`` with ``flock`` mode ``how``; yield False if it is busy (LOCK_NB)."""
    with (root / ".lock").open("a") as fh:
        try:
            fcntl.flock(fh.fileno(), how)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def lease(root: Path, key: str) -> Iterator[None]:
    """Mark cache entry ``root/<key>`` as used by this process, for this process's lifetime.

    Inside the block the entry may be checked and (re)made: :func:`prune_leased` waits for
    no one and skips the folder while the block holds ``root``'s lock shared. The lease
    (``root/.lease-<key>-p<pid>``) stays after the block, so the entry is kept for as long
    as this process lives; a dead process's lease no longer counts.
    """
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root, fcntl.LOCK_SH):
        (root / f".lease-{key}-p{os.getpid()}").touch()
        yield


def _unleased(entry: Path, live: set[str]) -> bool:
    m = _LEASED_ENTRY.match(entry.name)
    if m:
        return m.group(1) not in live
    tmp = _EXPORT_TMP.match(entry.name)  # an export killed halfway
    return tmp is not None and not owner_alive(int(tmp.group(1)), entry)


def prune_leased(root: Path) -> list[Path]:
    """Remove ``root``'s cache entries (``<key>``, ``<key>.json``) that no live process leases.

    Also removes dead processes' leases and ``.export-p<pid>-…`` temp folders. Returns the
    removed entries; nothing when ``root`` is busy (someone holds :func:`lease`).
    """
    if not root.is_dir():
        return []
    removed: list[Path] = []
    with _locked(root, fcntl.LOCK_EX | fcntl.LOCK_NB) as got:
        if not got:
            return []
        live: set[str] = set()
        for entry in sorted(root.iterdir()):
            m = _LEASE.match(entry.name)
            if m and owner_alive(int(m.group(2)), entry):
                live.add(m.group(1))
            elif m:
                entry.unlink(missing_ok=True)
        # The description first: a half-removed folder without it is rebuilt, never trusted.
        for entry in sorted(root.iterdir(), key=lambda p: not p.name.endswith(".json")):
            if not _unleased(entry, live):
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            if not entry.exists():
                removed.append(entry)
    return removed
