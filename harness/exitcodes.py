"""Exit codes: a documented contract for CI, and the one table from exceptions to codes.

====  ==========  ===========================================================
code  name        meaning
====  ==========  ===========================================================
0     PASS        the gate passed (or, without a gate, the run completed cleanly)
1     FAIL        the gate failed: a significant, material regression
2     USAGE       usage or configuration error (bad option, case, policy, lock)
3     WARN        the gate warned (``--warn-ok`` maps it to 0)
4     BLOCKED     nothing could be judged: infra/evaluator errors, drift, invalid run,
                  a tampered store, the disk full or read-only
5     INTERNAL    a bug in harness itself (please report it)
====  ==========  ===========================================================

:func:`exit_for_exception` is the only place an exception becomes an exit code (httpx's
``map_httpcore_exceptions`` is the model): the first matching row of :data:`EXCEPTION_TABLE`
wins, and anything not in the table is an internal error, never exit 1 — CI reads 1 as
"the gate failed".
"""

from __future__ import annotations

import enum
import errno

from harness.errors import (
    ConfigError,
    EvaluatorError,
    HarnessError,
    InfraError,
    InvalidRunError,
    LockMismatchError,
    StoreError,
    StoreIntegrityError,
)

__all__ = ["EXCEPTION_TABLE", "ExitCode", "exit_for_exception", "for_verdict"]


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


# errnos that say the machine, not the user or the harness, is at fault.
_ENVIRONMENT_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EMFILE, errno.ENFILE}
)

EXCEPTION_TABLE: tuple[tuple[type[BaseException], ExitCode, str], ...] = (
    # Most specific first: a subclass row must precede its base class's row.
    (StoreIntegrityError, ExitCode.BLOCKED, "blocked"),
    (ConfigError, ExitCode.USAGE, "error"),
    (LockMismatchError, ExitCode.USAGE, "error"),
    (InfraError, ExitCode.BLOCKED, "blocked"),
    (InvalidRunError, ExitCode.BLOCKED, "blocked"),
    (EvaluatorError, ExitCode.BLOCKED, "blocked"),
    (StoreError, ExitCode.USAGE, "store error"),
    (HarnessError, ExitCode.USAGE, "error"),
)
"""(exception type, exit code, message prefix), first match wins."""


def _environmental(exc: BaseException) -> OSError | None:
    """Return the OSError (the exception or its cause) that blames the machine, if any."""
    for e in (exc, exc.__cause__):
        if isinstance(e, OSError) and e.errno in _ENVIRONMENT_ERRNOS:
            return e
    return None


def exit_for_exception(exc: BaseException) -> tuple[ExitCode, str]:
    """Map an exception that reached the CLI to its exit code and message prefix.

    A full or read-only disk (also behind a :class:`StoreError`) blocks (4); any exception
    the table does not name is an internal error (5).
    """
    if _environmental(exc) is not None:
        return ExitCode.BLOCKED, "blocked"
    for kind, code, prefix in EXCEPTION_TABLE:
        if isinstance(exc, kind):
            return code, prefix
    return ExitCode.INTERNAL, "internal error"
