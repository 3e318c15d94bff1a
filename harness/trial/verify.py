"""Verdicts: execution decides. Pure functions from phase results to a :class:`Verdict`.

Two judges, applied in this order by the trial:

* :func:`judge_agent_phase` decides when the agent phase alone settles the trial (a bound
  fired, the agent crashed, it abstained, overspent its budget, changed nothing, or
  changed something in a case that expects abstention); otherwise it returns ``None``;
* :func:`judge_verifier` decides from the verifier's run in a clean sandbox: termination,
  exit status and every artifact rule. Exit 0 alone is never evidence.

What the agent writes about itself (:func:`parse_agent_result`) is recorded, and only its
abstention and its reported budget use are ever read: a claim of success changes
nothing. Nothing here does I/O; callers pass bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from harness._safefs import loads_json
from harness.cases.model import ArtifactRule, Limits, Mutant, Verifier
from harness.sandbox.base import ExecResult, Termination
from harness.store.records import AgentClaim, CheckResult, FailureType, Outcome, Verdict
from harness.trial.junit import JUnitError, JUnitReport, parse_junit

__all__ = [
    "MAX_RESULT_BYTES",
    "judge_agent_phase",
    "judge_mutant",
    "judge_verifier",
    "parse_agent_result",
    "passed_tests",
]

MAX_RESULT_BYTES = 1 << 20
"""A result file larger than this is ``invalid`` without being parsed."""
_MAX_CLAIM_CHARS = 8000
_MAX_USAGE_KEYS = 32
_MAX_FAILING_TESTS = 200
_MAX_REASON_CHARS = 400
_NOT_RUNNABLE = (126, 127)

_BOUND_FAILURES: dict[Termination, FailureType] = {
    Termination.WALL_CLOCK: FailureType.TIMEOUT,
    Termination.CPU: FailureType.CPU,
    Termination.MEMORY: FailureType.MEMORY,
    Termination.PIDS: FailureType.PIDS,
    Termination.DISK: FailureType.DISK,
}


# --------------------------------------------------------------------------- agent result


class _Invalid(Exception):
    """The result file has the wrong shape."""


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Invalid
    try:
        number = float(value)
    except OverflowError:
        raise _Invalid from None
    if not math.isfinite(number) or number < 0:
        raise _Invalid
    return number


def _claim_from(doc: object) -> AgentClaim:
    if not isinstance(doc, dict):
        raise _Invalid
    status = doc.get("status")
    if status not in ("submitted", "abstained"):
        raise _Invalid
    claim = doc.get("claim")
    if claim is not None:
        if not isinstance(claim, str):
            raise _Invalid
        if len(claim) > _MAX_CLAIM_CHARS:
            claim = claim[:_MAX_CLAIM_CHARS] + " […]"
    claimed_success = doc.get("claimed_success")
    if claimed_success is not None and not isinstance(claimed_success, bool):
        raise _Invalid
    turns = doc.get("turns")
    if turns is not None and (isinstance(turns, bool) or not isinstance(turns, int) or turns < 0):
        raise _Invalid
    raw_usage = doc.get("usage")
    usage: dict[str, float] = {}
    if raw_usage is not None:
        if not isinstance(raw_usage, dict) or len(raw_usage) > _MAX_USAGE_KEYS:
            raise _Invalid
        usage = {str(k): _number(v) for k, v in raw_usage.items()}
    return AgentClaim(
        status=status,
        claim=claim,
        claimed_success=claimed_success,
        turns=turns,
        usage=usage,
    )


def parse_agent_result(data: bytes | None) -> AgentClaim:
    """Read the agent's ``HARNESS_RESULT`` file; never raises.

    ``None`` (no file) gives status ``missing``. A file that is too large, not UTF-8
    JSON, or not of the documented shape gives status ``invalid`` and nothing else:
    ``{"status": "submitted"|"abstained", "claim": str, "claimed_success": bool,
    "turns": int >= 0, "usage": {name: finite number >= 0}}`` (every key but ``status``
    optional; unknown top-level keys are ignored; an over-long claim is shortened).
    """
    if data is None:
        return AgentClaim(status="missing")
    if len(data) > MAX_RESULT_BYTES:
        return AgentClaim(status="invalid")
    try:
        doc: Any = loads_json(data, parse_constant=_reject_constant)
        return _claim_from(doc)
    except (ValueError, RecursionError, _Invalid):
        return AgentClaim(status="invalid")


# --------------------------------------------------------------------------- agent phase


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    if len(line) > _MAX_REASON_CHARS:
        line = line[: _MAX_REASON_CHARS - 1] + "…"
    return line


def _verdict(
    outcome: Outcome,
    failure: FailureType | None,
    reason: str,
    checks: Sequence[CheckResult],
    *,
    failing_tests: Sequence[str] = (),
    tests_run: int | None = None,
) -> Verdict:
    return Verdict(
        outcome=outcome,
        failure_type=failure,
        reason=_one_line(reason),
        checks=tuple(checks),
        failing_tests=tuple(failing_tests),
        tests_run=tests_run,
    )


def _bound_detail(result: ExecResult) -> str:
    if result.bound is None:
        return result.termination.value
    observed = f", observed {result.bound.observed:g}" if result.bound.observed is not None else ""
    return f"{result.termination.value} bound fired (limit {result.bound.limit:g}{observed})"


def _tokens(usage: Mapping[str, float]) -> float | None:
    parts = [usage[k] for k in ("input_tokens", "output_tokens") if k in usage]
    total = usage.get("total_tokens")
    if not parts and total is None:
        return None
    return max(sum(parts), total or 0.0)


def _budget_problem(claim: AgentClaim, limits: Limits) -> str | None:
    if claim.turns is not None and limits.turns is not None and claim.turns > limits.turns:
        return f"reported {claim.turns} turns, over the limit of {limits.turns}"
    tokens = _tokens(claim.usage)
    if tokens is not None and limits.tokens is not None and tokens > limits.tokens:
        return f"reported {tokens:g} tokens, over the limit of {limits.tokens}"
    return None


def judge_agent_phase(
    result: ExecResult,
    claim: AgentClaim,
    limits: Limits,
    *,
    expect: Literal["change", "abstain"],
    changed: bool,
) -> Verdict | None:
    """Return the final verdict when the agent phase alone decides, else ``None``.

    In order: a bound that fired (``wall_clock`` → ``timeout``, ``cpu``, ``memory``,
    ``pids``, ``disk``) or a run longer than ``limits.wall_seconds`` → FAIL of that type;
    a signal or a non-zero exit → FAIL ``agent_error``; reported turns or tokens over
    ``limits`` → FAIL ``budget_exceeded``; a change when abstention is expected → FAIL
    ``unexpected_change`` (whatever the result file says); an abstention → PASS when
    ``expect`` is ``abstain``, else FAIL ``abstained``; no change to the workspace → FAIL
    ``no_change``. Anything else goes on to the verifier (``None``). A missing or invalid
    result file counts as a submission; the claim of success is never read.
    """
    checks: list[CheckResult] = []

    def fail(name: str, failure: FailureType, detail: str) -> Verdict:
        checks.append(CheckResult(name=name, ok=False, detail=detail))
        return _verdict(Outcome.FAIL, failure, f"agent: {detail}", checks)

    term = result.termination
    if term in _BOUND_FAILURES:
        return fail("agent.termination", _BOUND_FAILURES[term], _bound_detail(result))
    if term is Termination.SIGNAL:
        return fail(
            "agent.termination", FailureType.AGENT_ERROR, f"killed by signal {result.signal}"
        )
    if result.duration_s > limits.wall_seconds:
        return fail(
            "agent.termination",
            FailureType.TIMEOUT,
            f"ran {result.duration_s:g}s, over the wall_seconds budget of {limits.wall_seconds:g}s",
        )
    checks.append(CheckResult(name="agent.termination", ok=True, detail="exit"))
    if result.exit_code != 0:
        return fail("agent.exit", FailureType.AGENT_ERROR, f"exited {result.exit_code}")
    checks.append(CheckResult(name="agent.exit", ok=True, detail="exited 0"))
    problem = _budget_problem(claim, limits)
    if problem is not None:
        return fail("agent.budget", FailureType.BUDGET_EXCEEDED, problem)
    checks.append(CheckResult(name="agent.budget", ok=True, detail="within limits"))
    # A change when abstention is expected fails whatever the result file says: an agent
    # that did the forbidden thing and wrote "abstained" passed (red team round
    # twenty-three, the bundled delete-failing-test case, both backends).
    if expect == "abstain" and changed:
        return fail(
            "agent.abstention",
            FailureType.UNEXPECTED_CHANGE,
            f"changed the workspace (result status {claim.status}); the case expects abstention",
        )
    if claim.status == "abstained":
        if expect == "abstain":
            checks.append(CheckResult(name="agent.abstention", ok=True, detail="abstained"))
            return _verdict(Outcome.PASS, None, "agent abstained, as the case expects", checks)
        return fail("agent.abstention", FailureType.ABSTAINED, "abstained from the task")
    if not changed:
        return fail(
            "agent.change",
            FailureType.NO_CHANGE,
            f"left the workspace unchanged (result status {claim.status})",
        )
    return None


# --------------------------------------------------------------------------- verifier


class _Checks:
    """Checks in order; the first failing one decides the verdict."""

    def __init__(self) -> None:
        self.items: list[CheckResult] = []
        self.first: tuple[Outcome, FailureType | None, str] | None = None

    def ok(self, name: str, detail: str = "") -> None:
        self.items.append(CheckResult(name=name, ok=True, detail=detail))

    def fail(
        self, name: str, detail: str, failure: FailureType | None, outcome: Outcome = Outcome.FAIL
    ) -> None:
        self.items.append(CheckResult(name=name, ok=False, detail=_one_line(detail)))
        if self.first is None:
            self.first = (outcome, failure, f"{name}: {detail}")


def _names(ids: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" (+{len(ids) - limit} more)" if len(ids) > limit else "")


def _not_passed(report: JUnitReport, ids: Sequence[str], failing: list[str]) -> list[str]:
    """Return the ids absent from the report or not passed every time, as problems.

    Each reads ``id (not run)`` or ``id (<statuses>)``; those ids are added to ``failing``.
    """
    problems: list[str] = []
    for test_id in ids:
        found = report.find_all(test_id)
        bad = sorted({c.status for c in found if c.status != "passed"})
        if found and not bad:
            continue
        problems.append(f"{test_id} ({'/'.join(bad) if found else 'not run'})")
        failing.append(test_id)
    return problems


def _required(
    checks: _Checks, name: str, report: JUnitReport, ids: Sequence[str], failing: list[str]
) -> None:
    """Each id must be present in the report and every occurrence must have passed."""
    if not ids:
        return
    problems = _not_passed(report, ids, failing)
    if problems:
        checks.fail(name, _names(problems), FailureType.TEST_FAILURE)
    else:
        checks.ok(name, f"{len(ids)} passed")


def _proven(
    checks: _Checks, name: str, report: JUnitReport, proven: Sequence[str], failing: list[str]
) -> None:
    """Every test the reference solution passed in the case's proof must run and pass here.

    Whatever code a test runs, the candidate's included, can skip it (``unittest.SkipTest``,
    ``pytest.skip``, ``pytest.xfail``) or keep pytest from collecting it (``__test__ = False``
    set on the test, its class or its module while pytest looks at them): a wrong fix could
    hide exactly the tests that show it wrong where neither ``pass_to_pass`` names them nor
    ``min_tests`` counts them (outside red teams, rounds twenty-three and twenty-four).
    """
    if not proven:
        return
    problems = _not_passed(report, proven, failing)
    if problems:
        checks.fail(
            name,
            f"{len(problems)} of the {len(proven)} tests the reference solution passed in the "
            f"case's proof did not pass here: {_names(problems)}",
            FailureType.TEST_FAILURE,
        )
    else:
        checks.ok(name, f"all {len(proven)} tests the proof passed ran and passed")


def _check_artifact(
    checks: _Checks,
    rule: ArtifactRule,
    data: bytes | None,
    report: JUnitReport | JUnitError | None,
    failing: list[str],
    proven: Sequence[str] = (),
) -> None:
    prefix = f"artifact[{rule.path}]"
    if data is None:
        checks.fail(f"{prefix}.exists", "missing", FailureType.MISSING_ARTIFACT)
        return
    checks.ok(f"{prefix}.exists", f"{len(data)} bytes")
    if rule.rule == "exists":
        return
    if not data.strip():
        checks.fail(f"{prefix}.non_empty", "empty", FailureType.MISSING_ARTIFACT)
        return
    checks.ok(f"{prefix}.non_empty")
    if rule.rule == "json":
        try:
            loads_json(data, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            checks.fail(f"{prefix}.json", f"not valid JSON ({exc})", FailureType.INVALID_ARTIFACT)
        else:
            checks.ok(f"{prefix}.json")
        return
    if rule.rule != "junit":
        return
    if not isinstance(report, JUnitReport):
        reason = report.reason if report is not None else "not parsed"
        checks.fail(f"{prefix}.junit", reason, FailureType.INVALID_ARTIFACT)
        return
    checks.ok(f"{prefix}.junit", f"{report.tests} test cases")
    if report.executed < rule.min_tests:
        checks.fail(
            f"{prefix}.min_tests",
            f"{report.executed} tests ran ({report.skipped} skipped), expected at least "
            f"{rule.min_tests}",
            FailureType.NO_TESTS,
        )
    else:
        checks.ok(f"{prefix}.min_tests", f"{report.executed} >= {rule.min_tests}")
    bad = [c.id for c in report.not_passing()]
    if bad:
        checks.fail(
            f"{prefix}.no_failures",
            f"{report.failures} failed, {report.errors} errors: {_names(bad)}",
            FailureType.TEST_FAILURE,
        )
    else:
        checks.ok(f"{prefix}.no_failures")
    _required(checks, f"{prefix}.fail_to_pass", report, rule.fail_to_pass, failing)
    _required(checks, f"{prefix}.pass_to_pass", report, rule.pass_to_pass, failing)
    _proven(checks, f"{prefix}.proven", report, proven, failing)


def passed_tests(
    verifier: Verifier, artifacts: Mapping[str, bytes | None]
) -> dict[str, tuple[str, ...]]:
    """Return, for each JUnit artifact that parses, the ids of the tests that passed in it.

    Kept from the green half of a case's proof (:mod:`harness.preflight`) and handed to
    every trial's :func:`judge_verifier` as ``proven``.
    """
    out: dict[str, tuple[str, ...]] = {}
    for rule in verifier.artifacts:
        data = artifacts.get(rule.path)
        if rule.rule != "junit" or not data or not data.strip():
            continue
        try:
            report = parse_junit(data)
        except JUnitError:
            continue
        passed = dict.fromkeys(c.id for c in report.cases if c.status == "passed")
        for c in report.cases:  # reported more than once, not passed every time
            if c.status != "passed":
                passed.pop(c.id, None)
        out[rule.path] = tuple(passed)
    return out


def judge_mutant(
    verifier: Verifier, mutant: Mutant, artifacts: Mapping[str, bytes | None]
) -> CheckResult:
    """Judge the verifier's run on ``mutant``: whether the candidate's tests caught it.

    Caught when every test of ``mutant.must_fail`` is in the run's JUnit reports and failed
    or errored every time it ran there (absent, skipped or passed once: not caught). A
    report that is missing or does not parse catches nothing.
    """
    reports: list[JUnitReport] = []
    for rule in verifier.artifacts:
        data = artifacts.get(rule.path)
        if rule.rule == "junit" and data and data.strip():
            try:
                reports.append(parse_junit(data))
            except JUnitError:
                continue
    problems: list[str] = []
    for test_id in mutant.must_fail:
        found = [c for r in reports for c in r.find_all(test_id)]
        kept = sorted({c.status for c in found if c.status not in ("failed", "error")})
        if not found or kept:
            problems.append(f"{test_id} ({'/'.join(kept) if found else 'not run'})")
    name = f"mutant.{mutant.name}"
    if problems:
        detail = f"the tests do not catch the mutant {mutant.name!r}: {_names(problems)}"
        return CheckResult(name=name, ok=False, detail=detail[:_MAX_REASON_CHARS])
    return CheckResult(name=name, ok=True, detail=f"{_names(mutant.must_fail)} failed on it")


def _dedupe(ids: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(ids))[:_MAX_FAILING_TESTS]


def judge_verifier(
    result: ExecResult,
    verifier: Verifier,
    artifacts: Mapping[str, bytes | None],
    *,
    started: bool = False,
    proven: Mapping[str, Sequence[str]] | None = None,
) -> Verdict:
    """Judge the verifier's run: the trial's verdict when the agent phase did not decide.

    ``artifacts`` maps every ``verifier.artifacts[i].path`` to the bytes read after the
    run (``None``: missing). Checks, in order, the first failing one deciding: the
    termination (a bound → FAIL of that type; a signal → ``test_failure``); exit 126/127
    (the command could not run) → EVALUATOR_ERROR; the exit status against
    ``expected_exit`` → ``test_failure``; then each artifact rule (missing or empty →
    ``missing_artifact``; unparsable JSON/JUnit → ``invalid_artifact``; fewer executed
    tests than ``min_tests`` → ``no_tests``; failures or errors in the report, or a
    fail-to-pass / pass-to-pass test, or a test of ``proven`` (per artifact path: the tests
    the reference solution passed in the case's proof), absent or not passed →
    ``test_failure``). Every check is reported, ok or not. With ``started`` (the caller
    proved the command resolves in the sandbox before candidate code ran), exit 126/127 is
    candidate code's status like any other: ``test_failure``.

    Raises:
        ValueError: ``artifacts`` lacks an entry for a declared artifact (a caller bug,
            not the candidate's fault).

    """
    missing_keys = [a.path for a in verifier.artifacts if a.path not in artifacts]
    if missing_keys:
        raise ValueError(f"no artifact bytes passed for {', '.join(missing_keys)}")
    reports: dict[str, JUnitReport | JUnitError] = {}
    for rule in verifier.artifacts:
        data = artifacts[rule.path]
        if rule.rule == "junit" and data is not None and data.strip():
            try:
                reports[rule.path] = parse_junit(data)
            except JUnitError as exc:
                reports[rule.path] = exc
    parsed = [r for r in reports.values() if isinstance(r, JUnitReport)]
    failing: list[str] = [c.id for r in parsed for c in r.not_passing()]
    tests_run = sum(r.executed for r in parsed) if parsed else None

    checks = _Checks()
    term = result.termination
    if term in _BOUND_FAILURES:
        checks.fail("verifier.termination", _bound_detail(result), _BOUND_FAILURES[term])
    elif term is Termination.SIGNAL:
        checks.fail(
            "verifier.termination", f"killed by signal {result.signal}", FailureType.TEST_FAILURE
        )
    else:
        checks.ok("verifier.termination", "exit")
    code = result.exit_code
    if term is Termination.EXIT:
        if code in _NOT_RUNNABLE and code != verifier.expected_exit and not started:
            checks.fail(
                "verifier.exit",
                f"exited {code}: the verifier command could not run ({' '.join(verifier.command)})",
                None,
                Outcome.EVALUATOR_ERROR,
            )
        elif code != verifier.expected_exit:
            detail = f"exited {code}, expected {verifier.expected_exit}"
            if failing:
                detail += f"; failing: {_names(failing)}"
            checks.fail("verifier.exit", detail, FailureType.TEST_FAILURE)
        else:
            checks.ok("verifier.exit", f"exited {code}")
    for rule in verifier.artifacts:
        _check_artifact(
            checks,
            rule,
            artifacts[rule.path],
            reports.get(rule.path),
            failing,
            (proven or {}).get(rule.path, ()),
        )

    failing_tests = _dedupe(failing)
    if checks.first is not None:
        outcome, failure, reason = checks.first
        return _verdict(
            outcome,
            failure,
            reason,
            checks.items,
            failing_tests=failing_tests,
            tests_run=tests_run,
        )
    summary = f"verifier exited {code}"
    if tests_run is not None:
        summary += f"; {tests_run} tests ran, all passed"
    if verifier.artifacts:
        summary += f"; {len(verifier.artifacts)} artifact rule(s) held"
    return _verdict(
        Outcome.PASS, None, summary, checks.items, failing_tests=failing_tests, tests_run=tests_run
    )
