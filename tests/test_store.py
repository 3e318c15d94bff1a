"""The store: write-once records, verified blobs, one writer per run, resume."""

from __future__ import annotations

import datetime as dt
import multiprocessing
from pathlib import Path

import pytest

from harness.errors import StoreError
from harness.records import Arm, AttemptRecord, Outcome, ReleaseRecord, RunRecord, TrialKey, Verdict
from harness.store import Store

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def release(run_id: str = "r1", k: int = 3) -> ReleaseRecord:
    return ReleaseRecord(
        run_id=run_id,
        release="cand",
        system_digest="sha256:s",
        system={},
        task_set="golden",
        task_set_digest="sha256:t",
        cases={"a": "sha256:a"},
        k=k,
        backend="local",
        created_at=NOW,
        harness_version="0",
    )


def trial(t: int, outcome: Outcome = Outcome.PASS) -> RunRecord:
    v = Verdict(outcome=outcome)
    return RunRecord(
        key=TrialKey(arm=Arm.CANDIDATE, release="cand", case_id="a", case_version=1, trial=t),
        case_digest="sha256:a",
        system_digest="sha256:s",
        backend="local",
        attempts=(AttemptRecord(attempt=1, verdict=v),),
        verdict=v,
        started_at=NOW,
        finished_at=NOW,
        harness_version="0",
    )


def test_records_are_written_once_and_never_overwritten(tmp_path):
    store = Store(tmp_path)
    with store.open_run(release()) as h:
        assert h.add_trial(trial(0), {})
        assert not h.add_trial(trial(0, Outcome.FAIL), {})
    [rec] = store.trials("r1")
    assert rec.outcome is Outcome.PASS


def test_blobs_are_content_addressed_and_verified(tmp_path):
    store = Store(tmp_path)
    d = store.put_blob(b"hello")
    assert store.get_blob(d) == b"hello"
    store.blob_path(d).write_bytes(b"tampered")
    with pytest.raises(StoreError, match="corrupt"):
        store.get_blob(d)


def _hold(root: str, ready, release_evt) -> None:
    with Store(Path(root)).open_run(release()):
        ready.set()
        release_evt.wait(10)


def test_a_second_writer_of_the_same_run_is_refused(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    ready, done = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold, args=(str(tmp_path), ready, done))
    proc.start()
    try:
        assert ready.wait(20)
        with pytest.raises(StoreError, match="another harness process"):
            Store(tmp_path).open_run(release())
    finally:
        done.set()
        proc.join(20)


def test_reopening_with_a_different_release_record_is_refused(tmp_path):
    store = Store(tmp_path)
    with store.open_run(release()):
        pass
    with pytest.raises(StoreError, match="different release record"):
        store.open_run(release(k=5))


def test_resume_sees_finished_trials(tmp_path):
    store = Store(tmp_path)
    with store.open_run(release()) as h:
        h.add_trial(trial(0), {})
        h.add_trial(trial(2), {})
    with store.open_run(release()) as h:
        assert h.done() == {trial(0).key.slug(), trial(2).key.slug()}


def test_a_corrupt_record_is_a_store_error_not_a_traceback(tmp_path):
    store = Store(tmp_path)
    with store.open_run(release()) as h:
        h.add_trial(trial(0), {})
    path = next((tmp_path / "runs" / "r1" / "trials").glob("*.json"))
    path.write_text("{not json")
    with pytest.raises(StoreError, match="corrupt"):
        store.trials("r1")


def test_resolve_run_prefix_and_latest(tmp_path):
    store = Store(tmp_path)
    for rid in ("cand-aaa", "cand-abb"):
        with store.open_run(release(rid)):
            pass
    assert store.resolve_run("cand-aa") == "cand-aaa"
    with pytest.raises(StoreError, match="ambiguous"):
        store.resolve_run("cand-a")
    assert store.resolve_run("latest") in {"cand-aaa", "cand-abb"}


def test_debris_of_a_killed_writer_is_cleared_on_resume(tmp_path):
    store = Store(tmp_path)
    with store.open_run(release()) as h:
        h.add_trial(trial(0), {})
    debris = tmp_path / "runs" / "r1" / "trials" / ".tmp-abc"
    debris.write_text("half a record")
    with store.open_run(release()) as h:
        assert h.done() == {trial(0).key.slug()}
    assert not debris.exists()
