"""The promotion gate: policy + arm data → a :class:`Decision` (pure, deterministic).

:func:`decide` is the public, versioned entry point (``harness.decide``; the rule's
version is :data:`GATE_RULE_VERSION`, recorded in every decision). It is a sequence of
small named rules, each returning its reasons; the verdict is the most severe reason:

* **blocked** — nothing can be judged: :func:`rule_validity` (the run is invalid),
  :func:`rule_infra` (unverifiable trials above ``infra_errors.block_above``),
  :func:`rule_drift` (the re-executed baseline disagrees with the stored one),
  :func:`rule_absolute` (no judged candidate trial at all), or no case in common.
* **fail** — :func:`rule_regression`: the exact within-case family of
  :mod:`harness.gate.regression` rejects at ``alpha`` with a material drop, or a critical
  case's drop is significant; :func:`rule_absolute`: pass rate under the policy's floor
  or zero; :func:`rule_required`: a required or critical case without data.
* **warn** — the same family at ``warn_alpha`` without the magnitude condition; regressions
  over the shrunk budget (:func:`rule_budget`); non-inferiority not shown on a set large
  enough to show it (:func:`rule_non_inferiority`); unverifiable trials over the warning
  limit; missing cases (:func:`rule_missing`); a verdict worst-case imputation would make
  worse (:func:`rule_imputation`); a baseline not re-executed or drift not checkable.
* **pass** — none of the above; ``info`` reasons explain it.

The reference baseline is the re-executed baseline, falling back per case to the stored
baseline for cases that were not re-executed (``baseline.mode: sample``). Without any
baseline the decision is about the candidate alone and says so. When the baseline arm was
re-executed from recorded model responses (``baseline_replayed``), it is not a fresh
sample: the reference is the stored baseline and the re-executed arm serves the drift
check only (:func:`rule_baseline_replayed` says so). Against a baseline pool
(``baseline_pooled``) the reference is the pool plus the run's live trials, and the
magnitude rule judges "a case broke" on its k most recent trials per case, as a fresh
k-trial re-run would see it (:func:`harness.gate.stats.recent_counts`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from harness.frozen import Frozen as _Frozen
from harness.gate.compare import Comparison, compare_arms
from harness.gate.conditional import pool_level
from harness.gate.drift import DriftCheck, drift_check
from harness.gate.policy import Policy, policy_digest
from harness.gate.regression import RuleResult
from harness.gate.rules import (
    GATE_RULE_VERSION,
    Reason,
    Severity,
    evaluate_rule,
    fmt_signed,
    list_names,
    make_reason,
    regressed_cases,
    rule_budget,
    rule_non_inferiority,
    rule_regression,
)
from harness.gate.stats import (
    ArmData,
    ArmSummary,
    recent_counts,
    summarize_arm,
    summarize_case,
)
from harness.store.records import Outcome

__all__ = [
    "GATE_RULE_VERSION",
    "Decision",
    "DriftCheck",
    "Reason",
    "Severity",
    "VerdictKind",
    "decide",
    "drift_check",
    "evaluate_rule",
    "regressed_cases",
    "rerun_plan",
    "rule_absolute",
    "rule_baseline_pooled",
    "rule_baseline_replayed",
    "rule_budget",
    "rule_drift",
    "rule_imputation",
    "rule_infra",
    "rule_missing",
    "rule_non_inferiority",
    "rule_regression",
    "rule_required",
    "rule_validity",
]

VerdictKind = Literal["pass", "warn", "fail", "blocked"]
_RANK: dict[str, int] = {"info": 0, "pass": 0, "warn": 1, "fail": 2, "blocked": 3}
_VERDICT: dict[int, VerdictKind] = {0: "pass", 1: "warn", 2: "fail", 3: "blocked"}
_JUDGED = (Outcome.PASS, Outcome.FAIL)
_EPS = 1e-12


def _severity(reasons: Iterable[Reason]) -> int:
    return max((_RANK[r.severity] for r in reasons), default=0)


# --------------------------------------------------------------------------- decision


class Decision(_Frozen):
    """The gate's decision with everything it was derived from."""

    schema_version: Literal[1] = 1
    rule_version: int = GATE_RULE_VERSION
    """Version of the decision rule that produced it (:data:`GATE_RULE_VERSION`)."""
    verdict: VerdictKind
    reasons: tuple[Reason, ...]
    """Most severe first; stable order within a severity."""
    policy_version: str
    policy_digest: str
    k: int
    compared: bool
    """False when there was no baseline: the candidate was judged alone."""
    candidate: ArmSummary
    baseline: ArmSummary | None
    """The re-executed baseline, when there is one."""
    stored_baseline: ArmSummary | None
    comparison: Comparison | None
    rule: RuleResult | None = None
    """The regression family on the compared cases (None without a comparison)."""
    drift: DriftCheck | None
    imputed_verdict: VerdictKind | None
    """Verdict of the statistical rules under worst-case imputation (None: nothing missing)."""
    baseline_replayed: bool = False
    """The baseline arm was re-executed from recorded model responses: the candidate was
    compared with the stored baseline, the re-executed arm checked drift only."""
    baseline_pooled: bool = False
    """The stored baseline was a baseline pool: the candidate was compared with the pool
    plus this run's live baseline trials, which were checked against the pool for drift."""


