"""harness.stats: estimators, summaries and paired tests against independent values."""

from __future__ import annotations

import datetime as dt
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from harness.budget import flip_risk, poisson_binomial_pmf, regression_budget
from harness.compare import case_counts, compare_arms, holm, mcnemar_exact, paired_test
from harness.records import (
    Arm,
    AttemptRecord,
    Outcome,
    RunRecord,
    TrialKey,
    Verdict,
)
from harness.stats import ArmData, pass_at_k, pass_hat_k, summarize_arm, summarize_case

P, F, INF, EV = Outcome.PASS, Outcome.FAIL, Outcome.INFRA_ERROR, Outcome.EVALUATOR_ERROR


def outs(spec: str) -> tuple[Outcome, ...]:
    """'PPFI' -> outcomes (P pass, F fail, I infra_error, E evaluator_error)."""
    return tuple({"P": P, "F": F, "I": INF, "E": EV}[ch] for ch in spec)


def test_case_counts_pairs_judged_counts_by_position() -> None:
    a = [summarize_case(outs("PPFI"), 2), summarize_case(outs("E"), 2)]
    b = [summarize_case(outs("FFI"), 2), summarize_case(outs("PPEP"), 2)]
    got = case_counts(a, b)
    assert [x.tolist() for x in got] == [[2, 0], [3, 0], [0, 3], [2, 3]]
    assert all(x.dtype == np.int64 for x in got)


# ------------------------------------------------------------------ pass^k and pass@k


def test_pass_hat_k_examples() -> None:
    assert pass_hat_k(10, 7, 3) == pytest.approx(0.2916666666666667, rel=1e-15)
    assert pass_hat_k(5, 4, 5) == 0.0
    assert pass_hat_k(5, 5, 5) == 1.0
    assert math.isnan(pass_hat_k(4, 4, 5))


def test_pass_at_k_examples() -> None:
    assert pass_at_k(10, 3, 5) == pytest.approx(0.9166666666666666, rel=1e-15)
    assert pass_at_k(200, 1, 100) == pytest.approx(0.5, rel=1e-15)
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 6, 5) == 1.0  # n - c < k: every k-subset holds a pass
    assert math.isnan(pass_at_k(3, 1, 5))


@pytest.mark.parametrize("args", [(5, 6, 3), (5, -1, 3), (-1, 0, 1), (5, 3, 0)])
def test_estimators_reject_impossible_counts(args: tuple[int, int, int]) -> None:
    with pytest.raises(ValueError):
        pass_hat_k(*args)
    with pytest.raises(ValueError):
        pass_at_k(*args)


def test_pass_at_k_stable_where_binomials_overflow() -> None:
    # C(2000, 1000) overflows a float; the product form does not.
    assert pass_at_k(2000, 1, 1000) == pytest.approx(0.5, rel=1e-12)
    assert pass_hat_k(2000, 1999, 1000) == pytest.approx(0.5, rel=1e-12)


counts = st.integers(1, 60).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))
)


@given(counts)
def test_estimators_match_exact_fractions(nck: tuple[int, int, int]) -> None:
    n, c, k = nck
    exact_hat = Fraction(math.comb(c, k), math.comb(n, k))
    exact_at = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_hat_k(n, c, k) == pytest.approx(float(exact_hat), rel=1e-12, abs=1e-15)
    assert pass_at_k(n, c, k) == pytest.approx(float(exact_at), rel=1e-12, abs=1e-15)


@given(counts)
def test_estimator_bounds_and_order(nck: tuple[int, int, int]) -> None:
    n, c, k = nck
    hat, at, rate = pass_hat_k(n, c, k), pass_at_k(n, c, k), c / n
    eps = 1e-12
    assert 0.0 <= hat <= 1.0 and 0.0 <= at <= 1.0
    # all-k is at most rate^k; at-least-one is at least the rate
    assert hat <= rate**k + eps
    assert rate**k <= rate + eps
    assert rate <= at + eps
    if c < n:  # monotone in c
        assert pass_hat_k(n, c + 1, k) >= hat - eps
        assert pass_at_k(n, c + 1, k) >= at - eps


@settings(max_examples=60)
@given(
    st.integers(1, 12).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n))),
    st.fractions(min_value=0, max_value=1, max_denominator=20),
)
def test_pass_hat_k_is_unbiased_for_p_to_the_k(nk: tuple[int, int], p: Fraction) -> None:
    n, k = nk
    expectation = sum(
        math.comb(n, c) * p**c * (1 - p) ** (n - c) * Fraction(math.comb(c, k), math.comb(n, k))
        for c in range(n + 1)
    )
    assert expectation == p**k  # exact: the estimator's algebra, not the float code
    approx = sum(
        math.comb(n, c) * float(p) ** c * (1 - float(p)) ** (n - c) * pass_hat_k(n, c, k)
        for c in range(n + 1)
    )
    assert approx == pytest.approx(float(p**k), abs=1e-12)


