"""One trial: starting state → agent → candidate → fresh verifier sandbox → verdict.

A trial may hold several *attempts* when the release's retry policy allows correction:
each revision gets a new candidate identity, a fresh verifier sandbox and the feedback
package built mechanically from the previous attempt's external evidence. The trial's
verdict is the last attempt's.

Exceptions become verdicts in exactly one place, :func:`verdict_from_exception`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Literal

from harness import __version__
from harness.agents import prepare_agent, stage_agent_files
from harness.cases.load import LoadedCase, load_case
from harness.cases.model import ArtifactRule, PhaseContract
from harness.digest import tree_manifest
from harness.env.model import BuiltEnv
from harness.env.plan import check_envs, phase_view
from harness.errors import (
    BudgetExceededError,
    CandidateTooLarge,
    EvaluatorError,
    HarnessError,
    InfraError,
)
from harness.excerpt import select_excerpt
from harness.gateway import LinkAddress, RemoteSession, Session, active_gateway, session_label
from harness.project import AGENT_DIR, AgentSpec, Release
from harness.records import (
    Arm,
    AttemptRecord,
    CheckResult,
    FailureType,
    ModelUsage,
    Outcome,
    PhaseRecord,
    RunRecord,
    TrialKey,
    Verdict,
)
from harness.runner_guard import (
    CANARY_LOG,
    GuardedRun,
    check_canary,
    cross_check,
    guard_env,
    guard_files,
    guarded_runs,
    new_nonce,
)
from harness.sandbox.base import ExecResult, Sandbox, SandboxSession, SealedView, ViewMount
from harness.sandbox.prune import owned_prefix
from harness.verify import judge_agent_phase, judge_verifier, parse_agent_result
from harness.vtree import VerificationTree, build_verification_tree
from harness.workspace import Candidate, extract_tree, materialize, snapshot

__all__ = [
    "TrialOutput",
    "TrialSpec",
    "run_trial",
    "verdict_from_exception",
    "verify_tree",
    "verify_tree_phase",
]

_RESULT_LIMIT = 1 << 20
_WITH_BASE_URL = 'OPENAI_BASE_URL="$HARNESS_ENDPOINT/v1" exec "$@"'
_ARTIFACT_LIMIT = 32 << 20


@dataclass(frozen=True)
class TrialSpec:
    """Everything a worker needs to run one trial: plain, picklable data."""

    key: TrialKey
    project_root: str
    case_dir: str
    case_digest: str
    release: Release
    system_digest: str
    backend: str
    downgrade: frozenset[str] = frozenset()
    replay_tarball: bytes | None = None
    """For the ``replay`` adapter: the recorded candidate tree to re-verify."""
    record_path: str = ""
    """Where the coordinator will store this trial's record (quoted in feedback)."""
    image: str | None = None
    """Case image (container backends): both phases start from it, its workspace seeded."""
    run_seed: int = 0
    """The run's recorded seed; the agent's ``HARNESS_SEED`` derives from it."""
    environment: BuiltEnv | None = None
    """The case's built environment: first on PATH in the verifier and the agent's shell."""
    agent_environment: BuiltEnv | None = None
    """The release's agent environment: mounted in the agent phase only."""
    gateway_link: LinkAddress | None = field(default=None, repr=False, compare=False)
    """How a worker without the gateway in its process reaches it (``--executor dask``):
    set by the executor, never part of an identity or a record."""


@dataclass
class TrialOutput:
    """A finished trial: its record and the blobs the record refers to."""

    record: RunRecord
    blobs: dict[str, bytes] = field(default_factory=dict)


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
    if isinstance(exc, OSError):
        return Verdict(outcome=Outcome.INFRA_ERROR, reason=f"host: {type(exc).__name__}: {exc}")
    if isinstance(exc, HarnessError):
        return Verdict(outcome=Outcome.EVALUATOR_ERROR, reason=f"{type(exc).__name__}: {exc}")
    tb = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return Verdict(outcome=Outcome.EVALUATOR_ERROR, reason=f"unexpected: {tb}")


class _Blobs:
    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def put(self, data: bytes) -> str:
        from harness.digest import digest_bytes

        d = digest_bytes(data)
        self.data[d] = data
        return d