def rule_validity(run_valid: bool, invalid_reasons: Sequence[str]) -> list[Reason]:
    """Block an invalid run (the system changed mid-run, the run never finished)."""
    if run_valid and not invalid_reasons:
        return []
    return [
        make_reason(
            "invalid_run",
            "blocked",
            "the run is invalid and cannot be judged: "
            + ("; ".join(invalid_reasons) or "no reason given"),
            reasons=list(invalid_reasons),
        )
    ]


def rule_infra(policy: Policy, arms: Sequence[tuple[str, ArmSummary | None]]) -> list[Reason]:
    """Unverifiable trials (infra + evaluator errors) per arm: warn, then block."""
    out: list[Reason] = []
    limits = policy.infra_errors
    for arm_name, s in arms:
        if s is None:
            continue
        data = {
            "arm": arm_name,
            "fraction": s.unverifiable_fraction,
            "trials": s.trials,
            "infra_errors": s.infra_errors,
            "evaluator_errors": s.evaluator_errors,
        }
        counts = (
            f"{s.infra_errors} infra + {s.evaluator_errors} evaluator errors in "
            f"{s.trials} trials ({s.unverifiable_fraction:.1%})"
        )
        if s.unverifiable_fraction > limits.block_above + _EPS:
            out.append(
                make_reason(
                    "infra_errors_block",
                    "blocked",
                    f"{arm_name}: {counts}, above the limit of {limits.block_above:.1%}: "
                    "too many to judge; fix the environment and resume the run",
                    limit=limits.block_above,
                    **data,
                )
            )
        elif s.unverifiable_fraction > limits.warn_above + _EPS:
            out.append(
                make_reason(
                    "infra_errors_over_limit",
                    "warn",
                    f"{arm_name}: {counts}, above the limit of {limits.warn_above:.1%}; "
                    "look at the report's infra-error evidence",
                    limit=limits.warn_above,
                    **data,
                )
            )
    return out


