"""The report model: everything the HTML, JUnit, Markdown and JSON reports show, as data.

:func:`build_report` reads a run's stored records once (the release record, the run
records, the gate decision recomputed by :func:`harness.decision.decide_run`) and reduces
them to a frozen :class:`ReportData`. The renderers are pure functions of that model, so
all four reports agree on every number.

Arms: ``candidate``; ``baseline`` (the baseline re-executed in this run); ``stored``
(the promoted baseline's stored results, summary only). The per-case table compares the
candidate with the gate's *reference* baseline: the re-executed one, falling back per
case to the stored one when a case was not re-executed, and always the stored one when the
baseline arm was replayed from recorded model responses (``Decision.baseline_replayed``).

Evidence is kept for every trial that did not pass. Excerpts are stored once per
distinct text in :attr:`ReportData.excerpts` (identical output is common across trials
of one case), and evidence items refer to them by id.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Literal

from harness.decision import RunDecision, decide_run
from harness.frozen import Frozen as _Frozen
from harness.gate.decide import Decision, Reason
from harness.gate.policy import Policy
from harness.gate.stats import ArmSummary, CaseSummary
from harness.project import Project
from harness.report.reference import is_reference_edit, patch_paths, reference_patches
from harness.report.usage import (
    HarnessCost,
    ModelCost,
    VerifyCost,
    harness_cost,
    model_cost,
    ordered_union,
    transcript_refs,
    verify_cost,
)
from harness.sandbox.base import Bound
from harness.store.records import (
    Arm,
    AttemptRecord,
    FailureType,
    Outcome,
    PhaseRecord,
    ReleaseRecord,
    RunRecord,
    Verdict,
)
from harness.store.store import Store
from harness.trial.claims import ClaimStats, claim_stats, claim_stats_by_case

__all__ = [
    "ArmCase",
    "ArmCost",
    "ArmView",
    "AttemptView",
    "CaseView",
    "Evidence",
    "EvidenceGroup",
    "JudgmentCase",
    "Mark",
    "PathRef",
    "ReportCore",
    "ReportData",
    "build_report",
    "gate_named_cases",
    "report_from_decision",
]

ArmKey = Literal["candidate", "baseline", "stored"]
EvidenceKind = Literal["fail", "infra_error", "evaluator_error"]


class Mark(_Frozen):
    """One trial as a mark in the per-case table."""

    trial: int
    outcome: Outcome
    failure_type: FailureType | None = None
    attempts: int = 1
    anchor: str | None = None
    """Id of the trial's evidence item (trials that did not pass)."""


class ArmCase(_Frozen):
    """One case in one arm: its summary, its trials as marks, its claims and attempts."""

    summary: CaseSummary
    marks: tuple[Mark, ...] = ()
    """Empty when the arm's data for this case are stored results (not re-executed)."""
    claims: ClaimStats | None = None
    stop_reasons: dict[str, int] = {}
    model: ModelCost | None = None
    """Tokens and cost measured by the gateway (None: no trial of the case was measured)."""
    verify: VerifyCost | None = None
    tampered: int = 0
    """Trials with tampering (protected paths the agent changed: restored, flagged)."""
    seconds: float = 0.0
    """Agent plus verifier wall seconds of the case's trials, every attempt."""
    left_out: int = 0
    """Trials whose agent added files under protected paths (left out; a neutral note)."""


class CaseView(_Frozen):
    """One row of the per-case table."""

    case_id: str
    critical: bool
    compared: bool
    """The case has judged trials in both the candidate and the reference baseline."""
    regression: bool = False
    """All-pass in the baseline, not all-pass in the candidate."""
    improvement: bool = False
    broken: bool = False
    """All-pass in the baseline, all-fail in the candidate."""
    delta_pass_rate: float | None = None
    delta_pass_hat_k: float | None = None
    p_diagnostic: float | None = None
    candidate: ArmCase | None
    baseline: ArmCase | None = None
    baseline_source: Literal["re-executed", "stored"] | None = None
    flags: tuple[str, ...] = ()
    """Filter tags: regression, improvement, broken, flaky, failing, errors, critical,
    tampering."""
    named_by: tuple[str, ...] = ()
    """Why the gate names this case: ``regression``, ``broken``, or the code of a reason
    whose data names it (``critical_case_broken``, …). Empty: the gate is silent on it."""


