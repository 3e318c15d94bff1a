"""What the harness adds to the verifier's interpreter and test runner (never to the tree).

* **Interpreter guard**: ``PYTHONSAFEPATH=1`` plus a ``sitecustomize`` (on ``PYTHONPATH``
  from the guard folder, mounted read-only outside the io dir) that appends the workspace
  to the *end* of ``sys.path``: the project stays importable, a workspace ``pytest/`` or
  ``json.py`` cannot stand in for the runner or the standard library.
* **Canary**: a pytest plugin (``-p harness_canary`` via ``PYTEST_ADDOPTS``) that, in every
  pytest run writing a JUnit report, adds one test that must fail, and leaves the exit
  status as it would be without it. Candidate code that rewrites outcomes or the report
  writer at import time turns the canary green or drops it: :func:`check_canary` catches
  both and strips the canary before the verdict is judged. The same plugin streams every
  outcome to the harness as it happens (:mod:`harness.trial.evidence`).
"""

from __future__ import annotations

import hashlib
import re
import secrets

from harness.trial.junit import JUnitError, parse_junit

__all__ = [
    "check_canary",
    "guard_env",
    "new_nonce",
]


def new_nonce() -> str:
    """Return a fresh canary name suffix (unguessable before the verifier runs)."""
    return secrets.token_hex(8)


def guard_env(guard_dir: str, nonce: str) -> dict[str, str]:
    """Return the variables that isolate the verifier's interpreter and arm the guard.

    ``guard_dir``: where :func:`harness.trial.evidence.guard_files` are, read-only to the
    sandbox (:data:`harness.trial.evidence.GUARD_MOUNT`).
    """
    return {
        "PYTHONSAFEPATH": "1",
        # No user site: a file one pytest's candidate code leaves under $HOME (the sandbox's
        # /tmp) would run in the next pytest of the same command before its guard loads.
        "PYTHONNOUSERSITE": "1",
        "PYTHONPATH": guard_dir,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTEST_ADDOPTS": "-p no:cacheprovider -p harness_canary",
        # The canary's name is public (tests and reports show it). The stream asks each
        # pytest for its records; their keys are the guards' own, never in an environment.
        "HARNESS_CANARY": canary_token(nonce),
        "HARNESS_STREAM": "1",
    }


def canary_token(nonce: str) -> str:
    """Return the canary test's public name part, derived from (not revealing) ``nonce``."""
    return hashlib.sha256(b"harness canary\0" + nonce.encode()).hexdigest()[:16]


def check_canary(
    data: bytes | None, nonce: str, *, guarded: bool
) -> tuple[bytes | None, str | None]:
    """Check and strip the canary of one JUnit report.

    ``guarded``: the guard's stream says it armed a canary for this report. Returns the
    report without the canary and a problem (tampering) when the canary did not fail, or
    is missing from a guarded report.
    """
    if data is None:
        return None, None
    name = f"harness_canary_{canary_token(nonce)}"
    try:
        report = parse_junit(data)
    except JUnitError:
        return data, None  # judged (and failed) as an invalid artifact
    found = [c for c in report.cases if c.name == name]
    if not found:
        if guarded:
            return data, "the test runner's report lost the harness canary test (tampered)"
        return data, None
    if any(c.status not in ("failed", "error") for c in found):
        return _strip(data, name), (
            "the harness canary test, which always fails, was reported "
            f"{found[0].status}: the candidate tampered with the test runner"
        )
    return _strip(data, name), None


def _strip(data: bytes, name: str) -> bytes:
    pattern = (
        rb'<testcase\b[^>]*\bname="' + re.escape(name.encode()) + rb'"[^>]*?(/>|>.*?</testcase>)'
    )
    return re.sub(pattern, b"", data, flags=re.S)
