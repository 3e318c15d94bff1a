"""Sweep what killed runs left behind: temp dirs, local sessions, exec cgroups, containers.

Every temporary folder the harness makes on the host is discoverable and owned: its name
carries the owning process's pid (``harness-<kind>-p<pid>-XXXXXXXX``, see
:func:`owned_prefix`), and a local session also records it in ``.harness-owner``. A
folder whose owner is gone is an orphan: trial workspaces and snapshots, verifier
staging, case-image build trees, and sessions (their processes died with bwrap's
``--die-with-parent``; their tmpfs mount and folder remain). ``harness run`` sweeps
orphans before starting, so a ``kill -9`` never accumulates leftovers; ``harness sandbox
prune`` does it on demand. A live owner's folders are never touched; a pid that was
reused by a process started after the folder was last changed does not count as alive.
Docker containers and volumes carry the same ownership as labels (host, pid, boot id;
:func:`harness.sandbox.docker.owner_labels`) and are judged the same way. Agent
environments exported from images to the cache (:data:`EXPORTS`) are held by a
:func:`lease` per process that uses them and go once no live process holds one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from harness._safefs import rmtree
from harness.errors import HarnessError

__all__ = [
    "EXPORTS",
    "lease",
    "owned_prefix",
    "owner_alive",
    "prune_all",
    "prune_leased",
    "prune_local",
    "sweep_store_debris",
]

_OWNED = re.compile(r"^harness-.*-p(\d+)-[a-z0-9_]{8}$")
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


def _owner(d: Path) -> int | None:
    from harness.sandbox.local import OWNER_FILE

    m = _OWNED.match(d.name)
    if m:
        return int(m.group(1))
    owner_file = d / OWNER_FILE
    if (d / "workspace").is_dir() and owner_file.is_file():
        try:
            return int(owner_file.read_text().strip() or "0")
        except (OSError, ValueError):
            return 0
    return None  # not recognisably ours: leave it


def prune_local(base_dir: Path | None = None) -> list[str]:
    """Remove harness temp folders and local sessions whose owning process is dead."""
    from harness.sandbox.local import _umount

    base = base_dir or Path(tempfile.gettempdir())
    removed: list[str] = []
    for d in sorted(base.glob("harness-*")):
        if not d.is_dir() or d.is_symlink():
            continue
        owner = _owner(d)
        if owner is None or owner_alive(owner, d):
            continue
        if os.path.ismount(d):
            _umount(d)
        rmtree(d)  # iterative: a 1,200-deep folder left by a command is removed too
        if not d.exists():
            removed.append(str(d))
    with contextlib.suppress(Exception):
        from harness.sandbox._cgroup import detect_cgroups

        driver = detect_cgroups()
        if driver is not None:
            driver.sweep()
    return removed


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
"""Cache folder of agent environments copied out of images (:func:`harness.images.export_env`)."""
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


def prune_all(
    *,
    docker: bool = True,
    everything: bool = False,
    labels: Mapping[str, str] | None = None,
) -> list[str]:
    """Prune local orphans and, when an engine is reachable, orphaned harness containers.

    Containers and volumes go when their owner is dead (see
    :func:`harness.sandbox.docker.owner_state`); ``everything`` also removes those of live
    runs and of owners this host cannot judge. ``labels`` restricts the engine sweep to
    objects carrying every pair. Local folders carry no labels and are always swept
    orphans-only.
    """
    from harness.env.build import cache_root

    lines = [f"removed local session {p}" for p in prune_local()]
    exports = prune_leased(cache_root() / EXPORTS)
    lines += [f"removed exported environment {p}" for p in exports if p.suffix != ".json"]
    if docker:
        try:
            from harness.sandbox.docker import prune

            report = prune(orphans_only=not everything, labels=labels)
            lines += [f"removed container {c}" for c in report.containers]
            lines += [f"removed volume {v}" for v in report.volumes]
            if report.unknown:
                lines.append(
                    f"kept {report.unknown} container(s)/volume(s) whose owner cannot be "
                    "judged here (another host, or made by an older harness); --all removes them"
                )
        except HarnessError as exc:
            lines.append(f"docker: skipped ({exc})")
    if not lines:
        lines.append("nothing to prune")
    return lines
