"""The CLI with a model upstream (key and executor checks) and candidate replay."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from scripted_upstream import MODEL, Script, ScriptedUpstream
from support import harness, make_project

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


def test_dask_scheduler_the_gateway_link_cannot_route_to_is_a_config_error(project, monkeypatch):
    monkeypatch.setenv("HGW_E2E_KEY", "sk-e2e")
    _add_release(project, UPSTREAM_RELEASE)
    done = harness(
        project, "run", "--release", "modelled", "--k", "1", "--executor", "dask",
        "--scheduler", "tcp://no-such-host.invalid:8786", "--no-report",
    )  # fmt: skip
    assert done.returncode == 2 and "--scheduler" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (project / ".harness" / "runs").exists()


def test_upstream_is_part_of_the_system_digest_and_of_the_baseline_release(project):
    from harness.project import load_project
    from harness.store.baseline import Baseline, BaselineFile
    from harness.store.records import ReleaseRecord

    _add_release(project, UPSTREAM_RELEASE)
    p = load_project(project)
    sysdef = p.system_definition("modelled", "ts", "v")
    assert sysdef.upstream is not None
    assert sysdef.upstream["key_env"] == "HGW_E2E_KEY"  # the name, never a value
    before = p.system_digest("modelled", "ts", "v")
    path = project / "harness.yaml"
    path.write_text(path.read_text().replace("output_per_mtok: 2.0", "output_per_mtok: 3.0"))
    assert load_project(project).system_digest("modelled", "ts", "v") != before
    now = dt.datetime.now(dt.UTC)
    record = ReleaseRecord(
        run_id="r", release="modelled", system_digest=before, system=sysdef, task_set="ts",
        task_set_digest="ts", cases={}, k=1, backend="local", created_at=now,
        harness_version="v",
    )  # fmt: skip
    bf = BaselineFile(name="b", promoted_at=now, release=record)
    rebuilt = Baseline(file=bf, records=[], digest="d").release_definition
    assert rebuilt.upstream == p.release("modelled").upstream


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


# --------------------------------------------------------------- a real agent, end to end

AGENT_SRC = Path(__file__).resolve().parent.parent / "agents" / "tool_agent.py"
E2E_KEY = "sk-e2e-real-key-7d2f9c41b0"
FIX = ["cat calc.py", "sed -i 's/a - b/a + b/' calc.py"]
BOTCH = ["sed -i 's/a - b/a - b + 1/' calc.py"]  # add(2, 2) == 1


def _agent_project(tmp_path: Path, up: ScriptedUpstream, limits: str = "") -> Path:
    root = make_project(tmp_path / "agentproj", n_cases=1)
    if limits:
        case = root / "cases" / "add-0" / "case.yaml"
        case.write_text(case.read_text() + limits)
    shutil.copy(AGENT_SRC, root / "tool_agent.py")
    _add_release(
        root,
        f"""\
  tool:
    agent: {{command: [python3, "{{agent}}/tool_agent.py"], files: [tool_agent.py]}}
    retry: {{infra_retries: 0}}
    upstream: &up
      base_url: {up.base_url}
      model: {MODEL}
      key_env: HGW_E2E_KEY
      price: {{input_per_mtok: 3.0, output_per_mtok: 15.0}}
      retries: 1
  tool-stream:
    agent: {{command: [python3, "{{agent}}/tool_agent.py", --stream], files: [tool_agent.py]}}
    retry: {{infra_retries: 0}}
    upstream: *up
