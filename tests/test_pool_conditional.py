"""The FAIL level against a baseline pool (harness.gate.conditional) and its policy field."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from scipy import stats as sps

from harness.gate.conditional import fixed_share, pool_level, pooled_alpha
from harness.gate.decide import decide
from harness.gate.policy import Policy, load_policy, policy_data, policy_digest
from harness.gate.pool_rates import pooled_verdict, recent_window
from harness.gate.stats import ArmData
from harness.store.records import Outcome

ROOT = Path(__file__).resolve().parents[1]
P, F = Outcome.PASS, Outcome.FAIL

alphas = st.floats(0.005, 0.2)
shares = st.floats(0.005, 0.45)
rhos = st.floats(0.0, 0.6)


# ---------------------------------------------------------------------------- fixed share


def test_fixed_share_by_hand() -> None:
    # k = 5 against the promoted 5 alone: half of the noise is the fixed sample's.
    assert fixed_share([5], [5], [0]) == pytest.approx(0.5)
    # 15 pooled + 2 live against 5: (15 / 17²) / (1/5 + 1/17) = 0.2005 (docs/gate.md).
    assert fixed_share([5], [15], [2]) == pytest.approx((15 / 289) / (1 / 5 + 1 / 17))
    assert fixed_share([5, 5], [15, 5], [2, 0]) == pytest.approx((0.2005 + 0.5) / 2, abs=1e-4)
    # a fresh reference has no fixed part; cases without trials are left out
    assert fixed_share([5, 0, 5], [0, 9, 5], [5, 2, 0]) == pytest.approx(0.25)
    assert fixed_share([0], [0], [0]) == 0.0


@given(st.lists(st.tuples(st.integers(1, 20), st.integers(0, 60), st.integers(0, 10)), min_size=1))
def test_fixed_share_is_a_share_and_falls_with_live_trials(
    cases: list[tuple[int, int, int]],
) -> None:
    n, f, s = (np.array(x) for x in zip(*cases, strict=True))
    rho = fixed_share(n, f, s)
    # all fixed, the share is n / (n + m): below 1, and 1/2 for k against k stored trials
    assert 0.0 <= rho < 1
    assert rho <= float(np.max(n / (n + np.maximum(f + s, 1)))) + 1e-12
    assert fixed_share(n, f, s + 1) <= rho + 1e-12
    assert fixed_share(n, np.zeros_like(f), s) == 0.0


# ---------------------------------------------------------------------------- the level


def test_pooled_alpha_by_hand() -> None:
    # Φ̄(√0.2 · z_0.05 + √0.8 · z_0.10) = Φ̄(0.7357 + 1.1463) = Φ̄(1.882) = 0.0299
    assert pooled_alpha(0.05, 0.05, 0.2) == pytest.approx(0.0299, abs=5e-4)
    assert pooled_alpha(0.05, 0.05, 0.0) == 0.05
    # a small fixed share: the plain level already keeps the conditional spread in bounds
    assert pooled_alpha(0.05, 0.05, 0.01) == 0.05


@settings(max_examples=200)
@given(alphas, shares, rhos)
def test_the_pool_at_the_share_quantile_fails_exactly_2_alpha(
    alpha: float, share: float, rho: float
) -> None:
    """The defining property, checked with scipy's normal: a pool whose deviation is at the
    upper ``share`` quantile falsely fails 2α (or less, when the cap at α binds)."""
    level = pooled_alpha(alpha, share, rho)
    assert 0 < level <= alpha
    if rho == 0:
        return
    z_pool = sps.norm.isf(share)
    shifted = (sps.norm.isf(level) - math.sqrt(rho) * z_pool) / math.sqrt(1 - rho)
    conditional = sps.norm.sf(shifted)
    if level < alpha:
        assert conditional == pytest.approx(2 * alpha, rel=1e-6)
    else:
        assert conditional <= 2 * alpha * (1 + 1e-6)


@settings(max_examples=200)
@given(alphas, shares, shares, rhos, rhos)
def test_pooled_alpha_is_stricter_for_a_smaller_share_and_a_larger_fixed_part(
    alpha: float, s1: float, s2: float, r1: float, r2: float
) -> None:
    # z(rho) = √rho·z_share + √(1 − rho)·z_2α rises while rho < z_share² / (z_share² + z_2α²),
    # which is at least 1/2 (k candidate against k stored trials) when share ≤ 2α
    lo_s, hi_s = sorted((s1, s2))
    lo_r, hi_r = sorted((min(r1, 0.5), min(r2, 0.5)))
    assume(hi_s <= 2 * alpha)
    assert pooled_alpha(alpha, lo_s, lo_r) <= pooled_alpha(alpha, hi_s, lo_r) + 1e-15
    assert pooled_alpha(alpha, lo_s, hi_r) <= pooled_alpha(alpha, lo_s, lo_r) + 1e-15


@pytest.mark.parametrize("args", [(0.5, 0.05, 0.2), (0.05, 0.0, 0.2), (0.05, 0.05, 1.0)])
def test_pooled_alpha_refuses_values_out_of_range(args: tuple[float, float, float]) -> None:
    with pytest.raises(ValueError, match="need 0 < alpha"):
        pooled_alpha(*args)


# ---------------------------------------------------------------------------- the policy


def _pooled(**pool: object) -> Policy:
    return Policy.model_validate({"version": "1", "baseline": {"pool": {"live_trials": 2, **pool}}})


def test_a_pool_policy_without_the_share_keeps_the_digest_it_had() -> None:
    # recorded by the release before baseline.pool.conditional_share existed
    assert policy_digest(_pooled()) == (
        "sha256:88c1ef237869866be137fbe23a9f1e3d200cfb277662d0c0c5daa3c5cb5ca795"
    )
    assert "conditional_share" not in policy_data(_pooled())["baseline"]["pool"]
    assert policy_data(_pooled(conditional_share=0.05))["baseline"]["pool"][
        "conditional_share"
    ] == pytest.approx(0.05)
    assert policy_digest(_pooled(conditional_share=0.05)) != policy_digest(_pooled())
    assert "pool" not in policy_data(load_policy(ROOT / "policy.yaml").policy)["baseline"]


@pytest.mark.parametrize("bad", [0, 0.5, -0.1, "high"])
def test_a_bad_share_is_refused(bad: object) -> None:
    with pytest.raises(ValidationError, match="conditional_share"):
        _pooled(conditional_share=bad)


def test_pool_level_is_the_policy_alpha_unless_the_share_is_set() -> None:
    n, f, s = [5] * 4, [15] * 4, [2] * 4
    assert pool_level(_pooled(), n, f, s) == 0.05
    assert pool_level(Policy(version="1"), n, f, s) == 0.05
    assert pool_level(_pooled(conditional_share=0.05), n, f, s) == pytest.approx(
        pooled_alpha(0.05, 0.05, fixed_share(n, f, s))
    )


# ---------------------------------------------------------------------------- in the gate


def _arm(counts: list[int], sizes: list[int], k: int) -> ArmData:
    return ArmData(
        k=k,
        cases={
            f"case-{i:03d}": (P,) * c + (F,) * (n - c)
            for i, (c, n) in enumerate(zip(counts, sizes, strict=True))
        },
    )


def test_a_drop_significant_at_alpha_but_not_at_the_pooled_level_is_no_fail() -> None:
    """8 flaky cases, pool 5 + 2 live: the within-case p lies between the two levels."""
    plain, guarded = _pooled(), _pooled(conditional_share=0.05)
    pool, live, cand = [4] * 8, [2] * 8, [4, 4, 4, 4, 4, 3, 2, 2]
    args = (_arm(cand, [5] * 8, 5), _arm(live, [2] * 8, 2), _arm(pool, [5] * 8, 5))
    a = decide(plain, *args, baseline_pooled=True)
    b = decide(guarded, *args, baseline_pooled=True)
    p = a.rule.within.p_value if a.rule else 1.0
    level = pool_level(guarded, [5] * 8, [5] * 8, [2] * 8)
    # no case can break (none all-pass): the within-case test holds the whole level
    assert level < p <= 0.05
    assert a.verdict == "fail" and b.verdict == "warn"
    note = next(r for r in b.reasons if r.code == "baseline_pooled")
    assert note.data["fail_level"] == pytest.approx(level) and "FAIL level" in note.message


@settings(max_examples=40, deadline=None)
@given(
    st.integers(3, 8).flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(0, 12), min_size=n, max_size=n),
            st.lists(st.integers(0, 2), min_size=n, max_size=n),
            st.lists(st.integers(0, 5), min_size=n, max_size=n),
        )
    )
)
def test_pooled_verdict_with_the_share_is_the_gates_verdict(
    x: tuple[list[int], list[int], list[int]],
) -> None:
    pool, live, cand = x
    policy = _pooled(conditional_share=0.05)
    n = len(pool)
    # the 5 most recent reference trials: the 2 live ones and the pool's last 3 (its fails
    # come last in _arm)
    tail = np.array([max(0, 3 - (12 - c)) for c in pool])
    fast = pooled_verdict(
        policy,
        np.array(pool),
        np.full(n, 12),
        np.array(live),
        2,
        np.array(cand),
        5,
        recent=recent_window(tail, np.full(n, 12), np.array(live), 2, 5),
    )
    full = decide(
        policy,
        _arm(cand, [5] * n, 5),
        _arm(live, [2] * n, 2),
        _arm(pool, [12] * n, 5),
        baseline_pooled=True,
    )
    assert full.verdict == fast, [r.code for r in full.reasons]
