"""Pure statistics of a paired comparison: candidate against baseline, case by case.

Candidate - baseline, so a negative difference is a drop. Only cases with judged trials
in both arms are compared; data in, frozen results out, seeded randomness only, no I/O.

* **E1**: per-case paired difference in pass rate; mean, SE = sd(d)/sqrt(N), one-sided
  t test with N-1 degrees of freedom, a t interval, and a seeded paired bootstrap over
  cases as a cross-check.
* **E2**: pass^k per case. Cases with exactly k judged trials in both arms have a 0/1
  pass^k and go to the exact one-sided McNemar (binomial) test, the others are listed in
  ``excluded``; only when fewer than half the cases are 0/1 (e.g. flaky reruns gave many
  cases more trials) do the unbiased estimates go through E1's machinery.
* **Holm** across E1 and E2.
* **Regression budget** from :mod:`harness.gate.budget`.

E1 and E2 are information since gate rule 2: the gate's regression rule is the exact
within-case family of :mod:`harness.gate.regression`. The per-arm estimators and summaries
come from :mod:`harness.gate.stats`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

from harness.frozen import Frozen as _Frozen
from harness.gate.budget import RegressionBudget, beta_prior, flip_risk, regression_budget
from harness.gate.stats import ArmData, CaseSummary, summarize_case, t_ppf

__all__ = [
    "CaseRow",
    "Comparison",
    "PairedTest",
    "case_counts",
    "compare_arms",
    "fisher_less",
    "holm",
    "mcnemar_exact",
    "paired_test",
]


# --------------------------------------------------------------------------- tests


def mcnemar_exact(
    b: int, c: int, alternative: Literal["greater", "two-sided"] = "greater"
) -> float:
    """Exact McNemar (binomial) test on discordant pairs.

    ``b`` counts pairs that went baseline-pass → candidate-fail, ``c`` the reverse.
    ``greater`` tests whether regressions outnumber improvements: P(X >= b) for
    X ~ Bin(b + c, 1/2). With no discordant pair the p-value is 1.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    if b + c == 0:
        return 1.0
    from scipy import stats as sps

    return float(sps.binomtest(b, b + c, 0.5, alternative=alternative).pvalue)


def holm(pvalues: Sequence[float | None]) -> tuple[float, ...]:
    """Holm step-down adjusted p-values (monotone, capped at 1; None/NaN count as 1)."""
    ps = [1.0 if p is None or math.isnan(p) else float(p) for p in pvalues]
    m = len(ps)
    order = sorted(range(m), key=lambda i: (ps[i], i))
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        adjusted[i] = running
    return tuple(adjusted)


class PairedTest(_Frozen):
    """A paired comparison over cases of candidate - baseline (negative = drop)."""

    name: str
    metric: Literal["pass_rate", "pass_hat_k"]
    method: Literal["paired_t", "mcnemar_exact", "none"]
    """``none``: fewer than two cases; nothing could be tested."""
    alternative: Literal["less", "two-sided"]
    """``less``: H1 is that the candidate is worse."""
    n_cases: int
    mean_candidate: float | None
    mean_baseline: float | None
    mean_diff: float | None
    sd_diff: float | None
    se: float | None
    df: int | None
    t_stat: float | None
    p_value: float | None
    p_holm: float | None = None
    """Holm-adjusted across the comparison's family (set by :func:`compare_arms`)."""
    ci_level: float
    ci_low: float | None
    ci_high: float | None
    """t interval; with ``ci_level = 1 - 2*alpha`` its lower end is the one-sided bound."""
    bootstrap_ci_low: float | None = None
    bootstrap_ci_high: float | None = None
    bootstrap_p: float | None = None
    """Share of bootstrap means >= 0 (``less``), a cross-check of ``p_value``."""
    bootstrap_resamples: int = 0
    bootstrap_seed: int = 0
    discordant_regressed: int | None = None
    """McNemar b: cases all-pass in the baseline, not in the candidate."""
    discordant_improved: int | None = None
    excluded: tuple[str, ...] = ()
    """Compared cases left out of this test (fewer than k judged trials in an arm)."""