class ArmCost(_Frozen):
    """Time and agent-reported usage of an arm (all its trials, every attempt)."""

    trials: int
    attempts: int
    agent_seconds: float
    verifier_seconds: float
    usage: dict[str, float]
    """Agent-reported usage summed over attempts (tokens, cost, … as the agent named them)."""
    trials_with_usage: int
    model: ModelCost | None = None
    """Tokens and cost measured by the gateway (None: no trial was measured)."""
    verify: VerifyCost | None = None
    """Sandbox CPU and wall seconds of the verifier phases."""
    harness: HarnessCost | None = None
    """The harness's own time beside the verifier's (None: no record carries its steps)."""


class ArmView(_Frozen):
    """One arm: the gate's summary plus claims, attempts, cost and run-to-run results."""

    key: ArmKey
    title: str
    release: str
    summary: ArmSummary
    claims: ClaimStats | None = None
    cost: ArmCost | None = None
    attempts_used: dict[int, int] = {}
    """Attempts used → number of trials."""
    stop_reasons: dict[str, int] = {}
    """Why the correction loop stopped → number of trials."""
    runs: tuple[float, ...] = ()
    """Aggregate pass rate of run j (trial index j over all cases), for the spread."""


class PathRef(_Frozen):
    """A stored file behind a number: a run record or a blob, named by store identity.

    Never a host path: the report folder writer resolves it in the store and copies it in.
    """

    label: str
    kind: Literal["record", "blob"]
    ref: str
    """The record's trial slug, or the blob's digest."""
    exists: bool


class AttemptView(_Frozen):
    """One attempt of a trial's correction loop (its lineage)."""

    attempt: int
    outcome: Outcome
    failure_type: FailureType | None
    reason: str
    candidate_digest: str | None
    infra_retries: int
    infra_reasons: tuple[str, ...] = ()
    """Why infrastructure ended each earlier try of this attempt (records that keep them)."""
    feedback: bool
    """This attempt was handed a feedback package."""


class Evidence(_Frozen):
    """What a reviewer needs to believe one trial's non-pass verdict."""

    anchor: str
    arm: ArmKey
    case_id: str
    trial: int
    kind: EvidenceKind
    outcome: Outcome
    failure_type: FailureType | None
    reason: str
    bound: Bound | None
    bound_phase: str | None
    failing_tests: tuple[str, ...]
    failed_checks: tuple[str, ...]
    candidate_digest: str | None
    excerpt: str | None
    """Id of the verifier excerpt in :attr:`ReportData.excerpts`."""
    agent_excerpt: str | None
    """Id of the agent-phase excerpt (when the agent phase is what failed)."""
    attempts: tuple[AttemptView, ...]
    stop_reason: str
    claim_status: str | None
    claimed_success: bool | None
    paths: tuple[PathRef, ...]
    tampering: tuple[str, ...] = ()
    """Protected paths the agent changed beyond what the case's reference changes
    (restored and flagged), over every attempt."""
    reference_edits: tuple[str, ...] = ()
    """Protected paths the agent changed that the case's reference solution changes too
    (restored, not flagged: the task asked for such an edit)."""
    left_out: tuple[str, ...] = ()
    """Files the agent added under protected paths, left out of the verifier's tree."""
    overhead_s: float | None = None
    """The harness's own seconds in this trial (None: its record has no steps)."""
    verifier_s: float = 0.0
    """Seconds of the verifier's commands in this trial."""


class EvidenceGroup(_Frozen):
    """The evidence of one case in one arm, of one kind."""

    case_id: str
    arm: ArmKey
    anchor: str
    trials: int
    """All trials of the case in that arm."""
    items: tuple[Evidence, ...]
    failure_types: dict[str, int]


