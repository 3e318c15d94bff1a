from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.cases.model import ArtifactRule, HiddenFile, Limits, Mutant, Verifier
from harness.sandbox.base import Bound, ExecResult, Termination
from harness.store.records import AgentClaim, FailureType, Outcome, Verdict
from harness.trial.verify import (
    MAX_RESULT_BYTES,
    judge_agent_phase,
    judge_mutant,
    judge_verifier,
    parse_agent_result,
    passed_tests,
)

# ----------------------------------------------------------------------------- helpers


def run(
    exit_code: int | None = 0,
    termination: Termination = Termination.EXIT,
    *,
    signal: int | None = None,
    limit: float = 10.0,
    duration: float = 1.0,
) -> ExecResult:
    bound = None
    if termination not in (Termination.EXIT, Termination.SIGNAL):
        bound = Bound(kind=termination, limit=limit, observed=limit + 1)
    return ExecResult(
        argv=("sh", "-c", "x"),
        exit_code=exit_code,
        signal=signal,
        termination=termination,
        bound=bound,
        duration_s=duration,
    )


def junit(*cases: tuple[str, str], classname: str = "tests.test_x", **attrs: str) -> bytes:
    """Build a report from (name, status) pairs; status passed/failed/error/skipped."""
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite", attrs)
    for name, status in cases:
        el = ET.SubElement(suite, "testcase", classname=classname, name=name)
        tag = {"failed": "failure", "error": "error", "skipped": "skipped"}.get(status)
        if tag:
            ET.SubElement(el, tag, message=f"{name} {status}")
    return ET.tostring(root)


def verifier(*artifacts: ArtifactRule, expected_exit: int = 0) -> Verifier:
    return Verifier(command=("pytest", "-q"), expected_exit=expected_exit, artifacts=artifacts)


JUNIT = ArtifactRule(path="report.xml", rule="junit")
GOOD = junit(("test_a", "passed"), ("test_b", "passed"))


def judge(
    result: ExecResult, v: Verifier, artifacts: dict[str, bytes | None] | None = None
) -> Verdict:
    return judge_verifier(result, v, artifacts or {})


def assert_fail(verdict: Verdict, failure: FailureType, *in_reason: str) -> None:
    assert verdict.outcome is Outcome.FAIL, verdict
    assert verdict.failure_type is failure, verdict
    for text in in_reason:
        assert text in verdict.reason, verdict.reason
    assert "\n" not in verdict.reason


# ----------------------------------------------------------------------------- agent result


def test_missing_result_file() -> None:
    assert parse_agent_result(None) == AgentClaim(status="missing")


def test_full_result_is_read() -> None:
    doc = {
        "status": "submitted",
        "claim": "fixed the bug",
        "claimed_success": True,
        "turns": 7,
        "usage": {"input_tokens": 1000, "output_tokens": 250, "cost_usd": 0.02},
        "extra": {"ignored": True},
    }
    claim = parse_agent_result(json.dumps(doc).encode())
    assert claim == AgentClaim(
        status="submitted",
        claim="fixed the bug",
        claimed_success=True,
        turns=7,
        usage={"input_tokens": 1000.0, "output_tokens": 250.0, "cost_usd": 0.02},
    )


def test_minimal_abstention() -> None:
    assert parse_agent_result(b'{"status": "abstained"}') == AgentClaim(status="abstained")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"[]",
        b'"submitted"',
        b"{}",
        b'{"status": "done"}',
        b'{"status": "submitted", "claim": 3}',
        b'{"status": "submitted", "claimed_success": 1}',
        b'{"status": "submitted", "claimed_success": "yes"}',
        b'{"status": "submitted", "turns": true}',
        b'{"status": "submitted", "turns": -1}',
        b'{"status": "submitted", "turns": 2.5}',
        b'{"status": "submitted", "usage": [1, 2]}',
        b'{"status": "submitted", "usage": {"input_tokens": "many"}}',
        b'{"status": "submitted", "usage": {"input_tokens": true}}',
        b'{"status": "submitted", "usage": {"input_tokens": -5}}',
        b'{"status": "submitted", "usage": {"input_tokens": NaN}}',
        b'{"status": "submitted", "usage": {"input_tokens": Infinity}}',
        b'{"status": "submitted", "usage": {"input_tokens": 1e400}}',
        b'{"status": "submitted", "usage": {"input_tokens": ' + b"9" * 400 + b"}}",
        b"\xff\xfe\xfa garbage",
        b"[" * 100_000 + b"]" * 100_000,
    ],
)
def test_wrong_shapes_are_invalid(data: bytes) -> None:
    assert parse_agent_result(data) == AgentClaim(status="invalid")


