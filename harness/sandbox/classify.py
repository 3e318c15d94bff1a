"""Which bound stopped a command: a pure signature table, testable without a kernel.

Both backends gather :class:`Evidence` (exit status, signal, their own kill, the OOM
flag, the pids controller's counters, the command's stderr, whether the disk area filled)
and hand it to :func:`classify`. The rules are tried in order; the first that matches
names the bound. Order matters where evidence overlaps: an OOM kill also shows as
``SIGKILL``; a fork bomb also runs into the wall clock because it never exits on its own.

Stderr patterns are the kernel's own messages as libc, the shell and Python print them.
They only ever pick *which* bound a command that already failed ran into; they never turn
a success into a failure or a failure into a success.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from harness.sandbox.base import Bound, Termination

__all__ = ["RULES", "Evidence", "classify"]

ENOSPC = re.compile(rb"No space left on device|ENOSPC|\[Errno 28\]", re.I)
"""The disk area is full (tmpfs ``size=``)."""
EFBIG = re.compile(rb"File too large|EFBIG|\[Errno 27\]", re.I)
"""``RLIMIT_FSIZE`` refused a write: Python ignores ``SIGXFSZ`` and gets ``EFBIG``."""
EAGAIN_FORK = re.compile(
    rb"fork: (retry: )?Resource temporarily unavailable|can't fork|cannot fork|fork failed|"
    rb"BlockingIOError: \[Errno 11\] Resource temporarily unavailable|"
    rb"(pthread_create|clone)[^\n]*Resource temporarily unavailable",
    re.I,
)
"""The kernel's ``EAGAIN`` from ``fork``/``clone`` at the pids limit."""

CPU_NEAR = 0.95
"""A ``SIGKILL`` after this share of ``cpu_seconds`` is the hard RLIMIT_CPU kill (the
kernel sends ``SIGKILL`` one second past the soft limit; accounting is coarse)."""


@dataclass(frozen=True)
class Evidence:
    """What a backend saw about one finished command, plus the contract's limits."""

    exit_code: int | None
    """Exit status, ``None`` when killed by a signal."""
    signal: int | None
    killed: Literal["wall_clock", "cpu"] | None = None
    """The harness killed the command itself, and why."""
    oom: bool = False
    """The kernel's OOM killer acted on the command (cgroup event or engine flag)."""
    pids_events: int = 0
    """Forks the pids controller refused."""
    pids_observed: float | None = None
    """Processes alive (at our kill) or the peak, where known."""
    disk_full: bool = False
    """The backend saw its disk area full, and this command wrote to it."""
    stderr: bytes = b""
    duration_s: float = 0.0
    cpu_s: float | None = None
    peak_memory_mb: float | None = None
    disk_used_mb: float | None = None
    timeout_s: float = 0.0
    cpu_seconds: float | None = None
    memory_mb: float = 0.0
    pids: float = 0.0
    disk_mb: float | None = None

    @property
    def failed(self) -> bool:
        """Anything but a clean ``exit 0``."""
        return not (self.exit_code == 0 and self.signal is None and self.killed is None)


def _memory(e: Evidence) -> bool:
    return e.oom and e.failed


def _cpu(e: Evidence) -> bool:
    if e.killed == "cpu":
        return True
    if e.cpu_seconds is None or e.killed is not None:
        return False
    if e.signal == signal.SIGXCPU:
        return True
    near = e.cpu_s is None or e.cpu_s >= e.cpu_seconds * CPU_NEAR
    return e.signal == signal.SIGKILL and near


def _pids_at_deadline(e: Evidence) -> bool:
    # A fork bomb never exits by itself: at the deadline the pids controller has refused
    # forks, the engine counts the processes at the limit (one short: the init), or (no
    # pids events, as on cgroup v1) the shell or Python reported the kernel's EAGAIN.
    at_limit = e.pids_observed is not None and e.pids_observed >= e.pids - 1
    refused = e.pids_events > 0 or bool(EAGAIN_FORK.search(e.stderr))
    return e.killed == "wall_clock" and (refused or at_limit)


def _wall_clock(e: Evidence) -> bool:
    return e.killed == "wall_clock"


def _disk(e: Evidence) -> bool:
    if e.disk_mb is None or not e.failed:
        return False
    return (
        e.signal == signal.SIGXFSZ
        or e.disk_full
        or bool(ENOSPC.search(e.stderr) or EFBIG.search(e.stderr))
    )


def _pids(e: Evidence) -> bool:
    return e.failed and (e.pids_events > 0 or bool(EAGAIN_FORK.search(e.stderr)))


def _signal(e: Evidence) -> bool:
    return e.signal is not None


_Get = Callable[[Evidence], float | None]


def _bound(kind: Termination, limit: _Get, observed: _Get) -> Callable[[Evidence], Bound | None]:
    def make(e: Evidence) -> Bound | None:
        lim = limit(e)
        return None if lim is None else Bound(kind=kind, limit=lim, observed=observed(e))

    return make


def _none(e: Evidence) -> Bound | None:
    return None


_Rule = tuple[str, Callable[[Evidence], bool], Termination, Callable[[Evidence], Bound | None]]

RULES: tuple[_Rule, ...] = (
    ("memory", _memory, Termination.MEMORY,
     _bound(Termination.MEMORY, lambda e: e.memory_mb, lambda e: e.peak_memory_mb)),
    ("cpu", _cpu, Termination.CPU,
     _bound(Termination.CPU, lambda e: e.cpu_seconds, lambda e: e.cpu_s)),
    ("pids_at_deadline", _pids_at_deadline, Termination.PIDS,
     _bound(Termination.PIDS, lambda e: e.pids, lambda e: e.pids_observed)),
    ("wall_clock", _wall_clock, Termination.WALL_CLOCK,
     _bound(Termination.WALL_CLOCK, lambda e: e.timeout_s, lambda e: round(e.duration_s, 3))),
    ("disk", _disk, Termination.DISK,
     _bound(Termination.DISK, lambda e: e.disk_mb, lambda e: e.disk_used_mb)),
    ("pids", _pids, Termination.PIDS,
     _bound(Termination.PIDS, lambda e: e.pids, lambda e: e.pids_observed)),
    ("signal", _signal, Termination.SIGNAL, _none),
)  # fmt: skip
"""(name, matches, termination, bound) in the order they are tried."""


def classify(e: Evidence) -> tuple[Termination, Bound | None]:
    """Name the bound that stopped the command (``exit`` when none did)."""
    if not e.failed:
        return Termination.EXIT, None
    for _name, matches, term, bound in RULES:
        if matches(e):
            return term, bound(e)
    return Termination.EXIT, None