def rule_drift(
    policy: Policy, baseline: ArmData | None, stored: ArmData | None
) -> tuple[DriftCheck | None, list[Reason]]:
    """Check the re-executed baseline against the stored one: block on drift."""
    if baseline is None:
        if stored is None:
            return None, []
        return None, [
            make_reason(
                "baseline_not_reexecuted",
                "warn",
                "the baseline was not re-executed in this run: the comparison uses "
                "stored results and evaluator drift cannot be ruled out",
            )
        ]
    if stored is None:
        return None, [
            make_reason(
                "drift_not_checked",
                "info",
                "no stored baseline given: drift of the evaluator was not checked",
            )
        ]
    bp = policy.baseline
    drift = drift_check(baseline, stored, alpha=bp.drift_alpha, tolerance=bp.drift_tolerance)
    dd = {
        "mean_diff": drift.aggregate.mean_diff,
        "p_holm": drift.aggregate_p_holm,
        "p_broken": drift.broken_p_adjusted,
        "drifted_cases": list(drift.drifted_cases),
        "broken": list(drift.broken),
        "alpha": bp.drift_alpha,
        "tolerance": bp.drift_tolerance,
        "n_cases": len(drift.compared),
    }
    if not drift.compared:
        return drift, [
            make_reason(
                "drift_not_checked",
                "warn",
                "no stored baseline case is comparable with the re-executed ones "
                "(case versions changed or no judged trials): evaluator drift was "
                "NOT checked; promote a fresh baseline",
                **dd,
            )
        ]
    if drift.detected:
        where = drift.broken or drift.drifted_cases
        return drift, [
            make_reason(
                "baseline_drift",
                "blocked",
                "the re-executed baseline disagrees with the stored baseline beyond "
                f"noise (mean pass-rate difference {fmt_signed(drift.aggregate.mean_diff)}"
                + (f"; look at {list_names(list(where))}" if where else "")
                + "): the fixed reference is lost; find the evaluator or "
                "environment change before judging",
                **dd,
            )
        ]
    out = [
        make_reason(
            "baseline_reproduced",
            "info",
            "the re-executed baseline agrees with the stored baseline within noise on "
            f"{len(drift.compared)} cases",
            **dd,
        )
    ]
    if drift.broken:
        out.append(
            make_reason(
                "baseline_case_broken",
                "info",
                f"{list_names(list(drift.broken))}: all-pass in the stored baseline, all-fail "
                "re-executed (not significant as drift; check the case's environment "
                "if it persists)",
                cases=list(drift.broken),
            )
        )
    return drift, out


def rule_required(
    required: Sequence[str], critical: Sequence[str], arms: Sequence[tuple[str, ArmData]]
) -> list[Reason]:
    """Fail a required or critical case without any judged trial in a judged arm."""
    out = []
    for cid in required:
        for arm_name, arm in arms:
            if summarize_case(arm.cases.get(cid, ()), arm.k, cid).n == 0:
                kind = "critical" if cid in critical else "required"
                out.append(
                    make_reason(
                        "required_case_no_data",
                        "fail",
                        f"{kind} case {cid!r} has no judged trial in the {arm_name}; "
                        "re-run it (`harness run ... --case " + cid + "`)",
                        case_id=cid,
                        arm=arm_name,
                    )
                )
    return out


def rule_absolute(
    policy: Policy, summary: ArmSummary, critical: Sequence[str], *, alone: bool
) -> list[Reason]:
    """Rules on the candidate alone: something to judge, a pass-rate floor, critical cases."""
    if summary.cases_with_data == 0:
        return [
            make_reason(
                "nothing_to_judge",
                "blocked",
                f"the candidate has no judged trial in {summary.n_cases} case(s): "
                "nothing can be judged",
                n_cases=summary.n_cases,
            )
        ]
    out: list[Reason] = []
    ab = policy.absolute
    rate = summary.pass_rate.mean or 0.0
    if summary.passes == 0:
        out.append(
            make_reason(
                "no_candidate_pass",
                "fail",
                f"not one of the candidate's {summary.passes + summary.fails} judged trials passed",
                pass_rate=rate,
            )
        )
    elif rate < ab.min_pass_rate - _EPS:
        out.append(
            make_reason(
                "pass_rate_below_minimum",
                "fail",
                f"candidate pass rate {rate:.3f} is below the policy's minimum of "
                f"{ab.min_pass_rate:.3f}",
                pass_rate=rate,
                minimum=ab.min_pass_rate,
            )
        )
    by_id = {c.case_id: c for c in summary.cases}
    for cid in critical:
        s = by_id.get(cid)
        if s is None or s.pass_rate is None:
            continue  # rule_required names it
        if alone and s.label == "stable_fail":
            out.append(
                make_reason(
                    "critical_case_broken",
                    "fail",
                    f"critical case {cid!r} fails every candidate trial",
                    case_id=cid,
                )
            )
        elif s.pass_rate < ab.critical_min_pass_rate - _EPS:
            out.append(
                make_reason(
                    "critical_case_below_minimum",
                    "fail",
                    f"critical case {cid!r} passes {s.pass_rate:.0%} of its trials, "
                    f"below the policy's {ab.critical_min_pass_rate:.0%}",
                    case_id=cid,
                    pass_rate=s.pass_rate,
                )
            )
    return out