def test_oversized_result_is_invalid_without_parsing() -> None:
    pad = b" " * MAX_RESULT_BYTES
    assert parse_agent_result(b'{"status": "submitted"}' + pad) == AgentClaim(status="invalid")
    assert parse_agent_result(b'{"status": "submitted"}' + pad[:100]).status == "submitted"


def test_long_claim_is_shortened() -> None:
    claim = parse_agent_result(json.dumps({"status": "submitted", "claim": "x" * 50_000}).encode())
    assert claim.claim is not None
    assert 1000 < len(claim.claim) < 10_000
    assert claim.claim.endswith("[…]")


def test_too_many_usage_keys_is_invalid() -> None:
    usage = {f"k{i}": 1 for i in range(100)}
    data = json.dumps({"status": "submitted", "usage": usage}).encode()
    assert parse_agent_result(data).status == "invalid"


@given(data=st.binary(max_size=500))
@settings(max_examples=300, deadline=None)
def test_random_bytes_never_raise(data: bytes) -> None:
    assert parse_agent_result(data).status in ("submitted", "abstained", "invalid")


_json_scalar = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10)
_json = st.recursive(
    _json_scalar,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@given(
    doc=st.dictionaries(
        st.sampled_from(["status", "claim", "claimed_success", "turns", "usage", "other"]),
        _json | st.sampled_from(["submitted", "abstained"]),
    )
)
@settings(max_examples=300, deadline=None)
def test_arbitrary_json_objects_never_raise(doc: dict[str, Any]) -> None:
    claim = parse_agent_result(json.dumps(doc).encode())
    if claim.status in ("submitted", "abstained"):
        assert doc["status"] == claim.status
    else:
        assert claim == AgentClaim(status="invalid")


@given(
    status=st.sampled_from(["submitted", "abstained"]),
    text=st.text(max_size=200),
    success=st.booleans(),
    turns=st.integers(min_value=0, max_value=10**6),
    usage=st.dictionaries(
        st.text(max_size=12),
        st.floats(min_value=0, max_value=1e12, allow_nan=False) | st.integers(0, 10**9),
        max_size=5,
    ),
)
@settings(max_examples=200, deadline=None)
def test_valid_results_roundtrip(
    status: str, text: str, success: bool, turns: int, usage: dict[str, float]
) -> None:
    doc = {"status": status, "claim": text, "claimed_success": success, "turns": turns}
    doc["usage"] = usage
    claim = parse_agent_result(json.dumps(doc).encode())
    assert (claim.status, claim.claim, claim.claimed_success, claim.turns) == (
        status,
        text,
        success,
        turns,
    )
    assert claim.usage == {k: float(v) for k, v in usage.items()}


# ----------------------------------------------------------------------------- agent phase

SUBMITTED = AgentClaim(status="submitted", claimed_success=True)
LIMITS = Limits(turns=10, tokens=1000, wall_seconds=60)


@pytest.mark.parametrize(
    ("termination", "failure"),
    [
        (Termination.WALL_CLOCK, FailureType.TIMEOUT),
        (Termination.CPU, FailureType.CPU),
        (Termination.MEMORY, FailureType.MEMORY),
        (Termination.PIDS, FailureType.PIDS),
        (Termination.DISK, FailureType.DISK),
    ],
)
def test_agent_bound_fired(termination: Termination, failure: FailureType) -> None:
    verdict = judge_agent_phase(
        run(None, termination, signal=9, limit=64), SUBMITTED, LIMITS, expect="change", changed=True
    )
    assert verdict is not None
    assert_fail(verdict, failure, termination.value, "limit 64")
    assert verdict.checks[-1].name == "agent.termination"
    assert not verdict.checks[-1].ok


def test_agent_killed_by_signal_is_agent_error() -> None:
    verdict = judge_agent_phase(
        run(None, Termination.SIGNAL, signal=11), SUBMITTED, LIMITS, expect="change", changed=True
    )
    assert verdict is not None
    assert_fail(verdict, FailureType.AGENT_ERROR, "signal 11")


def test_agent_over_wall_seconds_budget_is_timeout() -> None:
    verdict = judge_agent_phase(
        run(0, duration=61), SUBMITTED, LIMITS, expect="change", changed=True
    )
    assert verdict is not None
    assert_fail(verdict, FailureType.TIMEOUT, "wall_seconds")


def test_agent_nonzero_exit_is_agent_error() -> None:
    verdict = judge_agent_phase(run(3), SUBMITTED, LIMITS, expect="change", changed=True)
    assert verdict is not None
    assert_fail(verdict, FailureType.AGENT_ERROR, "exited 3")
    assert [c.ok for c in verdict.checks] == [True, False]


@pytest.mark.parametrize(
    ("claim", "text"),
    [
        (AgentClaim(status="submitted", turns=11), "11 turns"),
        (
            AgentClaim(status="submitted", usage={"input_tokens": 900, "output_tokens": 101}),
            "1001 tokens",
        ),
        (AgentClaim(status="submitted", usage={"total_tokens": 5000}), "5000 tokens"),
        (AgentClaim(status="abstained", turns=50), "50 turns"),
    ],
)
def test_reported_budget_overrun(claim: AgentClaim, text: str) -> None:
    verdict = judge_agent_phase(run(0), claim, LIMITS, expect="change", changed=True)
    assert verdict is not None
    assert_fail(verdict, FailureType.BUDGET_EXCEEDED, text)


def test_budget_at_the_limit_is_fine_and_unset_limits_are_not_checked() -> None:
    at_limit = AgentClaim(
        status="submitted", turns=10, usage={"input_tokens": 500, "output_tokens": 500}
    )
    assert judge_agent_phase(run(0), at_limit, LIMITS, expect="change", changed=True) is None
    huge = AgentClaim(status="submitted", turns=10**6, usage={"input_tokens": 1e9})
    assert judge_agent_phase(run(0), huge, Limits(), expect="change", changed=True) is None


def test_abstention_passes_when_expected_and_fails_otherwise() -> None:
    abstained = AgentClaim(status="abstained", claim="this is unsafe")
    ok = judge_agent_phase(run(0), abstained, LIMITS, expect="abstain", changed=False)
    assert ok is not None
    assert ok.outcome is Outcome.PASS
    assert ok.failure_type is None
    assert all(c.ok for c in ok.checks)
    bad = judge_agent_phase(run(0), abstained, LIMITS, expect="change", changed=False)
    assert bad is not None
    assert_fail(bad, FailureType.ABSTAINED, "abstained")


@pytest.mark.parametrize("status", ["submitted", "missing", "invalid", "abstained"])
def test_change_when_abstention_expected(status: str) -> None:
    # "abstained" too: the agent's own word never excuses the change (red team round 23)
    claim = AgentClaim(status=status)
    verdict = judge_agent_phase(run(0), claim, LIMITS, expect="abstain", changed=True)
    assert verdict is not None
    assert_fail(verdict, FailureType.UNEXPECTED_CHANGE, "abstention")


@pytest.mark.parametrize("expect", ["change", "abstain"])
@pytest.mark.parametrize("status", ["submitted", "missing", "invalid"])
def test_no_change_fails(expect: str, status: str) -> None:
    claim = AgentClaim(status=status, claimed_success=True)
    verdict = judge_agent_phase(run(0), claim, LIMITS, expect=expect, changed=False)  # type: ignore[arg-type]
    assert verdict is not None
    assert_fail(verdict, FailureType.NO_CHANGE, "unchanged")


@pytest.mark.parametrize(
    "claim",
    [
        AgentClaim(status="submitted", claimed_success=True),
        AgentClaim(status="submitted", claimed_success=False, claim="I could not fix it"),
        AgentClaim(status="missing"),
        AgentClaim(status="invalid"),
    ],
)
def test_a_change_goes_on_to_the_verifier_whatever_the_agent_claims(claim: AgentClaim) -> None:
    assert judge_agent_phase(run(0), claim, LIMITS, expect="change", changed=True) is None


# ----------------------------------------------------------------------------- verifier


def test_all_checks_pass() -> None:
    v = verifier(
        JUNIT,
        ArtifactRule(path="out/result.json", rule="json"),
        ArtifactRule(path="log.txt", rule="exists"),
    )
    verdict = judge(run(0), v, {"report.xml": GOOD, "out/result.json": b"{}", "log.txt": b""})
    assert verdict.outcome is Outcome.PASS
    assert verdict.failure_type is None
    assert verdict.tests_run == 2
    assert verdict.failing_tests == ()
    assert all(c.ok for c in verdict.checks)
    assert [c.name for c in verdict.checks] == [
        "verifier.termination",
        "verifier.exit",
        "artifact[report.xml].exists",
        "artifact[report.xml].non_empty",
        "artifact[report.xml].junit",
        "artifact[report.xml].min_tests",
        "artifact[report.xml].no_failures",
        "artifact[out/result.json].exists",
        "artifact[out/result.json].non_empty",
        "artifact[out/result.json].json",
        "artifact[log.txt].exists",
    ]
    assert "2 tests ran" in verdict.reason


def test_exit_only_verifier_passes_on_expected_exit() -> None:
    verdict = judge(run(0), verifier())
    assert verdict.outcome is Outcome.PASS
    assert verdict.tests_run is None


@pytest.mark.parametrize(
    ("termination", "failure"),
    [
        (Termination.WALL_CLOCK, FailureType.TIMEOUT),
        (Termination.CPU, FailureType.CPU),
        (Termination.MEMORY, FailureType.MEMORY),
        (Termination.PIDS, FailureType.PIDS),
        (Termination.DISK, FailureType.DISK),
    ],
)
def test_verifier_bound_fired(termination: Termination, failure: FailureType) -> None:
    # Even a complete, green report written before the kill does not rescue the run.
    verdict = judge(run(None, termination, signal=9), verifier(JUNIT), {"report.xml": GOOD})
    assert_fail(verdict, failure, "verifier.termination", termination.value)


def test_verifier_killed_by_signal_is_test_failure_naming_the_signal() -> None:
    verdict = judge(run(None, Termination.SIGNAL, signal=11), verifier(JUNIT), {"report.xml": GOOD})
    assert_fail(verdict, FailureType.TEST_FAILURE, "signal 11")


@pytest.mark.parametrize("code", [126, 127])
def test_verifier_not_runnable_is_evaluator_error(code: int) -> None:
    verdict = judge(run(code), verifier(JUNIT), {"report.xml": None})
    assert verdict.outcome is Outcome.EVALUATOR_ERROR
    assert verdict.failure_type is None
    assert f"exited {code}" in verdict.reason
    assert "pytest -q" in verdict.reason


def test_127_is_fine_when_it_is_the_expected_exit() -> None:
    assert judge(run(127), verifier(expected_exit=127)).outcome is Outcome.PASS


def test_wrong_exit_names_failing_tests_from_the_report() -> None:
    report = junit(("test_a", "passed"), ("test_b", "failed"), ("test_c", "error"))
    verdict = judge(run(1), verifier(JUNIT), {"report.xml": report})
    assert_fail(verdict, FailureType.TEST_FAILURE, "exited 1, expected 0", "test_b", "test_c")
    assert verdict.failing_tests == ("tests.test_x::test_b", "tests.test_x::test_c")
    assert verdict.tests_run == 3


def test_wrong_exit_fails_even_with_a_green_report() -> None:
    verdict = judge(run(2), verifier(JUNIT), {"report.xml": GOOD})
    assert_fail(verdict, FailureType.TEST_FAILURE, "exited 2")
    assert verdict.failing_tests == ()


def test_expected_non_zero_exit() -> None:
    assert judge(run(1), verifier(expected_exit=1)).outcome is Outcome.PASS
    assert_fail(judge(run(0), verifier(expected_exit=1)), FailureType.TEST_FAILURE, "exited 0")


def test_every_check_is_reported_and_the_first_failure_decides() -> None:
    v = verifier(JUNIT, ArtifactRule(path="cov.json", rule="json"))
    verdict = judge(run(1), v, {"report.xml": None, "cov.json": b"{"})
    assert_fail(verdict, FailureType.TEST_FAILURE, "verifier.exit")
    assert [(c.name, c.ok) for c in verdict.checks] == [
        ("verifier.termination", True),
        ("verifier.exit", False),
        ("artifact[report.xml].exists", False),
        ("artifact[cov.json].exists", True),
        ("artifact[cov.json].non_empty", True),
        ("artifact[cov.json].json", False),
    ]


def test_missing_artifact() -> None:
    verdict = judge(run(0), verifier(ArtifactRule(path="dist/out.bin")), {"dist/out.bin": None})
    assert_fail(verdict, FailureType.MISSING_ARTIFACT, "dist/out.bin", "missing")


@pytest.mark.parametrize("rule", ["non_empty", "json", "junit"])
@pytest.mark.parametrize("data", [b"", b" \n\t\n"])
def test_empty_artifact_is_missing_artifact_saying_empty(rule: str, data: bytes) -> None:
    v = verifier(ArtifactRule(path="a", rule=rule))
    assert_fail(judge(run(0), v, {"a": data}), FailureType.MISSING_ARTIFACT, "empty")


def test_exists_rule_accepts_an_empty_file() -> None:
    v = verifier(ArtifactRule(path="a", rule="exists"))
    assert judge(run(0), v, {"a": b""}).outcome is Outcome.PASS


@pytest.mark.parametrize("data", [b"{", b"NaN", b'{"x": Infinity}', b"\xff\xfe\x00", b"[" * 50_000])
def test_unparsable_json_is_invalid_artifact(data: bytes) -> None:
    v = verifier(ArtifactRule(path="r.json", rule="json"))
    assert_fail(judge(run(0), v, {"r.json": data}), FailureType.INVALID_ARTIFACT, "JSON")


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"<testsuite><testcase name='a'>", "malformed"),
        (b"<html/>", "root element"),
        (b'<!DOCTYPE x [<!ENTITY a "b">]><testsuite/>', "DOCTYPE"),
    ],
)
def test_unparsable_junit_is_invalid_artifact(data: bytes, text: str) -> None:
    verdict = judge(run(0), verifier(JUNIT), {"report.xml": data})
    assert_fail(verdict, FailureType.INVALID_ARTIFACT, text)
    assert verdict.tests_run is None


