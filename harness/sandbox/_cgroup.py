"""Per-exec control groups for the local backend (cgroup v1 and v2, detected at runtime).

One :class:`ExecCgroup` is created for every command a :class:`LocalSession` runs. The
command's first process joins it (or is attached) before it execs the user command (see
``local.py``), so everything it spawns, including grandchildren that ``setsid`` away,
stays inside and can be counted, bounded and killed.

* **v1** (one hierarchy per controller): ``memory`` (``memory.limit_in_bytes`` +
  ``memory.memsw.limit_in_bytes`` so swap is included, ``memory.oom_control`` oom_kill,
  ``memory.max_usage_in_bytes``), ``pids`` (``pids.max``, ``pids.events`` max) and, when
  mounted, ``cpuacct`` (``cpuacct.usage``). Groups nest under the harness's own cgroup,
  so the harness's own limits still apply.
* **v2** (unified): a ``harness`` group at the root of the hierarchy with ``+memory
  +pids`` delegated, and per-exec children with ``memory.max``, ``memory.swap.max=0``,
  ``pids.max``; ``memory.events`` oom_kill, ``pids.events`` max, ``memory.peak``,
  ``cpu.stat`` usage_usec; ``cgroup.kill`` when the kernel has it.

Everything here touches only files; nothing runs a program.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "CgroupDriver",
    "CgroupStats",
    "ExecCgroup",
    "detect_cgroups",
    "parse_keyed",
    "parse_mountinfo",
    "parse_proc_cgroup",
]

_PREFIX = "harness-"


class CgroupStats(BaseModel):
    """What the kernel recorded about one exec's cgroup."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    oom_kills: int = 0
    """Processes killed by the OOM killer because of the memory limit."""
    pids_max_events: int = 0
    """Forks refused because the pids limit was reached."""
    peak_memory_bytes: int | None = None
    pids_peak: int | None = None
    cpu_s: float | None = None


