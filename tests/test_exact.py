"""harness.gate.exact: the within-case tests against brute force, scipy and hand values."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from harness.gate.exact import (
    allocate_alpha,
    broken_count_test,
    case_min_p,
    case_p_less,
    case_scores,
    within_case_test,
)


def brute_force_p(c: list[int], n: list[int], b: list[int], m: list[int]) -> float:
    """Enumerate every table with the observed case totals (independent of the code)."""
    observed = sum(case_scores(c, n, b, m))
    supports = []
    for ci, ni, bi, mi in zip(c, n, b, m, strict=True):
        s = ci + bi
        supports.append(
            [
                (sps.hypergeom.pmf(x, ni + mi, s, ni), case_scores([x], [ni], [s - x], [mi])[0])
                for x in range(max(0, s - mi), min(ni, s) + 1)
            ]
        )
    return float(
        sum(
            math.prod(p for p, _ in combo)
            for combo in itertools.product(*supports)
            if sum(q for _, q in combo) >= observed
        )
    )


case = st.tuples(st.integers(1, 6), st.integers(1, 6)).flatmap(
    lambda nm: st.tuples(
        st.integers(0, nm[0]), st.just(nm[0]), st.integers(0, nm[1]), st.just(nm[1])
    )
)


@settings(max_examples=60, deadline=None)
@given(st.lists(case, min_size=1, max_size=4))
def test_within_case_p_matches_brute_force_enumeration(cases: list[tuple[int, ...]]) -> None:
    c, n, b, m = (list(x) for x in zip(*cases, strict=True))
    assert within_case_test(c, n, b, m).p_value == pytest.approx(
        brute_force_p(c, n, b, m), abs=1e-12
    )


def test_within_case_p_matches_scipy_permutation_test() -> None:
    # scipy's permutation_test permutes trial labels within each case ('samples' pairing
    # is not it; we shuffle arm labels per case by hand through its 'independent' mode
    # on one case, where the statistic is the candidate's pass count)
    cand, base = np.array([1, 0, 0, 0, 0]), np.array([1, 1, 1, 1, 0])
    res = sps.permutation_test(
        (cand, base),
        lambda x, y, axis: np.sum(x, axis=axis),
        permutation_type="independent",
        alternative="less",
        n_resamples=np.inf,
    )
    assert within_case_test([1], [5], [4], [5]).p_value == pytest.approx(res.pvalue)


def test_two_cases_slipping_once_give_a_quarter() -> None:
    # issue 11: PPPPP -> PPPPF twice: the exact p is 1/4 (each case: 1/2)
    t = within_case_test([4, 4], [5, 5], [5, 5], [5, 5])
    assert t.p_value == pytest.approx(0.25) and t.min_p == pytest.approx(0.25)


def test_uninformative_cases_do_not_move_the_test() -> None:
    t = within_case_test([5, 0, 0], [5, 5, 0], [5, 0, 2], [5, 5, 5])
    assert (t.p_value, t.informative, t.n_cases) == (1.0, 0, 3)


def test_two_sided_is_twice_the_smaller_tail() -> None:
    worse = within_case_test([0, 1], [5, 5], [5, 4], [5, 5])
    both = within_case_test([0, 1], [5, 5], [5, 4], [5, 5], alternative="two-sided")
    assert both.p_value == pytest.approx(2 * worse.p_value)
    mirror = within_case_test([5, 4], [5, 5], [0, 1], [5, 5], alternative="two-sided")
    assert mirror.p_value == pytest.approx(both.p_value)


def test_case_p_less_is_fishers_one_sided_test() -> None:
    for c, n, b, m in [(1, 5, 5, 5), (0, 5, 5, 5), (2, 5, 4, 5), (3, 7, 5, 6)]:
        ref = sps.fisher_exact([[c, n - c], [b, m - b]], alternative="less").pvalue
        assert case_p_less(c, n, b, m) == pytest.approx(ref)
    assert case_p_less(1, 5, 5, 5) == pytest.approx(5 / 210)  # by hand: C(5,1)/C(10,6)
    assert case_min_p(5, 5, 6) == pytest.approx(5 / 210)
    assert case_min_p(5, 5, 10) == 1.0


def test_broken_count_is_poisson_binomial_given_the_totals() -> None:
    # two cases 5/5 -> 0/5 (eligible, q = 1/252 each) and a third eligible 2/5 vs 3/5
    t = broken_count_test([0, 0, 2], [5, 5, 5], [5, 5, 3], [5, 5, 5])
    q = 1 / math.comb(10, 5)
    assert (t.observed, t.eligible) == (2, 3)
    assert t.p_value == pytest.approx(3 * q**2 * (1 - q) + q**3)
    assert broken_count_test([4], [5], [5], [5]).p_value == 1.0
    # the unconditional bound: each case breaks with probability <= 4^-k
    assert 1 / math.comb(10, 5) <= 1.0 and pytest.approx(1 / 1024) == 0.25**5


def test_allocate_alpha_gives_untestable_shares_away() -> None:
    shares = {
        s.name: s.share
        for s in allocate_alpha(
            0.05,
            [
                ("set", 0.5, [("within", 0.8, 1e-6), ("broken", 0.2, 1.0)]),
                ("critical", 0.5, [("a", 1.0, 5 / 210), ("b", 1.0, 1.0)]),
            ],
        )
    }
    assert shares == {
        "within": pytest.approx(0.025),
        "broken": 0.0,
        "a": pytest.approx(0.025),
        "b": 0.0,
    }
    nothing = allocate_alpha(0.05, [("set", 1.0, [("x", 1.0, 1.0)])])
    assert nothing[0].share == 0.0
    full = {
        s.name: s.share
        for s in allocate_alpha(0.05, [("set", 1.0, [("x", 1.0, 0.0)]), ("critical", 0.5, [])])
    }
    assert full == {"x": pytest.approx(0.05)}


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=3), st.floats(0.001, 0.5))
def test_within_case_test_is_exact_at_every_level(totals: list[int], level: float) -> None:
    # under the null, P(p <= level) <= level: summed over every table with these totals
    n = [5] * len(totals)
    supports = [range(max(0, s - 5), min(5, s) + 1) for s in totals]
    size = 0.0
    for cs in itertools.product(*supports):
        prob = math.prod(sps.hypergeom.pmf(c, 10, s, 5) for c, s in zip(cs, totals, strict=True))
        bs = [s - c for c, s in zip(cs, totals, strict=True)]
        if within_case_test(list(cs), n, bs, n).p_value <= level:
            size += prob
    assert size <= level + 1e-12