def _phase_record(
    phase: Literal["agent", "verifier"], res: ExecResult, session: SandboxSession, blobs: _Blobs
) -> PhaseRecord:
    return PhaseRecord(
        phase=phase,
        argv=res.argv,
        exit_code=res.exit_code,
        signal=res.signal,
        termination=res.termination,
        bound=res.bound,
        duration_s=res.duration_s,
        cpu_s=res.cpu_s,
        peak_memory_mb=res.peak_memory_mb,
        stdout_blob=blobs.put(res.stdout),
        stderr_blob=blobs.put(res.stderr),
        stdout_truncated=res.stdout_truncated,
        stderr_truncated=res.stderr_truncated,
        excerpt=select_excerpt(res.stdout, res.stderr),
        image_id=session.image_id,
        downgraded=session.downgraded,
    )


@dataclass
class _Context:
    spec: TrialSpec
    lc: LoadedCase
    sandbox: Sandbox
    tmp: Path
    start_dir: Path
    start_manifest: dict[str, str]
    blobs: _Blobs
    partial: dict[int, dict[str, object]] = field(default_factory=dict)
    """Per attempt: what the agent phase recorded before an exception ended the attempt."""


def _label(ctx: _Context, phase: str, attempt: int) -> str:
    return f"{ctx.spec.key.slug()}--a{attempt}--{phase}"


def _agent_phase(
    ctx: _Context, attempt: int, base: Path, feedback: bytes | None, out: Path
) -> tuple[PhaseRecord | None, ExecResult | None, bytes | None, CandidateTooLarge | None]:
    """Run the agent on ``base``; leave the candidate tree in ``out`` (unless over bounds)."""
    case = ctx.lc.case
    if ctx.spec.release.agent.adapter == "replay":
        if ctx.spec.replay_tarball is None:
            raise EvaluatorError(
                "replay: the recorded run has no candidate for this case and trial index"
            )
        extract_tree(ctx.spec.replay_tarball, out)
        return None, None, None, None
    contract = _with_image(case.contract.agent, ctx.spec.image)
    timeout = min(contract.timeout_seconds, case.limits.wall_seconds)
    session = _gateway_session(ctx, attempt)
    if session is None:
        return _run_agent(ctx, attempt, base, feedback, out, contract, timeout, None)
    try:
        # Time waiting on the upstream is not the agent's: the contract's timeout stays the
        # hard bound and the judge subtracts the recorded wait from the wall-clock budget.
        rec = _run_agent(
            ctx, attempt, base, feedback, out, contract, contract.timeout_seconds, session
        )
    finally:
        usage = session.close()
        for data in session.blobs.values():
            ctx.blobs.put(data)
        ctx.partial.setdefault(attempt, {})["model"] = usage
    if usage.fault is not None:
        raise InfraError(usage.fault, reason="upstream")
    if usage.budget is not None:
        raise BudgetExceededError(usage.budget, kind="model_calls")
    return rec


def _gateway_session(ctx: _Context, attempt: int) -> Session | RemoteSession | None:
    """Open this agent phase's gateway session when the release calls a model.

    The gateway of this process (the coordinator's, local executor), else the run's gateway
    over the link the spec carries (a Dask worker).
    """
    upstream = ctx.spec.release.upstream
    if upstream is None:
        return None
    gateway = active_gateway()
    if gateway is not None:
        label = session_label(ctx.spec.key, attempt)
        return gateway.open_session(label, upstream, ctx.lc.case.limits)
    if ctx.spec.gateway_link is not None:
        return RemoteSession(ctx.spec.gateway_link, ctx.spec.key, attempt, upstream)
    raise InfraError(
        "the release calls a model but no gateway serves this process and the trial "
        "carries no gateway link",
        reason="gateway",
    )


