"""Conditional error of a baseline pool (pure: counts in, frozen rates out, seeded).

Every release gated against the same pool is judged against the same stored trials, so the
false-FAIL rate a team lives with is *conditional* on the pool. :func:`pooled_verdict` is
the gate's verdict on counts (``decide(..., baseline_pooled=True)``: drift of the live
trials against the pool, then the candidate against the pool plus the live trials, the
broken-case clause of the magnitude rule on the k most recent of them, :func:`recent_window`);
:func:`pool_spread` simulates many pools of one composition and returns the distribution
of their conditional false-FAIL rates; :func:`posterior_rates` averages one pool's rates
over its posterior. No I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from harness.frozen import Frozen as _Frozen
from harness.gate.budget import beta_prior, flip_risk, poisson_binomial_pmf
from harness.gate.conditional import pool_level
from harness.gate.exact import allocate_alpha, broken_count_test, within_case_test
from harness.gate.opchar import Rate, wilson
from harness.gate.policy import Policy
from harness.gate.rules import policy_rule

__all__ = [
    "PoolRates",
    "PoolSpread",
    "live_drifted",
    "pool_spread",
    "pooled_verdict",
    "posterior_rates",
    "recent_window",
]

_EPS = 1e-12


def live_drifted(
    policy: Policy, c: np.ndarray, nc: np.ndarray, b: np.ndarray, nb: np.ndarray
) -> bool:
    """Return whether the drift family of :func:`harness.gate.drift.drift_check` fires (counts)."""
    bp = policy.baseline
    both = (nc > 0) & (nb > 0)
    if not both.any():
        return False
    within = within_case_test(c, nc, b, nb, alternative="two-sided")
    broken = broken_count_test(c, nc, b, nb, alternative="two-sided")
    shares = {
        s.name: s.share
        for s in allocate_alpha(
            bp.drift_alpha,
            [("drift", 1.0, [("within", 0.8, within.min_p), ("broken", 0.2, broken.min_p)])],
        )
    }
    mean = float((c[both] / nc[both] - b[both] / nb[both]).mean())
    big = abs(mean) >= bp.drift_tolerance - _EPS
    flipped = shares["broken"] > 0 and broken.p_value <= shares["broken"]
    return (shares["within"] > 0 and within.p_value <= shares["within"] and big) or flipped


def recent_window(
    tail: np.ndarray, pool_n: np.ndarray, live: np.ndarray, s: int, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Return the reference's ``k`` most recent trials per case on counts (passes, trials).

    The live trials come last in the reference, so with ``s <= k`` live trials per case the
    window is all of them (``live`` passes) plus the pool's ``min(k - s, pool_n)`` most
    recent trials, of which ``tail`` passed.

    Raises:
        ValueError: ``s > k`` (which live trials are the last ``k`` is not in the counts).
    """
    if s > k:
        raise ValueError(f"{s} live trials per case > k = {k}: the window is not in the counts")
    return live + tail, s + np.minimum(k - s, pool_n)


def _draw_tail(
    rng: np.random.Generator, pool: np.ndarray, pool_n: np.ndarray, size: np.ndarray
) -> np.ndarray:
    """Draw the passes among ``size`` of a pool's trials in a random order (exchangeable)."""
    return np.asarray(rng.hypergeometric(pool, pool_n - pool, np.minimum(size, pool_n)))