class JudgmentCase(_Frozen):
    """A judgment-lane case: run, listed, never scored."""

    case_id: str
    marks: tuple[Mark, ...]
    claims: ClaimStats
    candidates: tuple[str | None, ...]
    """Candidate identity of each trial (for a human to judge)."""
    records: tuple[PathRef, ...]


class ReportCore(_Frozen):
    """What every report carries: the decision, the arms, the per-case table, the judgment lane.

    :class:`ReportData` (the view model) adds the evidence; ``report.json``
    (:class:`harness.report.schema.ReportDocument`) is this core alone.
    """

    schema_version: int
    run_id: str
    generated_at: dt.datetime
    verdict: str
    """pass, warn, fail or blocked."""
    headline: str
    reasons: tuple[Reason, ...]
    notes: tuple[str, ...]
    release: ReleaseRecord
    decision: Decision
    arms: tuple[ArmView, ...]
    cases: tuple[CaseView, ...]
    """One per scored case; ``named_by`` says why the gate names it (empty: it does not)."""
    judgment: tuple[JudgmentCase, ...]
    """Judgment-lane cases: run, listed, never scored."""


class ReportData(ReportCore):
    """Everything the reports show, derived from stored records only."""

    schema_version: Literal[1] = 1
    failures: tuple[EvidenceGroup, ...]
    """Candidate failures (``fail`` verdicts), per case and arm."""
    infra_errors: tuple[EvidenceGroup, ...]
    evaluator_errors: tuple[EvidenceGroup, ...]
    excerpts: dict[str, str]
    """Excerpt id → text, each distinct text once."""
    policy: Policy
    """The promotion policy the decision applied (:attr:`RunDecision.policy`); not part of
    ``report.json``, whose release record carries the policy as stored."""
    reference_patches: dict[str, str] = {}
    """Case id → the head of its reference solution's patch (case folder digest matching
    the run's), shown beside a failed trial's diff."""

    def arm(self, key: ArmKey) -> ArmView | None:
        """Return the arm with ``key``, or None when the run has no such arm."""
        return next((a for a in self.arms if a.key == key), None)

    @property
    def has_baseline(self) -> bool:
        """A baseline (re-executed or stored) was compared against."""
        return self.decision.compared


# ----------------------------------------------------------------------------- helpers

_KIND: dict[Outcome, EvidenceKind] = {
    Outcome.FAIL: "fail",
    Outcome.INFRA_ERROR: "infra_error",
    Outcome.EVALUATOR_ERROR: "evaluator_error",
}
_JUDGED = (Outcome.PASS, Outcome.FAIL)


