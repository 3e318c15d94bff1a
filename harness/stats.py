"""Pure statistics: per-case estimators, arm summaries and paired comparisons.

Everything here is a deterministic function of its arguments: data in, frozen results
out, seeded randomness only, no I/O. The unit of inference is the *case*: trials are
reduced to per-case values first; ``infra_error`` and ``evaluator_error`` trials are
excluded from ``n`` and counted apart.

Undefined values (a pass rate without data, a CI over one case) are ``None`` in the
result models, so that results compare equal and serialise to JSON; the bare estimator
functions :func:`pass_hat_k` / :func:`pass_at_k` return NaN where the brief asks for it.

Comparisons (candidate - baseline, so a negative difference is a drop):

* **E1** — per-case paired difference in pass rate; mean, SE = sd(d)/sqrt(N), one-sided
  t test with N-1 degrees of freedom, a t interval, and a seeded paired bootstrap over
  cases as a cross-check.
* **E2** — pass^k per case. Cases with exactly k judged trials in both arms have a 0/1
  pass^k and go to the exact one-sided McNemar (binomial) test, the others are listed in
  ``excluded``; only when fewer than half the cases are 0/1 (e.g. flaky reruns gave many
  cases more trials) do the unbiased estimates go through E1's machinery.

E1 and E2 are information since gate rule 2: the gate's regression rule is the exact
within-case family of :mod:`harness.regression`.
* **Holm** across E1 and E2.
* **Regression budget** — how many cases may flip from all-pass to not-all-pass by noise
  alone: the Poisson-binomial distribution of the flip risks of the cases all-pass in the
  baseline, each shrunk towards the set's own empirical-Bayes Beta prior
  (:func:`beta_prior`, :func:`flip_risk`) so that a case seen all-pass still carries risk.

The drift test (a re-executed baseline against the stored one) lives in :mod:`harness.gate`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy import stats as sps

from harness.records import Outcome, RunRecord

__all__ = [
    "ArmData",
    "ArmSummary",
    "CaseRow",
    "CaseSummary",
    "Comparison",
    "Label",
    "MeanCI",
    "PairedTest",
    "RegressionBudget",
    "beta_prior",
    "case_counts",
    "compare_arms",
    "fisher_less",
    "flip_risk",
    "holm",
    "mcnemar_exact",
    "paired_test",
    "pass_at_k",
    "pass_hat_k",
    "poisson_binomial_pmf",
    "regression_budget",
    "summarize_arm",
    "summarize_case",
]

Label = Literal["stable_pass", "stable_fail", "flaky", "no_data"]
_JUDGED = (Outcome.PASS, Outcome.FAIL)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


# --------------------------------------------------------------------------- estimators


def _check_counts(n: int, c: int, k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if n < 0 or c < 0 or c > n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass^k (all k trials pass): ``C(c,k) / C(n,k)``.

    Computed as the product ``prod_{i<k} (c-i)/(n-i)``, which never forms a large
    binomial coefficient. NaN when ``n < k`` (not enough trials to estimate).

    Raises:
        ValueError: ``k < 1`` or not ``0 <= c <= n``.

    """
    _check_counts(n, c, k)
    if n < k:
        return math.nan
    if c < k:
        return 0.0
    prod = 1.0
    for i in range(k):
        prod *= (c - i) / (n - i)
    return prod


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass@k (at least one of k passes): ``1 - C(n-c,k)/C(n,k)``.

    Uses the numerically stable form ``1 - prod_{i=n-c+1}^{n} (1 - k/i)``. NaN when
    ``n < k``.

    Raises:
        ValueError: ``k < 1`` or not ``0 <= c <= n``.

    """
    _check_counts(n, c, k)
    if n < k:
        return math.nan
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def _none_if_nan(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


# --------------------------------------------------------------------------- inputs


class ArmData(_Frozen):
    """The trial outcomes of one arm (candidate or baseline): per case, in trial order."""

    k: int = Field(ge=1)
    """Trials per case the run asked for."""
    cases: dict[str, tuple[Outcome, ...]]
    """Case id → the ordered outcomes of its trials (all four kinds)."""
    name: str = ""
    """Release name, for display."""

    @classmethod
    def from_records(cls, records: Iterable[RunRecord], k: int, name: str = "") -> ArmData:
        """Group run records by case id, ordered by trial index."""
        grouped: dict[str, list[tuple[int, Outcome]]] = {}
        for rec in records:
            grouped.setdefault(rec.key.case_id, []).append((rec.key.trial, rec.outcome))
        return cls(
            k=k,
            name=name,
            cases={
                cid: tuple(o for _, o in sorted(v, key=lambda t: t[0]))
                for cid, v in sorted(grouped.items())
            },
        )


# --------------------------------------------------------------------------- summaries


class CaseSummary(_Frozen):
    """One case in one arm, reduced from its trials."""

    case_id: str = ""
    k: int
    trials: int
    """All trials, whatever their outcome."""
    n: int
    """Judged trials (pass + fail); infra and evaluator errors are excluded."""
    passes: int
    fails: int
    infra_errors: int
    evaluator_errors: int
    pass_rate: float | None
    pass_hat_k: float | None
    """Unbiased pass^k; None when n < k."""
    pass_at_k: float | None
    run_sd: float | None
    """Run-to-run standard deviation of this case's 0/1 outcomes (sample sd; n >= 2)."""
    label: Label