def parse_keyed(text: str) -> dict[str, int]:
    """Parse a flat-keyed cgroup file (``key value`` per line) into integers.

    Lines that are not ``<key> <integer>`` are ignored (kernels add keys over time).
    """
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            with contextlib.suppress(ValueError):
                out[parts[0]] = int(parts[1])
    return out


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """Parse ``/proc/<pid>/cgroup`` into {controller: path}; v2 appears as key ``""``."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if not controllers:
            out[""] = path
        for c in controllers.split(","):
            if c:
                out[c] = path
    return out


def parse_mountinfo(text: str) -> list[tuple[str, str, str, frozenset[str]]]:
    """Cgroup mounts from ``/proc/self/mountinfo``: (fstype, root, mountpoint, options)."""
    mounts: list[tuple[str, str, str, frozenset[str]]] = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        lf, rf = left.split(), right.split()
        if len(lf) < 5 or len(rf) < 3 or rf[0] not in ("cgroup", "cgroup2"):
            continue
        root = lf[3].replace("\\040", " ")
        point = lf[4].replace("\\040", " ")
        mounts.append((rf[0], root, point, frozenset(rf[2].split(","))))
    return mounts


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _read_int(path: Path) -> int | None:
    text = _read(path)
    if text is None:
        return None
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _join(mountpoint: str, mount_root: str, own: str) -> Path:
    """Return the host directory of cgroup ``own`` in a hierarchy mounted at ``mountpoint``."""
    rel = os.path.relpath(own, mount_root) if own.startswith(mount_root) else "."
    return Path(mountpoint) / ("" if rel == "." else rel)


class ExecCgroup:
    """The cgroup (one directory per hierarchy) of one command."""

    def __init__(self, driver: CgroupDriver, dirs: Mapping[str, Path]) -> None:
        self.driver = driver
        self.dirs = dict(dirs)
        """Directory per role: ``memory``, ``pids`` and optionally ``cpu``."""

    def attach(self, pid: int) -> None:
        """Move ``pid`` into every hierarchy of this cgroup.

        Raises:
            OSError: the kernel refused (the caller turns this into an infra error).

        """
        for d in dict.fromkeys(self.dirs.values()):
            _write(d / "cgroup.procs", str(pid))

    def self_join_files(self) -> tuple[Path, ...]:
        """Files a single-threaded process writes ``0`` into to join this cgroup itself.

        In v1 that is each hierarchy's ``tasks``: a thread moving itself needs no global
        lock since Linux 5.18 (another process's pid written to ``cgroup.procs`` waits an
        RCU grace period, ~2 ms, on every command). v2 has no per-thread file outside
        threaded groups: empty, the caller attaches with :meth:`attach`.
        """
        if self.driver.version != "v1":
            return ()
        return tuple(d / "tasks" for d in dict.fromkeys(self.dirs.values()))

    def pids(self) -> set[int]:
        """Every process currently in the cgroup."""
        found: set[int] = set()
        for d in dict.fromkeys(self.dirs.values()):
            text = _read(d / "cgroup.procs") or ""
            found.update(int(x) for x in text.split() if x.isdigit())
        return found

    def kill_all(self, timeout: float = 5.0) -> bool:
        """SIGKILL every process in the cgroup until it is empty; True when empty."""
        kill_file = self.dirs["pids"] / "cgroup.kill"
        if self.driver.version == "v2" and kill_file.exists():
            with contextlib.suppress(OSError):
                _write(kill_file, "1")
        deadline = time.monotonic() + timeout
        pause = 0.001
        while True:
            pids = self.pids()
            if not pids:
                return True
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def cpu_s(self) -> float | None:
        """CPU seconds used by the cgroup so far, where the kernel reports it."""
        cpu_dir = self.dirs.get("cpu")
        if cpu_dir is None:
            return None
        if self.driver.version == "v1":
            ns = _read_int(cpu_dir / "cpuacct.usage")
            return None if ns is None else ns / 1e9
        usec = parse_keyed(_read(cpu_dir / "cpu.stat") or "").get("usage_usec")
        return None if usec is None else usec / 1e6

    def stats(self) -> CgroupStats:
        """Read OOM kills, refused forks, peak memory and CPU time."""
        mem, pids = self.dirs["memory"], self.dirs["pids"]
        if self.driver.version == "v1":
            oom = parse_keyed(_read(mem / "memory.oom_control") or "").get("oom_kill", 0)
            peak = _read_int(mem / "memory.memsw.max_usage_in_bytes")
            if peak is None:
                peak = _read_int(mem / "memory.max_usage_in_bytes")
        else:
            events = parse_keyed(_read(mem / "memory.events") or "")
            oom = events.get("oom_kill", 0) + events.get("oom_group_kill", 0)
            peak = _read_int(mem / "memory.peak")
        return CgroupStats(
            oom_kills=oom,
            pids_max_events=parse_keyed(_read(pids / "pids.events") or "").get("max", 0),
            peak_memory_bytes=peak,
            pids_peak=_read_int(pids / "pids.peak"),
            cpu_s=self.cpu_s(),
        )

    def remove(self) -> bool:
        """Kill what is left and remove the directories; True when all are gone.

        The kernel refuses to remove a cgroup that still holds a process (EBUSY): the
        first attempt needs no look at its members, a refusal kills them and retries.
        """
        ok = True
        for d in dict.fromkeys(self.dirs.values()):
            for _ in range(200):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    self.kill_all(timeout=0.5)
                    time.sleep(0.005)
            else:
                ok = False
        return ok


class CgroupDriver(BaseModel):
    """Where per-exec cgroups are created, for one detected cgroup layout."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Literal["v1", "v2"]
    bases: dict[str, str]
    """Parent directory per role (``memory``, ``pids``, optional ``cpu``)."""
    swap_accounted: bool
    """Whether the memory limit can include swap (memsw in v1, swap.max in v2)."""

    def create(self, *, memory_mb: int, pids: int) -> ExecCgroup:
        """Create a fresh cgroup with the given limits.

        Raises:
            OSError: a directory or limit file could not be written.

        """
        name = f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
        dirs: dict[str, Path] = {}
        for role, base in self.bases.items():
            d = Path(base) / name
            if d not in dirs.values():
                d.mkdir()
            dirs[role] = d
        group = ExecCgroup(self, dirs)
        try:
            limit = memory_mb * 1024 * 1024
            mem = dirs["memory"]
            if self.version == "v1":
                _write(mem / "memory.limit_in_bytes", str(limit))
                if self.swap_accounted:
                    _write(mem / "memory.memsw.limit_in_bytes", str(limit))
            else:
                _write(mem / "memory.max", str(limit))
                if self.swap_accounted:
                    _write(mem / "memory.swap.max", "0")
            _write(dirs["pids"] / "pids.max", str(pids))
        except OSError:
            group.remove()
            raise
        return group

    def sweep(self) -> int:
        """Remove empty leftover exec cgroups of harness processes that no longer exist."""
        removed = 0
        for base in set(self.bases.values()):
            for d in _children(Path(base)):
                owner = d.name[len(_PREFIX) :].split("-", 1)[0]
                if not owner.isdigit() or Path(f"/proc/{owner}").exists():
                    continue
                with contextlib.suppress(OSError):
                    d.rmdir()
                    removed += 1
        return removed

    def describe(self) -> dict[str, str]:
        """Facts for the run record."""
        return {
            "cgroup": self.version,
            "cgroup_swap_accounted": str(self.swap_accounted).lower(),
            "cgroup_cpu_accounting": str("cpu" in self.bases).lower(),
        }


