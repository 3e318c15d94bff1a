"""The store: write-once records, verified blobs, one writer per run, resume."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import multiprocessing
import time
from pathlib import Path

import pytest
from support import system_definition

from harness.errors import ConfigError, StoreError, StoreIntegrityError
from harness.names import inside, name_problem
from harness.store.records import (
    Arm,
    AttemptRecord,
    Outcome,
    ReleaseRecord,
    ResultRecord,
    RunRecord,
    StepClock,
    TrialKey,
    TrialSteps,
    Verdict,
)
from harness.store.store import MANIFEST, Store, _chain

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def release(run_id: str = "r1", k: int = 3) -> ReleaseRecord:
    return ReleaseRecord(
        run_id=run_id,
        release="cand",
        system_digest="sha256:s",
        system=system_definition(),
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
    with pytest.raises(StoreIntegrityError, match="changed since it was committed"):
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


# -- the manifest: commit point and tamper evidence -------------------------------------


def _run(tmp_path: Path, *, seal: bool = True) -> tuple[Store, Path]:
    store = Store(tmp_path)
    with store.open_run(release()) as h:
        h.add_trial(trial(0, Outcome.FAIL), {"x": b"stdout of trial 0"})
        h.add_trial(trial(1), {})
        if seal:
            h.seal(True, [])
    return store, tmp_path / "runs" / "r1"


def _flip_to_pass(path: Path) -> None:
    data = json.loads(path.read_text())
    data["verdict"] = {"outcome": "pass"}
    data["attempts"][0]["verdict"] = {"outcome": "pass"}
    path.write_text(json.dumps(data, indent=2))


def test_a_record_edited_from_fail_to_pass_is_refused_naming_it(tmp_path):
    store, rdir = _run(tmp_path)
    rec = rdir / "trials" / f"{trial(0).key.slug()}.json"
    _flip_to_pass(rec)
    with pytest.raises(StoreIntegrityError, match=str(rec)):
        store.trials("r1")


def test_a_corrupt_blob_of_a_committed_record_is_refused(tmp_path):
    store, _ = _run(tmp_path)
    blob = store.blob_path(store.put_blob(b"stdout of trial 0"))
    blob.write_bytes(b"stdout of trial 1")
    with pytest.raises(StoreIntegrityError, match="corrupt"):
        Store(tmp_path).trials("r1")
    blob.unlink()
    with pytest.raises(StoreIntegrityError, match="missing"):
        Store(tmp_path).trials("r1")


def _rechain(rdir: Path) -> None:
    """What a careful forger does: recompute every digest and chain head."""
    lines = [json.loads(x) for x in (rdir / MANIFEST).read_text().splitlines()]
    prev = "sha256:" + "0" * 64
    out = []
    for e in lines:
        digest = "sha256:" + hashlib.sha256((rdir / e["path"]).read_bytes()).hexdigest()
        new = _chain(e["seq"], e["path"], digest, tuple(e["blobs"]), prev)
        out.append(new.model_dump_json())
        prev = new.head
    (rdir / MANIFEST).write_text("".join(x + "\n" for x in out))


def test_an_edited_record_with_a_recomputed_manifest_breaks_the_seal(tmp_path):
    store, rdir = _run(tmp_path)
    _flip_to_pass(rdir / "trials" / f"{trial(0).key.slug()}.json")
    _rechain(rdir)
    with pytest.raises(StoreIntegrityError, match="sealed in"):
        store.trials("r1")


def test_an_edited_manifest_line_breaks_the_chain(tmp_path):
    store, rdir = _run(tmp_path)
    lines = (rdir / MANIFEST).read_text().splitlines()
    del lines[1]
    (rdir / MANIFEST).write_text("".join(x + "\n" for x in lines))
    with pytest.raises(StoreIntegrityError, match="hash chain"):
        store.trials("r1")


def test_a_run_without_manifest_is_refused(tmp_path):
    store, rdir = _run(tmp_path)
    (rdir / MANIFEST).unlink()
    with pytest.raises(StoreIntegrityError, match="missing"):
        store.trials("r1")


def test_a_record_written_but_not_committed_is_rerun_not_reported(tmp_path):
    store, rdir = _run(tmp_path, seal=False)
    # A kill -9 between the record's write and its manifest entry leaves this behind:
    stray = rdir / "trials" / f"{trial(2).key.slug()}.json"
    stray.write_text(trial(2, Outcome.FAIL).model_dump_json())
    assert [r.key.trial for r in store.trials("r1")] == [0, 1]  # readers ignore it
    with store.open_run(release()) as h:
        assert trial(2).key.slug() not in h.done()
        assert not stray.exists()
        assert h.add_trial(trial(2), {})
    assert [r.outcome for r in store.trials("r1")] == [Outcome.FAIL, Outcome.PASS, Outcome.PASS]


def test_a_torn_manifest_line_is_not_committed_and_is_trimmed(tmp_path):
    store, rdir = _run(tmp_path, seal=False)
    with (rdir / MANIFEST).open("ab") as fh:
        fh.write(b'{"seq": 3, "path": "trials/')
    assert len(store.trials("r1")) == 2
    with store.open_run(release()) as h:
        assert h.add_trial(trial(2), {})
    assert len(store.trials("r1")) == 3


def test_validity_and_results_are_typed_sealed_records(tmp_path):
    store, _ = _run(tmp_path)
    v = store.validity("r1")
    assert v is not None and v.valid and v.manifest_entries == 3
    assert v.manifest_head == store.manifest("r1")[2].head
    assert store.results("r1") == []


# -- names -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad", ["", "../x", "../../evil", "a/b", "..", ".hidden", "-x", "a..b", "x" * 65, "a b", "é"]
)
def test_unsafe_names_are_refused(bad):
    assert name_problem(bad) is not None


@pytest.mark.parametrize("good", ["production-previous", "cand", "v1.2_rc-3", "A9"])
def test_safe_names_pass(good):
    assert name_problem(good) is None


def test_inside_refuses_a_path_that_escapes_even_through_a_symlink(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(tmp_path)
    assert inside(root, root / "a" / "b") == root / "a" / "b"
    with pytest.raises(ConfigError, match="outside"):
        inside(root, root / ".." / "x")
    with pytest.raises(ConfigError, match="outside"):
        inside(root, root / "link" / "x")


def test_run_refs_are_names(tmp_path):
    with pytest.raises(ConfigError, match="RUN"):
        Store(tmp_path).resolve_run("../../etc")


def test_a_record_written_before_steps_were_measured_still_loads(tmp_path):
    store, rdir = _run(tmp_path, seal=False)
    # As an older harness wrote it: no ``steps`` key at all (the store's digests recomputed).
    for path in (rdir / "trials").glob("*.json"):
        data = json.loads(path.read_text())
        del data["steps"]
        path.write_text(json.dumps(data, indent=2))
    _rechain(rdir)
    records = store.trials("r1")
    assert [r.key.trial for r in records] == [0, 1]
    assert [(r.steps, r.overhead_s()) for r in records] == [(None, None), (None, None)]


def test_the_store_adds_its_step_to_a_measured_record_only(tmp_path):
    store = Store(tmp_path)
    measured = trial(0).model_copy(update={"steps": TrialSteps(wall_s=2.0, verifier=1.5)})
    with store.open_run(release()) as h:
        assert h.add_trial(measured, {"x": b"stdout" * 10_000})
        assert h.add_trial(trial(1), {"y": b"stderr"})
    first, second = store.trials("r1")
    assert first.steps is not None and first.steps.store is not None and first.steps.store > 0
    assert (first.steps.wall_s, first.steps.verifier) == (2.0, 1.5)
    assert second.steps is None


def test_the_step_clock_never_counts_a_second_twice():
    clock = StepClock()
    with clock.step("agent"):
        time.sleep(0.05)
        with clock.step("workspace"):
            time.sleep(0.1)
    with clock.step("agent"):  # a second attempt adds to the same step
        time.sleep(0.05)
    steps = clock.steps()
    assert steps.workspace >= 0.1
    assert steps.agent >= 0.1
    # The nested step is taken out of the outer one: together they fit the wall time.
    assert steps.agent + steps.workspace <= steps.steps_s() <= steps.wall_s
    assert steps.store is None and steps.verifier == 0.0


def test_a_lone_surrogate_that_reached_a_record_is_stored_as_u_fffd(tmp_path):
    # the last line behind the parsers: a record that would not serialise never stops a run
    v = Verdict(outcome=Outcome.FAIL, reason="agent: odd \ud800 name odd\udcff.txt")
    bad = trial(0).model_copy(update={"verdict": v})
    store = Store(tmp_path)
    with store.open_run(release()) as h:
        assert h.add_trial(bad, {})
    with store.open_run(release()) as h:  # and the run resumes
        assert h.done() == {bad.key.slug()}
    (path,) = (tmp_path / "runs").rglob("trials/*.json") or tmp_path.rglob("trials/*.json")
    assert "odd \ufffd name odd\ufffd.txt" in path.read_text(encoding="utf-8")


def test_a_stored_result_reads_its_reasons_in_order():
    def result(decision: dict[str, object]) -> ResultRecord:
        return ResultRecord(
            computed_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
            run_id="r",
            release="x",
            system_digest="sha256:" + "0" * 64,
            verdict="fail",
            decision=decision,
        )

    reasons = [{"severity": "fail", "message": "b dropped"}, {"severity": "warn", "message": "m"}]
    assert result({"reasons": reasons}).reason_lines() == ("[fail] b dropped", "[warn] m")
    assert result({}).reason_lines() == ()
