"""Preflight's scheduling: pairs proven ``jobs`` at once, the first failure in case order
reported, every proof that passed cached, nothing proven twice.

The proof itself (two verifier runs in real sandboxes) is covered end to end in
tests/integration/test_environments.py; here it is replaced so that only the scheduling is
under test.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import harness.preflight as pf
from harness.errors import InfraError
from harness.store.records import FailureType, Outcome, Verdict
from harness.trial.validate import ValidationResult


def _verdict(outcome: Outcome, kind: FailureType | None) -> Verdict:
    return Verdict(outcome=outcome, failure_type=kind, reason="r", tests_run=3)


def _ok(cid: str) -> ValidationResult:
    red = _verdict(Outcome.FAIL, FailureType.TEST_FAILURE)
    return ValidationResult(cid, "ok", red, _verdict(Outcome.PASS, None), "ok")


def _broken(cid: str) -> ValidationResult:
    return ValidationResult(cid, "broken", None, None, f"{cid} is broken")


def _setup(n: int) -> tuple[list[SimpleNamespace], SimpleNamespace]:
    case = SimpleNamespace(lane="exec", expect="change")
    cases = [
        SimpleNamespace(id=f"c{i}", version=1, digest=f"sha256:{i:064x}", case=case)
        for i in range(n)
    ]
    ident = SimpleNamespace(implementation="cpython", version="3.11", distributions={})
    env = SimpleNamespace(digest="sha256:" + "e" * 64, identity=ident)
    return cases, SimpleNamespace(cases={c.id: env for c in cases})


def _run(tmp_path: Path, cases, envs, jobs: int) -> list[str]:
    return pf.preflight(
        cases,
        envs,
        sandbox=None,
        backend="local",
        store_dir=tmp_path,
        jobs=jobs,  # type: ignore[arg-type]
    )


def test_pairs_are_proven_jobs_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two proofs must be inside their proof at the same time: one at a time would time out."""
    together = threading.Barrier(2, timeout=20)

    def prove(lc, sandbox, downgrade, *, environment, image):
        together.wait()
        return _ok(lc.id)

    monkeypatch.setattr(pf, "validate_case", prove)
    cases, envs = _setup(4)
    assert _run(tmp_path, cases, envs, jobs=2) == ["c0", "c1", "c2", "c3"]
    assert len(list((tmp_path / pf.PREFLIGHT_DIR).glob("*.json"))) == 4
    # Cached: a second preflight proves nothing again.
    monkeypatch.setattr(pf, "validate_case", lambda *a, **k: pytest.fail("proven twice"))
    assert _run(tmp_path, cases, envs, jobs=2) == []


@pytest.mark.parametrize("jobs", [1, 3])
def test_the_first_failing_pair_in_case_order_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    started: list[str] = []
    lock = threading.Lock()

    def prove(lc, sandbox, downgrade, *, environment, image):
        with lock:
            started.append(lc.id)
        return _broken(lc.id) if lc.id in ("c1", "c2") else _ok(lc.id)

    monkeypatch.setattr(pf, "validate_case", prove)
    cases, envs = _setup(5)
    with pytest.raises(InfraError) as info:
        _run(tmp_path, cases, envs, jobs=jobs)
    assert info.value.reason == "preflight_failed"
    assert "case c1 v1 does not validate" in str(info.value) and "c1 is broken" in str(info.value)
    stamps = sorted(p.read_text() for p in (tmp_path / pf.PREFLIGHT_DIR).glob("*.json"))
    assert len(stamps) == 1 and '"case": "c0"' in stamps[0]  # what passed before it is kept
    if jobs == 1:
        assert started == ["c0", "c1"]  # one at a time: nothing after the failure starts


def _plan(cases, envs, backend: str = "local") -> SimpleNamespace:
    record = SimpleNamespace(backend=backend, system=SimpleNamespace(case_images=None))
    return SimpleNamespace(cases=cases, envs=envs, record=record)