def _children(base: Path) -> Iterable[Path]:
    try:
        return [p for p in base.iterdir() if p.is_dir() and p.name.startswith(_PREFIX)]
    except OSError:
        return []


def _swap_active() -> bool:
    text = _read(Path("/proc/swaps")) or ""
    return len(text.strip().splitlines()) > 1


def _probe(base: Path) -> bool:
    """Tell whether a child cgroup can be created (and removed) under ``base``."""
    probe = base / f"{_PREFIX}{os.getpid()}-probe-{uuid.uuid4().hex[:6]}"
    try:
        probe.mkdir()
    except OSError:
        return False
    with contextlib.suppress(OSError):
        probe.rmdir()
    return True


def _detect_v1(
    mounts: list[tuple[str, str, str, frozenset[str]]], own: Mapping[str, str]
) -> CgroupDriver | None:
    bases: dict[str, str] = {}
    for role, controller in (("memory", "memory"), ("pids", "pids"), ("cpu", "cpuacct")):
        for fstype, root, point, opts in mounts:
            if fstype == "cgroup" and controller in opts and controller in own:
                bases[role] = str(_join(point, root, own[controller]))
                break
    if "memory" not in bases or "pids" not in bases:
        return None
    if not all(_probe(Path(b)) for b in {bases["memory"], bases["pids"]}):
        return None
    if "cpu" in bases and not _probe(Path(bases["cpu"])):
        del bases["cpu"]
    memsw = (Path(bases["memory"]) / "memory.memsw.limit_in_bytes").exists()
    return CgroupDriver(version="v1", bases=bases, swap_accounted=memsw or not _swap_active())


def _detect_v2(mounts: list[tuple[str, str, str, frozenset[str]]]) -> CgroupDriver | None:
    for fstype, _root, point, _opts in mounts:
        if fstype != "cgroup2":
            continue
        top = Path(point)
        available = set((_read(top / "cgroup.controllers") or "").split())
        if not {"memory", "pids"} <= available:
            continue
        try:
            enabled = set((_read(top / "cgroup.subtree_control") or "").split())
            if not {"memory", "pids"} <= enabled:
                _write(top / "cgroup.subtree_control", "+memory +pids")
            base = top / "harness"
            base.mkdir(exist_ok=True)
            _write(base / "cgroup.subtree_control", "+memory +pids")
        except OSError:
            continue
        if not _probe(base):
            continue
        swap = _swap_max_supported(base)
        return CgroupDriver(
            version="v2",
            bases={"memory": str(base), "pids": str(base), "cpu": str(base)},
            swap_accounted=swap or not _swap_active(),
        )
    return None


def _swap_max_supported(base: Path) -> bool:
    probe = base / f"{_PREFIX}{os.getpid()}-swap-{uuid.uuid4().hex[:6]}"
    try:
        probe.mkdir()
    except OSError:
        return False
    try:
        return (probe / "memory.swap.max").exists()
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()


def detect_cgroups(proc: Path = Path("/proc")) -> CgroupDriver | None:
    """Find a writable cgroup layout with memory and pids controllers, or ``None``.

    v1 per-controller hierarchies are preferred where both are mounted (that is where the
    controllers live); otherwise a v2 hierarchy whose root offers memory and pids.
    """
    mounts = parse_mountinfo(_read(proc / "self" / "mountinfo") or "")
    own = parse_proc_cgroup(_read(proc / "self" / "cgroup") or "")
    driver = _detect_v1(mounts, own) or _detect_v2(mounts)
    if driver is not None:
        driver.sweep()
    return driver
