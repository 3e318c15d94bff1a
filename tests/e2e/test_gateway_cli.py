"""The CLI with a model upstream (key and executor checks) and candidate replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import harness

pytestmark = pytest.mark.integration

UPSTREAM_RELEASE = """\
  modelled:
    agent: {adapter: command, command: [sh, -c, "true"]}
    upstream:
      base_url: http://127.0.0.1:9/v1
      model: scripted-model-1
      key_env: HGW_E2E_KEY
      price: {input_per_mtok: 1.0, output_per_mtok: 2.0}
"""


def _add_release(root: Path, text: str) -> None:
    path = root / "harness.yaml"
    path.write_text(path.read_text() + text)


def test_missing_key_variable_stops_the_run_before_the_first_trial(project, monkeypatch):
    monkeypatch.delenv("HGW_E2E_KEY", raising=False)
    _add_release(project, UPSTREAM_RELEASE)
    done = harness(project, "run", "--release", "modelled", "--k", "1", "--no-report")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "releases.modelled.upstream.key_env" in done.stderr and "HGW_E2E_KEY" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (project / ".harness" / "runs").exists()


def test_dask_executor_with_an_upstream_is_refused(project, monkeypatch):
    monkeypatch.setenv("HGW_E2E_KEY", "sk-e2e")
    _add_release(project, UPSTREAM_RELEASE)
    done = harness(
        project, "run", "--release", "modelled", "--k", "1", "--executor", "dask", "--no-report"
    )
    assert done.returncode == 2 and "--executor" in done.stderr, done.stderr
    assert not (project / ".harness" / "runs").exists()


def test_upstream_is_part_of_the_system_digest_but_not_the_key_variable(project):
    from harness.project import load_project

    _add_release(project, UPSTREAM_RELEASE)
    p = load_project(project)
    before = p.system_digest("modelled", "ts", "v")
    path = project / "harness.yaml"
    path.write_text(path.read_text().replace("HGW_E2E_KEY", "OTHER_KEY"))
    assert load_project(project).system_digest("modelled", "ts", "v") == before
    path.write_text(path.read_text().replace("output_per_mtok: 2.0", "output_per_mtok: 3.0"))
    assert load_project(project).system_digest("modelled", "ts", "v") != before


def _shown(root: Path) -> dict:  # type: ignore[type-arg]
    done = harness(root, "show", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_replay_reverifies_recorded_candidates_and_reports_flips(project):
    first = harness(project, "run", "--release", "coin", "--k", "2", "--no-report")
    assert first.returncode in (0, 1), first.stderr
    recorded = _shown(project)
    run_id = recorded["release"]["run_id"]
    _add_release(project, f"  coin-replay:\n    agent: {{adapter: replay, replay_run: {run_id}}}\n")
    again = harness(project, "run", "--release", "coin-replay", "--k", "2", "--no-report")
    assert "0 verdict flip(s)" in again.stdout, again.stdout + again.stderr
    replayed = _shown(project)

    def by_trial(shown: dict) -> dict:  # type: ignore[type-arg]
        return {
            (t["key"]["case_id"], t["key"]["trial"]): (
                t["attempts"][-1]["candidate_digest"],
                t["verdict"]["outcome"],
            )
            for t in shown["trials"]
        }

    assert by_trial(replayed) == by_trial(recorded)
    # Today's verifier of one case rejects everything: each recorded pass of it flips.
    passes = [k for k, (_, v) in sorted(by_trial(recorded).items()) if v == "pass"]
    assert passes, "the recorded run must have a pass to flip"
    target = passes[0][0]
    passed = [k for k in passes if k[0] == target]
    case = project / "cases" / target
    (case / "hidden" / "verify_hidden.py").write_text("import sys\nsys.exit(1)\n")
    (case / "case.yaml").write_text(
        (case / "case.yaml").read_text().replace("version: 1", "version: 2")
    )
    assert harness(project, "cases", "lock").returncode == 0
    flipped = harness(project, "run", "--release", "coin-replay", "--k", "2", "--no-report")
    assert f"{len(passed)} verdict flip(s)" in flipped.stdout, flipped.stdout + flipped.stderr
    for case_id, trial in passed:
        assert f"flip {case_id} t{trial}: pass → fail" in flipped.stdout


def test_replay_without_replay_run_is_a_config_error(project):
    _add_release(project, "  bare-replay:\n    agent: {adapter: replay}\n")
    done = harness(project, "run", "--release", "bare-replay", "--k", "1", "--no-report")
    assert done.returncode == 2 and "releases.bare-replay.agent.replay_run" in done.stderr
