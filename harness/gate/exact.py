"""Exact within-case tests of a drop, conditional on the cases (pure, deterministic).

The golden set is fixed: the question the gate asks is "did the candidate get worse on
*these* cases", not "would it on a new sample of cases". So every test here conditions on
the cases and on each case's total number of passes ``s_i = c_i + b_i`` (candidate passes
``c_i`` of ``n_i`` judged trials, reference passes ``b_i`` of ``m_i``). Under the null
hypothesis — within each case, every trial of either arm passes with the same unknown
probability ``p_i`` — ``c_i`` given ``s_i`` is hypergeometric, free of ``p_i``, and the
cases are independent. Each test below is exact under that null whatever the ``p_i``:

* :func:`within_case_test` — a stratified permutation (CMH-style) test. Its statistic sums
  a per-case score that weighs both kinds of drop: the count drop ``c_hi - c`` (spread-out
  drops add up, as in Cochran-Mantel-Haenszel) plus ``-ln P(C <= c)`` (one case going
  all-pass → all-fail scores ln 252 ≈ 5.5 at k = 5, so a few concentrated breaks are not
  drowned by the noise of flaky cases). Scores are rounded to 1/8 so that the null
  distribution of the sum is an exact convolution on an integer lattice (no Monte Carlo).
* :func:`broken_count_test` — the number of cases that went all-pass → all-fail. Given
  the totals, a case can do that only when ``s_i = m_i``, and then with probability
  ``1 / C(n_i + m_i, m_i)``; the count is Poisson-binomial. (Unconditionally each case
  does it with probability ``p^k (1-p)^k <= 4^-k``: the Bin(N, 4^-k) bound.)
* :func:`case_p_less` — the one-sided Fisher exact p of one case (critical cases).
* :func:`allocate_alpha` — splits a family-wise level over tests (weighted Bonferroni in
  groups) and gives the share of a test that *cannot* reach significance to the others
  (Tarone). Whether a test can reach significance depends only on the totals ``s_i``,
  the conditioning statistics, so the family-wise level holds exactly.

All functions take plain integer sequences or numpy arrays and are cached on the few
distinct ``(n, m, s)`` a golden set produces, so that a decision costs milliseconds.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Sequence
from typing import Literal

import numpy as np

from harness.frozen import Frozen as _Frozen

__all__ = [
    "SCORE_RESOLUTION",
    "AlphaShare",
    "BrokenCountTest",
    "WithinCaseTest",
    "allocate_alpha",
    "broken_count_test",
    "case_min_p",
    "case_p_less",
    "case_scores",
    "within_case_test",
]

SCORE_RESOLUTION = 8
"""Per-case scores are rounded to 1/8 (of a trial, of a nat) to make the sum a lattice."""

Alternative = Literal["less", "two-sided"]
IntArray = Sequence[int] | np.ndarray


def _arrays(c: IntArray, n: IntArray, b: IntArray, m: IntArray) -> tuple[np.ndarray, ...]:
    arrs = tuple(np.asarray(x, dtype=np.int64).reshape(-1) for x in (c, n, b, m))
    size = arrs[0].size
    if any(a.size != size for a in arrs):
        raise ValueError("c, n, b and m must have one entry per case")
    c_, n_, b_, m_ = arrs
    if (n_ < 0).any() or (m_ < 0).any() or (c_ < 0).any() or (b_ < 0).any():
        raise ValueError("counts must be >= 0")
    if (c_ > n_).any() or (b_ > m_).any():
        raise ValueError("passes cannot exceed judged trials")
    return arrs


# --------------------------------------------------------------------------- one case


@functools.lru_cache(maxsize=4096)
def _null(n: int, m: int, s: int) -> tuple[int, np.ndarray, np.ndarray]:
    """Support start, pmf and lower cdf of candidate passes given the case total ``s``."""
    lo, hi = max(0, s - m), min(n, s)
    from scipy import stats as sps  # imported on first use: the CLI starts without scipy

    cs = np.arange(lo, hi + 1)
    pmf = np.asarray(sps.hypergeom.pmf(cs, n + m, s, n), dtype=float)
    pmf /= pmf.sum()
    cdf = np.minimum(np.cumsum(pmf), 1.0)
    pmf.setflags(write=False)
    cdf.setflags(write=False)
    return lo, pmf, cdf


def case_p_less(c: int, n: int, b: int, m: int) -> float:
    """One-sided Fisher exact p that the candidate's pass share is below the reference's.

    ``P(C <= c)`` for C hypergeometric given the case's total passes; 1 when the case
    carries no information (no trial in an arm, or every trial passed or failed).
    """
    _arrays([c], [n], [b], [m])
    s = c + b
    if n == 0 or m == 0 or s in (0, n + m):
        return 1.0
    lo, _, cdf = _null(n, m, s)
    return float(cdf[c - lo])


def case_min_p(n: int, m: int, s: int) -> float:
    """Return the smallest p :func:`case_p_less` can reach with these trials and passes."""
    if n == 0 or m == 0 or s in (0, n + m):
        return 1.0
    return float(_null(n, m, s)[1][0])


@functools.lru_cache(maxsize=4096)
def _score_dist(n: int, m: int, s: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer lattice scores of each support point (descending in c) and the null pmf."""
    lo, pmf, cdf = _null(n, m, s)
    cs = np.arange(lo, lo + pmf.size)
    raw = (cs[-1] - cs) + -np.log(cdf)
    q = np.rint(raw * SCORE_RESOLUTION).astype(np.int64)
    q -= q.min()
    dist = np.zeros(int(q.max()) + 1)
    np.add.at(dist, q, pmf)
    q.setflags(write=False)
    dist.setflags(write=False)
    return q, dist


