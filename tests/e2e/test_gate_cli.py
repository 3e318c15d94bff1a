"""Baselines and the gate through the CLI: promote, re-execute, decide, exit codes."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from support import harness

from harness.planning import plan_run
from harness.project import load_project
from harness.store.records import Arm

pytestmark = pytest.mark.integration


def _promote_good(project) -> None:
    done = harness(project, "run", "--release", "good", "--k", "2", "--no-report")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    done = harness(project, "baseline", "promote", "latest", "--name", "prod")
    assert done.returncode == 0, done.stderr
    assert (project / "baselines" / "prod" / "baseline.json").is_file()
    for f in (project / "baselines" / "prod").rglob("*.json"):
        text = f.read_text()
        assert "/harness-" not in text and str(project) not in text, f"host path in {f}"


def test_same_system_against_its_baseline_passes(project):
    _promote_good(project)
    done = harness(
        project, "run", "--release", "good", "--k", "2", "--baseline", "prod", "--no-report"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "re-executed baseline agrees with the stored baseline" in done.stdout
    shown = json.loads(harness(project, "show", "--json").stdout)
    arms = Counter(t["key"]["arm"] for t in shown["trials"])
    assert arms == {"candidate": 6, "baseline": 6}


def test_a_release_that_breaks_everything_fails_the_gate(project):
    _promote_good(project)
    done = harness(
        project, "run", "--release", "bad", "--k", "2", "--baseline", "prod", "--no-report"
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL" in done.stdout
    again = harness(project, "gate", "--json")
    assert again.returncode == 1
    assert json.loads(again.stdout)["verdict"] == "fail"


def test_unknown_baseline_is_a_config_error(project):
    done = harness(project, "run", "--release", "good", "--baseline", "nope")
    assert done.returncode == 2 and "no baseline 'nope'" in done.stderr


def test_flaky_looking_cases_get_extra_trials_per_policy(project):
    (project / "policy.yaml").write_text('version: "1"\nflaky_reruns: {extra_trials: 2}\n')
    done = harness(project, "run", "--release", "coin", "--k", "3", "--no-report")
    assert done.returncode in (0, 3), done.stdout + done.stderr
    shown = json.loads(harness(project, "show", "--json").stdout)
    by_case: dict[str, list[tuple[int, str]]] = {}
    for t in shown["trials"]:
        by_case.setdefault(t["key"]["case_id"], []).append(
            (t["key"]["trial"], t["verdict"]["outcome"])
        )
    for case, trials in by_case.items():
        first = {o for i, o in trials if i < 3}
        expected = 5 if first == {"pass", "fail"} else 3
        assert len(trials) == expected, (case, trials)
    assert any(len(t) == 5 for t in by_case.values()), (
        "the coin release should look flaky somewhere"
    )


def test_sampled_baseline_reexecutes_only_the_sample(project):
    _promote_good(project)
    (project / "policy.yaml").write_text(
        'version: "1"\nbaseline: {mode: sample, sample_size: 1, seed: 7}\n'
    )
    plan = plan_run(load_project(project), "good", 2, baseline="prod")
    per_arm = Counter(s.key.arm for s in plan.specs)
    assert per_arm == {Arm.CANDIDATE: 6, Arm.BASELINE: 2}


def test_gate_refuses_when_the_stored_baseline_was_replaced(project):
    _promote_good(project)
    done = harness(
        project, "run", "--release", "good", "--k", "2", "--baseline", "prod", "--no-report"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = json.loads(harness(project, "show", "--json").stdout)["release"]["run_id"]
    # judged alone, a release that passes nothing fails (issue 11), but its run is stored
    assert harness(project, "run", "--release", "bad", "--k", "1", "--no-report").returncode == 1
    assert (
        harness(project, "baseline", "promote", "latest", "--name", "prod", "--force").returncode
        == 0
    )
    refused = harness(project, "gate", run_id)
    assert refused.returncode == 2
    assert "changed after the run started" in refused.stderr
