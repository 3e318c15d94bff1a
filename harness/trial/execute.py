"""One trial: starting state → agent → candidate → fresh verifier sandbox → verdict.

A trial may hold several *attempts* when the release's retry policy allows correction:
each revision gets a new candidate identity, a fresh verifier sandbox and the feedback
package built mechanically from the previous attempt's external evidence. The trial's
verdict is the last attempt's.

The sandboxed phases themselves (agent, verifier) live in :mod:`harness.trial.phases`; this
module drives them, builds the feedback between attempts and writes the record.

Exceptions become verdicts in exactly one place, :func:`verdict_from_exception`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from harness.cases.load import LoadedCase, load_case
from harness.digest import tree_manifest
from harness.env.model import BuiltEnv
from harness.env.plan import check_envs
from harness.errors import (
    BudgetExceededError,
    CandidateTooLarge,
    EvaluatorError,
    HarnessError,
    InfraError,
)
from harness.project import AgentSpec, Release
from harness.sandbox.base import Sandbox
from harness.sandbox.owner import owned_prefix
from harness.store.records import (
    Arm,
    AttemptRecord,
    CheckResult,
    FailureType,
    ModelUsage,
    Outcome,
    PhaseRecord,
    RunRecord,
    StepClock,
    TrialKey,
    Verdict,
)
from harness.trial.excerpt import select_excerpt
from harness.trial.phases import (
    Blobs,
    TrialContext,
    agent_phase,
    env_view,
    phase_label,
    put_candidate,
    verifier_phase,
)
from harness.trial.spec import TrialSpec
from harness.trial.verify import judge_agent_phase, parse_agent_result, passed_tests
from harness.trial.vtree import VerificationTree
from harness.trial.workspace import Candidate, materialize, snapshot
from harness.version import __version__

__all__ = [
    "TrialOutput",
    "run_trial",
    "verdict_from_exception",
    "verify_tree",
    "verify_tree_phase",
]


@dataclass
class TrialOutput:
    """A finished trial: its record and the blobs the record refers to."""

    record: RunRecord
    blobs: dict[str, bytes] = field(default_factory=dict)


_HOST_TEMP = re.compile(re.escape(tempfile.gettempdir().rstrip("/")) + r"/harness-[^/\s'\"]+")


def _no_host_temp(text: str) -> str:
    """Return ``text`` with the harness's host temp folders named, not located.

    A reason reaches the report, which never shows a host path (red team round
    twenty-five found one through an unexpected host error).
    """
    return _HOST_TEMP.sub("<trial folder>", text)


def verdict_from_exception(exc: BaseException) -> Verdict:
    """Turn an exception into a verdict: the one place where this happens.

    ``InfraError`` (and OS-level failures of the harness host) → ``infra_error``: the
    environment broke. ``EvaluatorError``, a case that cannot be loaded, and any other
    unexpected exception → ``evaluator_error``: the evaluation itself could not run as
    specified. Neither is ever a pass or a fail.
    """
    if isinstance(exc, InfraError):
        return Verdict(outcome=Outcome.INFRA_ERROR, reason=f"{exc.reason}: {exc}")
    if isinstance(exc, BudgetExceededError):
        detail = f"gateway: {exc}"
        return Verdict(
            outcome=Outcome.FAIL,
            failure_type=FailureType.BUDGET_EXCEEDED,
            reason=f"agent: {detail}",
            checks=(CheckResult(name="agent.budget", ok=False, detail=detail),),
        )
    if isinstance(exc, CandidateTooLarge):  # found while copying it in: still its size
        return _too_large(exc)
    if isinstance(exc, OSError):
        reason = f"host: {type(exc).__name__}: {_no_host_temp(str(exc))}"
        return Verdict(outcome=Outcome.INFRA_ERROR, reason=reason)
    if isinstance(exc, HarnessError):
        return Verdict(outcome=Outcome.EVALUATOR_ERROR, reason=f"{type(exc).__name__}: {exc}")
    tb = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return Verdict(outcome=Outcome.EVALUATOR_ERROR, reason=f"unexpected: {tb}")


def _too_large(exc: CandidateTooLarge) -> Verdict:
    kind = FailureType.DISK if exc.kind == "disk" else FailureType.FILES
    detail = f"{exc.kind} bound of the candidate (limit {exc.limit:g}, over it: {exc.observed:g})"
    if exc.kind == "unreadable":  # the agent made an entry the harness cannot read
        detail = f"the candidate tree cannot be copied: {exc}"
    return Verdict(
        outcome=Outcome.FAIL,
        failure_type=kind,
        reason=f"candidate: {exc}",
        checks=(CheckResult(name="candidate.size", ok=False, detail=detail),),
    )


def verify_tree(
    lc: LoadedCase,
    sandbox: Sandbox,
    tree: Path,
    *,
    label: str,
    downgrade: frozenset[str] = frozenset(),
    environment: BuiltEnv | None = None,
    image: str | None = None,
) -> Verdict:
    """Run ``lc``'s verifier on ``tree`` in a fresh sandbox and judge it (no agent phase).

    Used by ``harness cases validate`` for the red/green proof; raises what the sandbox
    raises (callers map it with :func:`verdict_from_exception`).
    """
    return verify_tree_phase(
        lc, sandbox, tree, label=label, downgrade=downgrade, environment=environment, image=image
    )[1]


def verify_tree_phase(
    lc: LoadedCase,
    sandbox: Sandbox,
    tree: Path,
    *,
    label: str,
    downgrade: frozenset[str] = frozenset(),
    environment: BuiltEnv | None = None,
    image: str | None = None,
) -> tuple[PhaseRecord, Verdict, dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    """:func:`verify_tree`, also returning its phase record, what passed, what mutants broke.

    What passed: per JUnit artifact, the tests (:func:`harness.trial.verify.passed_tests`).
    What a mutant broke: per mutant name, the tests that passed on ``tree`` and did not on
    the mutant's (on the starting state: what the suite already catches of it).
    """
    spec = TrialSpec(
        key=TrialKey(
            arm=Arm.CANDIDATE, release=label, case_id=lc.id, case_version=lc.version, trial=0
        ),
        project_root="",
        case_dir=str(lc.dir),
        case_digest=lc.digest,
        release=Release(agent=AgentSpec(adapter="replay")),
        system_digest="",
        backend=getattr(sandbox, "name", ""),
        downgrade=downgrade,
        environment=environment,
        image=image,
    )
    with tempfile.TemporaryDirectory(prefix=owned_prefix("verify")) as tmp:
        start = Path(tmp) / "start"  # protected paths are restored from the real start
        materialize(lc, start)
        ctx = TrialContext(spec, lc, sandbox, Path(tmp), start, {}, Blobs())
        record, verdict, vt = verifier_phase(ctx, 1, tree)
        verifier = lc.case.verifier
        passed = passed_tests(verifier, ctx.artifacts.get(1, {}))
        broke = {}
        found_by = ctx.mutant_artifacts.get(1, [] if not verifier.mutants else None)
        if found_by is None:  # the mutants' runs did not all end: nothing proven of them
            raise EvaluatorError(f"case {lc.case.id}: its mutants' runs left no result")
        for mutant, found in zip(verifier.mutants, found_by, strict=True):
            still = {t for ids in passed_tests(verifier, found).values() for t in ids}
            broke[mutant.name] = tuple(t for ids in passed.values() for t in ids if t not in still)
        fixed = _fixed_tests(passed, ctx.nodes.get(1, {}), ctx.tmp / "verify-1", vt)
        return record, verdict, fixed, broke


def _fixed_tests(
    passed: dict[str, tuple[str, ...]],
    nodes: Mapping[str, Mapping[str, str]],
    tree: Path,
    vt: VerificationTree,
) -> dict[str, tuple[str, ...]]:
    """Keep the passed tests no candidate can change.

    Not those of a file of the tree that is not protected (a doctest of the project's own
    code, say): a correct fix may rewrite or remove those. A test whose file is not known
    (no stream) is kept.
    """
    protected = set(vt.protected)
    out: dict[str, tuple[str, ...]] = {}
    for path, ids in passed.items():
        by_id = nodes.get(path, {})
        kept = []
        for test_id in ids:
            rel = os.path.normpath(by_id.get(test_id, "").split("::", 1)[0])
            changeable = (
                rel not in ("", ".")
                and not rel.startswith("..")
                and rel not in protected
                and (tree / rel).is_file()
            )
            if not changeable:
                kept.append(test_id)
        out[path] = tuple(kept)
    return out


def _public_feedback(
    ctx: TrialContext, attempt: int, candidate_dir: Path
) -> dict[str, object] | None:
    """Run the case's public feedback command on the candidate, without hidden files."""
    cmd = ctx.lc.case.feedback.public_command
    if not cmd:
        return None
    with ctx.sandbox.open(
        ctx.lc.case.contract.verifier,
        label=phase_label(ctx, "feedback", attempt),
        downgrade=ctx.spec.downgrade,
        view=env_view(ctx.spec, "verifier"),
    ) as s:
        put_candidate(s, candidate_dir, ctx.lc.case.contract.verifier.disk_mb, ())
        res = s.exec(cmd, timeout=ctx.lc.case.contract.verifier.timeout_seconds)
    return {
        "command": list(cmd),
        "exit_status": res.exit_code,
        "termination": res.termination.value,
        "excerpt": select_excerpt(res.stdout, res.stderr, limit=3000),
    }


