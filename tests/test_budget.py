"""harness.gate.budget: Poisson-binomial, flip risk and regression budget against independent
values."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from harness.gate.budget import flip_risk, poisson_binomial_pmf, regression_budget


@settings(max_examples=60)
@given(st.lists(st.floats(0, 1), max_size=9))
def test_poisson_binomial_matches_brute_force(q: list[float]) -> None:
    brute = [0.0] * (len(q) + 1)
    for bits in itertools.product((0, 1), repeat=len(q)):
        prob = 1.0
        for b, qi in zip(bits, q, strict=True):
            prob *= qi if b else 1 - qi
        brute[sum(bits)] += prob
    assert poisson_binomial_pmf(q) == pytest.approx(brute, abs=1e-12)


# scipy's binom.pmf (the oracle) overflows for q at the bottom of the normal range
# (~2.2e-308), so the oracle is asked only about q = 0 or q >= 1e-300.
@given(st.integers(0, 40), st.one_of(st.just(0.0), st.floats(1e-300, 1)))
def test_poisson_binomial_equal_probabilities_is_binomial(n: int, q: float) -> None:
    pmf = poisson_binomial_pmf([q] * n)
    assert pmf == pytest.approx(sps.binom.pmf(range(n + 1), n, q).tolist(), abs=1e-10)
    assert sum(pmf) == pytest.approx(1.0)


def test_regression_budget_hand_values() -> None:
    # risk 0.25 per all-pass case, 12 cases -> Binomial(12, 0.25)
    b = regression_budget([0.25] * 12, 5, observed=6, confidence=0.95)
    assert b.expected == pytest.approx(3.0) and b.at_risk == 12
    assert b.budget == int(sps.binom.ppf(0.95, 12, 0.25)) == 6
    assert not b.over
    assert b.tail_p == pytest.approx(sps.binom.sf(5, 12, 0.25))
    assert regression_budget([0.25] * 12, 5, observed=7).over
    assert regression_budget([], 5, observed=1).over
    assert regression_budget([0.0], 5, observed=1, floor=2).over is False


def test_flip_risk_is_the_jeffreys_posterior_moment() -> None:
    # 1 - E[p^k], p ~ Beta(passes + 1/2, fails + 1/2): checked by numeric integration
    for passes, trials, k in [(5, 5, 5), (10, 10, 5), (3, 5, 5), (0, 5, 3), (7, 9, 10)]:
        post = sps.beta(passes + 0.5, trials - passes + 0.5)
        expected = 1 - post.expect(lambda p, k=k: p**k)
        assert flip_risk(passes, trials, k) == pytest.approx(expected, rel=1e-9)
    # issue 11: a case seen all-pass still carries risk (the plug-in rate 1.0 said 0)
    assert flip_risk(5, 5, 5) == pytest.approx(0.284, abs=1e-3)