""",
    )
    assert harness(root, "cases", "lock").returncode == 0
    return root


@pytest.fixture
def scripted_up() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream(Script(list(FIX))) as up:
        yield up


def _model(shown: dict) -> dict:  # type: ignore[type-arg]
    (trial,) = shown["trials"]
    return trial["attempts"][-1]["model"]  # type: ignore[no-any-return]


DOCKER = pytest.param("docker", marks=pytest.mark.docker)
BOTH = pytest.mark.parametrize("backend", ["local", DOCKER])
"""The Done-when runs on both backends (docker fails, never skips, without an engine)."""


@pytest.mark.parametrize(
    ("release", "backend"),
    [
        ("tool", "local"),
        ("tool-stream", "local"),
        pytest.param("tool-stream", "docker", marks=pytest.mark.docker),
    ],
)
def test_fixing_script_passes_metered_and_the_key_is_stored_nowhere(
    tmp_path, monkeypatch, scripted_up, release, backend
):
    monkeypatch.setenv("HGW_E2E_KEY", E2E_KEY)
    root = _agent_project(tmp_path, scripted_up)
    done = harness(root, "run", "--release", release, "--k", "1", "--backend", backend)
    assert done.returncode == 0, done.stdout + done.stderr
    shown = _shown(root)
    assert shown["release"]["backend"] == backend
    assert shown["trials"][0]["verdict"]["outcome"] == "pass"
    model = _model(shown)
    served = scripted_up.served
    assert len(served) == 3 and {s.stream for s in served} == {release == "tool-stream"}
    assert model["turns"] == 3 and model["answered_model"] == MODEL
    assert model["input_tokens"] == sum(s.input_tokens for s in served)
    assert model["output_tokens"] == sum(s.output_tokens for s in served)
    cost = (3.0 * model["input_tokens"] + 15.0 * model["output_tokens"]) / 1e6
    assert model["cost"] == pytest.approx(cost)
    assert all(s.authorization == f"Bearer {E2E_KEY}" for s in served)
    for folder in (root / ".harness", root / "reports"):
        files = [p for p in folder.rglob("*") if p.is_file()]
        assert files
        assert [p for p in files if E2E_KEY.encode() in p.read_bytes()] == []


def test_botching_script_fails(tmp_path, monkeypatch, scripted_up):
    monkeypatch.setenv("HGW_E2E_KEY", E2E_KEY)
    scripted_up.script.commands = list(BOTCH)
    root = _agent_project(tmp_path, scripted_up)
    done = harness(root, "run", "--release", "tool", "--k", "1", "--no-report")
    # No baseline, and not one trial passed: the absolute rules fail the release.
    assert done.returncode == 1, done.stdout + done.stderr
    verdict = _shown(root)["trials"][0]["verdict"]
    assert (verdict["outcome"], verdict["failure_type"]) == ("fail", "test_failure")


@BOTH
def test_turn_budget_of_3_stops_a_5_turn_script(tmp_path, monkeypatch, scripted_up, backend):
    monkeypatch.setenv("HGW_E2E_KEY", E2E_KEY)
    scripted_up.script.commands = ["ls", "ls", "ls", "ls", *FIX]
    root = _agent_project(tmp_path, scripted_up, limits="limits: {turns: 3}\n")
    harness(root, "run", "--release", "tool", "--k", "1", "--no-report", "--backend", backend)
    shown = _shown(root)
    assert shown["release"]["backend"] == backend
    verdict = shown["trials"][0]["verdict"]
    assert (verdict["outcome"], verdict["failure_type"]) == ("fail", "budget_exceeded")
    assert len(scripted_up.served) == 3 and _model(shown)["turns"] == 3


@BOTH
def test_upstream_500_is_infra_error_and_blocks_the_run(
    tmp_path, monkeypatch, scripted_up, backend
):
    monkeypatch.setenv("HGW_E2E_KEY", E2E_KEY)
    scripted_up.script.fault = "500"
    root = _agent_project(tmp_path, scripted_up)
    argv = ("run", "--release", "tool", "--k", "1", "--no-report", "--backend", backend)
    done = harness(root, *argv)
    assert done.returncode == 4, done.stdout + done.stderr  # blocked
    shown = _shown(root)
    assert shown["release"]["backend"] == backend
    verdict = shown["trials"][0]["verdict"]
    assert verdict["outcome"] == "infra_error" and "answered 500" in verdict["reason"]
    assert len(scripted_up.served) == 2  # the call and its one bounded retry