def _run_agent(
    ctx: _Context,
    attempt: int,
    base: Path,
    feedback: bytes | None,
    out: Path,
    contract: PhaseContract,
    timeout: float,
    session: Session | RemoteSession | None,
) -> tuple[PhaseRecord | None, ExecResult | None, bytes | None, CandidateTooLarge | None]:
    case = ctx.lc.case
    with ctx.sandbox.open(
        contract,
        label=_label(ctx, "agent", attempt),
        downgrade=ctx.spec.downgrade,
        view=_agent_view(ctx, session),
    ) as s:
        if ctx.spec.image is None:
            s.put_tree(base)
        elif base != ctx.start_dir:  # a correction attempt: replace the seeded tree
            s.remove(s.paths.workspace)
            s.put_tree(base)
        inv = prepare_agent(
            ctx.spec.key.release,
            ctx.spec.release,
            ctx.lc,
            trial=ctx.spec.key.trial,
            attempt=attempt,
            io_dir=s.paths.io,
            workspace=s.paths.workspace,
            feedback=feedback,
            run_seed=ctx.spec.run_seed,
        )
        for name, data in inv.io_files.items():
            s.write_file(f"{s.paths.io}/{name}", data)
        assert inv.argv is not None
        argv, env = inv.argv, dict(inv.env)
        if session is not None:
            # The relay's address is known inside the sandbox only (HARNESS_ENDPOINT).
            argv = ("/bin/sh", "-c", _WITH_BASE_URL, "agent", *argv)
            env.update(OPENAI_API_KEY=session.token, HARNESS_MODEL=session.upstream.model)
        res = s.exec(argv, env=env, timeout=timeout)
        result_file = s.read_file(f"{s.paths.io}/result.json", limit=_RESULT_LIMIT)
        overflow = None
        try:
            # A candidate that cannot fit the verifier's disk can never be verified: its fault.
            disk = case.contract.verifier.disk_mb
            mb = (
                case.contract.candidate_mb
                if disk is None
                else min(disk, case.contract.candidate_mb)
            )
            s.get_tree(out, max_files=case.contract.candidate_files, max_bytes=mb << 20)
        except CandidateTooLarge as exc:
            overflow = exc
        record = _phase_record("agent", res, s, ctx.blobs)
        ctx.partial.setdefault(attempt, {})["agent"] = record
        return record, res, result_file, overflow


def _too_large(exc: CandidateTooLarge) -> Verdict:
    kind = FailureType.FILES if exc.kind == "files" else FailureType.DISK
    detail = f"{exc.kind} bound of the candidate (limit {exc.limit:g}, over it: {exc.observed:g})"
    return Verdict(
        outcome=Outcome.FAIL,
        failure_type=kind,
        reason=f"candidate: {exc}",
        checks=(CheckResult(name="candidate.size", ok=False, detail=detail),),
    )


def _agent_view(ctx: _Context, session: Session | RemoteSession | None) -> SealedView | None:
    """Build what the agent phase sees besides the minimal system (files, model endpoint)."""
    staged = ctx.tmp / "agent-files"
    if not staged.exists():
        stage_agent_files(Path(ctx.spec.project_root), ctx.spec.release, staged)
    view = _view(ctx.spec, "agent") or SealedView()
    mounts = view.mounts
    if staged.exists():
        mounts += (ViewMount(source=str(staged), target=AGENT_DIR),)
    endpoint = session.socket_path if session is not None else None
    view = view.model_copy(update={"mounts": mounts, "endpoint": endpoint})
    return None if view == SealedView() else view


def _view(spec: TrialSpec, phase: str) -> SealedView | None:
    in_image = spec.image is not None and spec.backend == "docker"
    return phase_view(spec.environment, spec.agent_environment, phase, in_image=in_image)


def _with_image(contract: PhaseContract, image: str | None) -> PhaseContract:
    return contract if image is None else contract.model_copy(update={"image": image})


def _verifier_phase(
    ctx: _Context, attempt: int, candidate_dir: Path
) -> tuple[PhaseRecord, Verdict, VerificationTree]:
    """Verify the verifier-owned tree built from ``candidate_dir`` (see :mod:`harness.vtree`)."""
    case = ctx.lc.case
    tree = ctx.tmp / f"verify-{attempt}"
    if tree.exists():
        shutil.rmtree(tree)
    vt = build_verification_tree(
        ctx.lc,
        ctx.start_dir,
        candidate_dir,
        tree,
        artifacts=[rule.path for rule in case.verifier.artifacts],
    )
    with ctx.sandbox.open(
        _with_image(case.contract.verifier, ctx.spec.image),
        label=_label(ctx, "verifier", attempt),
        downgrade=ctx.spec.downgrade,
        view=_view(ctx.spec, "verifier"),
    ) as v:
        if ctx.spec.image is not None:  # the image seeded the starting tree: start empty
            v.remove(v.paths.workspace)
        v.put_tree(tree)
        ws = v.paths.workspace
        for name, data in guard_files().items():
            v.write_file(f"{v.paths.io}/{name}", data)
        nonce = new_nonce()
        timeout = case.contract.verifier.timeout_seconds
        res = v.exec(case.verifier.command, env=guard_env(v.paths.io, nonce), timeout=timeout)
        artifacts = {
            rule.path: v.read_file(f"{ws}/{rule.path}", limit=_ARTIFACT_LIMIT)
            for rule in case.verifier.artifacts
        }
        canary = _runner_checks(v, case.verifier.artifacts, artifacts, nonce, timeout)
        record = _phase_record("verifier", res, v, ctx.blobs)
    verdict = judge_verifier(res, case.verifier, artifacts)
    if canary:
        vt.tampering.extend(canary)
        verdict = Verdict(
            outcome=Outcome.FAIL,
            failure_type=FailureType.TAMPERING,
            reason=f"verifier: {canary[0]}",
            checks=(*verdict.checks, CheckResult(name="runner.canary", ok=False, detail=canary[0])),
        )
    return record, verdict, vt


