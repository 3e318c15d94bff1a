"""The bundled golden set (``cases/``) is well-formed; every verifier goes red and green.

For each case: ``case.yaml`` validates against :class:`~harness.cases.model.Case`, the id
equals the folder name and is unique, every referenced file exists. For each verifier:

* red: the untouched starting state plus the hidden files does not pass (non-zero exit, or
  a named fail-to-pass test missing or not passing), while the named pass-to-pass tests
  that can run there do pass;
* green: the starting state plus ``reference.patch`` (``git apply``) plus the hidden files
  passes: expected exit status, enough tests, every named test present and passed, every
  other artifact rule satisfied.

This is the by-hand version of ``harness cases validate``; it reads the JUnit report with
the standard library so that it does not depend on the verdict code it helps to check.
"""

from __future__ import annotations

import json
import os
import shutil
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import _proc
from harness._yaml import load_model
from harness.cases.model import ArtifactRule, Case
from harness.project import ProjectFile, load_project
from harness.trial.verify import judge_mutant

ROOT = Path(__file__).resolve().parent.parent
CASES_DIR = ROOT / "cases"
CASE_DIRS = sorted(p.parent for p in CASES_DIR.glob("*/case.yaml"))
VERIFIER_TIMEOUT = 120.0


def _load(case_dir: Path) -> Case:
    case, _ = load_model(case_dir / "case.yaml", Case)
    return case


CASES = {d.name: _load(d) for d in CASE_DIRS}
EXEC_IDS = sorted(cid for cid, c in CASES.items() if c.lane == "exec")
REFERENCE_IDS = sorted(cid for cid, c in CASES.items() if c.reference is not None)


@dataclass(frozen=True)
class Outcome:
    """What one verifier run left behind."""

    returncode: int
    output: str
    workspace: Path


def _junit_status(path: Path) -> dict[str, str]:
    """``classname::name`` → passed / failed / error / skipped, from a pytest JUnit file."""
    status: dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        kinds = [child.tag for child in case]
        if "failure" in kinds:
            status[test_id] = "failed"
        elif "error" in kinds:
            status[test_id] = "error"
        elif "skipped" in kinds:
            status[test_id] = "skipped"
        else:
            status[test_id] = "passed"
    return status


def _materialize(case_id: str, dest: Path, *, with_reference: bool) -> Path:
    case_dir = CASES_DIR / case_id
    case = CASES[case_id]
    assert case.repo.kind == "folder"
    ws = dest / "ws"
    shutil.copytree(case_dir / case.repo.path, ws)
    if with_reference:
        assert case.reference is not None
        patch = case_dir / case.reference.patch
        done = _proc.run(["git", "apply", "--whitespace=nowarn", str(patch)], cwd=ws)
        assert done.ok, done.stderr.decode()
    # Like the harness: a required artifact shipped by the candidate is removed before the
    # verifier runs, so every artifact must be produced by the verifier run itself.
    for rule in case.verifier.artifacts:
        (ws / rule.path).unlink(missing_ok=True)
    for hidden in case.verifier.hidden:
        target = ws / hidden.dest
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(case_dir / hidden.src, target)
    return ws


def _run_verifier(case_id: str, tmp_path: Path, *, with_reference: bool) -> Outcome:
    ws = _materialize(case_id, tmp_path, with_reference=with_reference)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LC_ALL": "C.UTF-8"}
    done = _proc.run(CASES[case_id].verifier.command, cwd=ws, env=env, timeout=VERIFIER_TIMEOUT)
    output = (done.stdout + done.stderr).decode("utf-8", "replace")
    return Outcome(done.returncode, output, ws)


def _rule_problems(rule: ArtifactRule, ws: Path) -> list[str]:
    """Why ``rule`` does not hold in ``ws`` (empty when it holds)."""
    path = ws / rule.path
    if not path.is_file():
        return [f"{rule.path}: missing"]
    if rule.rule == "non_empty" and path.stat().st_size == 0:
        return [f"{rule.path}: empty"]
    if rule.rule == "json":
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            return [f"{rule.path}: not JSON ({exc})"]
    if rule.rule == "junit":
        status = _junit_status(path)
        problems = []
        executed = sum(1 for s in status.values() if s != "skipped")
        if executed < rule.min_tests:
            problems.append(f"{rule.path}: {executed} tests ran, expected >= {rule.min_tests}")
        for test_id in (*rule.fail_to_pass, *rule.pass_to_pass):
            if status.get(test_id) != "passed":
                problems.append(f"{test_id}: {status.get(test_id, 'missing')}")
        return problems
    return []