def summarize_case(outcomes: Sequence[Outcome], k: int, case_id: str = "") -> CaseSummary:
    """Reduce one case's trial outcomes to counts, estimates and a stability label.

    Labels: ``no_data`` (no judged trial), ``stable_pass`` (every judged trial passed),
    ``stable_fail`` (none passed), ``flaky`` otherwise.
    """
    return _summarize_case(tuple(outcomes), k, case_id)


@functools.lru_cache(maxsize=1 << 14)
def _summarize_case(outs: tuple[Outcome, ...], k: int, case_id: str) -> CaseSummary:
    passes = outs.count(Outcome.PASS)
    fails = outs.count(Outcome.FAIL)
    infra = outs.count(Outcome.INFRA_ERROR)
    evaluator = outs.count(Outcome.EVALUATOR_ERROR)
    n = passes + fails
    label: Label
    if n == 0:
        label = "no_data"
    elif passes == n:
        label = "stable_pass"
    elif passes == 0:
        label = "stable_fail"
    else:
        label = "flaky"
    rate = passes / n if n else None
    run_sd = math.sqrt(passes * fails / (n * (n - 1))) if n >= 2 else None
    return CaseSummary(
        case_id=case_id,
        k=k,
        trials=len(outs),
        n=n,
        passes=passes,
        fails=fails,
        infra_errors=infra,
        evaluator_errors=evaluator,
        pass_rate=rate,
        pass_hat_k=_none_if_nan(pass_hat_k(n, passes, k)),
        pass_at_k=_none_if_nan(pass_at_k(n, passes, k)),
        run_sd=run_sd,
        label=label,
    )


@functools.lru_cache(maxsize=1024)
def _t_ppf(q: float, df: int) -> float:
    return float(sps.t.ppf(q, df))


class MeanCI(_Frozen):
    """A mean over cases with a t-based confidence interval over cases."""

    n_cases: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    level: float


def _mean_ci(values: Sequence[float], level: float) -> MeanCI:
    n = len(values)
    if n == 0:
        return MeanCI(n_cases=0, mean=None, ci_low=None, ci_high=None, level=level)
    arr = np.asarray(values, dtype=float)
    mean = float(arr.mean())
    if n < 2:
        return MeanCI(n_cases=n, mean=mean, ci_low=None, ci_high=None, level=level)
    se = float(arr.std(ddof=1)) / math.sqrt(n)
    half = _t_ppf(0.5 + level / 2, n - 1) * se
    # Every averaged quantity is a proportion: the interval is clipped to [0, 1].
    low, high = max(0.0, mean - half), min(1.0, mean + half)
    return MeanCI(n_cases=n, mean=mean, ci_low=low, ci_high=high, level=level)