def _runner_checks(
    v: SandboxSession,
    rules: Sequence[ArtifactRule],
    artifacts: dict[str, bytes | None],
    nonce: str,
    timeout: float,
) -> list[str]:
    """Check each JUnit artifact's canary and cross-check it with a separate collection.

    Strips the canary from ``artifacts`` in place; returns the problems (tampering).
    """
    ws, io = v.paths.workspace, v.paths.io
    log = v.read_file(f"{io}/{CANARY_LOG}", limit=1 << 20) or b""
    runs = {os.path.normpath(r.junit): r for r in guarded_runs(log)}
    problems: list[str] = []
    for i, rule in enumerate(r for r in rules if r.rule == "junit"):
        run = runs.get(os.path.normpath(f"{ws}/{rule.path}"))
        data, problem = check_canary(artifacts[rule.path], nonce, guarded=run is not None)
        artifacts[rule.path] = data
        if problem is None and run is not None and data is not None:
            problem = _collect_and_compare(v, run, data, i, nonce, timeout)
        if problem is not None:
            problems.append(f"{rule.path}: {problem}")
    return problems


def _collect_and_compare(
    v: SandboxSession, run: GuardedRun, data: bytes, i: int, nonce: str, timeout: float
) -> str | None:
    ws, io = v.paths.workspace, v.paths.io
    if os.path.normpath(run.dir) != ws and not run.dir.startswith(ws + "/"):
        return None  # a run outside the workspace (a verifier's own copy): not re-collected
    out = f"{io}/collect-{i}.json"
    env = {**guard_env(io, nonce), "HARNESS_COLLECT_OUT": out}
    done = v.exec(run.collect_argv(), env=env, cwd=run.dir, timeout=timeout)
    raw = v.read_file(out, limit=16 << 20)
    try:
        collected = json.loads(raw) if raw is not None else None
    except ValueError:
        collected = None
    if not isinstance(collected, list):
        if done.ok:  # pytest ran and exited 0, yet the plugin's list never appeared
            return "a separate collection of the suite exited 0 without its test list"
        return None  # the collection itself failed (timeout, bound): no evidence either way
    return cross_check(data, [str(x) for x in collected])


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
) -> tuple[PhaseRecord, Verdict]:
    """:func:`verify_tree`, also returning the verifier's phase record (its excerpt)."""
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
        ctx = _Context(spec, lc, sandbox, Path(tmp), start, {}, _Blobs())
        record, verdict, _ = _verifier_phase(ctx, 1, tree)
        return record, verdict


def _public_feedback(ctx: _Context, attempt: int, candidate_dir: Path) -> dict[str, object] | None:
    """Run the case's public feedback command on the candidate, without hidden files."""
    cmd = ctx.lc.case.feedback.public_command
    if not cmd:
        return None
    with ctx.sandbox.open(
        ctx.lc.case.contract.verifier,
        label=_label(ctx, "feedback", attempt),
        downgrade=ctx.spec.downgrade,
        view=_view(ctx.spec, "verifier"),
    ) as s:
        s.put_tree(candidate_dir)
        res = s.exec(cmd, timeout=ctx.lc.case.contract.verifier.timeout_seconds)
    return {
        "command": list(cmd),
        "exit_status": res.exit_code,
        "termination": res.termination.value,
        "excerpt": select_excerpt(res.stdout, res.stderr, limit=3000),
    }