def test_each_proof_is_timed_and_read_back_for_scheduling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run starts its longest cases first from these figures (tests/test_run_order.py)."""

    def prove(lc, sandbox, downgrade, *, environment, image):
        time.sleep(1.0 if lc.id == "c1" else 0.0)
        return _ok(lc.id)

    monkeypatch.setattr(pf, "validate_case", prove)
    cases, envs = _setup(3)
    _run(tmp_path, cases, envs, jobs=1)
    project = SimpleNamespace(store_dir=tmp_path)
    seconds = {k: p.seconds for k, p in pf.proofs(project, _plan(cases, envs)).items()}  # type: ignore[arg-type]
    assert set(seconds) == {"c0", "c1", "c2"}
    assert seconds["c1"] >= 1.0 > max(seconds["c0"], seconds["c2"])  # type: ignore[operator]
    # Another backend's proofs are not this run's (read before its preflight: refused); a
    # stamp without a figure (written before proofs were timed) has none.
    with pytest.raises(InfraError):
        pf.proofs(project, _plan(cases, envs, "docker"))  # type: ignore[arg-type]
    stamps = sorted((tmp_path / pf.PREFLIGHT_DIR).glob("*.json"))
    old = json.loads(stamps[0].read_text())
    del old["proof_seconds"]
    stamps[0].write_text(json.dumps(old))
    seconds = {k: p.seconds for k, p in pf.proofs(project, _plan(cases, envs)).items()}  # type: ignore[arg-type]
    assert sorted(v is None for v in seconds.values()) == [False, False, True]


def test_the_tests_the_reference_passed_are_kept_and_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every trial is handed them (a trial skipping one fails: tests/test_verify.py)."""
    passed = {"reports/junit.xml": ("tests.test_a::test_one", "tests.test_a::test_two")}

    def prove(lc, sandbox, downgrade, *, environment, image):
        red = _verdict(Outcome.FAIL, FailureType.TEST_FAILURE)
        return ValidationResult(lc.id, "ok", red, _verdict(Outcome.PASS, None), "ok", "", passed)

    monkeypatch.setattr(pf, "validate_case", prove)
    cases, envs = _setup(2)
    _run(tmp_path, cases, envs, jobs=1)
    project = SimpleNamespace(store_dir=tmp_path)
    got = pf.proofs(project, _plan(cases, envs))  # type: ignore[arg-type]
    assert {k: dict(p.green_passed) for k, p in got.items()} == {"c0": passed, "c1": passed}


@pytest.mark.parametrize(
    "damage",
    ["list-dropped", "not-json", "ids-not-strings"],
)
def test_a_proof_that_cannot_be_read_back_whole_is_proven_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    """A stamp without the list (or not whole) would hand its trials no list: never kept."""
    monkeypatch.setattr(pf, "validate_case", lambda lc, *a, **k: _ok(lc.id))
    cases, envs = _setup(2)
    _run(tmp_path, cases, envs, jobs=1)
    stamp = sorted((tmp_path / pf.PREFLIGHT_DIR).glob("*.json"))[0]
    doc = json.loads(stamp.read_text())
    if damage == "list-dropped":
        del doc["green_passed"]
        stamp.write_text(json.dumps(doc))
    elif damage == "not-json":
        stamp.write_text("{not json")
    else:
        doc["green_passed"] = {"reports/junit.xml": [1, 2]}
        stamp.write_text(json.dumps(doc))
    project = SimpleNamespace(store_dir=tmp_path)
    with pytest.raises(InfraError) as info:  # read before it is proven again: refused
        pf.proofs(project, _plan(cases, envs))  # type: ignore[arg-type]
    assert info.value.reason == "preflight_failed" and "cannot be read back" in str(info.value)
    assert _run(tmp_path, cases, envs, jobs=1) == [json.loads(stamp.read_text())["case"]]
    assert len(pf.proofs(project, _plan(cases, envs))) == 2  # type: ignore[arg-type]
