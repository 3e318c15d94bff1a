"""Trial logic against the scripted FakeSandbox: verdicts, tampering, infra, correction."""

from __future__ import annotations

import json
from pathlib import Path

from support import junit

from harness.errors import BudgetExceededError, SandboxUnavailableError
from harness.project import RetryPolicy
from harness.sandbox.base import Bound, ExecResult, Termination
from harness.sandbox.fake import ExecCall, FakeSandbox, exited
from harness.store.records import FailureType, Outcome
from harness.trial.execute import run_trial


def _fixing_agent(call: ExecCall) -> None:
    (call.workspace / "pkg" / "mod.py").write_text("def answer():\n    return 42\n")
    Path(call.env["HARNESS_RESULT"]).write_text(
        json.dumps({"status": "submitted", "claimed_success": True})
    )


def _honest_verifier(call: ExecCall) -> ExecResult:
    ok = "return 42" in (call.workspace / "pkg" / "mod.py").read_text()
    assert (call.workspace / "tests" / "test_hidden.py").exists(), "hidden file must be injected"
    (call.workspace / "reports").mkdir(exist_ok=True)
    (call.workspace / "reports" / "junit.xml").write_bytes(junit(("test_answer", ok)))
    return exited(call.argv, 0 if ok else 1)


def handler_for(agent, verifier=_honest_verifier):
    def handle(call: ExecCall) -> ExecResult:
        if "--agent" in call.label:
            agent(call)
            return exited(call.argv, 0)
        return verifier(call)

    return handle


def test_fix_passes_and_candidate_identity_recorded(make_case, make_spec):
    out = run_trial(make_spec(make_case()), FakeSandbox(handler_for(_fixing_agent)))
    rec = out.record
    assert rec.verdict.outcome is Outcome.PASS
    attempt = rec.attempts[0]
    assert attempt.candidate_digest and attempt.candidate_digest in str(rec.model_dump())
    assert b"+    return 42" in out.blobs[attempt.diff_blob]
    assert attempt.claim is not None and attempt.claim.claimed_success is True


def test_claim_and_fake_report_cannot_change_a_failing_verdict(make_case, make_spec):
    def liar(call: ExecCall) -> None:
        (call.workspace / "pkg" / "mod.py").write_text("def answer():\n    return 40\n")
        (call.workspace / "reports").mkdir()
        (call.workspace / "reports" / "junit.xml").write_bytes(junit(("test_answer", True)))
        (call.workspace / "tests").mkdir()
        (call.workspace / "tests" / "test_hidden.py").write_text("def test_answer(): pass\n")
        (call.workspace / "PASSED").write_text("yes")
        Path(call.env["HARNESS_RESULT"]).write_text(
            json.dumps({"status": "submitted", "claimed_success": True})
        )

    seen = {}

    def verifier(call: ExecCall) -> ExecResult:
        seen["report_before"] = (call.workspace / "reports" / "junit.xml").exists()
        seen["hidden"] = (call.workspace / "tests" / "test_hidden.py").read_text()
        return exited(call.argv, 1)  # crashes before writing any report

    rec = run_trial(make_spec(make_case()), FakeSandbox(handler_for(liar, verifier))).record
    assert seen["report_before"] is False, "a shipped report must be removed before verifying"
    assert "SECRET_HIDDEN_TEST_BODY" in seen["hidden"], "hidden files overwrite the candidate's"
    assert rec.verdict.outcome is Outcome.FAIL
    assert rec.attempts[0].claim.claimed_success is True
    assert len(rec.attempts[0].tampering) == 2


def test_exit_zero_without_tests_is_a_failure(make_case, make_spec):
    def empty_run(call: ExecCall) -> ExecResult:
        (call.workspace / "reports").mkdir(exist_ok=True)
        (call.workspace / "reports" / "junit.xml").write_bytes(junit())
        return exited(call.argv, 0)

    rec = run_trial(
        make_spec(make_case()), FakeSandbox(handler_for(_fixing_agent, empty_run))
    ).record
    assert rec.verdict.outcome is Outcome.FAIL
    assert rec.verdict.failure_type is FailureType.NO_TESTS