class ArmSummary(_Frozen):
    """One arm: per-case summaries, means over cases and run-to-run spread."""

    name: str
    k: int
    n_cases: int
    cases_with_data: int
    trials: int
    passes: int
    fails: int
    infra_errors: int
    evaluator_errors: int
    unverifiable_fraction: float
    """(infra + evaluator errors) / all trials; 0 for an empty arm."""
    labels: dict[str, int]
    """Label → number of cases."""
    pass_rate: MeanCI
    """Mean per-case pass rate over cases with data, with a t-based CI over cases."""
    pass_hat_k: MeanCI
    """Mean unbiased pass^k over cases with n >= k."""
    pass_at_k: MeanCI
    spread: float | None
    """Run-to-run sd: sd over trial indices j of the aggregate pass rate of run j."""
    mean_case_sd: float | None
    """Mean over cases of the per-case run-to-run sd of outcomes."""
    cases: tuple[CaseSummary, ...]


def summarize_arm(arm: ArmData, *, level: float = 0.95) -> ArmSummary:
    """Summarise an arm: means over cases with t-based CIs over cases, and spread."""
    cases = tuple(summarize_case(arm.cases[cid], arm.k, cid) for cid in sorted(arm.cases))
    rates = [c.pass_rate for c in cases if c.pass_rate is not None]
    hats = [c.pass_hat_k for c in cases if c.pass_hat_k is not None]
    ats = [c.pass_at_k for c in cases if c.pass_at_k is not None]
    sds = [c.run_sd for c in cases if c.run_sd is not None]
    runs: list[float] = []
    for j in range(max((len(v) for v in arm.cases.values()), default=0)):
        judged = [v[j] for v in arm.cases.values() if len(v) > j and v[j] in _JUDGED]
        if judged:
            runs.append(sum(1 for o in judged if o == Outcome.PASS) / len(judged))
    trials = sum(c.trials for c in cases)
    unverifiable = sum(c.infra_errors + c.evaluator_errors for c in cases)
    labels: dict[str, int] = {}
    for c in cases:
        labels[c.label] = labels.get(c.label, 0) + 1
    return ArmSummary(
        name=arm.name,
        k=arm.k,
        n_cases=len(cases),
        cases_with_data=len(rates),
        trials=trials,
        passes=sum(c.passes for c in cases),
        fails=sum(c.fails for c in cases),
        infra_errors=sum(c.infra_errors for c in cases),
        evaluator_errors=sum(c.evaluator_errors for c in cases),
        unverifiable_fraction=unverifiable / trials if trials else 0.0,
        labels=dict(sorted(labels.items())),
        pass_rate=_mean_ci(rates, level),
        pass_hat_k=_mean_ci(hats, level),
        pass_at_k=_mean_ci(ats, level),
        spread=float(np.std(runs, ddof=1)) if len(runs) >= 2 else None,
        mean_case_sd=float(np.mean(sds)) if sds else None,
        cases=cases,
    )


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
            **common, method="none", n_cases=n,
            mean_candidate=float(cand.mean()) if n else None,
            mean_baseline=float(base.mean()) if n else None,
            mean_diff=float(d.mean()) if n else None,
            sd_diff=None, se=None, df=None, t_stat=None, p_value=None,
            ci_low=None, ci_high=None,
        )  # fmt: skip
    mean = float(d.mean())
    sd = float(d.std(ddof=1))
    se = sd / math.sqrt(n)
    df = n - 1
    tcrit = _t_ppf(0.5 + ci_level / 2, df)
    t_stat: float | None
    if se > 0:
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
        **common, method="paired_t", n_cases=n,
        mean_candidate=float(cand.mean()), mean_baseline=float(base.mean()),
        mean_diff=mean, sd_diff=sd, se=se, df=df, t_stat=t_stat, p_value=p,
        ci_low=mean - tcrit * se, ci_high=mean + tcrit * se,
        bootstrap_ci_low=boot_low, bootstrap_ci_high=boot_high, bootstrap_p=boot_p,
        bootstrap_resamples=bootstrap_resamples, bootstrap_seed=seed,
    )  # fmt: skip


# --------------------------------------------------------------------------- budget