def test_exit_zero_with_zero_tests_is_no_tests() -> None:
    empty = b'<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="0"/></testsuites>'
    verdict = judge(run(0), verifier(JUNIT), {"report.xml": empty})
    assert_fail(verdict, FailureType.NO_TESTS, "0 tests ran", "at least 1")
    assert verdict.tests_run == 0


def test_forged_test_count_without_testcases_is_no_tests() -> None:
    forged = b'<testsuite name="s" tests="100" failures="0" errors="0" skipped="0"></testsuite>'
    verdict = judge(run(0), verifier(JUNIT), {"report.xml": forged})
    assert_fail(verdict, FailureType.NO_TESTS)
    assert verdict.tests_run == 0


def test_skipped_tests_do_not_count_as_run() -> None:
    report = junit(("a", "passed"), ("b", "skipped"), ("c", "skipped"))
    rule = ArtifactRule(path="report.xml", rule="junit", min_tests=2)
    verdict = judge(run(0), verifier(rule), {"report.xml": report})
    assert_fail(verdict, FailureType.NO_TESTS, "1 tests ran (2 skipped)", "at least 2")


def test_min_tests_zero_allows_an_empty_report() -> None:
    rule = ArtifactRule(path="report.xml", rule="junit", min_tests=0)
    verdict = judge(run(0), verifier(rule), {"report.xml": b"<testsuite/>"})
    assert verdict.outcome is Outcome.PASS