def test_infra_error_is_retried_as_infrastructure_then_counted_apart(make_case, make_spec):
    def broken(call: ExecCall) -> ExecResult:
        raise SandboxUnavailableError("container vanished", reason="engine")

    sandbox = FakeSandbox(handler_for(_fixing_agent, broken))
    rec = run_trial(make_spec(make_case(), retry=RetryPolicy(infra_retries=2)), sandbox).record
    assert rec.verdict.outcome is Outcome.INFRA_ERROR
    attempt = rec.attempts[0]
    assert attempt.infra_retries == 2
    assert sum("--verifier" in c.label for c in sandbox.calls) == 3
    assert rec.stop_reason == "infra_error"
    assert "container vanished" in rec.verdict.reason
    # The same candidate is verified again: the agent is never given a second try by it.
    assert sum("--agent" in c.label for c in sandbox.calls) == 1
    assert [t.candidate_digest for t in attempt.infra_tries] == [attempt.candidate_digest] * 2
    assert all(t.agent is None and "container vanished" in t.verdict.reason
               for t in attempt.infra_tries)  # fmt: skip
    assert attempt.agent is not None and len(rec.tries()) == 3


def test_a_verifier_phase_infra_retry_judges_the_candidate_the_agent_made(make_case, make_spec):
    """The agent's first candidate is what is verified again, never a new draw of it."""
    runs = {"agent": 0, "verifier": 0}

    def drawing(call: ExecCall) -> None:  # a different candidate each time it runs
        runs["agent"] += 1
        body = "return 42" if runs["agent"] > 1 else "return 40"
        (call.workspace / "pkg" / "mod.py").write_text(f"def answer():\n    {body}\n")
        Path(call.env["HARNESS_RESULT"]).write_text(json.dumps({"status": "submitted"}))

    def flaky(call: ExecCall) -> ExecResult:
        runs["verifier"] += 1
        if runs["verifier"] == 1:
            raise SandboxUnavailableError("container vanished", reason="engine")
        return _honest_verifier(call)

    sandbox = FakeSandbox(handler_for(drawing, flaky))
    rec = run_trial(make_spec(make_case(), retry=RetryPolicy(infra_retries=1)), sandbox).record
    assert runs == {"agent": 1, "verifier": 2}
    assert (rec.verdict.outcome, rec.verdict.failure_type) == (
        Outcome.FAIL,
        FailureType.TEST_FAILURE,
    )
    (kept,) = rec.attempts[0].infra_tries
    assert kept.verdict.outcome is Outcome.INFRA_ERROR
    assert kept.candidate_digest == rec.attempts[0].candidate_digest


def test_an_agent_phase_infra_retry_runs_the_agent_again_and_keeps_the_lost_try(
    make_case, make_spec
):
    runs = {"agent": 0}

    def vanishing(call: ExecCall) -> None:
        runs["agent"] += 1
        if runs["agent"] == 1:
            raise SandboxUnavailableError("container vanished", reason="engine")
        _fixing_agent(call)

    sandbox = FakeSandbox(handler_for(vanishing))
    rec = run_trial(make_spec(make_case(), retry=RetryPolicy(infra_retries=1)), sandbox).record
    assert rec.verdict.outcome is Outcome.PASS and runs["agent"] == 2
    (kept,) = rec.attempts[0].infra_tries
    assert kept.verdict.outcome is Outcome.INFRA_ERROR and kept.candidate_digest is None
    assert rec.attempts[0].infra_retries == 1


def test_unexpected_exception_is_an_evaluator_error_not_a_fail(make_case, make_spec):
    def bug(call: ExecCall) -> ExecResult:
        raise KeyError("boom")

    rec = run_trial(make_spec(make_case()), FakeSandbox(handler_for(_fixing_agent, bug))).record
    assert rec.verdict.outcome is Outcome.EVALUATOR_ERROR


