"""The verifier's interpreter guard and the runner canary, with a real pytest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.trial.junit import parse_junit
from harness.trial.runner_guard import (
    CANARY_LOG,
    check_canary,
    guard_env,
    guard_files,
    guarded_runs,
)

PATCH_OUTCOMES = (
    "import _pytest.reports as _r\n_init = _r.TestReport.__init__\n"
    "def _patched(self, *a, **k):\n    _init(self, *a, **k)\n"
    "    self.outcome, self.longrepr = 'passed', None\n"
    "_r.TestReport.__init__ = _patched\n"
)


def _run(tmp_path: Path, lib: str, extra: dict[str, str] | None = None):
    ws, io = tmp_path / "ws", tmp_path / "io"
    (ws / "tests").mkdir(parents=True)
    (ws / "lib.py").write_text(lib)
    (ws / "tests" / "test_lib.py").write_text(
        "from lib import X\n\ndef test_x():\n    assert X == 2\n\ndef test_y():\n    pass\n"
    )
    for rel, text in (extra or {}).items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    for rel, data in guard_files().items():
        (io / rel).parent.mkdir(parents=True, exist_ok=True)
        (io / rel).write_bytes(data)
    env = {"PATH": os.environ["PATH"], **guard_env(str(io), "n0nce")}
    argv = [sys.executable, "-m", "pytest", "-q", "--junitxml=reports/junit.xml", "tests"]
    done = subprocess.run(argv, cwd=ws, env=env, capture_output=True, check=False)
    junit = (ws / "reports" / "junit.xml").read_bytes() if (ws / "reports").exists() else None
    log = (io / CANARY_LOG).read_bytes() if (io / CANARY_LOG).exists() else b""
    guarded = str(ws / "reports" / "junit.xml") in {r.junit for r in guarded_runs(log)}
    return done, junit, guarded


@pytest.mark.parametrize("x", [1, 2])
def test_an_honest_run_keeps_its_exit_status_and_loses_the_canary(tmp_path, x):
    done, junit, guarded = _run(tmp_path, f"X = {x}\n")
    assert done.returncode == (0 if x == 2 else 1), done.stdout
    assert guarded
    stripped, problem = check_canary(junit, "n0nce", guarded=guarded)
    assert problem is None
    assert stripped is not None
    report = parse_junit(stripped)
    assert report.tests == 2 and report.failures == (0 if x == 2 else 1)


def test_an_import_time_patch_of_the_runner_is_caught(tmp_path):
    done, junit, guarded = _run(tmp_path, "X = 1\n" + PATCH_OUTCOMES)
    assert done.returncode == 0  # the patch fooled pytest itself
    _, problem = check_canary(junit, "n0nce", guarded=guarded)
    assert problem is not None and "reported passed" in problem


def test_a_workspace_pytest_package_does_not_stand_in_for_pytest(tmp_path):
    fake = "import sys\nprint('FAKE')\nsys.exit(0)\n"
    done, junit, _ = _run(
        tmp_path, "X = 1\n", {"pytest/__init__.py": "", "pytest/__main__.py": fake}
    )
    assert b"FAKE" not in done.stdout
    assert done.returncode == 1 and junit is not None


def test_a_dropped_canary_counts_only_when_it_was_armed() -> None:
    junit = b'<testsuite><testcase classname="t" name="a"/></testsuite>'
    assert check_canary(junit, "n", guarded=False) == (junit, None)
    assert check_canary(junit, "n", guarded=True)[1] is not None
    assert check_canary(None, "n", guarded=True) == (None, None)


def test_cross_check_flags_only_what_makes_a_run_look_better() -> None:
    from harness.trial.runner_guard import cross_check

    def doc(*cases: tuple[str, str]) -> bytes:
        body = "".join(
            f'<testcase classname="t.m" name="{n}">'
            + ("<failure/>" if s == "f" else "")
            + "</testcase>"
            for n, s in cases
        )
        return f"<testsuite>{body}</testsuite>".encode()

    collected = ["t.m::a", "t.m::b"]
    assert cross_check(doc(("a", "p"), ("b", "p")), collected) is None
    assert cross_check(doc(("a", "f")), collected) is None  # stopped early (-x): honest
    assert "missing" in (cross_check(doc(("a", "p")), collected) or "")
    assert "does not" in (cross_check(doc(("a", "p"), ("b", "p"), ("z", "p")), collected) or "")


def test_collect_argv_drops_the_report() -> None:
    from harness.trial.runner_guard import GuardedRun

    run = GuardedRun("j", "/w", ("-q", "--junitxml", "r.xml", "--junit-xml=x", "tests"), "py")
    assert run.collect_argv() == ["py", "-m", "pytest", "-q", "tests", "--collect-only", "-q"]