def _green_problems(case: Case, outcome: Outcome) -> list[str]:
    problems = []
    if outcome.returncode != case.verifier.expected_exit:
        problems.append(f"exit {outcome.returncode}, expected {case.verifier.expected_exit}")
    for rule in case.verifier.artifacts:
        problems.extend(_rule_problems(rule, outcome.workspace))
    return problems


# --------------------------------------------------------------------------- structure


def test_there_are_enough_cases_of_every_kind() -> None:
    cases = list(CASES.values())
    assert len(cases) >= 9
    assert any(c.expect == "abstain" for c in cases)
    assert any(c.lane == "judgment" for c in cases)
    assert 1 <= sum(c.critical for c in cases) <= 2
    tags = {t for c in cases for t in c.tags}
    for kind in (
        "localization",
        "modification",
        "feature",
        "add-test",
        "artifact",
        "tool-recovery",
        "regression-prone",
    ):
        assert kind in tags, kind


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_case_is_well_formed(case_id: str) -> None:
    case_dir = CASES_DIR / case_id
    case = CASES[case_id]
    assert case.id == case_id
    assert case.version >= 1
    assert case.repo.kind == "folder" and (case_dir / case.repo.path / "fieldkit").is_dir()
    for hidden in case.verifier.hidden:
        assert (case_dir / hidden.src).is_file(), hidden.src
        assert not hidden.src.startswith(case.repo.path + "/"), "hidden file inside the repo"
    if case.reference is not None:
        assert (case_dir / case.reference.patch).is_file()
    for rule in case.verifier.artifacts:
        assert not (case_dir / case.repo.path / rule.path).exists(), "the verifier must make it"
    for phase in (case.contract.agent, case.contract.verifier):
        assert phase.network == "none"
        assert 512 <= phase.memory_mb <= 1024
    assert case.contract.agent.timeout_seconds <= 60
    assert case.contract.verifier.timeout_seconds <= 120
    if case.lane == "exec":
        junit = [a for a in case.verifier.artifacts if a.rule == "junit"]
        assert junit and junit[0].fail_to_pass, "an exec case names its fail_to_pass tests"


def test_case_ids_are_unique_and_match_folders() -> None:
    ids = [CASES[d.name].id for d in CASE_DIRS]
    assert len(ids) == len(set(ids))
    assert ids == [d.name for d in CASE_DIRS]


def test_repos_carry_no_build_debris() -> None:
    debris = [
        p
        for p in CASES_DIR.rglob("*")
        if p.name in ("__pycache__", ".pytest_cache", "reports") or p.suffix == ".pyc"
    ]
    assert debris == []


# --------------------------------------------------------------------------- red / green


@pytest.mark.slow
@pytest.mark.parametrize("case_id", EXEC_IDS)
def test_verifier_goes_red_on_the_starting_state(case_id: str, tmp_path: Path) -> None:
    case = CASES[case_id]
    outcome = _run_verifier(case_id, tmp_path, with_reference=False)
    assert _green_problems(case, outcome), f"verifier passes the untouched start:\n{outcome.output}"
    junit = next(a for a in case.verifier.artifacts if a.rule == "junit")
    report = outcome.workspace / junit.path
    status = _junit_status(report) if report.is_file() else {}
    for test_id in junit.fail_to_pass:
        assert status.get(test_id) != "passed", f"{test_id} already passes on the start"
    for test_id in junit.pass_to_pass:
        assert status.get(test_id) == "passed", f"pass_to_pass {test_id} is not green on the start"


@pytest.mark.slow
@pytest.mark.parametrize("case_id", REFERENCE_IDS)
def test_verifier_goes_green_on_the_reference(case_id: str, tmp_path: Path) -> None:
    outcome = _run_verifier(case_id, tmp_path, with_reference=True)
    assert _green_problems(CASES[case_id], outcome) == [], outcome.output


