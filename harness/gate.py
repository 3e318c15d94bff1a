"""The promotion gate: policy + arm data → a :class:`Decision` (pure, deterministic).

Verdicts, most severe first (the verdict is the most severe reason; ``info`` reasons
explain a pass):

* **blocked** — nothing can be judged: the run is invalid; an arm's unverifiable
  fraction (infra + evaluator errors) is above ``infra_errors.block_above``; the
  re-executed baseline disagrees with the stored baseline beyond noise (drift); or the
  arms have no case in common.
* **fail** — a regression that is both significant (Holm over E1 and E2 at ``alpha``)
  and at least the policy's magnitude; a critical case broken (baseline all-pass,
  candidate all-fail; without a baseline: candidate all-fail); a required or critical
  case without data in a judged arm.
* **warn** — a significant but smaller drop; non-inferiority of the pass rate not shown;
  regressions over the budget; unverifiable trials over ``infra_errors.warn_above`` in an
  arm; missing cases over the limit; a verdict that worst-case imputation of the missing
  data (candidate: fail, baseline: pass) would make worse; a baseline that was not
  re-executed (drift unchecked); a stored all-pass baseline case now all-fail.
* **pass** — none of the above.

Drift (:func:`drift_check`): the re-executed baseline against the stored one, on the
cases both have; see :class:`DriftCheck` for the test and why noise does not block.

The reference baseline is the re-executed baseline, falling back per case to the stored
baseline for cases that were not re-executed (``baseline.mode: sample``). Without any
baseline the decision is about the candidate alone and says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from harness.policy import Policy, policy_digest
from harness.records import Outcome
from harness.stats import (
    ArmData,
    ArmSummary,
    Comparison,
    PairedTest,
    compare_arms,
    fisher_less,
    holm,
    paired_test,
    summarize_arm,
    summarize_case,
)

__all__ = [
    "Decision",
    "DriftCheck",
    "Reason",
    "Severity",
    "VerdictKind",
    "decide",
    "drift_check",
    "rerun_plan",
]

VerdictKind = Literal["pass", "warn", "fail", "blocked"]
Severity = Literal["info", "warn", "fail", "blocked"]
_RANK: dict[str, int] = {"info": 0, "pass": 0, "warn": 1, "fail": 2, "blocked": 3}
_VERDICT: dict[int, VerdictKind] = {0: "pass", 1: "warn", 2: "fail", 3: "blocked"}
_JUDGED = (Outcome.PASS, Outcome.FAIL)
_EPS = 1e-12


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class Reason(_Frozen):
    """One reason behind a verdict, as data."""

    code: str
    """Stable machine-readable code, e.g. ``regression_pass_rate``."""
    severity: Severity
    message: str
    data: dict[str, Any] = {}


# --------------------------------------------------------------------------- drift test


class DriftCheck(_Frozen):
    """Re-executed baseline against the stored baseline, on the cases both have.

    Family-wise level ``alpha``, split in two halves (Bonferroni): the aggregate
    two-sided paired t test on per-case pass rates (which also needs ``|mean diff| >=
    tolerance``), and a two-sided Fisher exact test per case (doubled one-sided tail)
    with Holm across cases. Drift is detected when the aggregate test is significant and
    large, or when any single case is significant. With k = 5 on each side no single
    case can reach significance (min p = 2/252), so per-case drift needs more trials;
    a stored all-pass case that now fails every trial is reported in ``broken`` for a
    warning, not a block, so that noise never blocks a good release.
    """

    alpha: float
    tolerance: float
    compared: tuple[str, ...]
    aggregate: PairedTest
    aggregate_p_holm: float | None
    """Aggregate p-value adjusted for the split (x2), compared with ``alpha``."""
    case_p_holm: dict[str, float]
    """Per-case Holm-adjusted p-values, adjusted for the split (x2)."""
    drifted_cases: tuple[str, ...]
    broken: tuple[str, ...]
    """Stored stable-pass, re-executed stable-fail."""
    detected: bool


def drift_check(
    reexecuted: ArmData, stored: ArmData, *, alpha: float = 0.01, tolerance: float = 0.10
) -> DriftCheck:
    """Decide whether a re-executed baseline disagrees with the stored one beyond noise."""
    k = reexecuted.k
    ids = sorted(set(reexecuted.cases) & set(stored.cases))
    rs = {c: summarize_case(reexecuted.cases[c], k, c) for c in ids}
    ss = {c: summarize_case(stored.cases[c], stored.k, c) for c in ids}
    compared = [c for c in ids if rs[c].n > 0 and ss[c].n > 0]
    agg = paired_test(
        [rs[c].pass_rate or 0.0 for c in compared], [ss[c].pass_rate or 0.0 for c in compared],
        name="drift", metric="pass_rate", alternative="two-sided", ci_level=1 - alpha,
    )  # fmt: skip
    case_p: list[float] = []
    if compared:
        arr = np.array([[rs[c].passes, rs[c].n, ss[c].passes, ss[c].n] for c in compared])
        lower = fisher_less(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3])
        upper = fisher_less(arr[:, 2], arr[:, 3], arr[:, 0], arr[:, 1])
        case_p = [float(min(1.0, 2 * min(lo, up))) for lo, up in zip(lower, upper, strict=True)]
    # alpha is split in two (Bonferroni): the aggregate test, and the Holm family of
    # per-case tests, so that many untestable small cases never dilute the aggregate.
    agg_adj = min(1.0, 2 * agg.p_value) if agg.p_value is not None else None
    per_case = {c: min(1.0, 2 * p) for c, p in zip(compared, holm(case_p), strict=True)}
    drifted = tuple(c for c, p in per_case.items() if p < alpha)
    big = agg.mean_diff is not None and abs(agg.mean_diff) >= tolerance - 1e-12
    aggregate_drift = agg_adj is not None and agg_adj < alpha and big
    return DriftCheck(
        alpha=alpha, tolerance=tolerance, compared=tuple(compared), aggregate=agg,
        aggregate_p_holm=agg_adj, case_p_holm=per_case, drifted_cases=drifted,
        broken=tuple(
            c for c in compared if ss[c].label == "stable_pass" and rs[c].label == "stable_fail"
        ),
        detected=aggregate_drift or bool(drifted),
    )  # fmt: skip


class Decision(_Frozen):
    """The gate's decision with everything it was derived from."""

    schema_version: Literal[1] = 1
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
    drift: DriftCheck | None
    imputed_verdict: VerdictKind | None
    """Verdict of the statistical rules under worst-case imputation (None: nothing missing)."""


