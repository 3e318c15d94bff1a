"""The gate's rules on a comparison: regression family, budget, non-inferiority (pure).

Each rule returns its :class:`Reason` objects; :func:`harness.gate.decide` combines them
with the run-level rules. :data:`GATE_RULE_VERSION` names this rule set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from harness.frozen import Frozen as _Frozen
from harness.gate.compare import Comparison, case_counts
from harness.gate.policy import Policy
from harness.gate.regression import RuleResult, broken_ids, regression_rule

__all__ = [
    "GATE_RULE_VERSION",
    "Reason",
    "Severity",
    "evaluate_rule",
    "regressed_cases",
    "rule_budget",
    "rule_non_inferiority",
    "rule_regression",
]

GATE_RULE_VERSION = 2
"""Version of the decision rule: 2 = exact within-case family (harness 0.2)."""

Severity = Literal["info", "warn", "fail", "blocked"]
_EPS = 1e-12
_SHOWN = 8
"""Cases named in one message at most (the data carries all of them)."""


class Reason(_Frozen):
    """One reason behind a verdict, as data."""

    code: str
    """Stable machine-readable code, e.g. ``regression``."""
    severity: Severity
    message: str
    data: dict[str, Any] = {}
    """What the rule measured; a reason about cases names them as ``case_id`` (one) or
    ``cases`` (several): read them with :meth:`named_cases`."""

    def named_cases(self) -> tuple[str, ...]:
        """Return the cases this reason is about: its ``case_id``, else its ``cases``; or none."""
        if "case_id" in self.data:
            return (str(self.data["case_id"]),)
        cases = self.data.get("cases")
        return tuple(str(c) for c in cases) if isinstance(cases, list | tuple) else ()


def make_reason(code: str, severity: Severity, message: str, **data: Any) -> Reason:
    return Reason(code=code, severity=severity, message=message, data=data)


def fmt_signed(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.3f}"


def list_names(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:_SHOWN])
    return shown + (f" and {len(ids) - _SHOWN} more" if len(ids) > _SHOWN else "")


def _rule_inputs(comp: Comparison) -> tuple[list[str], tuple[np.ndarray, ...]]:
    rows = [r for r in comp.rows if r.compared and r.candidate and r.baseline]
    ids = [r.case_id for r in rows]
    return ids, case_counts(
        [r.candidate for r in rows if r.candidate], [r.baseline for r in rows if r.baseline]
    )


Recent = Mapping[str, tuple[int, int]]
"""Per case: passes and judged trials among the reference's k most recent trials
(:func:`harness.gate.stats.recent_counts`)."""


def _recent_arrays(ids: Sequence[str], recent: Recent) -> tuple[np.ndarray, np.ndarray]:
    got = [recent.get(cid, (0, 0)) for cid in ids]
    return (
        np.array([x for x, _ in got], dtype=np.int64),
        np.array([y for _, y in got], dtype=np.int64),
    )


def evaluate_rule(
    policy: Policy, comp: Comparison, critical: Sequence[str], recent: Recent | None = None
) -> RuleResult:
    """Run the regression family of :mod:`harness.gate.regression` on a comparison's counts.

    ``recent`` (a baseline pool): the reference's k most recent trials per case, on which
    the magnitude clause "a case broke" is judged.
    """
    ids, (c, n, b, m) = _rule_inputs(comp)
    window = None if recent is None else _recent_arrays(ids, recent)
    return policy_rule(policy, ids, c, n, b, m, k=comp.k, critical=critical, recent=window)


def policy_rule(
    policy: Policy,
    case_ids: Sequence[str],
    c: Sequence[int] | np.ndarray,
    n: Sequence[int] | np.ndarray,
    b: Sequence[int] | np.ndarray,
    m: Sequence[int] | np.ndarray,
    *,
    k: int,
    critical: Sequence[str] = (),
    alpha: float | None = None,
    recent: tuple[Sequence[int] | np.ndarray, Sequence[int] | np.ndarray] | None = None,
) -> RuleResult:
    """Apply the regression rule to per-case counts with ``policy``'s levels and thresholds.

    The one place a policy's fields become the rule's arguments: the gate, ``policy check``
    and the decision-quality bench all call it. ``alpha`` replaces the FAIL level (a
    comparison against a baseline pool, :func:`harness.gate.conditional.pool_level`); the
    WARN level stays the policy's. ``recent`` is :func:`harness.gate.regression.regression_rule`'s
    (a baseline pool's k most recent trials per case).
    """
    th = policy.thresholds
    return regression_rule(
        case_ids,
        c,
        n,
        b,
        m,
        k=k,
        critical=critical,
        alpha=policy.alpha if alpha is None else alpha,
        warn_alpha=policy.warn_level,
        critical_share=policy.critical_share,
        pass_rate_drop=th.pass_rate_drop,
        pass_hat_k_drop=th.pass_hat_k_drop,
        recent=recent,
    )


def regressed_cases(comp: Comparison, critical: Sequence[str]) -> list[str]:
    """Cases that did worse than in the baseline: critical first, then by evidence."""
    rows = [r for r in comp.rows if r.compared and (r.delta_pass_rate or 0.0) < 0]
    rows.sort(
        key=lambda r: (
            r.case_id not in critical,
            not r.broken,
            r.p_diagnostic if r.p_diagnostic is not None else 1.0,
            r.delta_pass_rate or 0.0,
            r.case_id,
        )
    )
    return [r.case_id for r in rows]


def _drop(x: float | None, what: str) -> str:
    """Name a mean change: a drop when positive, a gain when negative (never a negative drop)."""
    if x is None:
        return f"{what} change n/a"
    if x < 0:
        return f"{what} gain {-x:.3f}"
    return f"{what} drop {x:.3f}"


def _alone(comp: Comparison, cases: Sequence[str], alpha: float) -> str:
    """One sentence on the worst case the set-level rule calls noise, and why."""
    rows = {r.case_id: r for r in comp.rows}
    worst = next((rows[c] for c in cases if c in rows), None)
    if worst is None or worst.candidate is None or worst.baseline is None:
        return ""
    cand, base = worst.candidate, worst.baseline
    p = "n/a" if worst.p_diagnostic is None else f"{worst.p_diagnostic:.3g}"
    return (
        f"; {worst.case_id} went {base.passes}/{base.n} → {cand.passes}/{cand.n}, which this "
        f"set cannot tell from noise (that case alone: exact p = {p}; the rule tests all "
        f"{len(comp.compared)} cases together at α = {alpha}): it detects a drop spread over "
        "several cases, a case going all-pass → all-fail, or any significant drop of a "
        "critical case, not one non-critical case's partial drop"
    )


_NEXT = (
    "next: open these cases' failing trials in the report (Evidence), compare with the "
    "baseline's, and re-run them with `--case` if an environment problem is suspected"
)


def _recent_note(comp: Comparison, recent: Recent | None) -> tuple[dict[str, Any], str]:
    """Return data and words on the magnitude clause "a case broke" on the recent trials."""
    if recent is None:
        return {}, ""
    ids, (c, n, _, _) = _rule_inputs(comp)
    rb, rm = _recent_arrays(ids, recent)
    broke = broken_ids(ids, c, n, rb, rm)
    data = {"recent_trials": comp.k, "broken_recent": list(broke)}
    return data, (
        f"; against the pool's {comp.k} most recent trials per case (the view of a fresh "
        f"{comp.k}-trial re-run, on which the magnitude rule judges a broken case) "
        f"{len(broke)} case(s) all-pass → all-fail"
        + (f": {list_names(list(broke))}" if broke else "")
    )


def rule_regression(
    policy: Policy, comp: Comparison, critical: Sequence[str], recent: Recent | None = None
) -> tuple[RuleResult, list[Reason]]:
    """Apply the exact within-case family: fail, warn or an explaining info reason.

    ``recent`` (a baseline pool, :func:`evaluate_rule`) is named in the reasons' message and
    data (``recent_trials``, ``broken_recent``).
    """
    res = evaluate_rule(policy, comp, critical, recent)
    cases = regressed_cases(comp, critical)
    recent_data, recent_words = _recent_note(comp, recent)
    shares = {s.name: s.share for s in res.fail_shares}
    data: dict[str, Any] = {
        "p_within": res.within.p_value,
        "p_broken": res.broken.p_value,
        "critical_p": res.critical_p,
        "shares": shares,
        "alpha": policy.alpha,
        "warn_alpha": policy.warn_level,
        "mean_drop": res.mean_drop,
        "mean_pass_hat_k_drop": res.mean_hat_drop,
        "broken": list(res.broken_cases),
        "cases": cases,
        "n_cases": res.within.n_cases,
        "rule_version": GATE_RULE_VERSION,
        **recent_data,
    }
    what = (
        f"mean {_drop(res.mean_drop, 'pass-rate')}, mean "
        f"{_drop(res.mean_hat_drop, f'pass^{comp.k}')}, {len(res.broken_cases)} case(s) "
        f"all-pass → all-fail{recent_words}; "
        f"within-case exact p = {res.within.p_value:.3g}, broken-count p = "
        f"{res.broken.p_value:.3g}"
    )
    out: list[Reason] = []
    for cid in res.failing_critical:
        out.append(
            make_reason(
                # all-pass -> all-fail keeps the code reports have always read
                "critical_case_broken" if cid in res.broken_cases else "critical_case_regressed",
                "fail",
                f"critical case {cid!r} "
                + ("broke (all-pass → all-fail)" if cid in res.broken_cases else "dropped")
                + " significantly: exact p = "
                f"{res.critical_p[cid]:.3g}, within the family-wise α = {policy.alpha}",
                case_id=cid,
                **data,
            )
        )
    named = f"; look at {list_names(cases)}" if cases else ""
    set_rejected = [t for t in res.rejected_fail if t in ("within", "broken")]
    if set_rejected and res.material:
        out.append(
            make_reason(
                "regression",
                "fail",
                f"significant and material regression ({what}; family-wise α = "
                f"{policy.alpha}){named}; {_NEXT}",
                tests=set_rejected,
                **data,
            )
        )
    elif res.outcome == "fail":
        # a critical case failed it; the set-level tests said nothing more. The next step
        # is said once, on the last critical reason.
        last = out[-1]
        out[-1] = last.model_copy(update={"message": f"{last.message}; {_NEXT}"})
    elif res.rejected_warn or set_rejected:
        why = (
            "significant but below the policy's magnitude "
            f"({policy.thresholds.pass_rate_drop:.3f} pass rate / "
            f"{policy.thresholds.pass_hat_k_drop:.3f} pass^k)"
            if set_rejected
            else f"significant at the warning level α = {policy.warn_level}"
        )
        out.append(
            make_reason(
                "possible_regression",
                "warn",
                f"possible regression: {why} ({what}){named}; {_NEXT}",
                tests=list(res.rejected_warn),
                **data,
            )
        )
    else:
        out.append(
            make_reason(
                "no_significant_regression",
                "info",
                f"no significant regression ({what})"
                + (f"; cases that did worse, within noise: {list_names(cases)}" if cases else "")
                + _alone(comp, cases, policy.alpha),
                **data,
            )
        )
    return res, out


def rule_budget(comp: Comparison) -> list[Reason]:
    """All-pass → not-all-pass flips against what shrunk noise explains (warn if over)."""
    b = comp.budget
    regs = list(comp.regressions)
    if b.over:
        return [
            make_reason(
                "regressions_over_budget",
                "warn",
                f"{b.observed} case(s) no longer pass every trial ({list_names(regs)}), more than "
                f"the {b.budget} that noise explains at {b.confidence:.0%} (expected "
                f"{b.expected:.2f} of {b.at_risk} all-pass cases; P(X ≥ {b.observed}) = "
                f"{b.tail_p:.3g}); look at their failing trials",
                cases=regs,
                **b.model_dump(),
            )
        ]
    if regs:
        return [
            make_reason(
                "regressions_within_budget",
                "info",
                f"{b.observed} case regression(s) (all-pass → not all-pass): {list_names(regs)}; "
                f"within the budget of {b.budget} that noise alone would produce "
                f"(expected {b.expected:.2f})",
                cases=regs,
                **b.model_dump(),
            )
        ]
    return []


def rule_non_inferiority(policy: Policy, comp: Comparison) -> list[Reason]:
    """Non-inferiority of the pass rate: a warning only where the set can show it."""
    th = policy.thresholds
    margin, low, high = th.non_inferiority_margin, comp.e1.ci_low, comp.e1.ci_high
    data = {"lower_bound": low, "margin": margin, "n_cases": comp.e1.n_cases}
    if low is not None and low > -margin + _EPS:
        return [
            make_reason(
                "non_inferiority_shown",
                "info",
                f"pass rate non-inferior: lower bound {fmt_signed(low)} > -{margin:.3f}",
                **data,
            )
        ]
    half = None if low is None or high is None else (high - low) / 2
    # large enough: an equal candidate would show non-inferiority with room to spare
    informative = half is not None and half < margin / 2
    severity: Severity = (
        "warn"
        if th.non_inferiority == "warn" or (th.non_inferiority == "auto" and informative)
        else "info"
    )
    small = (
        ""
        if informative
        else (
            f"; the set is too small to show it (bound half-width "
            f"{'n/a' if half is None else f'{half:.3f}'} ≥ margin / 2): information only"
        )
    )
    return [
        make_reason(
            "non_inferiority_not_shown",
            severity,
            f"non-inferiority of the pass rate not shown: one-sided {1 - policy.alpha:.0%} "
            f"lower bound {fmt_signed(low)} is not above -{margin:.3f} (n = {comp.e1.n_cases} "
            f"cases){small}",
            half_width=half,
            **data,
        )
    ]