def build_feedback(ctx: TrialContext, attempt: AttemptRecord, candidate_dir: Path) -> bytes:
    """Build the feedback package for the next attempt mechanically (no model).

    Only the case's declared channels reach it. Always: pass or fail, and what the agent
    phase itself showed (its exit status, the bound that fired, the failure type when the
    agent phase decided the attempt). With ``public_command``: that command's output on the
    candidate, without hidden files. With ``hidden_diagnostics`` only: anything measured
    while the hidden verifier ran — its exit status, termination and bound, the failure
    type it led to, failed checks, failing test names and output. Candidate code runs
    under the hidden verifier and chooses all of these: without the channel they would
    carry bits of a hidden file into the next attempt.
    """
    case = ctx.lc.case
    verdict = attempt.verdict
    phase = attempt.verifier or attempt.agent
    hidden = case.feedback.hidden_diagnostics
    by_verifier = attempt.verifier is not None
    package: dict[str, object] = {
        "attempt": attempt.attempt,
        "candidate": attempt.candidate_digest,
        "verdict": verdict.outcome.value,
        "failure_type": verdict.failure_type.value
        if verdict.failure_type and (hidden or not by_verifier)
        else None,
        "record": ctx.spec.record_path,
    }
    if attempt.agent is not None:
        package["agent"] = {
            "exit_status": attempt.agent.exit_code,
            "termination": attempt.agent.termination.value,
            "bound": attempt.agent.bound.model_dump(mode="json") if attempt.agent.bound else None,
        }
    if attempt.verifier is not None and hidden:
        package["verifier"] = {
            "exit_status": attempt.verifier.exit_code,
            "termination": attempt.verifier.termination.value,
            "bound": attempt.verifier.bound.model_dump(mode="json")
            if attempt.verifier.bound
            else None,
        }
    if hidden and phase is not None:
        package["command"] = list(phase.argv)
        package["failed_checks"] = [c.model_dump() for c in verdict.checks if not c.ok]
        package["failing_tests"] = list(verdict.failing_tests)
        package["excerpt"] = phase.excerpt
    public = _public_feedback(ctx, attempt.attempt, candidate_dir)
    if public is not None:
        package["public"] = public
    return json.dumps(package, indent=2, sort_keys=True).encode()


