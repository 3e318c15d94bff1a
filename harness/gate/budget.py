"""Pure statistics of the regression budget: how many cases may flip by noise alone.

The cases all-pass in the baseline can flip to not-all-pass in the candidate by noise
alone. Each case's flip risk (:func:`flip_risk`) is shrunk towards the set's own
empirical-Bayes Beta prior (:func:`beta_prior`), so that a case seen all-pass still
carries risk; the number of flips is then Poisson-binomial
(:func:`poisson_binomial_pmf`), and :func:`regression_budget` is its quantile. Data in,
frozen results out, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harness.frozen import Frozen as _Frozen
from harness.gate.stats import check_counts

__all__ = [
    "JEFFREYS",
    "RegressionBudget",
    "beta_prior",
    "flip_risk",
    "poisson_binomial_pmf",
    "regression_budget",
]


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
    check_counts(trials, passes, k)
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
        k=k,
        confidence=confidence,
        floor=floor,
        expected=float(sum(q)),
        budget=budget,
        observed=observed,
        tail_p=tail,
        over=observed > budget,
        at_risk=len(q),
    )
