"""Shared fixtures: a tiny case on disk, specs and a scripted sandbox."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from harness.cases.load import load_case
from harness.project import AgentSpec, Release, RetryPolicy
from harness.store.records import Arm, TrialKey
from harness.trial.spec import TrialSpec

CASE_YAML = """\
id: tiny
version: 1
request: Make `answer()` return 42.
repo: {kind: folder, path: repo}
verifier:
  command: [run-tests]
  artifacts:
    - path: reports/junit.xml
      rule: junit
      min_tests: 1
      fail_to_pass: [tests.test_hidden::test_answer]
  hidden:
    - {src: hidden/test_hidden.py, dest: tests/test_hidden.py}
reference: {patch: reference.patch}
"""


@pytest.fixture
def make_case(tmp_path: Path) -> Callable[..., Path]:
    def make(extra: str = "", name: str = "tiny") -> Path:
        d = tmp_path / "cases" / name
        (d / "repo" / "pkg").mkdir(parents=True)
        (d / "repo" / "pkg" / "mod.py").write_text("def answer():\n    return 41\n")
        (d / "hidden").mkdir()
        (d / "hidden" / "test_hidden.py").write_text("SECRET_HIDDEN_TEST_BODY = 1\n")
        (d / "reference.patch").write_text(
            textwrap.dedent(
                """\
                --- a/pkg/mod.py
                +++ b/pkg/mod.py
                @@ -1,2 +1,2 @@
                 def answer():
                -    return 41
                +    return 42
                """
            )
        )
        (d / "case.yaml").write_text(CASE_YAML.replace("id: tiny", f"id: {name}") + extra)
        return d

    return make


@pytest.fixture
def make_spec() -> Callable[..., TrialSpec]:
    def make(case_dir: Path, *, retry: RetryPolicy | None = None, trial: int = 0) -> TrialSpec:
        lc = load_case(case_dir)
        return TrialSpec(
            key=TrialKey(
                arm=Arm.CANDIDATE,
                release="cand",
                case_id=lc.id,
                case_version=lc.version,
                trial=trial,
            ),
            project_root=str(case_dir.parent.parent),
            case_dir=str(case_dir),
            case_digest=lc.digest,
            release=Release(
                agent=AgentSpec(adapter="command", command=("agent",)), retry=retry or RetryPolicy()
            ),
            system_digest="sha256:test",
            backend="fake",
        )

    return make


@pytest.fixture
def live_pid() -> Iterator[int]:
    """The pid of a process that lives for the whole test."""
    proc = subprocess.Popen(["sleep", "600"])
    yield proc.pid
    proc.kill()
    proc.wait()


@pytest.fixture
def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid
