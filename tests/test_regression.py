"""harness.gate.regression: the family rule on per-case counts."""

from __future__ import annotations

import numpy as np
import pytest

from harness.gate.regression import pass_hat_k_array, regression_rule
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