def rule_missing(
    policy: Policy, ids: Sequence[str], missing: Sequence[str], where: str
) -> list[Reason]:
    """Too many cases missing from the comparison (or from the candidate) warns."""
    limit = policy.missing_cases.max_fraction
    if not ids or len(missing) / len(ids) <= limit + _EPS:
        return []
    return [
        make_reason(
            "missing_cases_over_limit",
            "warn",
            f"{len(missing)} of {len(ids)} cases are missing from the {where} "
            f"(limit {limit:.1%}): {list_names(list(missing))}; re-run them",
            cases=list(missing),
            limit=limit,
        )
    ]


def _impute(arm: ArmData, ids: Iterable[str], fill: Outcome) -> ArmData:
    cases: dict[str, tuple[Outcome, ...]] = {}
    for cid in ids:
        outs = [o if o in _JUDGED else fill for o in arm.cases.get(cid, ())]
        outs += [fill] * max(0, arm.k - len(outs))
        cases[cid] = tuple(outs)
    return ArmData(k=arm.k, cases=cases, name=arm.name)


def _has_missing(arms: Sequence[ArmData], ids: Iterable[str]) -> bool:
    for cid in ids:
        for arm in arms:
            outs = arm.cases.get(cid, ())
            if len(outs) < arm.k or any(o not in _JUDGED for o in outs):
                return True
    return False


def rule_imputation(
    policy: Policy,
    candidate: ArmData,
    reference: ArmData,
    ids: Sequence[str],
    critical: Sequence[str],
    observed: int,
    *,
    recent: bool = False,
) -> tuple[VerdictKind | None, list[Reason]]:
    """Warn when worst-case filling of missing trials (candidate fails) would flip it.

    ``recent``: the reference is a baseline pool (the magnitude rule's broken-case clause
    looks at its k most recent trials, :func:`harness.gate.rules.evaluate_rule`).
    """
    if not _has_missing([candidate, reference], ids):
        return None, []
    filled = _impute(reference, ids, Outcome.PASS)
    worst = compare_arms(
        _impute(candidate, ids, Outcome.FAIL),
        filled,
        alpha=policy.alpha,
        bootstrap_resamples=0,
    )
    window = recent_counts(filled, candidate.k) if recent else None
    rank = _RANK[evaluate_rule(policy, worst, critical, window).outcome]
    imputed = _VERDICT[rank]
    if rank <= observed:
        return imputed, []
    return imputed, [
        make_reason(
            "imputation_would_flip",
            "warn",
            f"worst-case imputation of the missing data (candidate fails, baseline "
            f"passes) would turn {_VERDICT[observed]!r} into {imputed!r}; re-run "
            "the trials that ended in infra or evaluator errors",
            observed=_VERDICT[observed],
            imputed=imputed,
        )
    ]


def rerun_plan(policy: Policy, summary: ArmSummary) -> tuple[str, ...]:
    """Cases of an arm that get ``flaky_reruns.extra_trials`` more trials (flaky-looking).

    Ordered by how close their pass rate is to 1/2, then by id; at most ``max_cases``.
    """
    if policy.flaky_reruns.extra_trials == 0:
        return ()
    flaky = sorted(
        (c for c in summary.cases if c.label == "flaky"),
        key=lambda c: (round(abs((c.pass_rate or 0.0) - 0.5), 9), c.case_id),
    )
    limit = policy.flaky_reruns.max_cases
    return tuple(c.case_id for c in (flaky if limit is None else flaky[:limit]))


