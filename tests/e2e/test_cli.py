"""The CLI end to end on a tiny real project with the real local sandbox."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from support import harness

pytestmark = pytest.mark.integration


def _trials(root: Path) -> list[Path]:
    return sorted((root / ".harness" / "runs").glob("*/trials/*.json"))


def test_run_good_release_passes_and_show_lists_every_trial(project):
    done = harness(project, "run", "--release", "good", "--k", "2", "--no-report")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS" in done.stdout
    # Not a terminal: heartbeat lines instead of a progress bar, one per finished case.
    beats = [line for line in done.stderr.splitlines() if "cases finished" in line]
    assert beats[-1].split("·")[1].strip() == "3/3 cases finished", done.stderr
    shown = json.loads(harness(project, "show", "--json").stdout)
    assert len(shown["trials"]) == 6
    assert {t["verdict"]["outcome"] for t in shown["trials"]} == {"pass"}
    assert shown["release"]["policy_digest"].startswith("sha256:")


def test_overclaiming_bad_release_fails_every_trial_despite_its_claims(project):
    done = harness(project, "run", "--release", "bad", "--k", "2", "--no-report")
    shown = json.loads(harness(project, "show", "--json").stdout)
    claims = [t["attempts"][0]["claim"]["claimed_success"] for t in shown["trials"]]
    assert all(claims)
    assert {t["verdict"]["outcome"] for t in shown["trials"]} == {"fail"}
    # no baseline: the candidate alone is judged, and a 0 % pass rate never exits 0
    assert done.returncode == 1 and "not one of the candidate's" in done.stdout


def test_unknown_release_is_a_usage_error_without_traceback(project):
    done = harness(project, "run", "--release", "nope")
    assert done.returncode == 2
    assert "unknown release 'nope'" in done.stderr and "Traceback" not in done.stderr


def test_bad_case_file_is_a_config_error_naming_file_and_field(project):
    p = project / "cases" / "add-0" / "case.yaml"
    p.write_text(p.read_text().replace("version: 1", "version: one"))
    done = harness(project, "run", "--release", "good")
    assert done.returncode == 2
    assert "add-0/case.yaml:2 [version]" in done.stderr and "Traceback" not in done.stderr
    assert not (project / ".harness").exists(), "nothing is stored for bad input"


def test_rewritten_locked_case_is_refused_naming_files(project):
    (project / "cases" / "add-1" / "hidden" / "verify_hidden.py").write_text(
        "import sys; sys.exit(0)\n"
    )
    done = harness(project, "cases", "check")
    assert done.returncode == 2
    assert "add-1 v1" in done.stderr and "hidden/verify_hidden.py" in done.stderr
    assert harness(project, "run", "--release", "good").returncode == 2


def test_edited_policy_makes_gate_refuse(project):
    assert harness(project, "run", "--release", "good", "--k", "1", "--no-report").returncode == 0
    assert harness(project, "gate").returncode == 0
    (project / "policy.yaml").write_text('version: "2"\nalpha: 0.2\n')
    done = harness(project, "gate")
    assert done.returncode == 2
    assert "policy changed after the run started" in done.stderr


def test_changed_orchestration_mid_run_invalidates_the_run(project):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--release",
            "good",
            "--k",
            "3",
            "--jobs",
            "1",
            "--no-report",
        ],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not _trials(project) and time.monotonic() < deadline:
        time.sleep(0.05)
    (project / "prompt.txt").write_text("You are a reckless engineer.\n")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 4, out + err
    assert "system digest changed during the run" in out
    refused = harness(project, "baseline", "promote", "latest", "--name", "prod")
    assert refused.returncode == 2 and "cannot be a baseline" in refused.stderr
    assert not (project / "baselines").exists()


def test_sigkill_mid_run_then_resume_keeps_every_finished_trial(project):
    args = [
        sys.executable,
        "-m",
        "harness.cli",
        "run",
        "--release",
        "good",
        "--k",
        "4",
        "--jobs",
        "2",
        "--no-report",
    ]
    proc = subprocess.Popen(
        args,
        cwd=project,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while len(_trials(project)) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # Only records committed to the run's manifest are part of it; one written just
    # before the kill but not committed is run again (see test_store_cli.py).
    [run_dir] = (project / ".harness" / "runs").iterdir()
    committed = {
        json.loads(x)["path"] for x in (run_dir / "manifest.jsonl").read_text().splitlines()
    }
    before = {
        p.name: (p.stat().st_ino, p.read_bytes())
        for p in _trials(project)
        if f"trials/{p.name}" in committed
    }
    assert 2 <= len(before) < 12  # at most one record is written but not yet committed
    done = harness(project, "run", "--release", "good", "--k", "4", "--no-report")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"resuming, {len(before)} trials already recorded" in done.stderr
    after = {p.name: (p.stat().st_ino, p.read_bytes()) for p in _trials(project)}
    assert len(after) == 12
    for name, (ino, data) in before.items():
        assert after[name] == (ino, data), f"{name} was rewritten"
    for p in _trials(project):
        json.loads(p.read_text())  # none corrupt
    assert not list((project / ".harness" / "runs").glob("*/trials/.tmp-*"))
    leftovers = [
        d
        for d in Path(tempfile.gettempdir()).glob("harness-*")
        if (d / ".harness-owner").is_file()
        and (d / ".harness-owner").read_text().strip() == str(proc.pid)
    ]
    assert leftovers == [], "sessions of the killed run must be swept by the next run"


def _resolved(project: Path, release: str) -> tuple[int, list[dict]]:
    harness(project, "run", "--release", release, "--k", "4", "--no-report")
    shown = json.loads(harness(project, "show", "--json").stdout)
    return sum(t["verdict"]["outcome"] == "pass" for t in shown["trials"]), shown["trials"]


def test_correction_attempts_resolve_more_trials_with_visible_lineage(project):
    without, _ = _resolved(project, "learner-no-retry")
    with_retry, trials = _resolved(project, "learner")
    assert with_retry > without
    corrected = [t for t in trials if len(t["attempts"]) == 2]
    assert corrected, "some trial must have needed a second attempt"
    for t in corrected:
        first, second = t["attempts"]
        assert first["verdict"]["outcome"] == "fail" and second["feedback_blob"]
        if first["verdict"]["failure_type"] == "test_failure":  # a botched change
            # The revision is new bytes, so a new identity. (A first attempt that failed
            # for another reason may be resubmitted unchanged: same bytes, same identity.)
            assert first["candidate_digest"] != second["candidate_digest"], (first, second)
        assert t["stop_reason"] in {"passed", "attempt_limit", "identical_failure"}
    table = harness(project, "show").stdout
    assert "fail(test_failure) → pass" in table


def test_a_tampering_agent_cannot_change_its_verdict(project):
    hidden = project / "cases" / "add-0" / "hidden" / "verify_hidden.py"
    before = hidden.read_bytes()
    harness(project, "run", "--release", "tamper", "--k", "1", "--no-report")
    assert hidden.read_bytes() == before, "writes outside the workspace must fail"
    shown = json.loads(harness(project, "show", "--json").stdout)
    assert len(shown["trials"]) == 3
    for t in shown["trials"]:
        attempt = t["attempts"][0]
        assert attempt["claim"]["claimed_success"] is True
        assert t["verdict"]["outcome"] == "fail", t["verdict"]
        assert t["verdict"]["failure_type"] == "test_failure"
        assert len(attempt["tampering"]) == 2  # shipped report removed, hidden path overwritten


def test_cases_validate_proves_red_and_green_and_flags_a_verifier_that_cannot_go_red(project):
    ok = harness(project, "cases", "validate", "--case", "add-0")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "✓ add-0" in ok.stdout
    assert "exit status alone" not in ok.stdout
    # Judged by exit status alone (red team round twenty-two: code under test ended the
    # run with os._exit(0) and passed): proven all the same, and said.
    spec = project / "cases" / "add-2" / "case.yaml"
    text = spec.read_text()
    start, end = text.index("  artifacts:"), text.index("  hidden:")
    spec.write_text(text[:start] + text[end:])
    bare = harness(project, "cases", "validate", "--case", "add-2")
    assert bare.returncode == 0, bare.stdout + bare.stderr
    assert "add-2: judged by its verifier's exit status alone" in bare.stdout
    hidden = project / "cases" / "add-1" / "hidden" / "verify_hidden.py"
    hidden.write_text(hidden.read_text().replace("ok = add(2, 2) == 4", "ok = True"))
    broken = harness(project, "cases", "validate", "--case", "add-1")
    assert broken.returncode == 2
    assert "cannot go red" in broken.stdout
