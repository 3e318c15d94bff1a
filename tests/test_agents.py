"""Reproducible agents: protocol variables, declared agent files, system digest."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from harness.cases.load import load_case
from harness.errors import ConfigError
from harness.project import AGENT_DIR, AgentSpec, Release, load_project
from harness.sandbox.base import ExecResult
from harness.sandbox.fake import ExecCall, FakeSandbox, exited
from harness.trial.execute import run_trial

PROJECT = """\
releases:
  scripted:
    agent:
      adapter: command
      command: [python3, "{agent}/agent/main.py", --flag]
      files: [agent]
"""


def _prepare(case_dir: Path, *, run_seed: int = 7, trial: int = 0, attempt: int = 1):
    from harness.agents import prepare_agent

    release = Release(agent=AgentSpec(command=("python3", "{agent}/main.py"), files=("a",)))
    return prepare_agent(
        "rel",
        release,
        load_case(case_dir),
        trial=trial,
        attempt=attempt,
        io_dir="/io",
        workspace="/ws",
        feedback=None,
        run_seed=run_seed,
    )


def test_agent_gets_case_trial_attempt_and_a_seed_from_the_run(make_case):
    case = make_case()
    inv = _prepare(case)
    env = inv.env
    assert env["HARNESS_CASE_ID"] == "tiny"
    assert (env["HARNESS_TRIAL"], env["HARNESS_ATTEMPT"]) == ("0", "1")
    assert env["HARNESS_SEED"].isdigit()
    assert inv.argv == ("python3", f"{AGENT_DIR}/main.py")
    assert env["HARNESS_AGENT_DIR"] == AGENT_DIR
    # The same run, trial and attempt → the same seed (a resumed run draws the same way);
    # another trial, attempt or run seed → another seed.
    assert _prepare(case).env["HARNESS_SEED"] == env["HARNESS_SEED"]
    others = {
        _prepare(case, trial=1).env["HARNESS_SEED"],
        _prepare(case, attempt=2).env["HARNESS_SEED"],
        _prepare(case, run_seed=8).env["HARNESS_SEED"],
    }
    assert env["HARNESS_SEED"] not in others and len(others) == 3


def test_project_placeholder_is_refused_naming_the_field(tmp_path):
    (tmp_path / "harness.yaml").write_text(
        "releases:\n  r:\n    agent: {adapter: command, command: [sh, '{project}/a.sh']}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_project(tmp_path)
    text = str(info.value)
    assert "harness.yaml" in text and "command" in text and "agent.files" in text


@pytest.mark.parametrize("bad", ["/etc/passwd", "../outside", "."])
def test_agent_files_must_stay_inside_the_project(tmp_path, bad):
    (tmp_path / "harness.yaml").write_text(
        f"releases:\n  r:\n    agent: {{adapter: command, command: [x], files: ['{bad}']}}\n"
    )
    with pytest.raises(ConfigError, match="files"):
        load_project(tmp_path)


def _project(tmp_path: Path) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "harness.yaml").write_text(PROJECT)
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "main.py").write_text("print('v1')\n")
    return tmp_path


def test_editing_a_declared_agent_file_changes_the_system_digest(tmp_path):
    root = _project(tmp_path)
    before = load_project(root).system_digest("scripted", "sha256:ts", "1")
    (root / "agent" / "main.py").write_text("print('v2')\n")
    after = load_project(root).system_digest("scripted", "sha256:ts", "1")
    assert before != after
    shutil.rmtree(root / "agent")
    with pytest.raises(ConfigError, match=r"agent\.files"):
        load_project(root).system_digest("scripted", "sha256:ts", "1")


def test_agent_files_enter_the_agent_sandbox_as_a_read_only_view(tmp_path, make_case, make_spec):
    root = _project(tmp_path / "proj")
    spec = make_spec(make_case())
    release = load_project(root).release("scripted")
    spec = dataclasses.replace(spec, project_root=str(root), release=release, run_seed=5)
    seen: dict[str, object] = {}

    def handle(call: ExecCall) -> ExecResult:
        if "--agent" in call.label:
            assert call.view is not None
            (mount,) = call.view.mounts
            seen.update(
                target=mount.target,
                main=(Path(mount.source) / "agent" / "main.py").read_text(),
                argv=call.argv,
                seed=call.env["HARNESS_SEED"],
            )
            (call.workspace / "pkg" / "mod.py").write_text("def answer():\n    return 42\n")
            Path(call.env["HARNESS_RESULT"]).write_text('{"status": "submitted"}')
            return exited(call.argv, 0)
        return exited(call.argv, 1)

    sandbox = FakeSandbox(handle)
    run_trial(spec, sandbox)
    assert seen["target"] == AGENT_DIR
    assert seen["main"] == "print('v1')\n"
    assert seen["argv"] == ("python3", f"{AGENT_DIR}/agent/main.py", "--flag")
    # The verifier never gets the agent's files.
    pairs = zip(sandbox.opened, sandbox.views, strict=True)
    verifier_views = [v for label, v in pairs if "verifier" in label]
    assert verifier_views and all(
        v is None or all(m.target != AGENT_DIR for m in v.mounts) for v in verifier_views
    )
