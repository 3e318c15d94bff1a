"""A promoted baseline keeps its model transcript, and model replay reads it from there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scripted_upstream import Script, ScriptedUpstream
from support import harness
from test_gateway_cli import E2E_KEY, FIX, _agent_project

pytestmark = pytest.mark.integration


def _trial(root: Path) -> dict:  # type: ignore[type-arg]
    done = harness(root, "show", "--json")
    assert done.returncode == 0, done.stderr
    (trial,) = json.loads(done.stdout)["trials"]
    return trial  # type: ignore[no-any-return]


def _promoted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict, int]:  # type: ignore[type-arg]
    monkeypatch.setenv("HGW_E2E_KEY", E2E_KEY)
    with ScriptedUpstream(Script(list(FIX))) as up:
        root = _agent_project(tmp_path, up)
        done = harness(root, "run", "--release", "tool", "--k", "1", "--no-report")
        assert done.returncode == 0, done.stdout + done.stderr
        served = len(up.served)
    trial = _trial(root)
    assert trial["verdict"]["outcome"] == "pass"
    done = harness(root, "baseline", "promote", "latest", "--name", "modelled")
    assert done.returncode == 0, done.stdout + done.stderr
    return root, trial, served


def test_promote_keeps_the_transcript_and_model_replay_serves_it(tmp_path, monkeypatch):
    root, recorded, served = _promoted(tmp_path, monkeypatch)
    assert served == 3
    calls = recorded["attempts"][-1]["model"]["calls"]
    digests = {c["request_blob"] for c in calls} | {c["response_blob"] for c in calls}
    kept = root / "baselines" / "modelled" / "transcripts"
    assert {"sha256:" + p.name for p in kept.iterdir()} == digests
    # The local store is gone (a fresh clone has only git): replay from the baseline alone.
    for p in (root / ".harness" / "blobs").rglob("*"):
        if p.is_file():
            p.unlink()
    monkeypatch.delenv("HGW_E2E_KEY")  # the upstream is stopped and no key is needed
    done = harness(
        root, "run", "--release", "tool", "--k", "1", "--no-report",
        "--model-replay", "baseline:modelled",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    trial = _trial(root)
    assert trial["verdict"]["outcome"] == "pass", json.dumps(trial["verdict"])
    model = trial["attempts"][-1]["model"]
    assert model["replayed_from"] == "baseline:modelled" and model["turns"] == 3
    assert model["input_tokens"] == recorded["attempts"][-1]["model"]["input_tokens"]


def test_replay_of_a_tampered_or_unknown_baseline_is_refused(tmp_path, monkeypatch):
    root, _, _ = _promoted(tmp_path, monkeypatch)
    unknown = harness(
        root, "run", "--release", "tool", "--k", "1", "--no-report",
        "--model-replay", "baseline:nope",
    )  # fmt: skip
    assert unknown.returncode == 2 and "nope" in unknown.stderr, unknown.stderr
    assert "Traceback" not in unknown.stderr
    victim = next((root / "baselines" / "modelled" / "transcripts").iterdir())
    victim.write_bytes(victim.read_bytes() + b" ")
    done = harness(
        root, "run", "--release", "tool", "--k", "1", "--no-report",
        "--model-replay", "baseline:modelled",
    )  # fmt: skip
    assert done.returncode == 4 and "corrupt" in done.stderr, done.stdout + done.stderr
    assert "Traceback" not in done.stderr


def test_promote_over_the_transcript_cap_refuses_and_writes_nothing(tmp_path, monkeypatch):
    import harness.store.baseline as hb
    from harness.errors import ConfigError
    from harness.project import load_project
    from harness.store.store import Store

    root, _, _ = _promoted(tmp_path, monkeypatch)
    before = sorted(p.name for p in (root / "baselines").iterdir())
    monkeypatch.setattr(hb, "TRANSCRIPT_CAP", 100)
    project = load_project(root)
    store = Store(project.store_dir)
    run_id = store.resolve_run("latest")
    with pytest.raises(ConfigError, match=r"transcript is \d+ bytes .* over the"):
        hb.promote(store, run_id, "too-big", project.baselines_dir)
    assert sorted(p.name for p in (root / "baselines").iterdir()) == before