def test_a_host_error_names_no_host_temp_folder(make_case, make_spec):
    """An infra reason reaches the report, which never shows a host path."""
    import tempfile

    where = f"{tempfile.gettempdir()}/harness-trial-p1-x_y/candidate-1/fieldkit/notes"

    def host(call: ExecCall) -> ExecResult:
        raise OSError(36, "File name too long", where)

    rec = run_trial(make_spec(make_case()), FakeSandbox(handler_for(_fixing_agent, host))).record
    assert rec.verdict.outcome is Outcome.INFRA_ERROR
    assert "File name too long" in rec.verdict.reason
    assert tempfile.gettempdir() + "/" not in rec.verdict.reason, rec.verdict.reason
    assert "<trial folder>/candidate-1/fieldkit/notes" in rec.verdict.reason


def test_case_changed_after_planning_is_not_judged(make_case, make_spec):
    case_dir = make_case()
    spec = make_spec(case_dir)
    (case_dir / "hidden" / "test_hidden.py").write_text("changed\n")
    rec = run_trial(spec, FakeSandbox(handler_for(_fixing_agent))).record
    assert rec.verdict.outcome is Outcome.EVALUATOR_ERROR
    assert "changed since the run was planned" in rec.verdict.reason


def test_wall_clock_in_agent_phase_is_a_timeout_failure(make_case, make_spec):
    def slow(call: ExecCall) -> ExecResult:
        if "--agent" in call.label:
            return ExecResult(
                argv=call.argv,
                exit_code=None,
                signal=9,
                termination=Termination.WALL_CLOCK,
                bound=Bound(kind=Termination.WALL_CLOCK, limit=1.0, observed=1.0),
                duration_s=1.0,
            )
        raise AssertionError("verifier must not run after the agent timed out")

    rec = run_trial(make_spec(make_case()), FakeSandbox(slow)).record
    assert rec.verdict.outcome is Outcome.FAIL
    assert rec.verdict.failure_type is FailureType.TIMEOUT


def _learning_agent(call: ExecCall) -> None:
    mod = call.workspace / "pkg" / "mod.py"
    if call.env.get("HARNESS_FEEDBACK"):
        mod.write_text("def answer():\n    return 42\n")
    else:
        mod.write_text("def answer():\n    return 43\n")


def test_correction_attempt_uses_feedback_and_gets_a_new_identity(make_case, make_spec):
    sandbox = FakeSandbox(handler_for(_learning_agent))
    rec = run_trial(make_spec(make_case(), retry=RetryPolicy(max_attempts=3)), sandbox).record
    assert [a.verdict.outcome for a in rec.attempts] == [Outcome.FAIL, Outcome.PASS]
    assert rec.stop_reason == "passed"
    assert rec.attempts[0].candidate_digest != rec.attempts[1].candidate_digest
    assert rec.attempts[1].feedback_blob is not None
    assert rec.verdict.outcome is Outcome.PASS


def test_identical_failure_stops_the_loop(make_case, make_spec):
    def stubborn(call: ExecCall) -> None:
        (call.workspace / "pkg" / "mod.py").write_text("def answer():\n    return 43\n")

    rec = run_trial(
        make_spec(make_case(), retry=RetryPolicy(max_attempts=5)),
        FakeSandbox(handler_for(stubborn)),
    ).record
    assert len(rec.attempts) == 2
    assert rec.stop_reason == "identical_failure"


def test_attempt_limit_stops_the_loop(make_case, make_spec):
    counter = {"n": 0}

    def varied(call: ExecCall) -> None:
        counter["n"] += 1
        (call.workspace / "pkg" / "mod.py").write_text(
            f"def answer():\n    return {43 + counter['n']}\n"
        )

    def verifier(call: ExecCall) -> ExecResult:
        (call.workspace / "reports").mkdir(exist_ok=True)
        name = f"test_answer_{counter['n']}"
        (call.workspace / "reports" / "junit.xml").write_bytes(junit((name, False)))
        return exited(call.argv, 1)

    rec = run_trial(
        make_spec(make_case(), retry=RetryPolicy(max_attempts=3)),
        FakeSandbox(handler_for(varied, verifier)),
    ).record
    assert len(rec.attempts) == 3
    assert rec.stop_reason == "attempt_limit"