def build_feedback(ctx: _Context, attempt: AttemptRecord, candidate_dir: Path) -> bytes:
    """Build the feedback package for the next attempt mechanically (no model).

    Hidden-test names, contents and verifier output reach it only when the case declares
    the ``hidden_diagnostics`` channel; otherwise only what the deployed agent could also
    observe: its own exit status, the bound that fired, the failure type, and the output of
    the case's public command.
    """
    case = ctx.lc.case
    verdict = attempt.verdict
    phase = attempt.verifier or attempt.agent
    package: dict[str, object] = {
        "attempt": attempt.attempt,
        "candidate": attempt.candidate_digest,
        "verdict": verdict.outcome.value,
        "failure_type": verdict.failure_type.value if verdict.failure_type else None,
        "record": ctx.spec.record_path,
    }
    if attempt.agent is not None:
        package["agent"] = {
            "exit_status": attempt.agent.exit_code,
            "termination": attempt.agent.termination.value,
            "bound": attempt.agent.bound.model_dump(mode="json") if attempt.agent.bound else None,
        }
    if attempt.verifier is not None:
        package["verifier"] = {
            "exit_status": attempt.verifier.exit_code,
            "termination": attempt.verifier.termination.value,
            "bound": attempt.verifier.bound.model_dump(mode="json")
            if attempt.verifier.bound
            else None,
        }
    if case.feedback.hidden_diagnostics and phase is not None:
        package["command"] = list(phase.argv)
        package["failed_checks"] = [c.model_dump() for c in verdict.checks if not c.ok]
        package["failing_tests"] = list(verdict.failing_tests)
        package["excerpt"] = phase.excerpt
    public = _public_feedback(ctx, attempt.attempt, candidate_dir)
    if public is not None:
        package["public"] = public
    return json.dumps(package, indent=2, sort_keys=True).encode()


def _one_attempt(
    ctx: _Context, n: int, base: Path, feedback: bytes | None
) -> tuple[AttemptRecord, Path | None]:
    cand_dir = ctx.tmp / f"candidate-{n}"
    if cand_dir.exists():
        shutil.rmtree(cand_dir)
    agent_rec, agent_res, result_file, overflow = _agent_phase(ctx, n, base, feedback, cand_dir)
    claim = parse_agent_result(result_file)
    if overflow is not None:  # nothing more is done for it: no copy, digest or verifier
        rec = AttemptRecord(attempt=n, agent=agent_rec, claim=claim, verdict=_too_large(overflow))
        return rec, None
    cand: Candidate = snapshot(ctx.start_dir, ctx.start_manifest, cand_dir)
    fields: dict[str, object] = {
        "attempt": n,
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
    verdict = None
    if agent_res is not None:
        if isinstance(usage, ModelUsage):
            own = max(0.0, agent_res.duration_s - usage.upstream_wait_s)
            agent_res = agent_res.model_copy(update={"duration_s": own})
        verdict = judge_agent_phase(
            agent_res, claim, ctx.lc.case.limits, expect=ctx.lc.case.expect, changed=cand.changed
        )
    if verdict is None:
        ver_rec, verdict, vt = _verifier_phase(ctx, n, cand_dir)
        fields.update(verifier=ver_rec, tampering=tuple(vt.tampering), left_out=tuple(vt.left_out))
    fields["verdict"] = verdict
    return AttemptRecord.model_validate(fields), cand_dir


def _guarded(
    fn: Callable[[], tuple[AttemptRecord, Path | None]], n: int, ctx: _Context | None = None
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
    blobs = _Blobs()
    retry = spec.release.retry
    attempts: list[AttemptRecord] = []
    stop = "single_attempt"
    case_digest = spec.case_digest
    with tempfile.TemporaryDirectory(prefix=owned_prefix("trial")) as tmpname:
        tmp = Path(tmpname)
        try:
            check_envs({"case": spec.environment, "agent": spec.agent_environment})
            lc = _load_planned_case(spec)
            start = tmp / "start"
            materialize(lc, start)
            ctx = _Context(spec, lc, sandbox, tmp, start, tree_manifest(start), blobs)
        except Exception as exc:
            attempts.append(AttemptRecord(attempt=1, verdict=verdict_from_exception(exc)))
            stop = "evaluator_error"
        else:
            base, feedback = start, None
            for n in range(1, retry.max_attempts + 1):
                infra_retries = 0
                while True:
                    rec, cand_dir = _guarded(partial(_one_attempt, ctx, n, base, feedback), n, ctx)
                    if (
                        rec.verdict.outcome is not Outcome.INFRA_ERROR
                        or infra_retries >= retry.infra_retries
                    ):
                        break
                    infra_retries += 1
                rec = rec.model_copy(update={"infra_retries": infra_retries})
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
                if n == retry.max_attempts:
                    stop = "attempt_limit" if retry.max_attempts > 1 else "single_attempt"
                    break
                if retry.wall_seconds is not None and time.monotonic() - t0 >= retry.wall_seconds:
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
                    feedback = build_feedback(ctx, rec, cand_dir)
                except Exception as exc:
                    attempts[-1] = rec.model_copy(update={"verdict": verdict_from_exception(exc)})
                    stop = "infra_error"
                    break
                base = cand_dir
    final = attempts[-1].verdict
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
    )
    return TrialOutput(record=record, blobs=blobs.data)