_CANDIDATE_FIELDS = (
    "candidate_digest",
    "diff_blob",
    "diff_stats",
    "agent",
    "claim",
    "feedback_blob",
    "candidate_blob",
    "model",
)
"""What an attempt knows of its candidate once the agent phase is judged: a try that
infrastructure ended after it verifies the same candidate again."""


def _one_attempt(
    ctx: TrialContext, n: int, base: Path, feedback: bytes | None
) -> tuple[AttemptRecord, Path | None]:
    cand_dir = ctx.tmp / f"candidate-{n}"
    if cand_dir.exists():
        shutil.rmtree(cand_dir)
    with ctx.clock.step("agent"):
        agent_rec, agent_res, result_file, overflow = agent_phase(ctx, n, base, feedback, cand_dir)
        claim = parse_agent_result(result_file)
    if overflow is not None:  # nothing more is done for it: no copy, digest or verifier
        rec = AttemptRecord(attempt=n, agent=agent_rec, claim=claim, verdict=_too_large(overflow))
        return rec, None
    with ctx.clock.step("candidate"):
        cand: Candidate = snapshot(ctx.start_dir, ctx.start_manifest, cand_dir)
        fields: dict[str, object] = {
            "candidate_digest": cand.digest,
            "diff_blob": ctx.blobs.put(cand.diff),
            "diff_stats": cand.stats,
            "agent": agent_rec,
            "claim": claim,
            "feedback_blob": ctx.blobs.put(feedback) if feedback is not None else None,
        }
        fields["candidate_blob"] = ctx.blobs.put(cand.tarball)
    usage = ctx.partial.get(n, {}).get("model")
    fields["model"] = usage
    if agent_res is not None:
        if isinstance(usage, ModelUsage):
            # Waiting on the model is not the agent's time, but CPU it burned meanwhile is:
            # its own time is at least its CPU time (capped by the phase's length).
            cpu = min(agent_res.cpu_s or 0.0, agent_res.duration_s)
            own = max(0.0, agent_res.duration_s - usage.upstream_wait_s, cpu)
            agent_res = agent_res.model_copy(update={"duration_s": own})
        with ctx.clock.step("cross_check"):
            verdict = judge_agent_phase(
                agent_res,
                claim,
                ctx.lc.case.limits,
                expect=ctx.lc.case.expect,
                changed=cand.changed,
            )
        if verdict is not None:
            return AttemptRecord.model_validate(
                {"attempt": n, **fields, "verdict": verdict}
            ), cand_dir
    return _verify_candidate(ctx, n, fields, cand_dir)