@functools.lru_cache(maxsize=256)
def _score_table(n: int, m: int) -> np.ndarray:
    """Lattice score of every (s, c) for cases with ``n`` and ``m`` judged trials."""
    table = np.zeros((n + m + 1, n + 1), dtype=np.int64)
    for s in range(1, n + m):
        q, _ = _score_dist(n, m, s)
        lo = max(0, s - m)
        table[s, lo : lo + q.size] = q
    table.setflags(write=False)
    return table


def case_scores(c: IntArray, n: IntArray, b: IntArray, m: IntArray) -> np.ndarray:
    """Per-case score of a drop (count drop + ``-ln P(C <= c)``), in lattice units.

    Cases without information (no trial in an arm, all passed, all failed) score 0.
    """
    c_, n_, b_, m_ = _arrays(c, n, b, m)
    out = np.zeros(c_.size, dtype=np.int64)
    s = c_ + b_
    info = (n_ > 0) & (m_ > 0) & (s > 0) & (s < n_ + m_)
    if not info.any():
        return out
    for ni, mi in set(zip(n_[info].tolist(), m_[info].tolist(), strict=True)):
        sel = info & (n_ == ni) & (m_ == mi)
        out[sel] = _score_table(ni, mi)[s[sel], c_[sel]]
    return out