WEAK_NESTED_TEST = (
    "from fieldkit.config import parse_config\n\n\n"
    "def test_nested_reference():\n"
    "    assert parse_config('a = ${b}\\nb = x\\n')['']['a'] == 'x'\n"
)


@pytest.mark.slow
@pytest.mark.parametrize(("weak", "caught"), [(False, True), (True, False)], ids=["ref", "weak"])
def test_add_test_case_mutant_is_caught_by_the_reference_test_only(
    tmp_path: Path, weak: bool, caught: bool
) -> None:
    """The case's one-level mutant, run as the harness runs it (the same command on the
    same tree with the mutant's files in place), fails the reference's test, not one that
    checks a single level of references."""
    case = CASES["config-nested-test"]
    (mutant,) = case.verifier.mutants
    ws = _materialize("config-nested-test", tmp_path, with_reference=True)
    if weak:
        (ws / "tests" / "test_config_nested.py").write_text(WEAK_NESTED_TEST)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LC_ALL": "C.UTF-8"}
    done = _proc.run(case.verifier.command, cwd=ws, env=env, timeout=VERIFIER_TIMEOUT)
    assert done.returncode == 0, done.stdout.decode()  # both pass on the real code
    for file in mutant.replace:
        shutil.copyfile(CASES_DIR / "config-nested-test" / file.src, ws / file.dest)
    _proc.run(case.verifier.command, cwd=ws, env=env, timeout=VERIFIER_TIMEOUT)
    artifacts = {rule.path: (ws / rule.path).read_bytes() for rule in case.verifier.artifacts}
    check = judge_mutant(case.verifier, mutant, artifacts)
    assert check.ok is caught, check.detail


@pytest.mark.slow
def test_codegen_case_rejects_a_hand_edited_generated_file(tmp_path: Path) -> None:
    ws = _materialize("booleans-on-off", tmp_path, with_reference=False)
    generated = ws / "fieldkit" / "_booleans.py"
    text = generated.read_text()
    text = text.replace("'1', ", "'1', 'on', ").replace("'0', ", "'0', 'off', ")
    generated.write_text(text)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LC_ALL": "C.UTF-8"}
    done = _proc.run(CASES["booleans-on-off"].verifier.command, cwd=ws, env=env, timeout=60)
    assert done.returncode != 0
    assert b"out of date" in done.stderr


# --------------------------------------------------------------------------- harness.yaml


def test_harness_yaml_releases_point_at_real_cases() -> None:
    project_file, _ = load_model(ROOT / "harness.yaml", ProjectFile)
    assert set(project_file.releases) == {
        "production-previous",
        "candidate",
        "candidate-single-attempt",
        "mini-swe-agent",  # a real agent through the gateway (tests/e2e/test_mini_swe_agent.py)
        "candidate-regressed",  # the release the gate must FAIL (issue 11)
    }
    mini = project_file.releases["mini-swe-agent"]
    assert mini.upstream is not None and mini.agent.environment is not None
    single = project_file.releases["candidate-single-attempt"]
    assert single.retry.max_attempts == 1
    assert single.agent == project_file.releases["candidate"].agent, "same agent, no retries"
    assert project_file.cases_dir == "cases" and project_file.task_set == "golden"
    skills = {}
    for name, release in project_file.releases.items():
        if name == "mini-swe-agent":
            continue
        sim = release.agent.simulated
        assert release.agent.adapter == "simulated" and sim is not None
        for key in (*sim.skill, *sim.abstain):
            assert key == "default" or key in CASES, f"{name}: unknown case {key!r}"
        skills[name] = {cid: sim.skill_for(cid) for cid in CASES}
    before, after = skills["production-previous"], skills["candidate"]
    assert any(after[c] > before[c] for c in CASES), "candidate better somewhere"
    assert any(after[c] < before[c] for c in CASES), "candidate has a regression"
    project = load_project(ROOT)
    for name in set(project_file.releases) - {"mini-swe-agent"}:
        definition = project.system_definition(name, "sha256:" + "0" * 64, "0")
        assert definition.orchestration_digests