def poisson_binomial_pmf(q: Sequence[float]) -> tuple[float, ...]:
    """Exact pmf of the number of successes among independent Bernoulli(q_i) (DP)."""
    pmf = np.zeros(len(q) + 1)
    pmf[0] = 1.0
    for i, qi in enumerate(q):
        if not 0.0 <= qi <= 1.0:
            raise ValueError(f"probability out of [0, 1]: {qi}")
        pmf[1 : i + 2] = pmf[1 : i + 2] * (1 - qi) + pmf[0 : i + 1] * qi
        pmf[0] *= 1 - qi
    return tuple(float(x) for x in pmf)


JEFFREYS = (0.5, 0.5)


def beta_prior(
    passes: Sequence[int] | np.ndarray, trials: Sequence[int] | np.ndarray
) -> tuple[float, float]:
    """Empirical-Bayes Beta prior of the cases' pass probabilities (method of moments).

    Fits a beta-binomial to the per-case counts: mean ``mu`` = pooled pass share,
    intra-class correlation ``rho`` from the spread of the per-case rates beyond binomial
    noise; ``a + b = 1/rho - 1``. Falls back to Jeffreys (1/2, 1/2) with fewer than three
    cases, a pooled share of 0 or 1, or a fit that does not exist. The prior is clipped to
    ``a + b >= 1`` (never more extreme than Jeffreys) and ``a + b <= 100``.
    """
    pa = np.asarray(passes, dtype=float)
    ta = np.asarray(trials, dtype=float)
    keep = ta > 0
    pa, ta = pa[keep], ta[keep]
    if pa.size < 3:
        return JEFFREYS
    mu = float(pa.sum() / ta.sum())
    if not 0.0 < mu < 1.0:
        return JEFFREYS
    n = float(ta.mean())
    if n < 2:
        return JEFFREYS
    v = float(np.var(pa / ta, ddof=1))
    rho = (v / (mu * (1 - mu)) - 1 / n) / (1 - 1 / n)
    size = 1 / min(max(rho, 1 / 101), 0.5) - 1  # a + b in [1, 100]
    return mu * size, (1 - mu) * size


def flip_risk(passes: int, trials: int, k: int, prior: tuple[float, float] = JEFFREYS) -> float:
    """P(a case seen ``passes`` of ``trials`` does not pass all of its next k trials).

    Shrunk, not plugged in: the case's pass probability gets the posterior
    Beta(a + passes, b + fails) of ``prior`` (Jeffreys by default, or the set's own
    :func:`beta_prior`), and the risk is ``1 - E[p^k]`` under it,
    ``1 - prod_{j<k} (A + j) / (A + B + j)``. A case seen all-pass 5 times still carries
    a risk of about 0.28 for k = 5 under Jeffreys (the plug-in rate 1.0 said 0).
    """
    _check_counts(trials, passes, k)
    a, b = passes + prior[0], trials - passes + prior[1]
    prod = 1.0
    for j in range(k):
        prod *= (a + j) / (a + b + j)
    return 1.0 - prod


class RegressionBudget(_Frozen):
    """How many all-pass → not-all-pass flips noise alone explains, and how many occurred."""

    k: int
    confidence: float
    floor: int
    expected: float
    """Sum of the flip risks of the cases that were all-pass in the baseline."""
    budget: int
    """max(floor, smallest r with P(X <= r) >= confidence)."""
    observed: int
    tail_p: float
    """P(X >= observed) under the Poisson-binomial."""
    over: bool
    at_risk: int = 0
    """Cases all-pass in the baseline (the ones that can flip)."""