def rule_baseline_replayed(stored: ArmData) -> list[Reason]:
    """Say that the reference is the stored baseline because the re-executed one replayed."""
    return [
        make_reason(
            "baseline_replayed",
            "info",
            "the baseline arm was re-executed from recorded model responses (not a fresh "
            "sample): the candidate is compared with the stored baseline's "
            f"{stored.k} trials per case; the re-executed arm measures evaluator and "
            "environment drift only",
            stored_k=stored.k,
        )
    ]


def rule_baseline_pooled(
    pool: ArmData, live: ArmData | None, *, alpha: float | None = None, level: float | None = None
) -> list[Reason]:
    """Say that the reference is a baseline pool plus this run's live baseline trials.

    ``level`` is the FAIL level in force against the pool; the message names it when it is
    below the policy's ``alpha``.
    """
    sizes = sorted(len(o) for o in pool.cases.values()) or [0]
    live_n = sorted(len(o) for o in (live.cases.values() if live is not None else ())) or [0]
    span = str(sizes[0]) if sizes[0] == sizes[-1] else f"{sizes[0]}–{sizes[-1]}"
    lowered = (
        f"; against this partly fixed reference the FAIL level is α = {level:.3g} (policy "
        f"α = {alpha}, lowered by baseline.pool.conditional_share)"
        if level is not None and alpha is not None and level < alpha
        else ""
    )
    return [
        make_reason(
            "baseline_pooled",
            "info",
            f"the candidate is compared with the baseline pool ({span} stored trials per "
            f"case) plus this run's {live_n[-1]} live baseline trial(s) per case; the live "
            f"trials were checked against the pool for drift{lowered}",
            pool_trials={cid: len(o) for cid, o in sorted(pool.cases.items())},
            live_trials=live_n[-1],
            fail_level=level,
        )
    ]


def _reference(
    baseline: ArmData | None,
    stored: ArmData | None,
    *,
    replayed: bool = False,
    pool: bool = False,
) -> tuple[ArmData | None, ArmData | None]:
    """Return the reference arm (re-executed, else stored, per case) and the pooled arm.

    A replayed baseline arm is not a sample: the stored baseline alone is the reference. A
    baseline pool (``pool``) is one with the live trials: the reference is their union.
    """
    if pool and stored is not None:
        live = baseline.cases if baseline is not None else {}
        union = {
            cid: stored.cases.get(cid, ()) + live.get(cid, ())
            for cid in sorted(set(stored.cases) | set(live))
        }
        return ArmData(k=stored.k, name=stored.name, cases=union), None
    if replayed:
        return stored, None
    if baseline is not None and stored is not None:
        reference = ArmData(
            k=baseline.k, name=baseline.name, cases={**stored.cases, **baseline.cases}
        )
        pooled = ArmData(
            k=baseline.k,
            cases={
                cid: stored.cases.get(cid, ()) + baseline.cases.get(cid, ())
                for cid in sorted(set(stored.cases) | set(baseline.cases))
            },
        )
        return reference, pooled
    return (baseline if baseline is not None else stored), None


