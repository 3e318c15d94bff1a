"""harness.gate.stats: per-case estimators and arm summaries against independent values."""

from __future__ import annotations

import datetime as dt
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from harness.gate.stats import (
    ArmData,
    pass_at_k,
    pass_hat_k,
    recent_counts,
    summarize_arm,
    summarize_case,
)
from harness.store.records import (
    Arm,
    AttemptRecord,
    Outcome,
    RunRecord,
    TrialKey,
    Verdict,
)

P, F, INF, EV = Outcome.PASS, Outcome.FAIL, Outcome.INFRA_ERROR, Outcome.EVALUATOR_ERROR


def outs(spec: str) -> tuple[Outcome, ...]:
    """'PPFI' -> outcomes (P pass, F fail, I infra_error, E evaluator_error)."""
    return tuple({"P": P, "F": F, "I": INF, "E": EV}[ch] for ch in spec)


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


def test_recent_counts_are_the_last_k_judged_trials() -> None:
    """Infra and evaluator errors are skipped; a case with fewer judged trials gives them all."""
    arm = ArmData(k=5, cases={"a": outs("FFPPIPPEP"), "b": outs("PFI"), "c": outs("II")})
    assert recent_counts(arm, 5) == {"a": (5, 5), "b": (1, 2), "c": (0, 0)}
    assert recent_counts(arm, 6) == {"a": (5, 6), "b": (1, 2), "c": (0, 0)}
    with pytest.raises(ValueError, match="k must be"):
        recent_counts(arm, 0)


@given(st.floats(min_value=0.001, max_value=0.999), st.integers(min_value=1, max_value=10_000))
def test_t_quantile_is_scipy_stats_t_ppf_to_the_bit(q: float, df: int) -> None:
    from harness.gate.stats import t_ppf

    assert t_ppf(q, df) == float(sps.t.ppf(q, df))