class _Paths:
    """Turns store locations into :class:`PathRef` (blob existence checked once per blob)."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.store = store
        self._blobs: dict[str, bool] = {}

    def record(self, rec: RunRecord) -> PathRef:
        # The record is in hand: it was read from the store's trials folder.
        return PathRef(label="run record", kind="record", ref=rec.key.slug(), exists=True)

    def blob(self, label: str, digest: str | None) -> PathRef | None:
        if digest is None:
            return None
        exists = self._blobs.get(digest)
        if exists is None:
            exists = self._blobs[digest] = self.store.blob_path(digest).exists()
        return PathRef(label=label, kind="blob", ref=digest, exists=exists)


class _Excerpts:
    def __init__(self) -> None:
        self.texts: dict[str, str] = {}

    def add(self, text: str | None) -> str | None:
        if not text:
            return None
        key = "x" + hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]
        self.texts.setdefault(key, text)
        return key


def _anchor(arm: str, index: int, trial: int | None = None) -> str:
    return f"ev-{arm[0]}{index}" + ("" if trial is None else f"-t{trial}")


def _runs(records: Sequence[RunRecord]) -> tuple[float, ...]:
    by_trial: dict[int, list[Outcome]] = {}
    for r in records:
        if r.outcome in _JUDGED:
            by_trial.setdefault(r.key.trial, []).append(r.outcome)
    return tuple(
        sum(o is Outcome.PASS for o in outs) / len(outs) for _, outs in sorted(by_trial.items())
    )


def _cost(records: Sequence[RunRecord]) -> ArmCost:
    trials = attempts = with_usage = 0
    agent = verifier = 0.0
    usage: dict[str, float] = {}
    for r in records:
        trials += 1
        used = False
        attempts += len(r.attempts)
        for a in r.tries():  # an infra try's phases ran (and its agent spent) too
            if a.agent is not None:
                agent += a.agent.duration_s
            if a.verifier is not None:
                verifier += a.verifier.duration_s
            if a.claim is not None and a.claim.usage:
                used = True
                for key, value in a.claim.usage.items():
                    usage[key] = usage.get(key, 0.0) + float(value)
        with_usage += used
    return ArmCost(
        trials=trials,
        attempts=attempts,
        agent_seconds=agent,
        verifier_seconds=verifier,
        usage=dict(sorted(usage.items())),
        trials_with_usage=with_usage,
        model=model_cost(records),
        verify=verify_cost(records),
        harness=harness_cost(records),
    )


def _seconds(records: Sequence[RunRecord]) -> float:
    return sum(
        ph.duration_s for r in records for a in r.tries() for ph in (a.agent, a.verifier) if ph
    )


def _attempt_views(rec: RunRecord) -> tuple[AttemptView, ...]:
    return tuple(
        AttemptView(
            attempt=a.attempt,
            outcome=a.verdict.outcome,
            failure_type=a.verdict.failure_type,
            reason=a.verdict.reason,
            candidate_digest=a.candidate_digest,
            infra_retries=a.infra_retries,
            infra_reasons=tuple(t.verdict.reason for t in a.infra_tries),
            feedback=a.feedback_blob is not None,
        )
        for a in rec.attempts
    )


def _decisive_mutant(attempt: AttemptRecord, verdict: Verdict) -> PhaseRecord | None:
    """Return the mutant run that failed the trial: the first whose ``mutant.*`` check failed.

    Mutants are judged only when the verifier's own run passed, one check each in the
    case's order, the order of the attempt's ``mutants``.
    """
    checks = [c for c in verdict.checks if c.name.startswith("mutant.")]
    for i, check in enumerate(checks):
        if not check.ok and i < len(attempt.mutants):
            return attempt.mutants[i]
    return None


def _evidence(
    rec: RunRecord,
    arm: ArmKey,
    anchor: str,
    paths: _Paths,
    excerpts: _Excerpts,
    expected: frozenset[str] = frozenset(),
) -> Evidence:
    last = rec.attempts[-1]
    judged = _decisive_mutant(last, rec.verdict)
    verifier = judged or last.verifier
    bound, phase = None, None
    for ph in (verifier, last.agent):
        if ph is not None and ph.bound is not None:
            bound, phase = ph.bound, ph.phase
            break
    agent_failed = last.agent is not None and (
        last.verifier is None
        or last.agent.bound is not None
        or rec.verdict.failure_type in (FailureType.AGENT_ERROR, FailureType.TIMEOUT)
    )
    refs = [paths.record(rec)]
    for label, digest in (
        ("verifier stdout", last.verifier.stdout_blob if last.verifier else None),
        ("verifier stderr", last.verifier.stderr_blob if last.verifier else None),
        ("mutant run stdout", judged.stdout_blob if judged else None),
        ("mutant run stderr", judged.stderr_blob if judged else None),
        ("agent stdout", last.agent.stdout_blob if last.agent else None),
        ("agent stderr", last.agent.stderr_blob if last.agent else None),
        ("candidate diff", last.diff_blob),
        ("candidate tree", last.candidate_blob),
        *transcript_refs(last),
        ("feedback given", last.feedback_blob),
    ):
        ref = paths.blob(label, digest)
        if ref is not None:
            refs.append(ref)
    claim = last.claim
    touched = ordered_union(rec.attempts, "tampering")
    return Evidence(
        anchor=anchor,
        arm=arm,
        case_id=rec.key.case_id,
        trial=rec.key.trial,
        kind=_KIND[rec.outcome],
        outcome=rec.outcome,
        failure_type=rec.verdict.failure_type,
        reason=rec.verdict.reason,
        bound=bound,
        bound_phase=phase,
        failing_tests=rec.verdict.failing_tests,
        failed_checks=tuple(
            f"{c.name}: {c.detail}" if c.detail else c.name for c in rec.verdict.checks if not c.ok
        ),
        candidate_digest=last.candidate_digest,
        excerpt=excerpts.add(verifier.excerpt if verifier else None),
        agent_excerpt=excerpts.add(last.agent.excerpt if last.agent and agent_failed else None),
        attempts=_attempt_views(rec),
        stop_reason=rec.stop_reason,
        claim_status=claim.status if claim else None,
        claimed_success=claim.claimed_success if claim else None,
        paths=tuple(refs),
        tampering=tuple(p for p in touched if not is_reference_edit(p, expected)),
        reference_edits=tuple(p for p in touched if is_reference_edit(p, expected)),
        left_out=ordered_union(rec.attempts, "left_out"),
        overhead_s=rec.overhead_s(),
        verifier_s=sum(a.verifier.duration_s for a in rec.attempts if a.verifier),
    )


def _flags(
    view_c: ArmCase | None,
    view_b: ArmCase | None,
    critical: bool,
    regression: bool,
    improvement: bool,
    broken: bool,
) -> tuple[str, ...]:
    flags = [
        name
        for name, on in (
            ("regression", regression),
            ("improvement", improvement),
            ("broken", broken),
            ("critical", critical),
        )
        if on
    ]
    sums = [v.summary for v in (view_c, view_b) if v is not None]
    if any(s.label == "flaky" for s in sums):
        flags.append("flaky")
    if any(s.fails for s in sums):
        flags.append("failing")
    if any(s.infra_errors or s.evaluator_errors for s in sums):
        flags.append("errors")
    if any(v.tampered for v in (view_c, view_b) if v is not None):
        flags.append("tampering")
    return tuple(flags)


def _arm_case(
    summary: CaseSummary,
    marks: tuple[Mark, ...],
    records: Sequence[RunRecord],
    claims: ClaimStats | None,
    expected: frozenset[str] = frozenset(),
) -> ArmCase:
    return ArmCase(
        summary=summary,
        marks=marks,
        claims=claims,
        stop_reasons=dict(sorted(Counter(r.stop_reason for r in records).items())),
        model=model_cost(records),
        verify=verify_cost(records) if records else None,
        tampered=sum(
            any(not is_reference_edit(t, expected) for a in r.attempts for t in a.tampering)
            for r in records
        ),
        seconds=_seconds(records),
        left_out=sum(any(a.left_out for a in r.attempts) for r in records),
    )


# ----------------------------------------------------------------------------- building


def build_report(project: Project, store: Store, run_id: str) -> ReportData:
    """Read run ``run_id`` from ``store`` and reduce it to a :class:`ReportData`.

    Raises:
        StoreError: the run or one of its records is missing or corrupt.
        InvalidRunError: the run's recorded policy cannot be checked any more.
        ConfigError: the run's baseline cannot be loaded.

    """
    return build_report_and_decision(project, store, run_id)[0]


def build_report_and_decision(
    project: Project, store: Store, run_id: str
) -> tuple[ReportData, RunDecision, list[RunRecord]]:
    """Like :func:`build_report`, also returning the decision and the records it read."""
    cached = _OnceStore(store)
    decision = decide_run(project, cached, run_id)
    trials = cached.trials(run_id)
    return report_from_decision(project, store, decision, trials), decision, trials


class _OnceStore(Store):
    """A view of a store that reads each run's records once.

    The gate and the report both need them; a large run has tens of thousands of files.
    """

    def __init__(self, store: Store) -> None:
        super().__init__(store.root)
        self._trials: dict[str, list[RunRecord]] = {}

    def trials(self, run_id: str) -> list[RunRecord]:
        """Every run record of a run, sorted by slug (read on first use)."""
        if run_id not in self._trials:
            self._trials[run_id] = super().trials(run_id)
        return list(self._trials[run_id])


def report_from_decision(
    project: Project, store: Store, rd: RunDecision, trials: Sequence[RunRecord]
) -> ReportData:
    """Build the report model from a decision and the run's records.

    Nothing more is read from the store; blob and record paths are only checked to exist.
    """
    release = rd.release
    dec = rd.decision
    paths = _Paths(store, rd.run_id)
    by_arm = _scored_by_arm(trials, set(release.judgment_cases))
    case_ids = _case_ids(dec)
    patches = reference_patches(project.cases_dir, release.cases)
    views = _ArmViews(
        paths=paths,
        index={cid: i for i, cid in enumerate(case_ids)},
        expected={cid: patch_paths(text) for cid, text in patches.items()},
    )
    cand = views.arm("candidate", by_arm["candidate"], dec.candidate)
    base_re = views.arm("baseline", by_arm["baseline"], dec.baseline) if dec.baseline else {}
    cases = _case_views(dec, case_ids, cand, base_re, _critical_cases(rd.policy, release, dec))
    return ReportData(
        run_id=rd.run_id,
        generated_at=dt.datetime.now(dt.UTC),
        verdict=rd.verdict,
        headline=rd.headline,
        reasons=dec.reasons,
        notes=rd.notes,
        release=release,
        decision=dec,
        arms=_arm_views(release, dec, by_arm, trials),
        cases=cases,
        failures=views.ordered("fail"),
        infra_errors=views.ordered("infra_error"),
        evaluator_errors=views.ordered("evaluator_error"),
        judgment=_judgment_cases(rd, paths),
        excerpts=views.excerpts.texts,
        policy=rd.policy,
        reference_patches=_reference_heads(patches, views.groups["fail"]),
    )


def _critical_cases(policy: Policy, release: ReleaseRecord, dec: Decision) -> set[str]:
    """Cases critical in their case files, in the run's policy, or broken as critical."""
    return set(release.critical_cases) | set(policy.critical_cases) | _policy_critical(dec)


def _scored_by_arm(
    trials: Sequence[RunRecord], judgment_ids: set[str]
) -> dict[ArmKey, dict[str, list[RunRecord]]]:
    """Arm → case id → its scored records in trial order (judgment-lane cases left out)."""
    by_arm: dict[ArmKey, dict[str, list[RunRecord]]] = {"candidate": {}, "baseline": {}}
    for r in sorted(trials, key=lambda t: (t.key.case_id, t.key.trial)):
        if r.key.case_id in judgment_ids:
            continue
        key: ArmKey = "candidate" if r.key.arm is Arm.CANDIDATE else "baseline"
        by_arm[key].setdefault(r.key.case_id, []).append(r)
    return by_arm


def _case_ids(dec: Decision) -> list[str]:
    """Every case the decision mentions (either arm or the comparison), sorted."""
    return sorted(
        {c.case_id for c in dec.candidate.cases}
        | {c.case_id for c in (dec.baseline.cases if dec.baseline else ())}
        | ({r.case_id for r in dec.comparison.rows} if dec.comparison else set())
    )


class _ArmViews:
    """Builds each arm's per-case views; collects the evidence of the trials that did not pass."""

    def __init__(
        self, paths: _Paths, index: dict[str, int], expected: dict[str, frozenset[str]]
    ) -> None:
        self.paths = paths
        self.index = index
        """Case id → its position in the case table (evidence anchors use it)."""
        self.expected = expected
        """Case id → the paths its reference patch edits."""
        self.excerpts = _Excerpts()
        self.groups: dict[EvidenceKind, list[EvidenceGroup]] = {
            "fail": [],
            "infra_error": [],
            "evaluator_error": [],
        }

    def arm(
        self, arm: ArmKey, recs_by_case: dict[str, list[RunRecord]], summary: ArmSummary
    ) -> dict[str, ArmCase]:
        """Case id → the arm's view of the case; its evidence groups are collected."""
        claims = claim_stats_by_case(r for rs in recs_by_case.values() for r in rs)
        out: dict[str, ArmCase] = {}
        for cid, cs in {c.case_id: c for c in summary.cases}.items():
            recs = recs_by_case.get(cid, [])
            expected = self.expected.get(cid, frozenset())
            marks = self._marks_and_evidence(arm, cid, recs, expected)
            out[cid] = _arm_case(cs, marks, recs, claims.get(cid), expected)
        return out

    def _marks_and_evidence(
        self, arm: ArmKey, cid: str, recs: list[RunRecord], expected: frozenset[str]
    ) -> tuple[Mark, ...]:
        """One mark per trial; the trials that did not pass grouped by kind as evidence."""
        marks: list[Mark] = []
        pending: dict[EvidenceKind, list[Evidence]] = {}
        for r in recs:
            anchor = None
            if r.outcome is not Outcome.PASS:
                anchor = _anchor(arm, self.index.get(cid, 0), r.key.trial)
                ev = _evidence(r, arm, anchor, self.paths, self.excerpts, expected)
                pending.setdefault(ev.kind, []).append(ev)
            marks.append(
                Mark(
                    trial=r.key.trial,
                    outcome=r.outcome,
                    failure_type=r.verdict.failure_type,
                    attempts=len(r.attempts),
                    anchor=anchor,
                )
            )
        for kind, items in pending.items():
            types = Counter(e.failure_type.value if e.failure_type else e.kind for e in items)
            self.groups[kind].append(
                EvidenceGroup(
                    case_id=cid,
                    arm=arm,
                    anchor=f"{_anchor(arm, self.index.get(cid, 0))}-{kind}",
                    trials=len(recs),
                    items=tuple(items),
                    failure_types=dict(sorted(types.items())),
                )
            )
        return tuple(marks)

    def ordered(self, kind: EvidenceKind) -> tuple[EvidenceGroup, ...]:
        """Return the evidence groups of ``kind``: the candidate's first, then by case."""
        return tuple(sorted(self.groups[kind], key=lambda g: (g.arm != "candidate", g.case_id)))


def _case_views(
    dec: Decision,
    case_ids: Sequence[str],
    cand: Mapping[str, ArmCase],
    base_re: Mapping[str, ArmCase],
    critical: set[str],
) -> tuple[CaseView, ...]:
    """One row per case: the candidate beside the gate's reference baseline."""
    rows = {r.case_id: r for r in dec.comparison.rows} if dec.comparison else {}
    named = gate_named_cases(dec)
    cases: list[CaseView] = []
    for cid in case_ids:
        row = rows.get(cid)
        c_view = cand.get(cid)
        # A replayed baseline arm is not a sample: the stored one is what was compared.
        b_view: ArmCase | None = None if dec.baseline_replayed else base_re.get(cid)
        source: Literal["re-executed", "stored"] | None = "re-executed" if b_view else None
        if row is not None and row.baseline is not None and b_view is None:
            b_view, source = ArmCase(summary=row.baseline), "stored"
        is_crit = cid in critical
        reg = bool(row and row.regression)
        imp = bool(row and row.improvement)
        brk = bool(row and row.broken)
        cases.append(
            CaseView(
                case_id=cid,
                critical=is_crit,
                compared=bool(row and row.compared),
                regression=reg,
                improvement=imp,
                broken=brk,
                delta_pass_rate=row.delta_pass_rate if row else None,
                delta_pass_hat_k=row.delta_pass_hat_k if row else None,
                p_diagnostic=row.p_diagnostic if row else None,
                candidate=c_view,
                baseline=b_view,
                baseline_source=source,
                flags=_flags(c_view, b_view, is_crit, reg, imp, brk),
                named_by=named.get(cid, ()),
            )
        )
    return tuple(cases)


