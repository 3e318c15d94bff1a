"""harness.gate.regression: the family rule on per-case counts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.gate.regression import broken_ids, pass_hat_k_array, regression_rule
from harness.gate.stats import pass_hat_k

IDS = [f"c{i:02d}" for i in range(20)]


def rule(c: list[int], b: list[int], k: int = 5, **kw: object):
    n = [k] * len(c)
    return regression_rule(IDS[: len(c)], c, n, b, n, k=k, **kw)  # type: ignore[arg-type]


def test_identical_counts_pass() -> None:
    res = rule([5] * 10 + [3] * 10, [5] * 10 + [3] * 10)
    assert res.outcome == "pass" and res.rejected_warn == () and res.mean_drop == 0.0


def test_concentrated_breakage_fails_through_the_broken_count() -> None:
    res = rule([0, 0] + [5] * 8 + [3] * 10, [5] * 10 + [3] * 10)
    assert res.outcome == "fail" and "broken" in res.rejected_fail
    assert res.broken_cases == ("c00", "c01") and res.material


def test_fail_needs_a_material_drop_else_it_warns() -> None:
    # 40 of 400 cases slip one trial: significant, mean drop 0.02 < 0.05, pass^k drop 0.1
    c, b = [4] * 40 + [5] * 360, [5] * 400
    ids = [f"c{i}" for i in range(400)]
    n = [5] * 400
    strict = regression_rule(ids, c, n, b, n, k=5, pass_hat_k_drop=0.5)
    assert strict.outcome == "warn" and not strict.material and strict.rejected_fail
    assert regression_rule(ids, c, n, b, n, k=5).outcome == "fail"


def test_critical_share_is_used_only_when_a_critical_case_can_reach_it() -> None:
    base = [5] * 20
    res = rule([1] + [5] * 19, base, critical=("c00", "c05"))
    shares = {s.name: s.share for s in res.fail_shares}
    assert shares["critical:c05"] == 0.0  # 5/5 vs 5/5 can never be significant
    assert shares["critical:c00"] == pytest.approx(0.025)
    assert res.failing_critical == ("c00",) and res.outcome == "fail"
    quiet = rule([5] * 20, base, critical=("c00", "c05"))
    assert {s.name: s.share for s in quiet.fail_shares}["within"] == 0.0  # nothing informative


def test_warn_level_is_looser_than_fail() -> None:
    res = rule([3, 4, 4] + [5] * 17, [5] * 20, alpha=0.001, warn_alpha=0.4)
    assert res.outcome == "warn" and res.rejected_warn and not res.rejected_fail


def test_pass_hat_k_array_matches_the_scalar_estimator() -> None:
    c = np.array([0, 3, 5, 6, 2])
    n = np.array([5, 5, 5, 7, 1])
    got = pass_hat_k_array(c, n, 5)
    for i in range(4):
        assert got[i] == pytest.approx(pass_hat_k(int(n[i]), int(c[i]), 5))
    assert np.isnan(got[4])


def test_a_rejected_test_passes_its_share_on_weighted_holm() -> None:
    # both critical cases 5/5 -> 1/5 (p = 5/210 each): at the first step each gets 1/4
    # of alpha; once the within-case test rejects, its share lets both through
    res = rule([1, 1] + [5] * 18, [5] * 20, critical=("c00", "c01"))
    assert res.critical_p == {"c00": pytest.approx(5 / 210), "c01": pytest.approx(5 / 210)}
    first = {s.name: s.share for s in res.fail_shares}
    assert max(first["critical:c00"], first["critical:c01"]) < 5 / 210 or (
        min(first["critical:c00"], first["critical:c01"]) == 0.0
    )
    assert res.failing_critical == ("c00", "c01")


# ------------------------------------------------- a pooled reference: the recent window


def test_a_case_all_pass_in_the_recent_window_makes_the_drop_material() -> None:
    """One of 40 cases goes 15/17 → 0/5; the others pass everything in both arms.

    Significant (that case's exact p ≈ 0.0008), mean drop 0.022 and pass^5 drop 0.012: not
    material on the whole reference, where the case is not all-pass. Its 5 most recent
    reference trials all passed: a fresh 5-trial re-run would have seen it break.
    """
    ids = [f"c{i:02d}" for i in range(40)]
    c, n = [0] + [5] * 39, [5] * 40
    b, m = [15] + [17] * 39, [17] * 40
    whole = regression_rule(ids, c, n, b, m, k=5)
    assert whole.rejected_fail and not whole.material and whole.outcome == "warn"
    recent = regression_rule(ids, c, n, b, m, k=5, recent=([5] * 40, [5] * 40))
    assert recent.material and recent.outcome == "fail"
    # the tests and the whole reference's broken cases are untouched by the window
    assert recent.broken_cases == whole.broken_cases == ()
    assert recent.within == whole.within and recent.broken == whole.broken
    not_all_pass = regression_rule(ids, c, n, b, m, k=5, recent=([4] + [5] * 39, [5] * 40))
    assert not not_all_pass.material and not_all_pass.outcome == "warn"


@st.composite
def _nested(
    draw: st.DrawFn,
) -> tuple[list[int], list[int], list[int], list[int], list[int], list[int]]:
    """Counts of a candidate, a reference and a window of the reference's trials in it."""
    size = draw(st.integers(1, 12))
    c, n, b, m, rb, rm = [], [], [], [], [], []
    for _ in range(size):
        ni, mi = draw(st.integers(0, 5)), draw(st.integers(0, 20))
        bi = draw(st.integers(0, mi))
        wi = draw(st.integers(min(1, mi), min(5, mi)))  # never empty while mi > 0
        # a window of wi of the reference's trials holds between these many passes
        lo, hi = max(0, wi - (mi - bi)), min(wi, bi)
        c.append(draw(st.integers(0, ni)))
        n.append(ni)
        b.append(bi)
        m.append(mi)
        rm.append(wi)
        rb.append(draw(st.integers(lo, hi)))
    return c, n, b, m, rb, rm


@settings(max_examples=200, deadline=None)
@given(_nested())
def test_the_recent_window_only_adds_materiality(
    x: tuple[list[int], list[int], list[int], list[int], list[int], list[int]],
) -> None:
    """A window inside the reference is all-pass wherever the reference is: the window can
    make a drop material, never take materiality away, and never changes a test."""
    c, n, b, m, rb, rm = x
    ids = [f"c{i:02d}" for i in range(len(c))]
    whole = regression_rule(ids, c, n, b, m, k=5)
    recent = regression_rule(ids, c, n, b, m, k=5, recent=(rb, rm))
    assert recent.material >= whole.material
    assert (recent.within, recent.broken, recent.rejected_fail, recent.rejected_warn) == (
        whole.within,
        whole.broken,
        whole.rejected_fail,
        whole.rejected_warn,
    )
    assert set(whole.broken_cases) <= set(broken_ids(ids, *map(np.array, (c, n, rb, rm))))
