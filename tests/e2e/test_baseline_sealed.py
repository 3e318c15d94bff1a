"""Stored baselines under the sealed view: re-executable, or refused with a hint (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import harness

pytestmark = pytest.mark.integration

SCRIPTED = """\
  scripted:
    agent:
      adapter: command
      command: [sh, "{agent}/agent/fix.sh"]
      files: [agent]
"""

FIX = """\
cd "$HARNESS_WORKSPACE"
printf 'def add(a, b):\\n    return a + b\\n' > calc.py
printf '{"status": "submitted", "claimed_success": true}' > "$HARNESS_RESULT"
"""


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _run(project: Path, release: str, *extra: str):
    return harness(project, "run", "--release", release, "--k", "1", "--no-report", *extra)


def _promote(project: Path, release: str, name: str) -> None:
    assert _run(project, release).returncode == 0
    done = harness(project, "baseline", "promote", "latest", "--name", name)
    assert done.returncode == 0, done.stderr


def test_a_baseline_whose_agent_names_a_host_path_is_refused_with_a_hint(project):
    _promote(project, "good", "prod")
    path = project / "baselines" / "prod" / "baseline.json"
    data = json.loads(path.read_text())
    data["release"]["system"]["agent"] = {"adapter": "command", "command": ["{project}/a.sh"]}
    path.write_text(json.dumps(data))
    before = _listing(project)
    done = _run(project, "good", "--baseline", "prod")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "baseline.json" in done.stderr and "{project}" in done.stderr
    assert "harness baseline promote RUN --name prod --force" in done.stderr
    assert _listing(project) == before, "a refused run must store nothing"


def test_a_baseline_whose_declared_agent_files_changed_is_refused(project):
    (project / "harness.yaml").write_text((project / "harness.yaml").read_text() + SCRIPTED)
    (project / "agent").mkdir()
    (project / "agent" / "fix.sh").write_text(FIX)
    _promote(project, "scripted", "scr")
    # The declared files entered the sandbox and the agent passed; its baseline re-runs.
    again = _run(project, "good", "--baseline", "scr")
    assert again.returncode == 0, again.stdout + again.stderr
    (project / "agent" / "fix.sh").write_text(FIX + "# edited\n")
    before = _listing(project)
    done = _run(project, "good", "--baseline", "scr")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "agent files changed" in done.stderr and "--name scr --force" in done.stderr
    assert _listing(project) == before
