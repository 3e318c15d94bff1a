"""What the harness adds to the verifier's interpreter and test runner (never to the tree).

* **Interpreter guard**: ``PYTHONSAFEPATH=1`` plus a ``sitecustomize`` (on ``PYTHONPATH``
  from the verifier's io dir) that appends the workspace to the *end* of ``sys.path``: the
  project stays importable, a workspace ``pytest/`` or ``json.py`` cannot stand in for the
  runner or the standard library.
* **Canary**: a pytest plugin (``-p harness_canary`` via ``PYTEST_ADDOPTS``) that, in every
  pytest run writing a JUnit report, adds one test that must fail, and leaves the exit
  status as it would be without it. Candidate code that rewrites outcomes or the report
  writer at import time turns the canary green or drops it: :func:`check_canary` catches
  both and strips the canary before the verdict is judged. The plugin logs each report it
  guards to ``<io>/canary.log`` before any test module (and so any candidate code) is
  imported.
"""

from __future__ import annotations

import json
import re
import secrets
from collections import Counter
from dataclasses import dataclass

from harness.trial.junit import JUnitError, parse_junit

__all__ = [
    "CANARY_LOG",
    "GUARD_DIR",
    "GuardedRun",
    "check_canary",
    "cross_check",
    "guard_env",
    "guard_files",
    "guarded_runs",
    "new_nonce",
]

GUARD_DIR = "pyguard"
"""Folder in the verifier's io dir holding the guard (never part of the tree)."""
CANARY_LOG = "canary.log"

_SITECUSTOMIZE = b'''\
"""harness: the verifier's Python imports from its workspace last, never first."""
import os
import sys

_extra = [os.getcwd()]
if sys.argv and sys.argv[0].endswith(".py"):
    _extra.append(os.path.dirname(os.path.abspath(sys.argv[0])))
for _p in _extra:
    if _p not in sys.path:
        sys.path.append(_p)
'''

_PLUGIN = b'''\
"""harness canary: one test that must fail in every pytest run that writes a JUnit report."""
import json
import os
import sys

import pytest

_NAME = "harness_canary_" + os.environ.get("HARNESS_CANARY", "unset")
_LOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "canary.log")


class _Canary(pytest.Item):
    def runtest(self):
        raise AssertionError("harness canary")

    def repr_failure(self, excinfo, style=None):
        return "harness canary: fails on purpose (checks the runner reports failures)"

    def reportinfo(self):
        return self.path, None, _NAME


def pytest_configure(config):
    xml = getattr(config.option, "xmlpath", None)
    collect = getattr(config.option, "collectonly", False)
    config._harness_canary = bool(xml) and not collect
    config._harness_collect = os.environ.get("HARNESS_COLLECT_OUT") if collect else None
    if config._harness_canary:
        entry = {
            "junit": os.path.abspath(xml),
            "dir": str(config.invocation_params.dir),
            "args": [str(a) for a in config.invocation_params.args],
            "python": sys.executable,
        }
        with open(_LOG, "a") as fh:
            fh.write(json.dumps(entry) + "\\n")


def pytest_collection_finish(session):
    out = getattr(session.config, "_harness_collect", None)
    if out:
        from _pytest.junitxml import mangle_test_address

        prefix = getattr(session.config.option, "junitprefix", None)
        ids = []
        for item in session.items:
            names = mangle_test_address(item.nodeid)
            if prefix:
                names[0] = prefix + "." + names[0]
            ids.append(".".join(names[:-1]) + "::" + names[-1] if len(names) > 1 else names[0])
        with open(out, "w") as fh:
            json.dump(ids, fh)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    if getattr(config, "_harness_canary", False):
        items.append(_Canary.from_parent(session, name=_NAME))


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report, config):
    # Keep the canary out of the terminal's failures (reviewers read that output).
    if report.when == "call" and report.nodeid.endswith("::" + _NAME):
        return "harness canary", "", ""


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    # The canary's own failure must not change the run's exit status.
    if getattr(session.config, "_harness_canary", False) and exitstatus == 1:
        if session.testsfailed == 1:
            session.exitstatus = 0
'''


@dataclass(frozen=True)
class GuardedRun:
    """One pytest run the plugin armed, as it logged itself before importing any test."""

    junit: str
    dir: str
    args: tuple[str, ...]
    python: str

    def collect_argv(self) -> list[str]:
        """Return the same run as ``--collect-only`` (no report written, no canary)."""
        args, skip = [], False
        for a in self.args:
            if skip:
                skip = False
            elif a in ("--junitxml", "--junit-xml"):
                skip = True
            elif not a.startswith(("--junitxml=", "--junit-xml=")):
                args.append(a)
        return [self.python, "-m", "pytest", *args, "--collect-only", "-q"]


def guarded_runs(log: bytes) -> list[GuardedRun]:
    """Parse the plugin's log (unparsable lines are ignored: they only weaken the check)."""
    runs = []
    for line in log.decode(errors="replace").splitlines():
        try:
            d = json.loads(line)
            runs.append(GuardedRun(d["junit"], d["dir"], tuple(d["args"]), d["python"]))
        except (ValueError, KeyError, TypeError):
            continue
    return runs


def cross_check(data: bytes | None, collected: list[str]) -> str | None:
    """Compare a (canary-stripped) JUnit report with a separate collection of its suite.

    Only differences that could make a run look better count: a passing test the runner
    never collected (fabricated), or collected tests missing from a report without any
    failure or error (dropped). A run stopped early by ``-x`` reports failures and fewer
    tests: not tampering.
    """
    if data is None:
        return None
    try:
        report = parse_junit(data)
    except JUnitError:
        return None
    want = Counter(collected)
    got = Counter(c.id for c in report.cases)
    made_up = [c.id for c in report.cases if c.status == "passed" and c.id not in want]
    if made_up:
        return (
            f"the report has {len(made_up)} passing test(s) a separate collection does not "
            f"know (e.g. {made_up[0]}): the candidate tampered with the test runner"
        )
    missing = want - got
    if missing and report.failures == 0 and report.errors == 0:
        first = next(iter(missing))
        return (
            f"{sum(missing.values())} collected test(s) are missing from a green report "
            f"(e.g. {first}): the candidate tampered with the test runner"
        )
    return None


def new_nonce() -> str:
    """Return a fresh canary name suffix (unguessable before the verifier runs)."""
    return secrets.token_hex(8)


def guard_files() -> dict[str, bytes]:
    """Return the guard's files, relative to the verifier's io dir."""
    return {
        f"{GUARD_DIR}/sitecustomize.py": _SITECUSTOMIZE,
        f"{GUARD_DIR}/harness_canary.py": _PLUGIN,
    }


def guard_env(io_dir: str, nonce: str) -> dict[str, str]:
    """Return the variables that isolate the verifier's interpreter and arm the canary."""
    return {
        "PYTHONSAFEPATH": "1",
        "PYTHONPATH": f"{io_dir}/{GUARD_DIR}",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTEST_ADDOPTS": "-p no:cacheprovider -p harness_canary",
        "HARNESS_CANARY": nonce,
    }


def check_canary(
    data: bytes | None, nonce: str, *, guarded: bool
) -> tuple[bytes | None, str | None]:
    """Check and strip the canary of one JUnit report.

    ``guarded``: the plugin logged that it armed a canary for this report. Returns the
    report without the canary and a problem (tampering) when the canary did not fail, or
    is missing from a guarded report.
    """
    if data is None:
        return None, None
    name = f"harness_canary_{nonce}"
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
