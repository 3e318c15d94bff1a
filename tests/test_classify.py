"""The termination signature table, without a kernel or an engine."""

from __future__ import annotations

import signal

import pytest

from harness.sandbox.base import Termination
from harness.sandbox.classify import RULES, Evidence, classify

LIMITS = {"timeout_s": 10.0, "memory_mb": 256, "pids": 64, "disk_mb": 64, "cpu_seconds": None}


def ev(**kw: object) -> Evidence:
    return Evidence(**{"exit_code": None, "signal": None, **LIMITS, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("evidence", "term"),
    [
        (ev(exit_code=0), Termination.EXIT),
        (ev(exit_code=1), Termination.EXIT),
        (ev(exit_code=0, oom=True), Termination.EXIT),  # a child was OOM-killed, the command won
        (ev(signal=9, oom=True), Termination.MEMORY),
        (ev(killed="wall_clock", oom=True), Termination.MEMORY),
        (ev(killed="wall_clock"), Termination.WALL_CLOCK),
        # a fork bomb never exits by itself: the deadline fires, but pids is what stopped it
        (ev(killed="wall_clock", pids_events=3), Termination.PIDS),
        (ev(killed="wall_clock", pids_observed=63), Termination.PIDS),  # engine count at kill
        (ev(killed="wall_clock", pids_observed=12), Termination.WALL_CLOCK),
        (ev(killed="wall_clock", stderr=b"sh: 1: Cannot fork\n"), Termination.PIDS),
        (ev(killed="cpu", cpu_seconds=2.0), Termination.CPU),
        (ev(signal=signal.SIGXCPU, cpu_seconds=2.0), Termination.CPU),
        (ev(signal=9, cpu_seconds=2.0, cpu_s=1.99), Termination.CPU),
        (ev(signal=9, cpu_seconds=2.0, cpu_s=0.5), Termination.SIGNAL),
        (ev(signal=signal.SIGXFSZ), Termination.DISK),
        # Python ignores SIGXFSZ: RLIMIT_FSIZE shows as EFBIG on stderr
        (ev(exit_code=1, stderr=b"OSError: [Errno 27] File too large"), Termination.DISK),
        (ev(exit_code=1, stderr=b"write: No space left on device"), Termination.DISK),
        (ev(exit_code=1, disk_full=True), Termination.DISK),
        (ev(exit_code=1, disk_full=True, disk_mb=None), Termination.EXIT),
        (ev(exit_code=0, stderr=b"No space left on device"), Termination.EXIT),
        (ev(exit_code=254, stderr=b"sh: fork: retry: Resource temporarily unavailable"),
         Termination.PIDS),
        (ev(exit_code=1, pids_events=1), Termination.PIDS),
        (ev(signal=15), Termination.SIGNAL),
    ],
)  # fmt: skip
def test_signature_table_names_the_bound(evidence: Evidence, term: Termination) -> None:
    got, bound = classify(evidence)
    assert got is term
    if term in (Termination.EXIT, Termination.SIGNAL):
        assert bound is None
    else:
        assert bound is not None and bound.kind is term


def test_bounds_carry_limit_and_observation() -> None:
    _, bound = classify(ev(killed="wall_clock", pids_events=1, pids_observed=64))
    assert bound is not None and (bound.limit, bound.observed) == (64, 64)
    _, bound = classify(ev(exit_code=1, disk_full=True, disk_used_mb=63.5))
    assert bound is not None and (bound.limit, bound.observed) == (64, 63.5)


def test_rule_names_are_unique() -> None:
    names = [r[0] for r in RULES]
    assert len(names) == len(set(names))