def paired_test(
    candidate: Sequence[float],
    baseline: Sequence[float],
    *,
    name: str = "E1",
    metric: Literal["pass_rate", "pass_hat_k"] = "pass_rate",
    alternative: Literal["less", "two-sided"] = "less",
    ci_level: float = 0.90,
    bootstrap_resamples: int = 0,
    seed: int = 0,
) -> PairedTest:
    """Paired t test over cases on d = candidate - baseline, with a seeded bootstrap.

    SE = sd(d)/sqrt(N), N-1 degrees of freedom. When sd(d) is 0 the statistic is
    degenerate: p is the exact sign-flip p, ``2^-N`` (two-sided ``2^(1-N)``) if the mean
    is strictly in the direction of H1, else 1.
    """
    if len(candidate) != len(baseline):
        raise ValueError("paired samples must have equal length")
    n = len(candidate)
    cand = np.asarray(candidate, dtype=float)
    base = np.asarray(baseline, dtype=float)
    d = cand - base
    common = {"name": name, "metric": metric, "alternative": alternative, "ci_level": ci_level}
    if n < 2:
        return PairedTest(
            **common,
            method="none",
            n_cases=n,
            mean_candidate=float(cand.mean()) if n else None,
            mean_baseline=float(base.mean()) if n else None,
            mean_diff=float(d.mean()) if n else None,
            sd_diff=None,
            se=None,
            df=None,
            t_stat=None,
            p_value=None,
            ci_low=None,
            ci_high=None,
        )
    mean = float(d.mean())
    sd = float(d.std(ddof=1))
    se = sd / math.sqrt(n)
    df = n - 1
    tcrit = t_ppf(0.5 + ci_level / 2, df)
    t_stat: float | None
    if se > 0:
        from scipy import stats as sps

        t_stat = mean / se
        if alternative == "less":
            p = float(sps.t.cdf(t_stat, df))
        else:
            p = float(min(1.0, 2 * sps.t.sf(abs(t_stat), df)))
    else:
        # Every d is the same value: the t statistic is undefined. The exact sign-flip
        # p-value is what is left: the observed signs are the most extreme of 2^n.
        t_stat = None
        toward = mean < 0 if alternative == "less" else mean != 0
        tail = 0.5**n if alternative == "less" else min(1.0, 2 * 0.5**n)
        p = tail if toward else 1.0
    boot_low = boot_high = boot_p = None
    if bootstrap_resamples > 0:
        rng = np.random.Generator(np.random.PCG64(seed))
        idx = rng.integers(0, n, size=(bootstrap_resamples, n))
        means = d[idx].mean(axis=1)
        tail = (1 - ci_level) / 2
        boot_low = float(np.quantile(means, tail))
        boot_high = float(np.quantile(means, 1 - tail))
        if alternative == "less":
            boot_p = float(np.mean(means >= 0))
        else:
            boot_p = float(min(1.0, 2 * min(np.mean(means >= 0), np.mean(means <= 0))))
    return PairedTest(
        **common,
        method="paired_t",
        n_cases=n,
        mean_candidate=float(cand.mean()),
        mean_baseline=float(base.mean()),
        mean_diff=mean,
        sd_diff=sd,
        se=se,
        df=df,
        t_stat=t_stat,
        p_value=p,
        ci_low=mean - tcrit * se,
        ci_high=mean + tcrit * se,
        bootstrap_ci_low=boot_low,
        bootstrap_ci_high=boot_high,
        bootstrap_p=boot_p,
        bootstrap_resamples=bootstrap_resamples,
        bootstrap_seed=seed,
    )


# --------------------------------------------------------------------------- comparison


class CaseRow(_Frozen):
    """One case of the comparison table (diagnostic; never significant on its own)."""

    case_id: str
    compared: bool
    """Both arms have judged trials for it."""
    candidate: CaseSummary | None
    baseline: CaseSummary | None
    delta_pass_rate: float | None
    delta_pass_hat_k: float | None
    regression: bool
    """Baseline stable-pass, candidate not."""
    improvement: bool
    """Baseline not stable-pass, candidate stable-pass."""
    broken: bool
    """Baseline stable-pass, candidate stable-fail."""
    p_diagnostic: float | None
    """One-sided Fisher exact p (candidate worse); diagnostic only, not corrected."""


class Comparison(_Frozen):
    """Candidate against baseline on the cases both have data for."""

    k: int
    alpha: float
    compared: tuple[str, ...]
    only_candidate: tuple[str, ...]
    """Cases with judged trials in the candidate only (reported, not compared)."""
    only_baseline: tuple[str, ...]
    neither: tuple[str, ...]
    """Cases present in some arm but with no judged trial in either."""
    e1: PairedTest
    e2: PairedTest
    rows: tuple[CaseRow, ...]
    regressions: tuple[str, ...]
    improvements: tuple[str, ...]
    broken: tuple[str, ...]
    budget: RegressionBudget