def decide(
    policy: Policy,
    candidate: ArmData,
    baseline: ArmData | None,
    stored_baseline: ArmData | None,
    *,
    run_valid: bool = True,
    invalid_reasons: Sequence[str] = (),
    critical_cases: Iterable[str] = (),
    operating_characteristics: str | None = None,
    baseline_replayed: bool = False,
    baseline_pooled: bool = False,
) -> Decision:
    """Apply ``policy`` to the arms and return the decision with its reasons.

    Stable public API (``harness.decide``, rule version :data:`GATE_RULE_VERSION`):
    ``candidate`` holds the candidate's trial outcomes per case; ``baseline`` the
    baseline re-executed in this run and ``stored_baseline`` the one promoted earlier
    (either may be None). ``critical_cases`` adds case ids flagged critical in their case
    files to the policy's list; critical cases are also required. ``run_valid`` /
    ``invalid_reasons`` block the decision. ``operating_characteristics`` is a sentence
    from ``harness policy check`` shown as an info reason. ``baseline_replayed`` says the
    ``baseline`` arm was re-executed from recorded model responses (``--model-replay
    baseline:NAME``): it is then used for the drift check only and the candidate is
    compared with ``stored_baseline`` (an ``info`` reason says so). ``baseline_pooled``
    says ``stored_baseline`` is a baseline pool and ``baseline`` this run's live baseline
    trials: drift is checked live vs pool, the candidate is compared with their union (an
    ``info`` reason says so), and the magnitude rule's "a case broke" reads the union's
    ``candidate.k`` most recent judged trials per case (``baseline`` last, so its trials
    first; the regression reason's data gives ``recent_trials`` and ``broken_recent``).
    Pure: the same arguments give an equal :class:`Decision`.

    Raises:
        ValueError: ``baseline_replayed`` or ``baseline_pooled`` without a
            ``stored_baseline`` to compare with.
    """
    if (baseline_replayed or baseline_pooled) and stored_baseline is None:
        raise ValueError("a replayed or pooled baseline needs the stored baseline (or pool)")
    critical = tuple(sorted(set(policy.critical_cases) | set(critical_cases)))
    required = tuple(sorted(set(policy.required_cases) | set(critical)))
    cand_sum = summarize_arm(candidate)
    base_sum = summarize_arm(baseline) if baseline is not None else None
    stored_sum = summarize_arm(stored_baseline) if stored_baseline is not None else None
    reference, pooled = _reference(
        baseline, stored_baseline, replayed=baseline_replayed, pool=baseline_pooled
    )

    reasons = rule_validity(run_valid, invalid_reasons)
    if baseline_replayed and stored_baseline is not None:
        reasons += rule_baseline_replayed(stored_baseline)
    rule_policy = policy
    if baseline_pooled and stored_baseline is not None:
        rule_policy, found = _pooled_policy(policy, candidate, stored_baseline, baseline)
        reasons += found
    reasons += rule_infra(policy, [("candidate", cand_sum), ("baseline", base_sum)])
    drift, found = rule_drift(policy, baseline, stored_baseline)
    reasons += found
    judged = [("candidate", candidate)] + ([("baseline", reference)] if reference else [])
    reasons += rule_required(required, critical, judged)
    reasons += rule_absolute(policy, cand_sum, critical, alone=reference is None)

    comparison: Comparison | None = None
    rule: RuleResult | None = None
    imputed: VerdictKind | None = None
    if reference is None:
        reasons += _judge_alone(policy, candidate, required)
    else:
        comparison, rule, imputed, found = _judge_compared(
            policy,
            candidate,
            reference,
            required,
            critical,
            pooled,
            rule_policy,
            recent=baseline_pooled,
        )
        reasons += found
    if operating_characteristics:
        reasons.append(make_reason("operating_characteristics", "info", operating_characteristics))
    reasons = _blocked_first(reasons)
    return Decision(
        verdict=_VERDICT[_severity(reasons)],
        reasons=tuple(reasons),
        policy_version=policy.version,
        policy_digest=policy_digest(policy),
        k=candidate.k,
        compared=reference is not None,
        candidate=cand_sum,
        baseline=base_sum,
        stored_baseline=stored_sum,
        comparison=comparison,
        rule=rule,
        drift=drift,
        imputed_verdict=imputed,
        baseline_replayed=baseline_replayed,
        baseline_pooled=baseline_pooled,
    )


def _pooled_policy(
    policy: Policy, candidate: ArmData, pool: ArmData, live: ArmData | None
) -> tuple[Policy, list[Reason]]:
    """Return the policy the rule applies against a pool (its FAIL level lowered) and why."""
    level = _pooled_level(policy, candidate, pool, live)
    reasons = rule_baseline_pooled(pool, live, alpha=policy.alpha, level=level)
    if level >= policy.alpha:
        return policy, reasons
    return policy.model_copy(update={"alpha": level, "warn_alpha": policy.warn_level}), reasons