# --------------------------------------------------------------------------- rules


def _r(code: str, severity: Severity, message: str, **data: Any) -> Reason:
    return Reason(code=code, severity=severity, message=message, data=data)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.3f}"


def _severity(reasons: Iterable[Reason]) -> int:
    return max((_RANK[r.severity] for r in reasons), default=0)


def _judge_comparison(policy: Policy, comp: Comparison, critical: Sequence[str]) -> list[Reason]:
    """Apply the statistical and critical-case rules to one comparison (fail/warn/info)."""
    out: list[Reason] = []
    th = policy.thresholds
    for test, limit in ((comp.e1, th.pass_rate_drop), (comp.e2, th.pass_hat_k_drop)):
        data: dict[str, Any] = {
                "test": test.name, "method": test.method, "mean_diff": test.mean_diff,
                "p_value": test.p_value, "p_holm": test.p_holm, "alpha": policy.alpha,
                "threshold": limit, "ci_low": test.ci_low, "ci_high": test.ci_high,
                "n_cases": test.n_cases}  # fmt: skip
        if test.method == "mcnemar_exact":
            data["discordant"] = [test.discordant_regressed, test.discordant_improved]
        significant = (
            test.p_holm is not None and test.p_holm < policy.alpha
            and test.mean_diff is not None and test.mean_diff < 0
        )  # fmt: skip
        what = f"{test.name} ({test.metric}): mean difference {_fmt(test.mean_diff)}"
        where = f"Holm p = {test.p_holm:.4g}" if test.p_holm is not None else "not testable"
        if significant and test.mean_diff is not None and -test.mean_diff >= limit - _EPS:
            out.append(_r(f"regression_{test.metric}", "fail",
                          f"{what}, significant ({where} < {policy.alpha}) and at least the "
                          f"policy's drop of {limit:.3f}", **data))  # fmt: skip
        elif significant:
            out.append(_r(f"small_regression_{test.metric}", "warn",
                          f"{what}, significant ({where}) but smaller than the policy's "
                          f"drop of {limit:.3f}", **data))  # fmt: skip
        else:
            out.append(_r(f"no_significant_regression_{test.metric}", "info",
                          f"{what}, no significant drop ({where})", **data))  # fmt: skip
    margin = th.non_inferiority_margin
    low = comp.e1.ci_low
    if low is None or low <= -margin + _EPS:
        out.append(_r("non_inferiority_not_shown", "warn",
                      f"non-inferiority of the pass rate not shown: one-sided "
                      f"{1 - policy.alpha:.0%} lower bound {_fmt(low)} is not above "
                      f"-{margin:.3f} (n = {comp.e1.n_cases} cases)",
                      lower_bound=low, margin=margin, n_cases=comp.e1.n_cases))  # fmt: skip
    else:
        out.append(_r("non_inferiority_shown", "info",
                      f"pass rate non-inferior: lower bound {_fmt(low)} > -{margin:.3f}",
                      lower_bound=low, margin=margin))  # fmt: skip
    b = comp.budget
    if b.over:
        out.append(_r("regressions_over_budget", "warn",
                      f"{b.observed} case regressions (all-pass -> not all-pass) exceed the "
                      f"budget of {b.budget} (noise expects {b.expected:.2f}; "
                      f"P(X >= {b.observed}) = {b.tail_p:.3g})",
                      cases=list(comp.regressions), **b.model_dump()))  # fmt: skip
    elif comp.regressions:
        out.append(_r("regressions_within_budget", "info",
                      f"{b.observed} case regression(s) (all-pass -> not all-pass): "
                      f"{', '.join(comp.regressions)}; within the budget of {b.budget} "
                      f"that noise alone would produce (expected {b.expected:.2f})",
                      cases=list(comp.regressions), **b.model_dump()))  # fmt: skip
    for cid in sorted(set(critical) & set(comp.broken)):
        out.append(_r("critical_case_broken", "fail",
                      f"critical case {cid!r} is broken: all-pass in the baseline, "
                      "all-fail in the candidate", case_id=cid))  # fmt: skip
    return out


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