def case_counts(
    a: Sequence[CaseSummary], b: Sequence[CaseSummary]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Judged counts of cases paired by position, as the exact tests take them.

    Returns int arrays: arm A's passes and judged trials, arm B's passes and judged trials.
    """
    return (
        np.array([s.passes for s in a], dtype=np.int64),
        np.array([s.n for s in a], dtype=np.int64),
        np.array([s.passes for s in b], dtype=np.int64),
        np.array([s.n for s in b], dtype=np.int64),
    )


def fisher_less(
    c_pass: np.ndarray, c_n: np.ndarray, b_pass: np.ndarray, b_n: np.ndarray
) -> np.ndarray:
    """One-sided Fisher exact p that arm A's pass share is lower than arm B's (vectorised).

    Arguments are per-case arrays: A's passes and judged trials, B's passes and trials.
    """
    from scipy import stats as sps

    total = c_n + b_n
    passes = c_pass + b_pass
    # X = candidate passes ~ Hypergeom(M=total, n=passes, N=c_n); small X is evidence.
    return np.asarray(sps.hypergeom.cdf(c_pass, total, passes, c_n), dtype=float)


def compare_arms(
    candidate: ArmData,
    baseline: ArmData,
    *,
    alpha: float = 0.05,
    budget_confidence: float = 0.95,
    budget_floor: int = 0,
    bootstrap_resamples: int = 2000,
    seed: int = 0,
    budget_baseline: ArmData | None = None,
) -> Comparison:
    """Compare candidate with baseline: E1, E2, Holm, per-case rows and the budget.

    ``k`` is the candidate's. Only cases with judged trials in both arms are compared.
    The budget's per-case pass rates come from ``budget_baseline`` when given (e.g. the
    stored and re-executed baseline trials pooled: more baseline data, less plug-in
    bias), else from ``baseline``.
    Confidence intervals use level ``1 - 2*alpha`` so that their lower end is the
    one-sided bound matching the one-sided tests (and the non-inferiority check).
    """
    k = candidate.k
    level = 1 - 2 * alpha
    ids = sorted(set(candidate.cases) | set(baseline.cases))
    cs = {cid: summarize_case(candidate.cases.get(cid, ()), k, cid) for cid in ids}
    bs = {cid: summarize_case(baseline.cases.get(cid, ()), k, cid) for cid in ids}
    compared = [cid for cid in ids if cs[cid].n > 0 and bs[cid].n > 0]
    only_c = tuple(cid for cid in ids if cs[cid].n > 0 and bs[cid].n == 0)
    only_b = tuple(cid for cid in ids if cs[cid].n == 0 and bs[cid].n > 0)
    neither = tuple(cid for cid in ids if cs[cid].n == 0 and bs[cid].n == 0)

    e1 = paired_test(
        [cs[c].pass_rate or 0.0 for c in compared],
        [bs[c].pass_rate or 0.0 for c in compared],
        name="E1",
        metric="pass_rate",
        ci_level=level,
        bootstrap_resamples=bootstrap_resamples,
        seed=seed,
    )
    e2 = _e2_test(cs, bs, compared, level, bootstrap_resamples, seed)
    p1, p2 = holm([e1.p_value, e2.p_value])
    e1 = e1.model_copy(update={"p_holm": p1})
    e2 = e2.model_copy(update={"p_holm": p2})

    rows = _case_rows(ids, cs, bs, candidate, baseline)
    regressions = tuple(r.case_id for r in rows if r.regression)
    budget = _budget(
        cs, bs, compared, k, budget_baseline, len(regressions), budget_confidence, budget_floor
    )
    return Comparison(
        k=k,
        alpha=alpha,
        compared=tuple(compared),
        only_candidate=only_c,
        only_baseline=only_b,
        neither=neither,
        e1=e1,
        e2=e2,
        rows=tuple(rows),
        regressions=regressions,
        improvements=tuple(r.case_id for r in rows if r.improvement),
        broken=tuple(r.case_id for r in rows if r.broken),
        budget=budget,
    )


def _e2_test(
    cs: dict[str, CaseSummary],
    bs: dict[str, CaseSummary],
    compared: list[str],
    level: float,
    bootstrap_resamples: int,
    seed: int,
) -> PairedTest:
    """E2 on pass^k: exact McNemar when most cases are 0/1, else the paired t test."""
    usable = [c for c in compared if cs[c].pass_hat_k is not None and bs[c].pass_hat_k is not None]
    # pass^k is 0/1 for a case with exactly k judged trials (or none / all passing): the
    # exact McNemar test applies to those cases whatever happened to the others (an
    # unrelated infra error must not switch the method).
    binary = [c for c in usable if {cs[c].pass_hat_k, bs[c].pass_hat_k} <= {0.0, 1.0}]
    exact = bool(binary) and len(binary) * 2 >= len(usable)
    if exact:
        usable = binary
    excluded = tuple(c for c in compared if c not in usable)
    e2 = paired_test(
        [cs[c].pass_hat_k or 0.0 for c in usable],
        [bs[c].pass_hat_k or 0.0 for c in usable],
        name="E2",
        metric="pass_hat_k",
        ci_level=level,
        bootstrap_resamples=bootstrap_resamples,
        seed=seed + 1,
    )
    if exact:
        b = sum(1 for c in usable if bs[c].pass_hat_k == 1.0 and cs[c].pass_hat_k == 0.0)
        imp = sum(1 for c in usable if bs[c].pass_hat_k == 0.0 and cs[c].pass_hat_k == 1.0)
        e2 = e2.model_copy(
            update={
                "method": "mcnemar_exact",
                "p_value": mcnemar_exact(b, imp, "greater"),
                "discordant_regressed": b,
                "discordant_improved": imp,
            }
        )
    e2 = e2.model_copy(update={"excluded": excluded})
    return e2


def _case_rows(
    ids: list[str],
    cs: dict[str, CaseSummary],
    bs: dict[str, CaseSummary],
    candidate: ArmData,
    baseline: ArmData,
) -> list[CaseRow]:
    """One diagnostic row per case, with a one-sided Fisher p for the compared ones."""
    compared = [cid for cid in ids if cs[cid].n > 0 and bs[cid].n > 0]
    diag: dict[str, float] = {}
    if compared:
        pv = fisher_less(*case_counts([cs[c] for c in compared], [bs[c] for c in compared]))
        diag = {c: float(min(1.0, p)) for c, p in zip(compared, pv, strict=True)}
    rows: list[CaseRow] = []
    for cid in ids:
        c_sum, b_sum = cs[cid], bs[cid]
        both = cid in diag
        regression = both and b_sum.label == "stable_pass" and c_sum.label != "stable_pass"
        rows.append(
            CaseRow(
                case_id=cid,
                compared=both,
                candidate=c_sum if cid in candidate.cases else None,
                baseline=b_sum if cid in baseline.cases else None,
                delta_pass_rate=(c_sum.pass_rate - b_sum.pass_rate)
                if both and c_sum.pass_rate is not None and b_sum.pass_rate is not None
                else None,
                delta_pass_hat_k=(c_sum.pass_hat_k - b_sum.pass_hat_k)
                if both and c_sum.pass_hat_k is not None and b_sum.pass_hat_k is not None
                else None,
                regression=regression,
                improvement=both and b_sum.label != "stable_pass" and c_sum.label == "stable_pass",
                broken=both and b_sum.label == "stable_pass" and c_sum.label == "stable_fail",
                p_diagnostic=diag.get(cid),
            )
        )
    return rows


def _budget(
    cs: dict[str, CaseSummary],
    bs: dict[str, CaseSummary],
    compared: list[str],
    k: int,
    budget_baseline: ArmData | None,
    regressions: int,
    confidence: float,
    floor: int,
) -> RegressionBudget:
    """Return the regression budget from the baseline's stable-pass cases' flip risks."""
    seen = {c: bs[c] for c in compared}
    if budget_baseline is not None:
        for cid in compared:
            pooled = summarize_case(budget_baseline.cases.get(cid, ()), k, cid)
            seen[cid] = pooled if pooled.n >= bs[cid].n else bs[cid]
    prior = beta_prior([s.passes for s in seen.values()], [s.n for s in seen.values()])
    risks = [
        flip_risk(seen[c].passes, seen[c].n, k, prior)
        for c in compared
        if bs[c].label == "stable_pass"
    ]
    budget = regression_budget(risks, k, regressions, confidence=confidence, floor=floor)
    return budget