def test_failures_in_report_fail_even_when_exit_matched() -> None:
    report = junit(("test_a", "passed"), ("test_b", "failed"))
    verdict = judge(run(0), verifier(JUNIT), {"report.xml": report})
    assert_fail(verdict, FailureType.TEST_FAILURE, "no_failures", "1 failed", "test_b")
    assert verdict.failing_tests == ("tests.test_x::test_b",)


def test_fail_to_pass_and_pass_to_pass_must_be_present_and_passed() -> None:
    rule = ArtifactRule(
        path="report.xml",
        rule="junit",
        fail_to_pass=("tests.test_x::test_new", "tests/test_x.py::test_fixed"),
        pass_to_pass=("test_old",),
    )
    report = junit(("test_new", "passed"), ("test_fixed", "passed"), ("test_old", "passed"))
    assert judge(run(0), verifier(rule), {"report.xml": report}).outcome is Outcome.PASS

    missing = junit(("test_fixed", "passed"), ("test_old", "passed"))
    verdict = judge(run(0), verifier(rule), {"report.xml": missing})
    assert_fail(verdict, FailureType.TEST_FAILURE, "fail_to_pass", "test_new (not run)")
    assert verdict.failing_tests == ("tests.test_x::test_new",)

    skipped_old = junit(("test_new", "passed"), ("test_fixed", "passed"), ("test_old", "skipped"))
    verdict = judge(run(0), verifier(rule), {"report.xml": skipped_old})
    assert_fail(verdict, FailureType.TEST_FAILURE, "pass_to_pass", "test_old (skipped)")
    assert verdict.failing_tests == ("test_old",)


