"""A gated run that replays its own baseline: the baseline arm from the recorded responses,
the candidate live, and the candidate compared with the stored baseline's trials."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from scripted_upstream import Script, ScriptedUpstream
from support import harness
from test_gateway_cli import E2E_KEY, FIX, _agent_project

pytestmark = pytest.mark.integration

SENTENCE = (
    "the baseline arm was re-executed from recorded model responses (not a fresh sample): "
    "the candidate is compared with the stored baseline's 1 trials per case; the "
    "re-executed arm measures evaluator and environment drift only"
)
GATED = ("--baseline", "modelled", "--model-replay", "baseline:modelled")


def _promote(root: Path) -> None:
    done = harness(root, "run", "--release", "tool", "--k", "1", "--no-report")
    assert done.returncode == 0, done.stdout + done.stderr
    done = harness(root, "baseline", "promote", "latest", "--name", "modelled")
    assert done.returncode == 0, done.stdout + done.stderr


def _trials(root: Path) -> list[dict]:  # type: ignore[type-arg]
    done = harness(root, "show", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["trials"]  # type: ignore[no-any-return]


def _gate(root: Path) -> dict:  # type: ignore[type-arg]
    done = harness(root, "gate", "--json")
    assert done.returncode in (0, 1, 3, 4), done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _runs(root: Path) -> set[str]:
    return {p.name for p in (root / ".harness" / "runs").iterdir()}


def test_baseline_replay_runs_the_candidate_live_and_compares_with_stored_trials(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("HGW_E2E_KEY", E2E_KEY)
    with ScriptedUpstream(Script(list(FIX))) as up:
        root = _agent_project(tmp_path, up)
        _promote(root)
        before = len(up.served)
        runs = _runs(root)
        # Another baseline's responses cannot re-execute this one: exit 2, nothing stored.
        other = harness(
            root, "run", "--release", "tool", "--k", "2", "--baseline", "modelled",
            "--model-replay", "baseline:elsewhere", "--no-report",
        )  # fmt: skip
        assert other.returncode == 2 and "--model-replay" in other.stderr, other.stderr
        assert "Traceback" not in other.stderr and _runs(root) == runs
        # The candidate calls its upstream live: its key is required.
        monkeypatch.delenv("HGW_E2E_KEY")
        nokey = harness(root, "run", "--release", "tool", "--k", "2", *GATED, "--no-report")
        assert nokey.returncode == 2 and "HGW_E2E_KEY" in nokey.stderr, nokey.stderr
        assert _runs(root) == runs and len(up.served) == before
        monkeypatch.setenv("HGW_E2E_KEY", E2E_KEY)
        done = harness(root, "run", "--release", "tool", "--k", "2", *GATED)
        assert done.returncode == 0, done.stdout + done.stderr
        live = up.served[before:]
    # The candidate's 2 trials × 3 turns reached the upstream; the baseline arm none.
    assert len(live) == 6 and all(s.authorization == f"Bearer {E2E_KEY}" for s in live)
    trials = _trials(root)
    arms = {(t["key"]["arm"], t["key"]["trial"]): t for t in trials}
    # The baseline arm re-executes the stored trial it has responses for (k = 1), no more.
    assert sorted(arms) == [("baseline", 0), ("candidate", 0), ("candidate", 1)]
    base = arms[("baseline", 0)]
    assert base["verdict"]["outcome"] == "pass"
    assert base["attempts"][-1]["model"]["replayed_from"] == "baseline:modelled"
    for t in (0, 1):
        model = arms[("candidate", t)]["attempts"][-1]["model"]
        assert model["replayed_from"] is None and model["turns"] == 3
    decision = _gate(root)["decision"]
    assert decision["baseline_replayed"] is True
    infos = {r["code"]: r["message"] for r in decision["reasons"]}
    assert infos["baseline_replayed"] == SENTENCE
    assert "baseline_reproduced" in infos  # the drift check: replayed vs stored
    assert decision["comparison"]["e1"]["mean_baseline"] == 1.0
    notes = _gate(root)["notes"]
    flips = "baseline replay: 0 of 1 re-executed baseline trials changed verdict"
    assert any(n.startswith(flips) for n in notes), notes
    run_id = json.loads(harness(root, "show", "--json").stdout)["release"]["run_id"]
    page = html.unescape((root / "reports" / run_id / "index.html").read_text())
    comparison = page.split('<section id="comparison">', 1)[1].split("</section>", 1)[0]
    assert SENTENCE in comparison
    from harness.project import load_project
    from harness.report.data import build_report
    from harness.report.junit import render_junit
    from harness.store.store import Store

    project = load_project(root)
    data = build_report(project, Store(project.store_dir), run_id)
    assert [c.baseline_source for c in data.cases] == ["stored"]  # the per-case table
    junit = render_junit(data, baseline=True).decode()
    assert "re-executed from recorded model responses (drift check only)" in junit
    assert "(not a fresh sample)" in (root / "reports" / run_id / "summary.md").read_text()
    summary = json.loads((root / ".harness" / "runs" / run_id / "summary.json").read_text())
    assert summary["baseline_replayed"] is True


def test_an_environment_change_shows_as_drift_under_baseline_replay(tmp_path, monkeypatch):
    monkeypatch.setenv("HGW_E2E_KEY", E2E_KEY)
    monkeypatch.delenv("HGW_DRIFT", raising=False)
    with ScriptedUpstream(Script(list(FIX))) as up:
        root = _agent_project(tmp_path, up)
        case = root / "cases" / "add-0"
        # The verifier reads a host variable it is allowed to see: outside the case digest,
        # so a changed value is environment drift, not a new case version.
        text = (case / "case.yaml").read_text()
        (case / "case.yaml").write_text(
            text.replace("version: 1", "version: 2").replace(
                "verifier: {timeout_seconds: 30, memory_mb: 256, pids: 64, disk_mb: 64}",
                "verifier: {timeout_seconds: 30, memory_mb: 256, pids: 64, disk_mb: 64, "
                "env: [HGW_DRIFT]}",
            )
        )
        hidden = case / "hidden" / "verify_hidden.py"
        hidden.write_text(
            hidden.read_text().replace(
                "ok = add(2, 2) == 4", "ok = add(2, 2) == 4 and not os.environ.get('HGW_DRIFT')"
            )
        )
        assert harness(root, "cases", "lock").returncode == 0
        _promote(root)
        monkeypatch.setenv("HGW_DRIFT", "1")
        before = len(up.served)
        done = harness(root, "run", "--release", "tool", "--k", "1", *GATED, "--no-report")
        assert len(up.served) - before == 3  # the candidate only
    assert done.returncode in (1, 4), done.stdout + done.stderr
    base = next(t for t in _trials(root) if t["key"]["arm"] == "baseline")
    # Same recorded responses, same candidate tree: only the verifier's world changed.
    assert base["attempts"][-1]["model"]["replayed_from"] == "baseline:modelled"
    assert base["verdict"]["outcome"] == "fail"
    decision = _gate(root)["decision"]
    assert decision["baseline_replayed"] is True
    assert decision["drift"]["aggregate"]["mean_diff"] == -1.0
    assert decision["drift"]["broken"] == ["add-0"]
    flips = "baseline replay: 1 of 1 re-executed baseline trials changed verdict"
    assert any(n.startswith(flips) and "add-0 t0 pass → fail" in n for n in _gate(root)["notes"])


def test_replaying_a_baseline_that_calls_no_model_is_refused(project):
    assert harness(project, "run", "--release", "good", "--k", "1", "--no-report").returncode == 0
    assert harness(project, "baseline", "promote", "latest", "--name", "plain").returncode == 0
    runs = _runs(project)
    done = harness(
        project, "run", "--release", "good", "--k", "1", "--baseline", "plain",
        "--model-replay", "baseline:plain", "--no-report",
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--model-replay" in done.stderr and "calls no model" in done.stderr
    assert "Traceback" not in done.stderr and _runs(project) == runs


@pytest.mark.slow
def test_baseline_replay_under_dask_serves_only_the_baseline_arm(tmp_path, monkeypatch):
    monkeypatch.setenv("HGW_E2E_KEY", E2E_KEY)
    with ScriptedUpstream(Script(list(FIX))) as up:
        root = _agent_project(tmp_path, up)
        _promote(root)
        before = len(up.served)
        done = harness(
            root, "run", "--release", "tool", "--k", "1", *GATED, "--no-report",
            "--executor", "dask", "--jobs", "2",
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert len(up.served) - before == 3  # the candidate's trial only
    arms = {t["key"]["arm"]: t["attempts"][-1]["model"] for t in _trials(root)}
    assert arms["baseline"]["replayed_from"] == "baseline:modelled"
    assert arms["candidate"]["replayed_from"] is None
    assert _gate(root)["decision"]["baseline_replayed"] is True
