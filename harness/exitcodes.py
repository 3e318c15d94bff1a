"""Exit codes: a documented contract for CI.

====  ==========  ===========================================================
code  name        meaning
====  ==========  ===========================================================
0     PASS        the gate passed (or, without a gate, the run completed cleanly)
1     FAIL        the gate failed: a significant, material regression
2     USAGE       usage or configuration error (bad option, case, policy, lock)
3     WARN        the gate warned (``--warn-ok`` maps it to 0)
4     BLOCKED     nothing could be judged: infra/evaluator errors, drift, invalid run
5     INTERNAL    a bug in harness itself (please report it)
====  ==========  ===========================================================
"""

from __future__ import annotations

import enum

__all__ = ["ExitCode", "for_verdict"]


class ExitCode(enum.IntEnum):
    """Process exit codes of the ``harness`` CLI."""

    PASS = 0
    FAIL = 1
    USAGE = 2
    WARN = 3
    BLOCKED = 4
    INTERNAL = 5


def for_verdict(verdict: str, *, warn_ok: bool = False) -> ExitCode:
    """Map a gate verdict (pass / warn / fail / blocked) to its exit code."""
    code = {
        "pass": ExitCode.PASS,
        "warn": ExitCode.WARN,
        "fail": ExitCode.FAIL,
        "blocked": ExitCode.BLOCKED,
    }[verdict]
    if code is ExitCode.WARN and warn_ok:
        return ExitCode.PASS
    return code