# ------------------------------------------------------------------ case and arm summaries


def test_summarize_case_excludes_infra_and_evaluator_errors() -> None:
    s = summarize_case(outs("PPIPEF"), 3, "c1")
    assert (s.trials, s.n, s.passes, s.fails, s.infra_errors, s.evaluator_errors) == (
        6, 4, 3, 1, 1, 1,
    )  # fmt: skip
    assert s.pass_rate == 0.75
    assert s.pass_hat_k == pytest.approx(pass_hat_k(4, 3, 3))
    assert s.pass_at_k == 1.0
    assert s.label == "flaky"
    assert s.run_sd == pytest.approx(float(np.std([1, 1, 1, 0], ddof=1)))


@pytest.mark.parametrize(
    ("spec", "label"),
    [
        ("PPPPP", "stable_pass"),
        ("FFFFF", "stable_fail"),
        ("PFPPP", "flaky"),
        ("IIEII", "no_data"),
        ("", "no_data"),
        ("PII", "stable_pass"),
    ],
)
def test_labels(spec: str, label: str) -> None:
    assert summarize_case(outs(spec), 5).label == label


def test_no_data_case_has_no_estimates() -> None:
    s = summarize_case(outs("III"), 3)
    assert (s.n, s.pass_rate, s.pass_hat_k, s.pass_at_k, s.run_sd) == (0, None, None, None, None)
    short = summarize_case(outs("PPI"), 3)
    assert short.pass_rate == 1.0 and short.pass_hat_k is None  # n < k


def test_summarize_arm_means_ci_and_spread() -> None:
    arm = ArmData(k=2, cases={"a": outs("PP"), "b": outs("PF"), "c": outs("FF"),
                              "d": outs("PI"), "e": outs("II")})  # fmt: skip
    s = summarize_arm(arm)
    rates = [1.0, 0.5, 0.0, 1.0]
    assert s.cases_with_data == 4 and s.n_cases == 5
    assert s.pass_rate.mean == pytest.approx(np.mean(rates))
    lo, hi = sps.t.interval(0.95, 3, loc=np.mean(rates), scale=sps.sem(rates))
    lo, hi = max(0.0, lo), min(1.0, hi)  # proportions: clipped to [0, 1]
    assert (s.pass_rate.ci_low, s.pass_rate.ci_high) == (pytest.approx(lo), pytest.approx(hi))
    assert s.pass_hat_k.n_cases == 3  # "d" has n = 1 < k
    assert s.pass_hat_k.mean == pytest.approx((1 + 0 + 0) / 3)
    # run 0: a P, b P, c F, d P -> 3/4; run 1: a P, b F, c F (d infra) -> 1/3
    assert s.spread == pytest.approx(float(np.std([3 / 4, 1 / 3], ddof=1)))
    assert (s.trials, s.infra_errors, s.unverifiable_fraction) == (10, 3, pytest.approx(0.3))
    assert s.labels == {"flaky": 1, "no_data": 1, "stable_fail": 1, "stable_pass": 2}


def _record(case_id: str, trial: int, outcome: Outcome) -> RunRecord:
    now = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    verdict = Verdict(outcome=outcome)
    return RunRecord(
        key=TrialKey(arm=Arm.CANDIDATE, release="r", case_id=case_id, case_version=1, trial=trial),
        case_digest="sha256:0", system_digest="sha256:0", backend="fake",
        attempts=(AttemptRecord(attempt=1, verdict=verdict),), verdict=verdict,
        started_at=now, finished_at=now, harness_version="0",
    )  # fmt: skip


def test_arm_data_from_records_orders_by_trial_index() -> None:
    recs = [_record("b", 1, F), _record("a", 0, P), _record("b", 0, INF), _record("b", 2, P)]
    arm = ArmData.from_records(recs, k=3, name="cand")
    assert arm.cases == {"a": (P,), "b": (INF, F, P)}
    assert list(arm.cases) == ["a", "b"]


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


# ------------------------------------------------------------------ Poisson-binomial budget


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


def test_budget_counts_flip_risk_of_all_pass_cases() -> None:
    base = {f"s{i}": "PPPPP" for i in range(30)}
    comp = compare_arms(_arm(base | {"s0": "PPPPF"}), _arm(base), bootstrap_resamples=0)
    assert comp.budget.at_risk == 30 and comp.budget.expected > 5
    assert not comp.budget.over  # one flip among 30 all-pass cases is noise


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