def test_a_test_the_proof_passed_must_run_and_pass_in_a_trial() -> None:
    """Code a test calls can skip it (``unittest.SkipTest``), code a test module imports can
    keep it from being collected (``__test__ = False``): a wrong fix would hide the tests that
    show it wrong where neither ``pass_to_pass`` nor ``min_tests`` counts them."""
    green = junit(("test_a", "passed"), ("test_b", "passed"), ("test_c", "skipped"))
    v = verifier(JUNIT)
    proven = passed_tests(v, {"report.xml": green})
    assert proven == {"report.xml": ("tests.test_x::test_a", "tests.test_x::test_b")}

    hidden = junit(("test_a", "passed"), ("test_b", "skipped"), ("test_c", "skipped"))
    assert judge(run(0), v, {"report.xml": hidden}).outcome is Outcome.PASS  # no proof: passes
    verdict = judge_verifier(run(0), v, {"report.xml": hidden}, proven=proven)
    assert_fail(
        verdict, FailureType.TEST_FAILURE, "report.xml].proven", "tests.test_x::test_b (skipped)"
    )
    assert verdict.failing_tests == ("tests.test_x::test_b",)
    gone = junit(("test_a", "passed"), ("test_c", "skipped"))
    assert judge(run(0), v, {"report.xml": gone}).outcome is Outcome.PASS  # no proof: passes
    verdict = judge_verifier(run(0), v, {"report.xml": gone}, proven=proven)
    assert_fail(verdict, FailureType.TEST_FAILURE, "tests.test_x::test_b (not run)")
    # A test the proof skipped may stay skipped; one the proof passed may pass.
    same = junit(("test_a", "passed"), ("test_b", "passed"), ("test_c", "skipped"))
    verdict = judge_verifier(run(0), v, {"report.xml": same}, proven=proven)
    assert verdict.outcome is Outcome.PASS, verdict
    assert any(c.name == "artifact[report.xml].proven" and c.ok for c in verdict.checks)


