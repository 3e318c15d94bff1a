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
    record = SimpleNamespace(backend="local", system=SimpleNamespace(case_images=None))
    plan = SimpleNamespace(cases=cases, envs=envs, record=record)
    project = SimpleNamespace(store_dir=tmp_path)
    seconds = pf.proof_seconds(project, plan)  # type: ignore[arg-type]
    assert set(seconds) == {"c0", "c1", "c2"}
    assert seconds["c1"] >= 1.0 > max(seconds["c0"], seconds["c2"])
    # Another backend's proofs are not this run's; a stamp without a figure (written before
    # proofs were timed) or unreadable is left out, never an error.
    other = SimpleNamespace(
        cases=cases, envs=envs, record=SimpleNamespace(backend="docker", system=record.system)
    )
    assert pf.proof_seconds(project, other) == {}  # type: ignore[arg-type]
    stamps = sorted((tmp_path / pf.PREFLIGHT_DIR).glob("*.json"))
    old = json.loads(stamps[0].read_text())
    del old["proof_seconds"]
    stamps[0].write_text(json.dumps(old))
    stamps[1].write_text("{not json")
    assert len(pf.proof_seconds(project, plan)) == 1  # type: ignore[arg-type]