def _arm_views(
    release: ReleaseRecord,
    dec: Decision,
    by_arm: dict[ArmKey, dict[str, list[RunRecord]]],
    trials: Sequence[RunRecord],
) -> tuple[ArmView, ...]:
    """Return the arms' headline views: candidate, re-executed baseline, stored baseline."""
    arms = [
        _arm_view(
            "candidate",
            _title("candidate", release.release),
            release.release,
            dec.candidate,
            by_arm["candidate"],
            trials,
            Arm.CANDIDATE,
        )
    ]
    if dec.baseline is not None:
        role = "baseline re-executed" + (" (replayed)" if dec.baseline_replayed else "")
        arms.append(
            _arm_view(
                "baseline",
                _title(role, release.baseline),
                release.baseline or "",
                dec.baseline,
                by_arm["baseline"],
                trials,
                Arm.BASELINE,
            )
        )
    if dec.stored_baseline is not None:
        arms.append(
            ArmView(
                key="stored",
                title=_title("baseline stored", release.baseline),
                release=release.baseline or "",
                summary=dec.stored_baseline,
            )
        )
    return tuple(arms)


def _judgment_cases(rd: RunDecision, paths: _Paths) -> tuple[JudgmentCase, ...]:
    """Return the judgment lane's cases: run and shown apart, never scored."""
    judgment: list[JudgmentCase] = []
    for cid, recs in sorted(rd.judgment.items()):
        recs = sorted(recs, key=lambda r: r.key.trial)
        judgment.append(
            JudgmentCase(
                case_id=cid,
                marks=tuple(
                    Mark(
                        trial=r.key.trial,
                        outcome=r.outcome,
                        failure_type=r.verdict.failure_type,
                        attempts=len(r.attempts),
                    )
                    for r in recs
                ),
                claims=claim_stats(recs),
                candidates=tuple(r.attempts[-1].candidate_digest for r in recs),
                records=tuple(paths.record(r) for r in recs),
            )
        )
    return tuple(judgment)


