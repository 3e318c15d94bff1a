"""Split a fix into hidden tests and a reference patch; take the request from the message.

Test files are recognised by the project conventions of :data:`DEFAULT_TEST_GLOBS` (or the
user's ``--tests`` globs). The request must not quote the solution: a line of the
reference patch's added code, or a diff header, found in the request is refused.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from harness.authoring._git import FixCommit
from harness.errors import ConfigError
from harness.trial.vtree import glob_regex

__all__ = ["DEFAULT_TEST_GLOBS", "Split", "check_request", "split_commit"]

DEFAULT_TEST_GLOBS: Final = (
    "tests/**",
    "test/**",
    "testing/**",
    "**/tests/**",
    "**/test/**",
    "**/test_*.py",
    "**/*_test.py",
    "**/conftest.py",
)
"""pytest's conventions: test folders, ``test_*.py``, ``*_test.py`` and ``conftest.py``."""

# A request line is "quoting" the patch when it holds an added line of at least this many
# non-blank characters: shorter lines (``return x``, ``else:``) occur in prose by chance.
_MIN_QUOTE = 24
_DIFF_HEADER = re.compile(r"^(diff --git |--- a/|\+\+\+ b/|@@ -\d)", re.M)


@dataclass(frozen=True)
class Split:
    """The fix divided into what the verifier hides and what the reference applies."""

    tests: tuple[str, ...]
    """Test paths the commit added or modified: copied in only for the verifier."""
    deleted_tests: tuple[str, ...]
    """Test paths the commit deleted (they stay in the starting state; reported)."""
    source: tuple[str, ...]
    """Every other changed path: the reference patch."""


def split_commit(fix: FixCommit, globs: Sequence[str] = DEFAULT_TEST_GLOBS) -> Split:
    """Classify the commit's paths by ``globs``.

    Raises:
        ConfigError: the commit changes no test file, or nothing but test files.
    """
    pats = [glob_regex(g) for g in globs]
    tests: list[str] = []
    deleted: list[str] = []
    source: list[str] = []
    for c in fix.changed:
        if any(p.fullmatch(c.path) for p in pats):
            (deleted if c.status == "D" else tests).append(c.path)
        else:
            source.append(c.path)
    where = f"commit {fix.sha[:12]}"
    if not tests:
        raise ConfigError(
            f"{where} adds or changes no test file (test files match {', '.join(globs)}; "
            "name others with --tests GLOB): there is nothing to verify the fix with",
            file=fix.repo,
        )
    if not source:
        raise ConfigError(
            f"{where} changes only test files ({', '.join(tests[:5])}): there is no fix to "
            "make, so no reference solution",
            file=fix.repo,
        )
    return Split(tuple(tests), tuple(deleted), tuple(source))


def check_request(request: str, patch: bytes, origin: str) -> str:
    """Return ``request`` stripped, refusing one that is empty or quotes ``patch``.

    Raises:
        ConfigError: the request is empty, holds a diff header, or a line of the patch's
            added code (names the line).
    """
    text = request.strip()
    if not text:
        raise ConfigError("the request is empty (write one with --request FILE)", file=origin)
    m = _DIFF_HEADER.search(text)
    if m:
        raise ConfigError(
            f"the request holds a diff ({m.group(0)!r}): it would hand the solution to the "
            "agent; write one with --request FILE",
            file=origin,
        )
    prose = " ".join(text.split())
    for raw in patch.decode("utf-8", errors="replace").splitlines():
        if not raw.startswith("+") or raw.startswith("+++"):
            continue
        line = " ".join(raw[1:].split())
        if len(line.replace(" ", "")) >= _MIN_QUOTE and line in prose:
            raise ConfigError(
                f"the request quotes the reference patch ({line[:80]!r}): it would hand the "
                "solution to the agent; write one with --request FILE",
                file=origin,
            )
    return text
