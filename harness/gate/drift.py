"""The drift check: is the re-executed baseline still the stored one? (pure).

The same machinery as the regression rule (:mod:`harness.gate.exact`), two-sided, at the
policy's ``baseline.drift_alpha``; :func:`harness.gate.decide.rule_drift` turns it into reasons.
"""

from __future__ import annotations

from harness.frozen import Frozen as _Frozen
from harness.gate.compare import PairedTest, case_counts, fisher_less, holm, paired_test
from harness.gate.exact import BrokenCountTest, WithinCaseTest, allocate_alpha
from harness.gate.exact import broken_count_test as _broken
from harness.gate.exact import within_case_test as _within
from harness.gate.stats import ArmData, summarize_case

__all__ = ["DriftCheck", "drift_check"]

_EPS = 1e-12


class DriftCheck(_Frozen):
    """Re-executed baseline against the stored baseline, on the cases both have.

    The same machinery as the regression rule, two-sided, at family-wise ``alpha``: the
    exact within-case test and the broken-case count (either direction), the level split
    4:1 between them (a test that cannot reach its share gives it to the other). Drift is
    detected when the broken-case count rejects (more all-pass ↔ all-fail flips than chance
    allows), or when the within-case test rejects and the mean pass-rate difference is at
    least ``tolerance``. Per-case Fisher tests (Holm) are
    shown to point at cases; they do not decide.
    """

    alpha: float
    tolerance: float
    compared: tuple[str, ...]
    aggregate: PairedTest
    """Paired t over cases (information: the mean difference and its interval)."""
    aggregate_p_holm: float | None
    """The within-case test's p, scaled by its share so that it compares with ``alpha``."""
    within: WithinCaseTest | None = None
    broken_test: BrokenCountTest | None = None
    broken_p_adjusted: float | None = None
    """The broken-count p, scaled by its share so that it compares with ``alpha``."""
    case_p_holm: dict[str, float]
    """Per-case two-sided Fisher p, Holm-adjusted (diagnostic)."""
    drifted_cases: tuple[str, ...]
    """Cases whose Holm-adjusted p is below ``alpha`` (diagnostic)."""
    broken: tuple[str, ...]
    """Stored stable-pass, re-executed stable-fail."""
    detected: bool


def _adjusted(p: float, share: float, alpha: float) -> float:
    return 1.0 if share <= 0 else min(1.0, p * alpha / share)


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
        [rs[c].pass_rate or 0.0 for c in compared],
        [ss[c].pass_rate or 0.0 for c in compared],
        name="drift",
        metric="pass_rate",
        alternative="two-sided",
        ci_level=1 - alpha,
    )
    case_p: list[float] = []
    within = broken_test = None
    p_within = p_broken = None
    detected = False
    if compared:
        c, n, b, m = case_counts([rs[x] for x in compared], [ss[x] for x in compared])
        lower = fisher_less(c, n, b, m)
        upper = fisher_less(b, m, c, n)
        case_p = [float(min(1.0, 2 * min(lo, up))) for lo, up in zip(lower, upper, strict=True)]
        within = _within(c, n, b, m, alternative="two-sided")
        broken_test = _broken(c, n, b, m, alternative="two-sided")
        shares = {
            s.name: s.share
            for s in allocate_alpha(
                alpha,
                [
                    (
                        "drift",
                        1.0,
                        [("within", 0.8, within.min_p), ("broken", 0.2, broken_test.min_p)],
                    )
                ],
            )
        }
        p_within = _adjusted(within.p_value, shares["within"], alpha)
        p_broken = _adjusted(broken_test.p_value, shares["broken"], alpha)
        big = agg.mean_diff is not None and abs(agg.mean_diff) >= tolerance - _EPS
        flipped = p_broken <= alpha  # flips beyond chance, not one flip of a coin-flip case
        detected = (p_within <= alpha and (big or flipped)) or flipped
    per_case = dict(zip(compared, holm(case_p), strict=True))
    return DriftCheck(
        alpha=alpha,
        tolerance=tolerance,
        compared=tuple(compared),
        aggregate=agg,
        aggregate_p_holm=p_within,
        within=within,
        broken_test=broken_test,
        broken_p_adjusted=p_broken,
        case_p_holm=per_case,
        drifted_cases=tuple(c for c, p in per_case.items() if p < alpha),
        broken=tuple(
            c for c in compared if ss[c].label == "stable_pass" and rs[c].label == "stable_fail"
        ),
        detected=detected,
    )