_REFERENCE_HEAD = 4000
"""Characters of a reference patch shown beside a failed trial's diff (a diff's preview)."""


def _reference_heads(patches: Mapping[str, str], fails: Sequence[EvidenceGroup]) -> dict[str, str]:
    """Return the reference patches of the cases with a failed candidate trial, cut to a head."""
    shown = {g.case_id for g in fails if g.arm == "candidate"}
    return {
        cid: text if len(text) <= _REFERENCE_HEAD else text[:_REFERENCE_HEAD] + "\n[… cut …]\n"
        for cid, text in sorted(patches.items())
        if cid in shown
    }


def _title(role: str, release: str | None) -> str:
    return role if not release or release == role else f"{role} · {release}"


def gate_named_cases(dec: Decision) -> dict[str, tuple[str, ...]]:
    """Case id → why the gate names it: regression, broken, or a reason code.

    Read generically from the decision: the comparison's regressions and broken cases, and
    every reason that names cases (:meth:`~harness.gate.rules.Reason.named_cases`), whatever
    the rule. Info-level mentions count too: a named case is one a reviewer must look at.
    """
    named: dict[str, list[str]] = {}

    def add(cid: object, why: str) -> None:
        tags = named.setdefault(str(cid), [])
        if why not in tags:
            tags.append(why)

    if dec.comparison is not None:
        for cid in dec.comparison.broken:
            add(cid, "broken")
        for cid in dec.comparison.regressions:
            add(cid, "regression")
    for r in dec.reasons:
        for cid in r.named_cases():
            add(cid, r.code)
    return {cid: tuple(tags) for cid, tags in named.items()}


def _policy_critical(dec: Decision) -> set[str]:
    return {cid for r in dec.reasons if r.code == "critical_case_broken" for cid in r.named_cases()}


def _arm_view(
    key: ArmKey,
    title: str,
    release: str,
    summary: ArmSummary,
    by_case: dict[str, list[RunRecord]],
    trials: Sequence[RunRecord],
    arm: Arm,
) -> ArmView:
    scored = [r for rs in by_case.values() for r in rs]
    everything = [r for r in trials if r.key.arm is arm]
    return ArmView(
        key=key,
        title=title,
        release=release,
        summary=summary,
        claims=claim_stats(scored),
        cost=_cost(everything),
        attempts_used=dict(sorted(Counter(len(r.attempts) for r in scored).items())),
        stop_reasons=dict(sorted(Counter(r.stop_reason for r in scored).items())),
        runs=_runs(scored),
    )