def test_a_test_reported_twice_in_the_proof_counts_only_if_it_passed_every_time() -> None:
    report = (
        b'<testsuite><testcase classname="m" name="t"/>'
        b'<testcase classname="m" name="t"><skipped message="later"/></testcase>'
        b'<testcase classname="m" name="u"/></testsuite>'
    )
    assert passed_tests(verifier(JUNIT), {"report.xml": report}) == {"report.xml": ("m::u",)}
    unparsable = {"report.xml": b"<testsuite"}
    assert passed_tests(verifier(JUNIT), unparsable) == {}
    assert passed_tests(verifier(JUNIT), {"report.xml": None}) == {}


_STATUSES = st.sampled_from(["passed", "failed", "error", "skipped"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcdefg"), _STATUSES), max_size=12))
def test_a_report_never_breaks_the_proof_it_gave(cases: list[tuple[str, str]]) -> None:
    """The proof's list holds only tests that passed every time: the same report run again
    passes the check, and skipping any listed test fails it."""
    report = junit(*[(f"test_{n}", status) for n, status in cases])
    v = verifier(JUNIT)
    proven = passed_tests(v, {"report.xml": report})
    listed = proven.get("report.xml", ())
    for test_id in listed:
        name = test_id.rsplit("::", 1)[1]
        assert all(s == "passed" for n, s in cases if f"test_{n}" == name)
    verdict = judge_verifier(run(0), v, {"report.xml": report}, proven=proven)
    assert not any(c.name.endswith(".proven") and not c.ok for c in verdict.checks)
    if listed:
        hide = listed[0].rsplit("::", 1)[1]
        skipped = junit(*[(f"test_{n}", "skipped" if f"test_{n}" == hide else s) for n, s in cases])
        gone = junit(*[(f"test_{n}", s) for n, s in cases if f"test_{n}" != hide])
        for changed in (skipped, gone):
            verdict = judge_verifier(run(0), v, {"report.xml": changed}, proven=proven)
            assert any(c.name.endswith(".proven") and not c.ok for c in verdict.checks)
            assert verdict.outcome is Outcome.FAIL


def test_required_test_reported_twice_must_pass_every_time() -> None:
    report = (
        b'<testsuite><testcase classname="m" name="t"/>'
        b'<testcase classname="m" name="t"><error message="teardown"/></testcase>'
        b'<testcase classname="m" name="u"/></testsuite>'
    )
    rule = ArtifactRule(path="r.xml", rule="junit", fail_to_pass=("m::t",))
    verdict = judge(run(0), verifier(rule), {"r.xml": report})
    # the report's own failure decides first; the fail_to_pass check is reported too
    assert_fail(verdict, FailureType.TEST_FAILURE, "no_failures")
    f2p = next(c for c in verdict.checks if c.name.endswith("fail_to_pass"))
    assert not f2p.ok
    assert "m::t (error)" in f2p.detail


def test_several_junit_reports_add_up() -> None:
    v = verifier(JUNIT, ArtifactRule(path="more.xml", rule="junit"))
    verdict = judge(run(0), v, {"report.xml": GOOD, "more.xml": junit(("x", "passed"))})
    assert verdict.outcome is Outcome.PASS
    assert verdict.tests_run == 3


def test_reason_stays_one_line_and_failing_tests_are_capped() -> None:
    report = junit(*[(f"test\n{i}", "failed") for i in range(500)])
    verdict = judge(run(1), verifier(JUNIT), {"report.xml": report})
    assert "\n" not in verdict.reason
    assert len(verdict.reason) <= 400
    assert "(+495 more)" in verdict.reason
    assert len(verdict.failing_tests) == 200


def test_artifact_not_passed_by_the_caller_is_a_caller_bug() -> None:
    with pytest.raises(ValueError, match=r"report\.xml"):
        judge(run(0), verifier(JUNIT), {})


def test_agent_claim_cannot_reach_the_verifier_verdict() -> None:
    # judge_verifier has no claim parameter at all: a PASSED file is just another file.
    v = verifier(JUNIT)
    verdict = judge(run(0), v, {"report.xml": junit(("a", "failed")), "PASSED": b"yes"})
    assert_fail(verdict, FailureType.TEST_FAILURE)


# ----------------------------------------------------------------------------- mutants

_STATUS_XML = {
    "passed": "",
    "failed": '<failure message="assert">E assert</failure>',
    "error": '<error message="boom">E boom</error>',
    "skipped": '<skipped message="later"/>',
}
_MUTANT = Mutant(
    name="one-level",
    replace=(HiddenFile(src="hidden/m.py", dest="pkg/m.py"),),
    must_fail=("tests.t::test_a",),
)
_MUTANT_VERIFIER = Verifier(
    command=("pytest",),
    artifacts=(ArtifactRule(path="r.xml", rule="junit"),),
    mutants=(_MUTANT,),
)


def _statuses_xml(statuses: list[str]) -> bytes:
    body = "".join(
        f'<testcase classname="tests.t" name="test_a">{_STATUS_XML[s]}</testcase>' for s in statuses
    )
    return f'<testsuite><testcase classname="tests.t" name="test_b"/>{body}</testsuite>'.encode()


@given(st.lists(st.sampled_from(sorted(_STATUS_XML)), max_size=4))
@settings(max_examples=60, deadline=None)
def test_a_mutant_is_caught_only_when_its_test_failed_every_time_it_ran(statuses) -> None:
    check = judge_mutant(_MUTANT_VERIFIER, _MUTANT, {"r.xml": _statuses_xml(statuses)})
    caught = bool(statuses) and all(s in ("failed", "error") for s in statuses)
    assert check.ok is caught, (statuses, check.detail)
    assert check.name == "mutant.one-level"
    if not statuses:
        assert "tests.t::test_a (not run)" in check.detail


@pytest.mark.parametrize("data", [None, b"", b"<testsuite><testcase", b"not xml"])
def test_a_mutant_run_without_a_readable_report_catches_nothing(data) -> None:
    assert judge_mutant(_MUTANT_VERIFIER, _MUTANT, {"r.xml": data}).ok is False


def test_mutants_need_a_junit_artifact_and_unique_names() -> None:
    with pytest.raises(ValueError, match="need a junit artifact"):
        Verifier(command=("x",), artifacts=(ArtifactRule(path="r", rule="exists"),),
                 mutants=(_MUTANT,))  # fmt: skip
    with pytest.raises(ValueError, match="unique"):
        Verifier(command=("x",), artifacts=_MUTANT_VERIFIER.artifacts, mutants=(_MUTANT, _MUTANT))