@functools.lru_cache(maxsize=8192)
def _power(n: int, m: int, s: int, count: int) -> np.ndarray:
    """Null pmf of the summed lattice score of ``count`` cases sharing ``(n, m, s)``."""
    _, dist = _score_dist(n, m, s)
    if count == 1:
        return dist
    half = _power(n, m, s, count // 2)
    out = _conv(half, half)
    if count % 2:
        out = _conv(out, dist)
    out.setflags(write=False)
    return out


def _conv_all(parts: Sequence[np.ndarray]) -> np.ndarray:
    """Convolve many pmfs: directly when short, else one FFT product."""
    size = sum(p.size - 1 for p in parts) + 1
    if size <= 2048:
        total = np.ones(1)
        for part in parts:
            total = np.convolve(total, part)
        return total
    from scipy import fft as sp_fft

    nfft = sp_fft.next_fast_len(size, real=True)
    spectrum = np.ones(nfft // 2 + 1, dtype=complex)
    for part in parts:
        spectrum *= sp_fft.rfft(part, nfft)
    # round-off is ~1e-16 of the peak: far below any level the gate tests at
    return np.asarray(np.clip(sp_fft.irfft(spectrum, nfft)[:size], 0.0, None), dtype=float)


def _conv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.size * b.size < 4096:
        return np.convolve(a, b)
    from scipy.signal import fftconvolve

    # FFT round-off is ~1e-16 of the peak: far below any level we test at
    return np.asarray(np.clip(fftconvolve(a, b), 0.0, None), dtype=float)


# --------------------------------------------------------------------------- the sum


class WithinCaseTest(_Frozen):
    """The stratified (within-case) exact test of a drop, candidate against reference."""

    alternative: Alternative
    """``less``: H1 is that the candidate is worse; ``two-sided``: either way (drift)."""
    n_cases: int
    """Cases in the test."""
    informative: int
    """Cases whose outcome could move the statistic (mixed outcomes over both arms)."""
    statistic: float
    """Sum of the per-case scores in the worse direction (1/8 units, shown / 8)."""
    p_value: float
    """Exact conditional p; two-sided: twice the smaller one-sided p (capped at 1)."""
    min_p: float
    """The smallest p this test could have produced given the case totals."""
    mean_drop: float | None
    """Mean over cases of the reference pass rate minus the candidate's (positive = worse)."""


def _one_sided(
    c: np.ndarray, n: np.ndarray, b: np.ndarray, m: np.ndarray
) -> tuple[float, float, float, int]:
    s = c + b
    keep = (n > 0) & (m > 0) & (s > 0) & (s < n + m)
    observed = int(case_scores(c[keep], n[keep], b[keep], m[keep]).sum())
    groups = Counter(zip(n[keep].tolist(), m[keep].tolist(), s[keep].tolist(), strict=True))
    parts = [_power(ni, mi, si, cnt) for (ni, mi, si), cnt in sorted(groups.items())]
    total = _conv_all(parts)
    min_p = 1.0
    for (ni, mi, si), cnt in groups.items():
        min_p *= case_min_p(ni, mi, si) ** cnt
    p = float(min(1.0, total[observed:].sum())) if observed < total.size else 0.0
    return p, observed / SCORE_RESOLUTION, min_p, int(keep.sum())


def within_case_test(
    c: IntArray, n: IntArray, b: IntArray, m: IntArray, *, alternative: Alternative = "less"
) -> WithinCaseTest:
    """Exact stratified permutation test of candidate (c of n) against reference (b of m).

    One entry per case. ``less`` tests for a drop; ``two-sided`` doubles the smaller of
    the two one-sided p-values (the drift check).
    """
    c_, n_, b_, m_ = _arrays(c, n, b, m)
    both = (n_ > 0) & (m_ > 0)
    drop = (b_[both] / m_[both] - c_[both] / n_[both]) if both.any() else np.zeros(0)
    p, stat, min_p, informative = _one_sided(c_, n_, b_, m_)
    if alternative == "two-sided":
        p_up, stat_up, min_up, _ = _one_sided(b_, m_, c_, n_)
        if p_up < p:
            stat = stat_up
        p = min(1.0, 2 * min(p, p_up))
        min_p = min(1.0, 2 * min(min_p, min_up))
    return WithinCaseTest(
        alternative=alternative,
        n_cases=int(c_.size),
        informative=informative,
        statistic=stat,
        p_value=p,
        min_p=min_p,
        mean_drop=float(drop.mean()) if drop.size else None,
    )


# --------------------------------------------------------------------------- broken count


class BrokenCountTest(_Frozen):
    """All-pass → all-fail cases against how many the case totals allow by chance."""

    alternative: Alternative
    observed: int
    """Cases all-pass in the reference and all-fail in the candidate (two-sided: the
    larger of that count and the reverse one)."""
    eligible: int
    """Cases whose totals make such a flip possible at all (``s_i = m_i``)."""
    expected: float
    """Flips expected by chance given the totals."""
    p_value: float
    min_p: float


def _poisson_binomial_sf(q: np.ndarray, observed: int) -> float:
    pmf = np.zeros(q.size + 1)
    pmf[0] = 1.0
    for i, qi in enumerate(q):
        pmf[1 : i + 2] = pmf[1 : i + 2] * (1 - qi) + pmf[0 : i + 1] * qi
        pmf[0] *= 1 - qi
    return float(min(1.0, pmf[observed:].sum())) if observed <= q.size else 0.0


def _broken_one_sided(
    c: np.ndarray, n: np.ndarray, b: np.ndarray, m: np.ndarray
) -> tuple[int, int, float, float, float]:
    ok = (n > 0) & (m > 0) & (c + b == m)
    q = np.array(
        [1.0 / math.comb(int(ni + mi), int(mi)) for ni, mi in zip(n[ok], m[ok], strict=True)]
    )
    observed = int(((n > 0) & (m > 0) & (b == m) & (c == 0)).sum())
    p = _poisson_binomial_sf(q, observed) if observed else 1.0
    min_p = float(np.prod(q)) if q.size else 1.0
    return observed, int(ok.sum()), float(q.sum()), p, min_p


def broken_count_test(
    c: IntArray, n: IntArray, b: IntArray, m: IntArray, *, alternative: Alternative = "less"
) -> BrokenCountTest:
    """Exact test of the number of all-pass → all-fail cases, given each case's total."""
    c_, n_, b_, m_ = _arrays(c, n, b, m)
    obs, elig, exp, p, min_p = _broken_one_sided(c_, n_, b_, m_)
    if alternative == "two-sided":
        obs2, elig2, exp2, p2, min2 = _broken_one_sided(b_, m_, c_, n_)
        if p2 < p:
            obs, elig, exp = obs2, elig2, exp2
        p = min(1.0, 2 * min(p, p2))
        min_p = min(1.0, 2 * min(min_p, min2))
    return BrokenCountTest(
        alternative=alternative, observed=obs, eligible=elig, expected=exp, p_value=p, min_p=min_p
    )


# --------------------------------------------------------------------------- the family


class AlphaShare(_Frozen):
    """One test's share of a family-wise level."""

    name: str
    group: str
    share: float
    """0 when the test cannot reach significance (its share went to the others)."""
    min_p: float


def allocate_alpha(
    level: float, groups: Sequence[tuple[str, float, Sequence[tuple[str, float, float]]]]
) -> tuple[AlphaShare, ...]:
    """Split ``level`` over tests: ``groups`` = (group, weight, [(test, weight, min_p)]).

    A test's share is ``level * group weight / active group weights * test weight /
    active test weights in its group``. A test whose smallest achievable p is above its
    share can never reject: it is dropped and the shares are recomputed (Tarone's
    refinement of Bonferroni); a group without tests left gives its weight to the others.
    The shares of the tests left sum to ``level``, so the family-wise error is at most
    ``level`` (the achievable p depends only on the conditioning totals).
    """
    active = {(g, t) for g, gw, tests in groups if gw > 0 for t, w, _ in tests if w > 0}
    info = {(g, t): (gw, w, mp) for g, gw, tests in groups for t, w, mp in tests}
    shares: dict[tuple[str, str], float] = {}
    while active:
        gws = {g: info[(g, t)][0] for g, t in active}
        gsum = sum(gws.values())
        shares = {}
        for g, t in active:
            tsum = sum(info[(g2, t2)][1] for g2, t2 in active if g2 == g)
            shares[(g, t)] = level * gws[g] / gsum * info[(g, t)][1] / tsum
        # drop the least testable test first, one at a time, so that the others' shares
        # grow before they are judged
        ratio = {key: info[key][2] / shares[key] for key in active}
        worst = max(sorted(active), key=lambda key: ratio[key])
        if ratio[worst] <= 1 + 1e-12:
            break
        active.discard(worst)
        if not active:
            shares = {}
            break
    return tuple(
        AlphaShare(name=t, group=g, share=shares.get((g, t), 0.0), min_p=mp)
        for g, _, tests in groups
        for t, _, mp in tests
    )