def _no_data(arm: ArmData, cid: str) -> bool:
    return summarize_case(arm.cases.get(cid, ()), arm.k, cid).n == 0


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


def decide(
    policy: Policy,
    candidate: ArmData,
    baseline: ArmData | None,
    stored_baseline: ArmData | None,
    *,
    run_valid: bool = True,
    invalid_reasons: Sequence[str] = (),
    critical_cases: Iterable[str] = (),
) -> Decision:
    """Apply ``policy`` to the arms and return the decision with its reasons.

    ``baseline`` is the baseline re-executed in this run, ``stored_baseline`` the one
    promoted earlier. ``critical_cases`` adds case ids flagged critical in their case
    files to the policy's list. Critical cases are also required.
    """
    critical = tuple(sorted(set(policy.critical_cases) | set(critical_cases)))
    required = tuple(sorted(set(policy.required_cases) | set(critical)))
    reasons: list[Reason] = []
    blocked: list[Reason] = []

    if not run_valid or invalid_reasons:
        blocked.append(_r("invalid_run", "blocked",
                          "the run is invalid and cannot be judged: "
                          + ("; ".join(invalid_reasons) or "no reason given"),
                          reasons=list(invalid_reasons)))  # fmt: skip

    cand_sum = summarize_arm(candidate)
    base_sum = summarize_arm(baseline) if baseline is not None else None
    stored_sum = summarize_arm(stored_baseline) if stored_baseline is not None else None
    limits = policy.infra_errors
    for arm_name, s in (("candidate", cand_sum), ("baseline", base_sum)):
        if s is None:
            continue
        data = {"arm": arm_name, "fraction": s.unverifiable_fraction, "trials": s.trials,
                "infra_errors": s.infra_errors, "evaluator_errors": s.evaluator_errors}  # fmt: skip
        counts = (f"{s.infra_errors} infra + {s.evaluator_errors} evaluator errors in "
                  f"{s.trials} trials ({s.unverifiable_fraction:.1%})")  # fmt: skip
        if s.unverifiable_fraction > limits.block_above + _EPS:
            blocked.append(_r("infra_errors_block", "blocked",
                              f"{arm_name}: {counts}, above the limit of "
                              f"{limits.block_above:.1%}: too many to judge",
                              limit=limits.block_above, **data))  # fmt: skip
        elif s.unverifiable_fraction > limits.warn_above + _EPS:
            reasons.append(_r("infra_errors_over_limit", "warn",
                              f"{arm_name}: {counts}, above the limit of {limits.warn_above:.1%}",
                              limit=limits.warn_above, **data))  # fmt: skip

    drift: DriftCheck | None = None
    reference: ArmData | None = None
    pooled: ArmData | None = None
    if baseline is not None and stored_baseline is not None:
        bp = policy.baseline
        drift = drift_check(baseline, stored_baseline, alpha=bp.drift_alpha,
                            tolerance=bp.drift_tolerance)  # fmt: skip
        dd = {"mean_diff": drift.aggregate.mean_diff, "p_holm": drift.aggregate_p_holm,
              "drifted_cases": list(drift.drifted_cases), "alpha": bp.drift_alpha,
              "tolerance": bp.drift_tolerance, "n_cases": len(drift.compared)}  # fmt: skip
        if drift.detected:
            blocked.append(_r("baseline_drift", "blocked",
                              "the re-executed baseline disagrees with the stored baseline "
                              f"beyond noise (mean pass-rate difference "
                              f"{_fmt(drift.aggregate.mean_diff)}, drifted cases: "
                              f"{', '.join(drift.drifted_cases) or 'none singly'}): the "
                              "fixed reference is lost; find the evaluator or environment "
                              "change before judging", **dd))  # fmt: skip
        else:
            reasons.append(_r("baseline_reproduced", "info",
                              "the re-executed baseline agrees with the stored baseline "
                              f"within noise on {len(drift.compared)} cases", **dd))  # fmt: skip
        for cid in drift.broken:
            reasons.append(_r("baseline_case_broken", "warn",
                              f"case {cid!r} passed every stored baseline trial but fails "
                              "every re-executed one: check the case's environment",
                              case_id=cid))  # fmt: skip
        reference = ArmData(k=baseline.k, name=baseline.name,
                            cases={**stored_baseline.cases, **baseline.cases})  # fmt: skip
        pooled = ArmData(k=baseline.k, cases={
            cid: stored_baseline.cases.get(cid, ()) + baseline.cases.get(cid, ())
            for cid in sorted(set(stored_baseline.cases) | set(baseline.cases))})  # fmt: skip
    elif baseline is not None:
        reference = baseline
        reasons.append(
            _r(
                "drift_not_checked",
                "info",
                "no stored baseline given: drift of the evaluator was not checked",
            )
        )
    elif stored_baseline is not None:
        reference = stored_baseline
        reasons.append(_r("baseline_not_reexecuted", "warn",
                          "the baseline was not re-executed in this run: the comparison uses "
                          "stored results and evaluator drift cannot be ruled out"))  # fmt: skip

    comparison: Comparison | None = None
    imputed: VerdictKind | None = None
    judged: list[ArmData] = [candidate] + ([reference] if reference is not None else [])
    for cid in required:
        for arm, arm_name in zip(judged, ("candidate", "baseline"), strict=False):
            if _no_data(arm, cid):
                kind = "critical" if cid in critical else "required"
                reasons.append(_r("required_case_no_data", "fail",
                                  f"{kind} case {cid!r} has no judged trial in the {arm_name}",
                                  case_id=cid, arm=arm_name))  # fmt: skip

    if reference is None:
        reasons.append(_r("no_comparison", "info",
                          "no baseline: NO COMPARISON WAS MADE. This verdict judges the "
                          "candidate alone (validity, infra errors, required and critical "
                          "cases, missing cases)"))  # fmt: skip
        ids = sorted(set(candidate.cases) | set(required))
        for cid in critical:
            summary = summarize_case(candidate.cases.get(cid, ()), candidate.k, cid)
            if summary.label == "stable_fail":
                reasons.append(_r("critical_case_broken", "fail",
                                  f"critical case {cid!r} fails every candidate trial",
                                  case_id=cid))  # fmt: skip
        missing = [cid for cid in ids if _no_data(candidate, cid)]
    else:
        ids = sorted(set(candidate.cases) | set(reference.cases) | set(required))
        comparison = compare_arms(
            candidate, reference, alpha=policy.alpha,
            budget_confidence=policy.regression_budget.confidence,
            budget_floor=policy.regression_budget.floor,
            bootstrap_resamples=policy.bootstrap.resamples, seed=policy.bootstrap.seed,
            budget_baseline=pooled,
        )  # fmt: skip
        if not comparison.compared:
            blocked.append(_r("no_common_cases", "blocked",
                              "no case has judged trials in both the candidate and the "
                              "baseline: nothing can be compared"))  # fmt: skip
        core = _judge_comparison(policy, comparison, critical)
        reasons.extend(core)
        missing = [cid for cid in ids if cid not in comparison.compared]
        if comparison.compared and _has_missing([candidate, reference], ids):
            worst = compare_arms(
                _impute(candidate, ids, Outcome.FAIL), _impute(reference, ids, Outcome.PASS),
                alpha=policy.alpha, budget_confidence=policy.regression_budget.confidence,
                budget_floor=policy.regression_budget.floor, bootstrap_resamples=0,
                budget_baseline=pooled,
            )  # fmt: skip
            observed_rank = _severity(core)
            imputed_rank = _severity(_judge_comparison(policy, worst, critical))
            imputed = _VERDICT[imputed_rank]
            if imputed_rank > observed_rank:
                reasons.append(_r("imputation_would_flip", "warn",
                                  f"worst-case imputation of the missing data (candidate fails, "
                                  f"baseline passes) would turn {_VERDICT[observed_rank]!r} "
                                  f"into {imputed!r}",
                                  observed=_VERDICT[observed_rank], imputed=imputed))  # fmt: skip
    if ids and len(missing) / len(ids) > policy.missing_cases.max_fraction + _EPS:
        reasons.append(_r("missing_cases_over_limit", "warn",
                          f"{len(missing)} of {len(ids)} cases are missing from the "
                          f"{'comparison' if reference is not None else 'candidate'} "
                          f"(limit {policy.missing_cases.max_fraction:.1%}): "
                          + ", ".join(missing), cases=missing,
                          limit=policy.missing_cases.max_fraction))  # fmt: skip

    if blocked:
        final = blocked + [r for r in reasons if r.severity == "info"]
        final.append(
            _r(
                "not_judged",
                "info",
                "blocked: the comparison is shown for diagnosis but was not judged",
            )
        )
    else:
        final = reasons
    final.sort(key=lambda r: -_RANK[r.severity])  # stable within a severity
    return Decision(
        verdict=_VERDICT[_severity(final)],
        reasons=tuple(final),
        policy_version=policy.version,
        policy_digest=policy_digest(policy),
        k=candidate.k,
        compared=reference is not None,
        candidate=cand_sum,
        baseline=base_sum,
        stored_baseline=stored_sum,
        comparison=comparison,
        drift=drift,
        imputed_verdict=imputed,
    )