def _feedback_texts(make_case, make_spec, extra: str) -> str:
    sandbox = FakeSandbox(handler_for(_learning_agent))
    out = run_trial(make_spec(make_case(extra), retry=RetryPolicy(max_attempts=2)), sandbox)
    fb = out.record.attempts[1].feedback_blob
    assert fb is not None
    agent_calls = [c for c in sandbox.calls if "--agent" in c.label]
    assert "HARNESS_FEEDBACK" in agent_calls[1].env
    return out.blobs[fb].decode()


def test_hidden_test_names_and_contents_never_reach_the_agent(make_case, make_spec):
    text = _feedback_texts(make_case, make_spec, "")
    assert "test_answer" not in text and "SECRET_HIDDEN_TEST_BODY" not in text
    assert "test_hidden" not in text
    package = json.loads(text)
    # The hidden verifier's exit status and failure type are chosen by candidate code
    # running under it: without the hidden_diagnostics channel, only pass/fail.
    assert package["verdict"] == "fail" and package["failure_type"] is None
    assert "verifier" not in package


def test_declared_hidden_diagnostics_channel_does_reach_the_agent(make_case, make_spec):
    text = _feedback_texts(make_case, make_spec, "feedback: {hidden_diagnostics: true}\n")
    assert "tests.test_hidden::test_answer" in text


def test_public_feedback_channel_runs_without_hidden_files(make_case, make_spec):
    extra = "feedback: {public_command: [run-public-tests]}\n"
    seen: dict[str, bool] = {}

    def handler(call: ExecCall) -> ExecResult:
        if "--agent" in call.label:
            _learning_agent(call)
            return exited(call.argv, 0)
        if "--feedback" in call.label:
            seen["hidden_present"] = (call.workspace / "tests" / "test_hidden.py").exists()
            return exited(
                call.argv, 1, stdout=b"FAILED tests/test_public.py::test_add - 43 != 42\n"
            )
        return _honest_verifier(call)

    sandbox = FakeSandbox(handler)
    out = run_trial(make_spec(make_case(extra), retry=RetryPolicy(max_attempts=2)), sandbox)
    assert seen == {"hidden_present": False}
    package = json.loads(out.blobs[out.record.attempts[1].feedback_blob])
    assert package["public"]["command"] == ["run-public-tests"]
    assert "test_public.py::test_add" in package["public"]["excerpt"]
    assert "SECRET_HIDDEN_TEST_BODY" not in json.dumps(package)


def test_an_attempt_over_its_model_budget_ends_the_trial_as_budget(make_case, make_spec):
    def spender(call: ExecCall) -> None:
        raise BudgetExceededError("turn 31 refused: the limit is 30 turns", kind="model_calls")

    sandbox = FakeSandbox(handler_for(spender))
    retry = RetryPolicy(max_attempts=3, stop_on_identical_failure=False)
    rec = run_trial(make_spec(make_case(), retry=retry), sandbox).record
    assert rec.verdict.failure_type is FailureType.BUDGET_EXCEEDED
    assert rec.stop_reason == "budget" and len(rec.attempts) == 1  # was candidate_too_large


def test_twin_runs_make_their_sandboxes_one_at_a_time_in_a_random_order():
    """Red team round thirty told the judged run by its workspace's device number: made
    first, it was always the lowest. The order is now drawn afresh for every verification."""
    import random
    import threading

    from harness.trial.phases import _Turns

    places = [random.Random(seed) for seed in range(300)]
    positions = [_Turns(3, rng).order.index(0) for rng in places]
    assert all(positions.count(p) > 60 for p in range(3)), positions  # about 100 each

    turns, entered = _Turns(4, random.Random(7)), []

    def run(i: int) -> None:
        turns.take(i)
        entered.append(i)
        turns.done(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in (3, 2, 1, 0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert entered == turns.order

    # a run that fails before its turn gives it up: the others are not held
    late = _Turns(2, random.Random(1))
    first, second = late.order
    late.done(first)
    done = threading.Event()
    threading.Thread(target=lambda: (late.take(second), done.set())).start()
    assert done.wait(10)