def regression_budget(
    risks: Sequence[float],
    k: int,
    observed: int,
    *,
    confidence: float = 0.95,
    floor: int = 0,
) -> RegressionBudget:
    """Regression budget from per-case flip risks (see :func:`flip_risk`): Poisson-binomial.

    ``risks`` holds one probability per case that was all-pass in the baseline: the
    chance that noise alone makes it not all-pass in the candidate.
    """
    q = list(risks)
    pmf = poisson_binomial_pmf(q)
    cdf = np.cumsum(pmf)
    quantile = int(np.searchsorted(cdf, confidence - 1e-12))
    budget = max(floor, min(quantile, len(q)))
    tail = float(min(1.0, sum(pmf[observed:]))) if observed <= len(q) else 0.0
    return RegressionBudget(
        k=k, confidence=confidence, floor=floor, expected=float(sum(q)), budget=budget,
        observed=observed, tail_p=tail, over=observed > budget, at_risk=len(q),
    )  # fmt: skip


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
        [cs[c].pass_rate or 0.0 for c in compared], [bs[c].pass_rate or 0.0 for c in compared],
        name="E1", metric="pass_rate", ci_level=level,
        bootstrap_resamples=bootstrap_resamples, seed=seed,
    )  # fmt: skip
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
        [cs[c].pass_hat_k or 0.0 for c in usable], [bs[c].pass_hat_k or 0.0 for c in usable],
        name="E2", metric="pass_hat_k", ci_level=level,
        bootstrap_resamples=bootstrap_resamples, seed=seed + 1,
    )  # fmt: skip
    if exact:
        b = sum(1 for c in usable if bs[c].pass_hat_k == 1.0 and cs[c].pass_hat_k == 0.0)
        imp = sum(1 for c in usable if bs[c].pass_hat_k == 0.0 and cs[c].pass_hat_k == 1.0)
        e2 = e2.model_copy(update={
            "method": "mcnemar_exact", "p_value": mcnemar_exact(b, imp, "greater"),
            "discordant_regressed": b, "discordant_improved": imp,
        })  # fmt: skip
    e2 = e2.model_copy(update={"excluded": excluded})
    p1, p2 = holm([e1.p_value, e2.p_value])
    e1 = e1.model_copy(update={"p_holm": p1})
    e2 = e2.model_copy(update={"p_holm": p2})

    diag: dict[str, float] = {}
    if compared:
        pv = fisher_less(*case_counts([cs[c] for c in compared], [bs[c] for c in compared]))
        diag = {c: float(min(1.0, p)) for c, p in zip(compared, pv, strict=True)}
    rows: list[CaseRow] = []
    for cid in ids:
        c_sum, b_sum = cs[cid], bs[cid]
        both = cid in diag
        regression = both and b_sum.label == "stable_pass" and c_sum.label != "stable_pass"
        rows.append(CaseRow(
            case_id=cid, compared=both,
            candidate=c_sum if cid in candidate.cases else None,
            baseline=b_sum if cid in baseline.cases else None,
            delta_pass_rate=(c_sum.pass_rate - b_sum.pass_rate)
            if both and c_sum.pass_rate is not None and b_sum.pass_rate is not None else None,
            delta_pass_hat_k=(c_sum.pass_hat_k - b_sum.pass_hat_k)
            if both and c_sum.pass_hat_k is not None and b_sum.pass_hat_k is not None else None,
            regression=regression,
            improvement=both and b_sum.label != "stable_pass" and c_sum.label == "stable_pass",
            broken=both and b_sum.label == "stable_pass" and c_sum.label == "stable_fail",
            p_diagnostic=diag.get(cid),
        ))  # fmt: skip
    regressions = tuple(r.case_id for r in rows if r.regression)
    seen = {c: bs[c] for c in compared}
    if budget_baseline is not None:
        for cid in compared:
            pooled = summarize_case(budget_baseline.cases.get(cid, ()), k, cid)
            seen[cid] = pooled if pooled.n >= bs[cid].n else bs[cid]
    prior = beta_prior([s.passes for s in seen.values()], [s.n for s in seen.values()])
    risks = [flip_risk(seen[c].passes, seen[c].n, k, prior)
             for c in compared if bs[c].label == "stable_pass"]  # fmt: skip
    budget = regression_budget(
        risks, k, len(regressions), confidence=budget_confidence, floor=budget_floor
    )
    return Comparison(
        k=k, alpha=alpha, compared=tuple(compared), only_candidate=only_c,
        only_baseline=only_b, neither=neither, e1=e1, e2=e2, rows=tuple(rows),
        regressions=regressions,
        improvements=tuple(r.case_id for r in rows if r.improvement),
        broken=tuple(r.case_id for r in rows if r.broken),
        budget=budget,
    )  # fmt: skip