def _window(
    rng: np.random.Generator,
    tail: np.ndarray,
    pool_n: np.ndarray,
    live: np.ndarray,
    s: int,
    k: int,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`recent_window`; with more live trials than ``k``, ``k`` of them drawn at random."""
    if s <= k:
        return recent_window(tail, pool_n, live, s, k)
    size = np.full(live.size, k)
    return np.asarray(rng.hypergeometric(live, s - live, size)), size


def pooled_verdict(
    policy: Policy,
    pool: np.ndarray,
    pool_n: np.ndarray,
    live: np.ndarray,
    s: int,
    cand: np.ndarray,
    k: int,
    critical: Sequence[str] = (),
    *,
    recent: tuple[np.ndarray, np.ndarray],
) -> str:
    """Return the gate's verdict against a pool, on per-case counts.

    ``pool`` passes of ``pool_n`` trials per case, ``live`` passes of ``s`` live baseline
    trials, ``cand`` passes of ``k`` candidate trials (case ids ``case-000`` …); ``recent``
    the passes and trials among the k most recent trials of the pool plus the live trials
    (:func:`recent_window`). The same rules in the same order as
    :func:`harness.gate.decide` with ``baseline_pooled=True``: drift → ``blocked``; the
    regression family (FAIL at :func:`harness.gate.conditional.pool_level`, the broken-case
    clause of the magnitude rule on ``recent``) → ``fail`` / ``warn``; no candidate pass →
    ``fail``; the regression budget and non-inferiority → ``warn``.
    """
    n_cases = cand.size
    if s > 0 and live_drifted(policy, live, np.full(n_cases, s), pool, pool_n):
        return "blocked"
    ref, ref_n = pool + live, pool_n + s
    ids = [f"case-{i:03d}" for i in range(n_cases)]
    level = pool_level(policy, np.full(n_cases, k), pool_n, np.full(n_cases, s))
    res = policy_rule(
        policy,
        ids,
        cand,
        np.full(n_cases, k),
        ref,
        ref_n,
        k=k,
        critical=critical,
        alpha=level,
        recent=recent,
    )
    if res.outcome == "fail" or cand.sum() == 0:
        return "fail"
    if res.outcome == "warn":
        return "warn"
    at_risk = ref == ref_n
    prior = beta_prior(ref, ref_n)
    risks = [
        flip_risk(int(x), int(m), k, prior)
        for x, m in zip(ref[at_risk], ref_n[at_risk], strict=True)
    ]
    flips = int((at_risk & (cand < k)).sum())
    cdf = np.cumsum(poisson_binomial_pmf(risks))
    rb = policy.regression_budget
    if flips > max(rb.floor, int(np.searchsorted(cdf, rb.confidence - _EPS))):
        return "warn"
    th = policy.thresholds
    d = cand / k - ref / ref_n
    if d.size >= 2 and th.non_inferiority != "info":
        from scipy import stats as sps

        half = float(sps.t.ppf(1 - policy.alpha, d.size - 1)) * float(d.std(ddof=1))
        half /= math.sqrt(d.size)
        if float(d.mean()) - half <= -th.non_inferiority_margin + _EPS and (
            th.non_inferiority == "warn" or half < th.non_inferiority_margin / 2
        ):
            return "warn"
    return "pass"


class PoolSpread(_Frozen):
    """Conditional false-FAIL rates of unchanged releases over many pools of one size."""

    pools: int
    releases: int
    """Unchanged releases judged against each pool."""
    mean: float
    median: float
    p90: float
    """90th percentile over pools of the per-pool false-FAIL rate."""
    share_above: float
    """Share of pools whose false-FAIL rate is above ``2 * alpha``."""
    alpha: float


class PoolRates(_Frozen):
    """One pool's rates for unchanged releases, averaged over its posterior."""

    reps: int
    fail: Rate
    warn: Rate
    blocked: Rate


def _rate(x: int, n: int) -> Rate:
    lo, hi = wilson(x, n)
    return Rate(rate=x / n, low=lo, high=hi, reps=n)


def _truth(rng: np.random.Generator, passes: np.ndarray, trials: np.ndarray) -> np.ndarray:
    """Pass probabilities drawn from each case's Jeffreys posterior Beta(c + ½, n − c + ½)."""
    return rng.beta(passes + 0.5, trials - passes + 0.5)


def pool_spread(
    policy: Policy,
    passes: Sequence[int],
    trials: Sequence[int],
    *,
    k: int,
    live: int,
    size: Sequence[int] | None = None,
    pools: int = 40,
    releases: int = 50,
    seed: int = 0,
) -> PoolSpread:
    """Simulate pools of ``size`` trials per case and their conditional false-FAIL rates.

    The cases' true pass probabilities come from the posterior of ``passes`` of ``trials``
    (drawn once); each simulated pool draws ``size`` (default ``trials``) trials per case
    (in a random order: which are its most recent is drawn once per pool), then
    ``releases`` unchanged releases (``k`` candidate and ``live`` baseline trials per case)
    are judged against it.
    """
    c, m = np.asarray(passes, dtype=int), np.asarray(trials, dtype=int)
    n = np.asarray(size if size is not None else trials, dtype=int)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 22, int(n.sum())])))
    p = _truth(rng, c, m)
    rates = np.zeros(pools)
    for i in range(pools):
        pool = rng.binomial(n, p)
        tail = _draw_tail(rng, pool, n, np.full(n.size, max(k - live, 0)))
        fails = 0
        for _ in range(releases):
            s_pass = rng.binomial(live, p)
            window = _window(rng, tail, n, s_pass, live, k)
            verdict = pooled_verdict(
                policy, pool, n, s_pass, live, rng.binomial(k, p), k, recent=window
            )
            fails += verdict == "fail"
        rates[i] = fails / releases
    return PoolSpread(
        pools=pools,
        releases=releases,
        mean=float(rates.mean()),
        median=float(np.median(rates)),
        p90=float(np.quantile(rates, 0.9)),
        share_above=float((rates > 2 * policy.alpha + _EPS).mean()),
        alpha=policy.alpha,
    )


def posterior_rates(
    policy: Policy,
    passes: Sequence[int],
    trials: Sequence[int],
    *,
    k: int,
    live: int,
    reps: int = 500,
    seed: int = 0,
    recent: Sequence[int] | None = None,
) -> PoolRates:
    """Return a pool's FAIL / WARN / BLOCKED rates for unchanged releases.

    The pool is fixed; each replicate draws the truth from the pool's posterior, then the
    live and candidate trials. It cannot tell a lucky pool from a fair one (the posterior is
    centred on the pool): read it beside :func:`pool_spread`. ``recent``: per case, the
    passes among the pool's ``min(k - live, trials)`` most recent trials
    (:func:`harness.gate.stats.recent_counts`); None draws them once from the pool's counts
    (seeded), as if its order were random.
    """
    c, n = np.asarray(passes, dtype=int), np.asarray(trials, dtype=int)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 23, int(n.sum())])))
    tail = (
        _draw_tail(rng, c, n, np.full(n.size, max(k - live, 0)))
        if recent is None
        else np.asarray(recent, dtype=int)
    )
    tally = {"fail": 0, "warn": 0, "blocked": 0, "pass": 0}
    for _ in range(reps):
        p = _truth(rng, c, n)
        s_pass = rng.binomial(live, p)
        window = _window(rng, tail, n, s_pass, live, k)
        cand = rng.binomial(k, p)
        tally[pooled_verdict(policy, c, n, s_pass, live, cand, k, recent=window)] += 1
    return PoolRates(
        reps=reps,
        fail=_rate(tally["fail"], reps),
        warn=_rate(tally["warn"], reps),
        blocked=_rate(tally["blocked"], reps),
    )
