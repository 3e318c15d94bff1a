"""harness.gate.compare: McNemar, Holm, paired t and compare_arms against independent values."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as sps
from test_stats import outs

from harness.gate.compare import case_counts, compare_arms, holm, mcnemar_exact, paired_test
from harness.gate.stats import ArmData, pass_hat_k, summarize_case


def test_case_counts_pairs_judged_counts_by_position() -> None:
    a = [summarize_case(outs("PPFI"), 2), summarize_case(outs("E"), 2)]
    b = [summarize_case(outs("FFI"), 2), summarize_case(outs("PPEP"), 2)]
    got = case_counts(a, b)
    assert [x.tolist() for x in got] == [[2, 0], [3, 0], [0, 3], [2, 3]]
    assert all(x.dtype == np.int64 for x in got)


# ------------------------------------------------------------------ McNemar, Holm, paired t


@pytest.mark.parametrize(
    ("b", "c", "alternative", "p"),
    [
        (9, 1, "two-sided", 0.021484375),
        (9, 1, "greater", 0.0107421875),
        (5, 0, "greater", 0.03125),
        (0, 0, "greater", 1.0),
        (1, 9, "greater", 1023 / 1024),
    ],
)
def test_mcnemar_exact_published_values(b: int, c: int, alternative: str, p: float) -> None:
    assert mcnemar_exact(b, c, alternative) == pytest.approx(p, rel=1e-12)  # type: ignore[arg-type]


@given(st.integers(0, 40), st.integers(0, 40))
def test_mcnemar_one_sided_is_binomial_tail(b: int, c: int) -> None:
    m = b + c
    expected = (
        1.0 if m == 0 else float(sum(Fraction(math.comb(m, j), 2**m) for j in range(b, m + 1)))
    )
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9)


def test_holm_hand_example() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx((0.03, 0.06, 0.06))
    assert holm([0.02, None]) == (0.04, 1.0)
    assert holm([0.5, 0.4]) == (0.8, 0.8)


@given(st.lists(st.floats(0, 1), min_size=1, max_size=8))
def test_holm_properties(ps: list[float]) -> None:
    adj = holm(ps)
    assert all(a >= p - 1e-15 and a <= 1.0 for a, p in zip(adj, ps, strict=True))
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    assert all(adj[order[i]] <= adj[order[i + 1]] for i in range(len(ps) - 1))
    assert min(adj) == pytest.approx(min(1.0, len(ps) * min(ps)))


def test_paired_t_matches_scipy() -> None:
    cand = [0.8, 0.4, 1.0, 0.6, 0.2, 1.0, 0.0]
    base = [1.0, 0.6, 1.0, 0.8, 0.6, 0.8, 0.2]
    res = paired_test(cand, base, ci_level=0.90)
    ref = sps.ttest_1samp(np.subtract(cand, base), 0.0, alternative="less")
    assert res.p_value == pytest.approx(ref.pvalue, rel=1e-10)
    assert res.t_stat == pytest.approx(ref.statistic, rel=1e-10)
    d = np.subtract(cand, base)
    lo, hi = sps.t.interval(0.90, len(d) - 1, loc=d.mean(), scale=sps.sem(d))
    assert (res.ci_low, res.ci_high) == (pytest.approx(lo), pytest.approx(hi))
    assert res.se == pytest.approx(d.std(ddof=1) / math.sqrt(len(d)))
    two = paired_test(cand, base, alternative="two-sided")
    assert two.p_value == pytest.approx(sps.ttest_rel(cand, base).pvalue, rel=1e-10)


def test_paired_t_degenerate_and_tiny_samples() -> None:
    same = paired_test([1.0, 0.5, 0.0], [1.0, 0.5, 0.0])
    assert (same.mean_diff, same.p_value, same.t_stat) == (0.0, 1.0, None)
    # issue 11: a constant drop (PPPPP -> PPPPF on two cases) is degenerate for t; the
    # exact sign-flip p is 1/4, never 0
    shifted = paired_test([0.8, 0.8], [1.0, 1.0])
    assert shifted.p_value == 0.25
    assert paired_test([0.8, 0.8], [1.0, 1.0], alternative="two-sided").p_value == 0.5
    assert paired_test([1.0, 1.0], [0.8, 0.8]).p_value == 1.0
    one = paired_test([0.0], [1.0])
    assert (one.method, one.p_value, one.ci_low, one.mean_diff) == ("none", None, None, -1.0)


def test_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    rng = np.random.default_rng(7)
    cand = rng.random(40).tolist()
    base = rng.random(40).tolist()
    a = paired_test(cand, base, bootstrap_resamples=3000, seed=11)
    b = paired_test(cand, base, bootstrap_resamples=3000, seed=11)
    c = paired_test(cand, base, bootstrap_resamples=3000, seed=12)
    assert a == b and a.bootstrap_ci_low != c.bootstrap_ci_low
    assert a.bootstrap_ci_low is not None and a.bootstrap_ci_high is not None
    assert a.bootstrap_ci_low < (a.mean_diff or 0) < a.bootstrap_ci_high
    # the bootstrap agrees with the t interval to within a few hundredths here
    assert a.bootstrap_ci_low == pytest.approx(a.ci_low, abs=0.03)
    assert a.bootstrap_p == pytest.approx(a.p_value, abs=0.05)


# ------------------------------------------------------------------ comparison


def _arm(cases: dict[str, str], k: int = 5) -> ArmData:
    return ArmData(k=k, cases={cid: outs(s) for cid, s in cases.items()})


def test_e2_uses_exact_mcnemar_when_every_case_has_k_trials() -> None:
    base = {f"r{i}": "PPPPP" for i in range(9)} | {"i0": "PFPPP"} | {"s0": "PPPPP"}
    cand = {f"r{i}": "PPFPP" for i in range(9)} | {"i0": "PPPPP"} | {"s0": "PPPPP"}
    comp = compare_arms(_arm(cand), _arm(base), bootstrap_resamples=0)
    assert comp.e2.method == "mcnemar_exact"
    assert (comp.e2.discordant_regressed, comp.e2.discordant_improved) == (9, 1)
    assert comp.e2.p_value == pytest.approx(0.0107421875)
    assert comp.e2.mean_diff == pytest.approx(-8 / 11)
    assert (comp.e1.p_holm, comp.e2.p_holm) == holm([comp.e1.p_value, 0.0107421875])
    assert comp.e2.p_holm == pytest.approx(0.0107421875)  # E1 is smaller: E2 step is x1
    assert set(comp.regressions) == {f"r{i}" for i in range(9)}
    assert comp.improvements == ("i0",)


def test_one_infra_error_does_not_switch_e2_away_from_exact_mcnemar() -> None:
    # issue 11: one unrelated infra error switched E2 to a paired t on 0/1 values
    base = {f"r{i}": "PPPPP" for i in range(9)} | {"other": "PPPPP"}
    cand = {f"r{i}": "PPFPP" for i in range(9)} | {"other": "PPIPP"}
    comp = compare_arms(_arm(cand), _arm(base), bootstrap_resamples=0)
    assert comp.e2.method == "mcnemar_exact"
    assert comp.e2.excluded == ("other",)
    assert comp.e2.p_value == pytest.approx(sps.binomtest(9, 9, 0.5, alternative="greater").pvalue)


def test_e2_falls_back_to_unbiased_estimates_when_most_counts_differ() -> None:
    base = {"a": "PPPPPPP", "b": "PPPPPPP", "c": "PPIPP", "d": "PFPPP"}
    cand = {"a": "PPPPPFP", "b": "PPPFPPP", "c": "PPPPP", "d": "PPPPP"}
    comp = compare_arms(_arm(cand), _arm(base), bootstrap_resamples=0)
    assert comp.e2.method == "paired_t"
    assert comp.e2.excluded == ("c",)  # baseline has 4 judged trials < k
    assert comp.e2.n_cases == 3
    assert comp.e2.mean_candidate == pytest.approx((pass_hat_k(7, 6, 5) * 2 + 1) / 3)
    assert comp.e1.n_cases == 4  # c still counts for the pass rate


def test_compare_reports_cases_outside_the_intersection() -> None:
    base = {"both": "PPPPP", "only_b": "PPPPP", "dead": "IIIII", "cand_dead": "PPPPP"}
    cand = {"both": "PPPPP", "only_c": "FFFFF", "dead": "EEEEE", "cand_dead": "IIIII"}
    comp = compare_arms(_arm(cand), _arm(base), bootstrap_resamples=0)
    assert comp.compared == ("both",)
    assert comp.only_candidate == ("only_c",)
    assert comp.only_baseline == ("cand_dead", "only_b")
    assert comp.neither == ("dead",)


def test_case_rows_flags_and_diagnostic_fisher() -> None:
    base = {"broken": "PPPPP", "slip": "PPPPP", "same": "PFPFP", "fixed": "FFFFF"}
    cand = {"broken": "FFFFF", "slip": "PPPFP", "same": "PFPFP", "fixed": "PPPPP"}
    comp = compare_arms(_arm(cand), _arm(base), bootstrap_resamples=0)
    rows = {r.case_id: r for r in comp.rows}
    assert rows["broken"].broken and rows["broken"].regression
    assert rows["slip"].regression and not rows["slip"].broken
    assert not rows["same"].regression and rows["same"].delta_pass_rate == 0.0
    assert rows["fixed"].improvement and rows["fixed"].delta_pass_hat_k == 1.0
    assert comp.broken == ("broken",)
    ref = sps.fisher_exact([[0, 5], [5, 0]], alternative="less").pvalue
    assert rows["broken"].p_diagnostic == pytest.approx(ref)
    ref_slip = sps.fisher_exact([[4, 1], [5, 0]], alternative="less").pvalue
    assert rows["slip"].p_diagnostic == pytest.approx(ref_slip)
    assert comp.budget.observed == 2


def test_comparison_is_deterministic() -> None:
    rng = np.random.default_rng(3)
    cases = {f"c{i}": "".join("P" if x else "F" for x in rng.random(5) < 0.7) for i in range(30)}
    other = {f"c{i}": "".join("P" if x else "F" for x in rng.random(5) < 0.6) for i in range(30)}
    a = compare_arms(_arm(other), _arm(cases), seed=5)
    b = compare_arms(_arm(other), _arm(cases), seed=5)
    assert a == b and a.model_dump_json() == b.model_dump_json()


def test_budget_counts_flip_risk_of_all_pass_cases() -> None:
    base = {f"s{i}": "PPPPP" for i in range(30)}
    comp = compare_arms(_arm(base | {"s0": "PPPPF"}), _arm(base), bootstrap_resamples=0)
    assert comp.budget.at_risk == 30 and comp.budget.expected > 5
    assert not comp.budget.over  # one flip among 30 all-pass cases is noise