def _pooled_level(policy: Policy, candidate: ArmData, pool: ArmData, live: ArmData | None) -> float:
    """Return the FAIL level against the pool (:func:`harness.gate.conditional.pool_level`).

    It takes the judged trials per case of each part: candidate, pool and live.
    """
    ids = sorted(candidate.cases)

    def judged(arm: ArmData | None, cid: str) -> int:
        return 0 if arm is None else summarize_case(arm.cases.get(cid, ()), arm.k).n

    return pool_level(
        policy,
        [judged(candidate, c) for c in ids],
        [judged(pool, c) for c in ids],
        [judged(live, c) for c in ids],
    )


def _judge_alone(policy: Policy, candidate: ArmData, required: Sequence[str]) -> list[Reason]:
    """Reasons for a candidate with no baseline to compare with: it is judged alone."""
    reasons = [
        make_reason(
            "no_comparison",
            "info",
            "no baseline: NO COMPARISON WAS MADE. This verdict judges the "
            "candidate alone (validity, infra errors, absolute rules, required "
            "and critical cases, missing cases)",
        )
    ]
    ids = sorted(set(candidate.cases) | set(required))
    missing = [c for c in ids if summarize_case(candidate.cases.get(c, ()), candidate.k).n == 0]
    return reasons + rule_missing(policy, ids, missing, "candidate")


def _judge_compared(
    policy: Policy,
    candidate: ArmData,
    reference: ArmData,
    required: Sequence[str],
    critical: Sequence[str],
    pooled: ArmData | None,
    rule_policy: Policy,
    *,
    recent: bool = False,
) -> tuple[Comparison, RuleResult | None, VerdictKind | None, list[Reason]]:
    """Compare the candidate with the reference arm; return the comparison and its reasons.

    ``rule_policy`` is ``policy`` with the FAIL level of the regression family in force
    (lowered against a baseline pool by ``baseline.pool.conditional_share``). ``recent``:
    the reference is a baseline pool plus the live trials, and the magnitude rule judges
    "a case broke" on its ``k`` most recent trials per case (the live ones first), as a
    fresh k-trial re-run would see it; the tests use every trial.
    """
    ids = sorted(set(candidate.cases) | set(reference.cases) | set(required))
    comparison = compare_arms(
        candidate,
        reference,
        alpha=policy.alpha,
        budget_confidence=policy.regression_budget.confidence,
        budget_floor=policy.regression_budget.floor,
        bootstrap_resamples=policy.bootstrap.resamples,
        seed=policy.bootstrap.seed,
        budget_baseline=pooled,
    )
    reasons: list[Reason] = []
    rule: RuleResult | None = None
    imputed: VerdictKind | None = None
    if not comparison.compared:
        reasons.append(
            make_reason(
                "no_common_cases",
                "blocked",
                "no case has judged trials in both the candidate and the "
                "baseline: nothing can be compared",
            )
        )
    else:
        window = recent_counts(reference, candidate.k) if recent else None
        rule, core = rule_regression(rule_policy, comparison, critical, window)
        core += rule_budget(comparison) + rule_non_inferiority(policy, comparison)
        reasons += core
        imputed, flip = rule_imputation(
            rule_policy, candidate, reference, ids, critical, _RANK[rule.outcome], recent=recent
        )
        reasons += flip
    missing = [c for c in ids if c not in comparison.compared]
    reasons += rule_missing(policy, ids, missing, "comparison")
    return comparison, rule, imputed, reasons


def _blocked_first(reasons: list[Reason]) -> list[Reason]:
    """Order reasons by severity; a blocked decision keeps only blocked and info reasons."""
    if any(r.severity == "blocked" for r in reasons):
        reasons = [r for r in reasons if r.severity in ("blocked", "info")]
        reasons.append(
            make_reason(
                "not_judged",
                "info",
                "blocked: the comparison is shown for diagnosis but was not judged",
            )
        )
    reasons.sort(key=lambda r: -_RANK[r.severity])  # stable within a severity
    return reasons