def _verify_candidate(
    ctx: TrialContext, n: int, fields: Mapping[str, object], cand_dir: Path
) -> tuple[AttemptRecord, Path | None]:
    """Run the verifier phase on attempt ``n``'s candidate (taken and judged already)."""
    # An exception from here on keeps the candidate on the attempt's record (_guarded).
    ctx.partial[n] = dict(fields)
    ver_rec, verdict, vt = verifier_phase(ctx, n, cand_dir)
    rec = AttemptRecord.model_validate(
        {
            "attempt": n,
            **fields,
            "verifier": ver_rec,
            "mutants": tuple(ctx.mutants.get(n, ())),
            "tampering": tuple(vt.tampering),
            "left_out": tuple(vt.left_out),
            "verdict": verdict,
        }
    )
    return rec, cand_dir


def _next_try(
    ctx: TrialContext, n: int, base: Path, feedback: bytes | None, failed: AttemptRecord
) -> tuple[Callable[[], tuple[AttemptRecord, Path | None]], AttemptRecord] | None:
    """Return how attempt ``n`` is tried again after infrastructure ended ``failed``.

    With the function, the record ``failed`` is kept as; None when it is not tried again.
    A candidate already taken is verified again in a fresh verifier sandbox: the agent is
    not run twice (its phase and model calls stay on the attempt, not on the kept try, so
    they are counted once). An agent phase is run again only when the harness's own
    infrastructure ended it: an upstream fault on one of the agent's model calls (no answer
    in time, a 5xx after the call's own retries, a diverged replay) is never tried again,
    since the agent chose that call (a long non-streamed completion cannot be told from a
    silent provider) and a fresh try would re-roll its own failure.
    """
    if failed.candidate_digest is not None:
        fields = {k: getattr(failed, k) for k in _CANDIDATE_FIELDS}
        kept = failed.model_copy(update={"agent": None, "model": None})
        return partial(_verify_candidate, ctx, n, fields, ctx.tmp / f"candidate-{n}"), kept
    if failed.model is not None and failed.model.fault is not None:
        return None
    return partial(_one_attempt, ctx, n, base, feedback), failed


def _attempt(
    ctx: TrialContext, n: int, base: Path, feedback: bytes | None, infra_retries: int
) -> tuple[AttemptRecord, Path | None]:
    """Run attempt ``n``, tried again up to ``infra_retries`` times as :func:`_next_try` allows."""
    tries: list[AttemptRecord] = []
    again: Callable[[], tuple[AttemptRecord, Path | None]]
    again = partial(_one_attempt, ctx, n, base, feedback)
    while True:
        rec, cand_dir = _guarded(again, n, ctx)
        if rec.verdict.outcome is not Outcome.INFRA_ERROR or len(tries) >= infra_retries:
            break
        retried = _next_try(ctx, n, base, feedback, rec)
        if retried is None:
            break
        again, kept = retried
        tries.append(kept)
    return rec.model_copy(
        update={"infra_retries": len(tries), "infra_tries": tuple(tries)}
    ), cand_dir


def _guarded(
    fn: Callable[[], tuple[AttemptRecord, Path | None]], n: int, ctx: TrialContext | None = None
) -> tuple[AttemptRecord, Path | None]:
    if ctx is not None:
        ctx.partial.pop(n, None)
    try:
        return fn()
    except Exception as exc:
        # Keep what the agent phase measured (its output, the model transcript) on the record.
        kept = ctx.partial.get(n, {}) if ctx is not None else {}
        return AttemptRecord(attempt=n, verdict=verdict_from_exception(exc), **kept), None


def _signature(a: AttemptRecord) -> tuple[object, ...]:
    v = a.verdict
    return (v.outcome, v.failure_type, v.failing_tests, tuple(c.name for c in v.checks if not c.ok))


_CASES: dict[tuple[str, str], LoadedCase] = {}
_CASES_LOCK = threading.Lock()


