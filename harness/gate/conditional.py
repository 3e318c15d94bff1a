"""The FAIL level against a partly fixed reference (a baseline pool), pure and closed-form.

Every release gated against one baseline pool is compared with the *same* stored trials:
the pool's deviation from the truth is shared by all of them, so the false-FAIL rate a
team lives with is conditional on the pool (docs/gate.md, "Baseline pool"). In the normal
approximation of a difference of pass rates with ``n`` candidate trials and ``m = f + s``
reference trials per case, ``f`` of them fixed (the pool) and ``s`` fresh (live), the fixed
part carries the share

    rho = (f / m²) / (1/n + 1/m)

of the statistic's variance. Given the pool's standardised deviation ``Z`` (standard
normal over pools), a test at one-sided level ``a`` falsely fails with probability
``Φ̄((z_a − √rho · Z) / √(1 − rho))``. That rate is above ``2α`` exactly when
``Z > (z_a − √(1 − rho) · z_2α) / √rho``; asking that this happen for at most a share
``gamma`` of pools gives the level

    a = Φ̄(√rho · z_gamma + √(1 − rho) · z_2α),

capped at ``α`` (with no fixed part the plain level already meets it). :func:`fixed_share`
averages ``rho`` over the compared cases (the within-case statistic weighs cases alike);
:func:`pooled_alpha` turns it into the level; :func:`pool_level` is the level a policy sets
(``baseline.pool.conditional_share`` is ``gamma``). Nothing here is fitted to data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

from harness.gate.policy import Policy

__all__ = ["fixed_share", "pool_level", "pooled_alpha"]

_NORMAL = NormalDist()


def fixed_share(
    n: Sequence[int] | np.ndarray,
    fixed: Sequence[int] | np.ndarray,
    live: Sequence[int] | np.ndarray,
) -> float:
    """Return the mean over cases of the variance share carried by the fixed reference trials.

    Per case: ``n`` candidate trials, ``fixed`` stored (pooled) reference trials, ``live``
    fresh reference trials. Cases with no candidate or no reference trial are left out; no
    case left gives 0.
    """
    nn, ff, ll = (np.asarray(x, dtype=float) for x in (n, fixed, live))
    mm = ff + ll
    ok = (nn > 0) & (mm > 0)
    if not ok.any():
        return 0.0
    nn, ff, mm = nn[ok], ff[ok], mm[ok]
    return float(np.mean((ff / mm**2) / (1 / nn + 1 / mm)))


def pooled_alpha(alpha: float, share: float, rho: float) -> float:
    """Return the FAIL level that keeps at most ``share`` of pools above ``2 * alpha``.

    ``rho`` is :func:`fixed_share`; the level is at most ``alpha`` and falls as ``rho``
    grows or ``share`` shrinks.

    Raises:
        ValueError: ``alpha`` not in (0, 0.5), ``share`` not in (0, 1), ``rho`` not in [0, 1).
    """
    if not 0 < alpha < 0.5 or not 0 < share < 1 or not 0 <= rho < 1:
        raise ValueError(
            f"need 0 < alpha < 0.5, 0 < share < 1, 0 <= rho < 1: {alpha}, {share}, {rho}"
        )
    if rho == 0:
        return alpha
    z = math.sqrt(rho) * _NORMAL.inv_cdf(1 - share) + math.sqrt(1 - rho) * _NORMAL.inv_cdf(
        1 - 2 * alpha
    )
    return min(alpha, 1 - _NORMAL.cdf(z))


def pool_level(
    policy: Policy,
    n: Sequence[int] | np.ndarray,
    fixed: Sequence[int] | np.ndarray,
    live: Sequence[int] | np.ndarray,
) -> float:
    """Return the FAIL level of a comparison against a pool under ``policy``.

    ``policy.alpha`` unless ``baseline.pool.conditional_share`` is set; then
    :func:`pooled_alpha` of the cases' :func:`fixed_share`.
    """
    pp = policy.baseline.pool
    if pp is None or pp.conditional_share is None:
        return policy.alpha
    return pooled_alpha(policy.alpha, pp.conditional_share, fixed_share(n, fixed, live))
