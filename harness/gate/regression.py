"""The regression rule on per-case counts: one family of exact tests (pure, fast).

:func:`regression_rule` is the statistical heart of the gate, shared by
:func:`harness.gate.decide`, ``harness policy check`` (:mod:`harness.gate.opchar`) and the
decision-quality bench, so that what is measured is what runs. Its input is, per case,
the candidate's passes ``c`` of ``n`` judged trials and the reference baseline's ``b`` of
``m``, and which cases are critical. The family, under one family-wise level:

* ``within`` — :func:`harness.gate.exact.within_case_test` (any drop, spread-out or not);
* ``broken`` — :func:`harness.gate.exact.broken_count_test` (all-pass → all-fail cases);
* ``critical:<id>`` — for each critical case, its one-sided Fisher exact test.

The level is split by :func:`harness.gate.exact.allocate_alpha`: the set-level tests share
``1 - critical_share`` of it (``within`` 4/5, ``broken`` 1/5), the critical cases share
the rest equally; a test that cannot reach significance given the case totals gives its
share to the others (so critical cases that passed every trial in both arms cost nothing),
and a test that rejects passes its share on to the tests left (weighted Holm step-down).

* **fail**: a set-level test rejects at ``alpha`` *and* the observed drop is material
  (mean pass-rate drop >= ``pass_rate_drop``, or mean pass^k drop >= ``pass_hat_k_drop``,
  or at least one case went all-pass → all-fail); or a critical case's test rejects at
  ``alpha``. Against a baseline pool (``recent`` given) the clause "a case went all-pass →
  all-fail" is judged on the reference's k most recent trials per case, the view a fresh
  k-trial re-run would have had (:func:`broken_ids`); the tests keep the whole reference.
* **warn**: any test of the family rejects at the looser ``warn_alpha`` (no magnitude
  condition), and it is not a fail.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from harness.frozen import Frozen as _Frozen
from harness.gate.exact import (
    AlphaShare,
    BrokenCountTest,
    WithinCaseTest,
    allocate_alpha,
    broken_count_test,
    case_min_p,
    case_p_less,
    within_case_test,
)

__all__ = ["RuleResult", "broken_ids", "pass_hat_k_array", "regression_rule"]

_EPS = 1e-12
WITHIN_WEIGHT = 0.8
"""Share of the set-level level for the within-case test (the broken count gets the rest)."""


class RuleResult(_Frozen):
    """What :func:`regression_rule` found, with every number it used."""

    outcome: Literal["pass", "warn", "fail"]
    within: WithinCaseTest
    broken: BrokenCountTest
    critical_p: dict[str, float]
    """Critical case id → its one-sided Fisher exact p."""
    fail_shares: tuple[AlphaShare, ...]
    """The family-wise ``alpha`` split over the tests (first step)."""
    warn_shares: tuple[AlphaShare, ...]
    """The family-wise ``warn_alpha`` split over the tests (first step)."""
    rejected_fail: tuple[str, ...]
    """Tests significant at ``alpha``: at their share, or at a larger one passed on by a
    test rejected before them (weighted Holm step-down)."""
    rejected_warn: tuple[str, ...]
    """Tests significant at their ``warn_alpha`` share."""
    mean_drop: float | None
    """Mean over cases of reference pass rate − candidate pass rate (positive = worse)."""
    mean_hat_drop: float | None
    """Mean over cases (with n, m >= k) of the drop in unbiased pass^k."""
    broken_cases: tuple[str, ...]
    """Reference all-pass, candidate all-fail."""
    material: bool
    """The observed drop meets the policy's magnitude, or a case broke (against a baseline
    pool: in the reference's k most recent trials, :func:`regression_rule`'s ``recent``)."""
    failing_critical: tuple[str, ...]
    """Critical cases whose drop is significant at ``alpha``."""


def pass_hat_k_array(c: np.ndarray, n: np.ndarray, k: int) -> np.ndarray:
    """Unbiased pass^k per case, ``C(c,k)/C(n,k)``; NaN where ``n < k`` (vectorised)."""
    from scipy.special import comb

    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.asarray(comb(c, k) / comb(n, k), dtype=float)
    out[n < k] = np.nan
    return out


def regression_rule(
    case_ids: Sequence[str],
    c: Sequence[int] | np.ndarray,
    n: Sequence[int] | np.ndarray,
    b: Sequence[int] | np.ndarray,
    m: Sequence[int] | np.ndarray,
    *,
    k: int,
    critical: Sequence[str] = (),
    alpha: float = 0.05,
    warn_alpha: float = 0.10,
    critical_share: float = 0.5,
    pass_rate_drop: float = 0.05,
    pass_hat_k_drop: float = 0.10,
    recent: tuple[Sequence[int] | np.ndarray, Sequence[int] | np.ndarray] | None = None,
) -> RuleResult:
    """Apply the regression rule to per-case counts (one entry per compared case).

    ``recent`` (a reference that is a baseline pool): per case, the passes and judged
    trials among the reference's k most recent trials. The magnitude clause "a case broke"
    is then judged on them, so it fires as often as against a fresh k-trial reference; a
    pool of many trials is almost never all-pass on a flaky case. None: on ``b`` of ``m``.
    """
    ca, na, ba, ma = (np.asarray(x, dtype=np.int64) for x in (c, n, b, m))
    within = within_case_test(ca, na, ba, ma)
    broken = broken_count_test(ca, na, ba, ma)
    index = {cid: i for i, cid in enumerate(case_ids)}
    crit = [cid for cid in sorted(set(critical)) if cid in index]
    crit_p: dict[str, float] = {}
    crit_min: dict[str, float] = {}
    for cid in crit:
        i = index[cid]
        ci, ni, bi, mi = int(ca[i]), int(na[i]), int(ba[i]), int(ma[i])
        crit_p[cid] = case_p_less(ci, ni, bi, mi)
        crit_min[cid] = case_min_p(ni, mi, ci + bi)

    pvals = {"within": within.p_value, "broken": broken.p_value}
    pvals |= {f"critical:{cid}": p for cid, p in crit_p.items()}

    family = functools.partial(
        _family,
        within_min=within.min_p,
        broken_min=broken.min_p,
        critical_min=crit_min,
        critical_share=critical_share,
    )
    fail_shares, rej_fail = _step_down(alpha, pvals, family)
    warn_shares, rej_warn = _step_down(warn_alpha, pvals, family)

    mean_drop, mean_hat, broke = _effect(case_ids, ca, na, ba, ma, k)
    if recent is None:
        material_broken = broke
    else:
        rb, rm = (np.asarray(x, dtype=np.int64) for x in recent)
        material_broken = broken_ids(case_ids, ca, na, rb, rm)
    material = (
        bool(material_broken)
        or (mean_drop is not None and mean_drop >= pass_rate_drop - _EPS)
        or (mean_hat is not None and mean_hat >= pass_hat_k_drop - _EPS)
    )
    failing_critical = tuple(
        sorted(name.split(":", 1)[1] for name in rej_fail if name.startswith("critical:"))
    )
    set_fail = any(name in ("within", "broken") for name in rej_fail) and material
    outcome: Literal["pass", "warn", "fail"] = (
        "fail" if set_fail or failing_critical else "warn" if rej_warn else "pass"
    )
    return RuleResult(
        outcome=outcome,
        within=within,
        broken=broken,
        critical_p=crit_p,
        fail_shares=fail_shares,
        warn_shares=warn_shares,
        rejected_fail=rej_fail,
        rejected_warn=rej_warn,
        mean_drop=mean_drop,
        mean_hat_drop=mean_hat,
        broken_cases=broke,
        material=material,
        failing_critical=failing_critical,
    )


def _family(
    level: float,
    done: set[str],
    *,
    within_min: float,
    broken_min: float,
    critical_min: dict[str, float],
    critical_share: float,
) -> tuple[AlphaShare, ...]:
    """Share ``level`` over the family; a test in ``done`` (rejected) passes its weight on."""

    def keep(name: str, weight: float) -> float:
        return 0.0 if name in done else weight

    return allocate_alpha(
        level,
        [
            (
                "set",
                1.0 - critical_share,
                [
                    ("within", keep("within", WITHIN_WEIGHT), within_min),
                    ("broken", keep("broken", 1.0 - WITHIN_WEIGHT), broken_min),
                ],
            ),
            (
                "critical",
                critical_share,
                [
                    (f"critical:{cid}", keep(f"critical:{cid}", 1.0), min_p)
                    for cid, min_p in critical_min.items()
                ],
            ),
        ],
    )


def _step_down(
    level: float,
    pvals: dict[str, float],
    family: Callable[[float, set[str]], tuple[AlphaShare, ...]],
) -> tuple[tuple[AlphaShare, ...], tuple[str, ...]]:
    """Return the first shares at ``level`` and the tests rejected, in rejection order."""
    # weighted Holm: a rejected test passes its share on to the others, until no
    # further test rejects (strong family-wise control at `level`)
    rejected: list[str] = []
    first: tuple[AlphaShare, ...] | None = None
    while True:
        shares = family(level, set(rejected))
        first = first or shares
        new = [s.name for s in shares if s.share > 0 and pvals[s.name] <= s.share]
        if not new:
            return first, tuple(rejected)
        rejected += new


def _effect(
    case_ids: Sequence[str], ca: np.ndarray, na: np.ndarray, ba: np.ndarray, ma: np.ndarray, k: int
) -> tuple[float | None, float | None, tuple[str, ...]]:
    """Return the mean pass-rate drop, the mean pass^k drop and the broken cases."""
    rate_drop = (ba / np.maximum(ma, 1) - ca / np.maximum(na, 1)) if ca.size else np.zeros(0)
    mean_drop = float(rate_drop.mean()) if ca.size else None
    hats = pass_hat_k_array(ba, ma, k) - pass_hat_k_array(ca, na, k)
    hats = hats[~np.isnan(hats)]
    mean_hat = float(hats.mean()) if hats.size else None
    return mean_drop, mean_hat, broken_ids(case_ids, ca, na, ba, ma)


def broken_ids(
    case_ids: Sequence[str], c: np.ndarray, n: np.ndarray, b: np.ndarray, m: np.ndarray
) -> tuple[str, ...]:
    """Cases all-pass in the reference (``b`` of ``m``) and all-fail in the candidate."""
    return tuple(case_ids[int(i)] for i in np.flatnonzero((n > 0) & (m > 0) & (b == m) & (c == 0)))