def _load_planned_case(spec: TrialSpec) -> LoadedCase:
    """Load the case the trial was planned with (cached per process by path and digest).

    Raises:
        EvaluatorError: the case folder no longer has the planned digest.
    """
    key = (spec.case_dir, spec.case_digest)
    with _CASES_LOCK:
        cached = _CASES.get(key)
    if cached is not None:
        return cached
    lc = load_case(Path(spec.case_dir))
    if lc.digest != spec.case_digest:
        raise EvaluatorError(
            f"case {lc.id} changed since the run was planned "
            f"({spec.case_digest} → {lc.digest}); evidence does not transfer"
        )
    with _CASES_LOCK:
        _CASES[key] = lc
    return lc


def run_trial(spec: TrialSpec, sandbox: Sandbox) -> TrialOutput:
    """Run one trial (all its attempts) and return its immutable record and blobs."""
    started = dt.datetime.now(dt.UTC)
    t0 = time.monotonic()
    clock = StepClock()
    blobs = Blobs()
    retry = spec.release.retry
    attempts: list[AttemptRecord] = []
    stop = "single_attempt"
    case_digest = spec.case_digest
    with tempfile.TemporaryDirectory(prefix=owned_prefix("trial")) as tmpname:
        tmp = Path(tmpname)
        try:
            with clock.step("workspace"):
                check_envs({"case": spec.environment, "agent": spec.agent_environment})
                lc = _load_planned_case(spec)
                start = tmp / "start"
                materialize(lc, start)
                manifest = tree_manifest(start)
            ctx = TrialContext(spec, lc, sandbox, tmp, start, manifest, blobs, clock=clock)
        except Exception as exc:
            attempts.append(AttemptRecord(attempt=1, verdict=verdict_from_exception(exc)))
            stop = "evaluator_error"
        else:
            base, feedback = start, None
            for n in range(1, retry.max_attempts + 1):
                rec, cand_dir = _attempt(ctx, n, base, feedback, retry.infra_retries)
                attempts.append(rec)
                outcome = rec.verdict.outcome
                if outcome is Outcome.PASS:
                    stop = "passed"
                    break
                if outcome is Outcome.INFRA_ERROR:
                    stop = "infra_error"
                    break
                if outcome is Outcome.EVALUATOR_ERROR:
                    stop = "evaluator_error"
                    break
                if rec.verdict.failure_type is FailureType.ABSTAINED:
                    stop = "abstained"
                    break
                if rec.verdict.failure_type is FailureType.BUDGET_EXCEEDED:
                    stop = "budget"  # the gateway ended the trial (docs/gateway.md, Budget)
                    break
                if n == retry.max_attempts:
                    stop = "attempt_limit" if retry.max_attempts > 1 else "single_attempt"
                    break
                # Time spent waiting for other trials' upstream leases is not this trial's.
                spent = time.monotonic() - t0 - clock.totals.get("lease", 0.0)
                if retry.wall_seconds is not None and spent >= retry.wall_seconds:
                    stop = "budget"
                    break
                if (
                    retry.stop_on_identical_failure
                    and len(attempts) >= 2
                    and _signature(attempts[-1]) == _signature(attempts[-2])
                ):
                    stop = "identical_failure"
                    break
                if cand_dir is None:  # over its bounds: nothing to build feedback from
                    stop = "candidate_too_large"
                    break
                try:
                    with clock.step("feedback"):
                        feedback = build_feedback(ctx, rec, cand_dir)
                except CandidateTooLarge:  # judged already; too large to be handed on
                    stop = "candidate_too_large"
                    break
                except Exception as exc:
                    attempts[-1] = rec.model_copy(update={"verdict": verdict_from_exception(exc)})
                    stop = "infra_error"
                    break
                base = cand_dir
    final = attempts[-1].verdict
    steps = clock.steps()  # after the temporary folder's removal: that is the trial's too
    record = RunRecord(
        key=spec.key,
        case_digest=case_digest,
        system_digest=spec.system_digest,
        backend=spec.backend,
        backend_info=dict(sandbox.describe()),
        attempts=tuple(attempts),
        verdict=final,
        stop_reason=stop,
        environment_digest=spec.environment.digest if spec.environment else None,
        agent_environment_digest=(
            spec.agent_environment.digest if spec.agent_environment else None
        ),
        started_at=started,
        finished_at=dt.datetime.now(dt.UTC),
        harness_version=__version__,
        steps=steps,
    )
    return TrialOutput(record=record, blobs=blobs.data)
