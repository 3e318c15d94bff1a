"""harness.gate.decide: every verdict rule of issue 4, with its reason codes as data."""

from __future__ import annotations

import numpy as np
import pytest

from harness.gate.decide import (
    GATE_RULE_VERSION,
    Decision,
    decide,
    drift_check,
    regressed_cases,
    rerun_plan,
    rule_absolute,
    rule_budget,
    rule_drift,
    rule_infra,
    rule_missing,
    rule_non_inferiority,
    rule_validity,
)
from harness.gate.policy import Policy
from harness.gate.stats import ArmData, summarize_arm
from harness.store.records import Outcome

CODES = {"P": Outcome.PASS, "F": Outcome.FAIL, "I": Outcome.INFRA_ERROR,
         "E": Outcome.EVALUATOR_ERROR}  # fmt: skip
POLICY = Policy(version="test")


def policy_with(**changes: object) -> Policy:
    """POLICY with top-level fields replaced, validated like a loaded file."""
    return Policy.model_validate(POLICY.model_dump() | changes)


def arm(cases: dict[str, str], k: int = 5, name: str = "") -> ArmData:
    return ArmData(k=k, name=name, cases={c: tuple(CODES[x] for x in s) for c, s in cases.items()})


def simulated(p: np.ndarray, seed: int, k: int = 5) -> dict[str, str]:
    rng = np.random.default_rng(seed)
    draws = rng.random((len(p), k)) < p[:, None]
    return {f"c{i:02d}": "".join("P" if x else "F" for x in row) for i, row in enumerate(draws)}


def codes(decision: Decision, severity: str | None = None) -> set[str]:
    return {r.code for r in decision.reasons if severity in (None, r.severity)}


# a reliable set: 30 stable-pass, 10 flaky, 5 stable-fail
STEADY = (
    {f"s{i:02d}": "PPPPP" for i in range(30)}
    | {f"f{i}": s for i, s in enumerate(["PPPFP", "PFPPP", "PPPPF", "FPPPP", "PPFPP"] * 2)}
    | {f"x{i}": "FFFFF" for i in range(5)}
)


def test_same_results_pass_with_explaining_reasons_and_are_deterministic() -> None:
    d1 = decide(POLICY, arm(STEADY), arm(STEADY), arm(STEADY))
    d2 = decide(POLICY, arm(STEADY), arm(STEADY), arm(STEADY))
    assert d1.verdict == "pass"
    assert d1 == d2 and d1.model_dump_json() == d2.model_dump_json()
    assert {"baseline_reproduced", "no_significant_regression", "non_inferiority_shown"} <= codes(
        d1
    )
    assert d1.compared and d1.comparison is not None and d1.drift is not None
    assert d1.rule is not None and d1.rule.outcome == "pass"
    assert d1.rule_version == GATE_RULE_VERSION == 2
    assert d1.imputed_verdict is None  # nothing missing
    assert d1.policy_version == "test" and d1.policy_digest.startswith("sha256:")


def test_large_significant_regression_fails_and_names_the_cases() -> None:
    worse = dict(STEADY) | {f"s{i:02d}": "PFPFF" for i in range(12)}
    d = decide(POLICY, arm(worse), arm(STEADY), arm(STEADY))
    assert d.verdict == "fail"
    reason = next(r for r in d.reasons if r.code == "regression")
    assert reason.severity == "fail" and reason.data["p_within"] < 1e-6
    assert set(reason.data["cases"]) == {f"s{i:02d}" for i in range(12)}
    assert "s00" in reason.message and "next:" in reason.message
    assert d.reasons[0].severity == "fail"  # most severe first


def test_significant_but_small_drop_warns() -> None:
    base = {f"c{i:03d}": "PPPPP" for i in range(400)}
    cand = dict(base) | {f"c{i:03d}": "PPPFP" for i in range(40)}  # mean drop 0.02
    policy = policy_with(thresholds={"pass_hat_k_drop": 0.5})
    d = decide(policy, arm(cand), arm(base), arm(base))
    assert d.verdict == "warn"
    assert "possible_regression" in codes(d, "warn") and not codes(d, "fail")
    assert "below the policy's magnitude" in next(
        r.message for r in d.reasons if r.code == "possible_regression"
    )
    # the same data under a policy whose pass^k threshold is met (0.10 drop) fails
    assert decide(POLICY, arm(cand), arm(base), arm(base)).verdict == "fail"


def test_non_inferiority_is_information_on_a_tiny_noisy_set() -> None:
    base = {"a": "PFPFP", "b": "PPFFP", "c": "FFPPP"}
    cand = {"a": "PFFFP", "b": "PPFPP", "c": "FPFPP"}
    d = decide(POLICY, arm(cand), arm(base), arm(base))
    reason = next(r for r in d.reasons if r.code == "non_inferiority_not_shown")
    assert reason.severity == "info" and "too small" in reason.message
    assert d.verdict == "pass"
    strict = policy_with(thresholds={"non_inferiority": "warn"})
    assert decide(strict, arm(cand), arm(base), arm(base)).verdict == "warn"


def test_non_inferiority_on_identical_releases_at_n9_never_warns() -> None:
    # issue 11: 46-72 % warnings on identical releases at N = 9
    p = np.linspace(0.3, 0.95, 9)
    warned = sum(
        "non_inferiority_not_shown" in codes(
            decide(POLICY, arm(simulated(p, 2 * s)), arm(simulated(p, 2 * s + 1)), None), "warn")
        for s in range(30)
    )  # fmt: skip
    assert warned == 0


def test_regressions_over_budget_warn_and_all_pass_cases_carry_flip_risk() -> None:
    # one flip among 30 all-pass cases is noise: a case seen all-pass 5 times is not p = 1
    stable = {c: s for c, s in STEADY.items() if not c.startswith("f")}
    d = decide(POLICY, arm(stable | {"s00": "PPPPF"}), arm(stable), arm(stable))
    assert d.comparison is not None and d.comparison.budget.expected > 1.0
    assert "regressions_within_budget" in codes(d, "info") and d.verdict == "pass"
    # many flips at once are over it, and the warning names them
    flips = stable | {f"s{i:02d}": "PPPFP" for i in range(14)}
    policy = policy_with(thresholds={"pass_rate_drop": 0.9, "pass_hat_k_drop": 0.9},
                         alpha=0.0001, warn_alpha=0.0001)  # fmt: skip
    d = decide(policy, arm(flips), arm(stable), arm(stable))
    reason = next(r for r in d.reasons if r.code == "regressions_over_budget")
    assert reason.severity == "warn" and reason.data["observed"] == 14
    assert "s00" in reason.message


def test_critical_case_broken_fails_even_when_statistics_are_quiet() -> None:
    cand = dict(STEADY) | {"s05": "FFFFF"}
    policy = policy_with(critical_cases=("s05",))
    d = decide(policy, arm(cand), arm(STEADY), arm(STEADY))
    assert d.verdict == "fail" and "critical_case_broken" in codes(d, "fail")
    via_case_file = decide(POLICY, arm(cand), arm(STEADY), arm(STEADY), critical_cases=["s05"])
    assert via_case_file.verdict == "fail"


def test_critical_case_with_a_significant_partial_drop_fails() -> None:
    # issue 11: only all-pass -> all-fail used to fail; 5/5 -> 1/5 has exact p = 5/210
    cand = dict(STEADY) | {"s05": "FPFFF"}
    policy = policy_with(critical_cases=("s05", "s06"))
    d = decide(policy, arm(cand), arm(STEADY), arm(STEADY))
    assert d.verdict == "fail"
    reason = next(r for r in d.reasons if r.code == "critical_case_regressed")
    assert reason.data["case_id"] == "s05"
    assert reason.data["critical_p"]["s05"] == pytest.approx(5 / 210)
    # a critical case 5/5 -> 3/5 is not significant: no critical failure
    milder = dict(STEADY) | {"s05": "FPFPP"}
    assert "critical_case_regressed" not in codes(decide(policy, arm(milder), arm(STEADY),
                                                         arm(STEADY)))  # fmt: skip


def test_reasons_name_critical_cases_first() -> None:
    base = {f"c{i:02d}": "PPPPP" for i in range(20)}
    cand = dict(base) | {"c01": "FFFFF", "c02": "FFFFF", "c17": "FPFFF"}
    d = decide(policy_with(critical_cases=("c17",)), arm(cand), arm(base), arm(base))
    reason = next(r for r in d.reasons if r.code == "regression")
    assert reason.data["cases"][0] == "c17"
    assert d.reasons[0].code == "critical_case_regressed"


def test_two_cases_slipping_once_is_not_a_failure() -> None:
    # issue 11: PPPPP -> PPPPF on two cases gave p = 0 (degenerate t) and failed
    base = {"a": "PPPPP", "b": "PPPPP"}
    d = decide(POLICY, arm({"a": "PPPPF", "b": "PPPPF"}), arm(base), arm(base))
    assert d.verdict != "fail"
    assert d.rule is not None and d.rule.within.p_value == pytest.approx(0.25)


def test_a_one_case_set_can_fail_on_statistics() -> None:
    one = {"only": "P" * 10}
    d = decide(POLICY, arm({"only": "F" * 10}, k=10), arm(one, k=10), arm(one, k=10))
    assert d.verdict == "fail" and "regression" in codes(d, "fail")


def test_the_bundled_example_shape_fails_with_both_critical_cases_named() -> None:
    # issue 11: pass rate 0.80 -> 0.50, both critical cases 5/5 -> 1/5 got WARN
    base = {"crit-a": "PPPPP", "crit-b": "PPPPP", "c1": "PPPPP", "c2": "PPPPP",
            "c3": "PPPFP", "c4": "PFPFP", "c5": "PPFFF", "c6": "PPPFF"}  # fmt: skip
    cand = {"crit-a": "FFPFF", "crit-b": "FPFFF", "c1": "PPFFF", "c2": "PFPFF",
            "c3": "PPPFP", "c4": "PFPFP", "c5": "PPFFF", "c6": "PPPFF"}  # fmt: skip
    policy = policy_with(critical_cases=("crit-a", "crit-b"))
    d = decide(policy, arm(cand), arm(base), arm(base))
    assert d.verdict == "fail"
    reason = next(r for r in d.reasons if r.severity == "fail")
    assert reason.data["cases"][:2] == ["crit-a", "crit-b"]


def test_required_case_without_data_fails() -> None:
    cand = dict(STEADY) | {"s07": "IIIII"}
    policy = policy_with(required_cases=("s07", "never-ran"))
    d = decide(policy, arm(cand), arm(STEADY), arm(STEADY))
    assert d.verdict == "fail"
    failing = [r for r in d.reasons if r.code == "required_case_no_data"]
    assert {(r.data["case_id"], r.data["arm"]) for r in failing} == {
        ("s07", "candidate"), ("never-ran", "candidate"), ("never-ran", "baseline"),
    }  # fmt: skip


def test_baseline_drift_blocks_and_nothing_is_judged() -> None:
    drifted = dict(STEADY) | {f"s{i:02d}": "FFFFF" for i in range(15)}
    d = decide(POLICY, arm(STEADY), arm(drifted), arm(STEADY))
    assert d.verdict == "blocked"
    assert "baseline_drift" in codes(d, "blocked")
    assert not codes(d, "fail") and not codes(d, "warn")
    assert "not_judged" in codes(d, "info")
    assert d.drift is not None and d.drift.detected


def test_baseline_noise_does_not_block() -> None:
    p = np.concatenate([np.ones(20), np.zeros(5), np.linspace(0.3, 0.95, 25)])
    blocked = sum(
        decide(POLICY, arm(simulated(p, 3 * s)), arm(simulated(p, 3 * s + 1)),
               arm(simulated(p, 3 * s + 2))).verdict == "blocked"
        for s in range(40)
    )  # fmt: skip
    assert blocked == 0


def test_infra_errors_warn_then_block() -> None:
    some = dict(STEADY) | {"s00": "PPIPP"}
    d = decide(POLICY, arm(some), arm(STEADY), arm(STEADY))
    assert "infra_errors_over_limit" in codes(d, "warn")
    many = dict(STEADY) | {f"s{i:02d}": "IIEII" for i in range(6)}
    d = decide(POLICY, arm(STEADY), arm(many), arm(STEADY))
    assert d.verdict == "blocked"
    reason = next(r for r in d.reasons if r.code == "infra_errors_block")
    assert reason.data["arm"] == "baseline" and reason.data["evaluator_errors"] == 6


def test_invalid_run_blocks() -> None:
    d = decide(POLICY, arm(STEADY), arm(STEADY), arm(STEADY), run_valid=False,
               invalid_reasons=("system digest changed mid-run",))  # fmt: skip
    assert d.verdict == "blocked"
    reason = next(r for r in d.reasons if r.code == "invalid_run")
    assert "system digest changed mid-run" in reason.message


def test_missing_cases_warn() -> None:
    cand = {c: s for c, s in STEADY.items() if c != "s03"}
    d = decide(POLICY, arm(cand), arm(STEADY), arm(STEADY))
    reason = next(r for r in d.reasons if r.code == "missing_cases_over_limit")
    assert reason.data["cases"] == ["s03"]
    assert d.comparison is not None and d.comparison.only_baseline == ("s03",)
    lenient = policy_with(missing_cases={"max_fraction": 0.05})
    assert "missing_cases_over_limit" not in codes(decide(lenient, arm(cand), arm(STEADY),
                                                          arm(STEADY)))  # fmt: skip


def test_worst_case_imputation_that_would_flip_the_verdict_warns() -> None:
    base = {f"c{i:02d}": "PPPPP" for i in range(20)}
    cand = dict(base) | {f"c{i:02d}": "PPIII" for i in range(6)}
    lenient = policy_with(infra_errors={"warn_above": 0.5, "block_above": 0.5})
    d = decide(lenient, arm(cand), arm(base), arm(base))
    assert d.imputed_verdict == "fail"
    assert "imputation_would_flip" in codes(d, "warn")
    assert d.verdict == "warn"
    observed = next(r for r in d.reasons if r.code == "imputation_would_flip")
    assert observed.data == {"observed": "pass", "imputed": "fail"}


def test_without_baseline_the_candidate_is_judged_alone() -> None:
    d = decide(POLICY, arm(STEADY), None, None)
    assert d.verdict == "pass" and not d.compared and d.comparison is None
    note = next(r for r in d.reasons if r.code == "no_comparison")
    assert "NO COMPARISON WAS MADE" in note.message
    critical = policy_with(critical_cases=("x0",))
    assert decide(critical, arm(STEADY), None, None).verdict == "fail"
    required = policy_with(required_cases=("gone",))
    assert decide(required, arm(STEADY), None, None).verdict == "fail"
    broken = dict(STEADY) | {f"s{i:02d}": "IIIII" for i in range(10)}
    assert decide(POLICY, arm(broken), None, None).verdict == "blocked"


def test_stored_baseline_only_warns_that_drift_is_unchecked() -> None:
    d = decide(POLICY, arm(STEADY), None, arm(STEADY))
    assert d.verdict == "warn" and "baseline_not_reexecuted" in codes(d, "warn")
    assert d.drift is None and d.compared
    fresh_only = decide(POLICY, arm(STEADY), arm(STEADY), None)
    assert fresh_only.verdict == "pass" and "drift_not_checked" in codes(fresh_only, "info")


def test_no_common_cases_blocks() -> None:
    d = decide(POLICY, arm({"a": "PPPPP"}), arm({"b": "PPPPP"}), None)
    assert d.verdict == "blocked" and "no_common_cases" in codes(d, "blocked")


def test_sampled_baseline_falls_back_to_stored_results() -> None:
    sample = {c: s for c, s in STEADY.items() if c.startswith("f")}  # re-executed subset
    d = decide(POLICY, arm(STEADY), arm(sample), arm(STEADY))
    assert d.comparison is not None
    assert len(d.comparison.compared) == len(STEADY)
    assert d.drift is not None and len(d.drift.compared) == len(sample)
    assert d.verdict == "pass"


def test_rerun_plan_picks_flaky_cases_closest_to_a_coin_flip() -> None:
    summary = summarize_arm(arm({"a": "PPPPF", "b": "PFPFF", "c": "PPPPP", "d": "FFPFF"}))
    assert rerun_plan(POLICY, summary) == ()
    policy = policy_with(flaky_reruns={"extra_trials": 5, "max_cases": 2})
    assert rerun_plan(policy, summary) == ("b", "a")


@pytest.mark.parametrize("seed", [1, 2])
def test_decision_is_a_pure_function_of_its_inputs(seed: int) -> None:
    p = np.linspace(0.2, 1.0, 30)
    args = (arm(simulated(p, seed)), arm(simulated(p, seed + 10)), arm(simulated(p, seed + 20)))
    assert decide(POLICY, *args) == decide(POLICY, *args)


# ------------------------------------------------------------------ drift test


def test_drift_not_detected_for_identical_or_noisy_baselines() -> None:
    base = {f"c{i}": s for i, s in enumerate(["PPPPP", "PFPFP", "FFFFF", "PPPFP"] * 5)}
    assert not drift_check(arm(base), arm(base)).detected
    noisy = {f"c{i}": s for i, s in enumerate(["PPPPP", "FPFPF", "FFFFF", "PFPPP"] * 5)}
    check = drift_check(arm(noisy), arm(base))
    assert not check.detected and check.broken == ()


def test_drift_detected_when_the_environment_breaks_many_cases() -> None:
    stored = {f"c{i}": "PPPPP" for i in range(20)}
    now = {f"c{i}": ("FFFFF" if i < 8 else "PPPPP") for i in range(20)}
    check = drift_check(arm(now), arm(stored))
    assert check.detected
    assert check.aggregate.mean_diff == pytest.approx(-0.4)
    assert len(check.broken) == 8
    assert check.drifted_cases == ()  # no single 5-trial case can be significant


def test_drift_needs_the_tolerance_as_well_as_significance() -> None:
    stored = {f"c{i}": "PPPPP" for i in range(200)}
    now = {f"c{i}": ("PPPPF" if i < 60 else "PPPPP") for i in range(200)}
    check = drift_check(arm(now), arm(stored), tolerance=0.10)
    assert check.aggregate_p_holm is not None and check.aggregate_p_holm < 1e-6
    assert not check.detected  # mean drop 0.06 < tolerance
    assert drift_check(arm(now), arm(stored), tolerance=0.05).detected


def test_drift_per_case_fires_with_many_trials() -> None:
    stored = {"a": "P" * 30, "b": "PPPPP"}
    now = {"a": "F" * 30, "b": "PPPPP"}
    check = drift_check(arm(now), arm(stored), tolerance=0.9)
    assert check.drifted_cases == ("a",)
    assert check.detected


def test_regressions_within_budget_are_still_named_in_the_reasons():
    from harness.gate.decide import decide
    from harness.gate.policy import Policy
    from harness.gate.stats import ArmData
    from harness.store.records import Outcome

    P, F = Outcome.PASS, Outcome.FAIL
    base = {f"c{i}": (P,) * 5 for i in range(10)} | {"flaky": (P, F, P, F, P)}
    cand = dict(base) | {"c0": (P, P, F, P, P)}
    d = decide(Policy(version="t"), ArmData(k=5, cases=cand), ArmData(k=5, cases=base), None)
    codes = {r.code: r for r in d.reasons}
    assert "regressions_within_budget" in codes or "regressions_over_budget" in codes
    reason = codes.get("regressions_within_budget") or codes["regressions_over_budget"]
    assert "c0" in reason.message


# ------------------------------------------------------------------ issue 11: absolute rules


def test_zero_cases_without_a_baseline_is_blocked() -> None:
    d = decide(POLICY, arm({}), None, None)
    assert d.verdict == "blocked" and "nothing_to_judge" in codes(d, "blocked")


def test_a_zero_pass_rate_never_passes() -> None:
    nothing = {c: "FFFFF" for c in STEADY}
    alone = decide(POLICY, arm(nothing), None, None)
    assert alone.verdict == "fail" and "no_candidate_pass" in codes(alone, "fail")
    both_zero = decide(POLICY, arm(nothing), arm(nothing), arm(nothing))
    assert both_zero.verdict == "fail"


def test_min_pass_rate_and_critical_minimum_apply_without_a_baseline() -> None:
    floor = policy_with(absolute={"min_pass_rate": 0.9})
    d = decide(floor, arm(STEADY), None, None)  # STEADY's mean pass rate is 0.8
    assert d.verdict == "fail" and "pass_rate_below_minimum" in codes(d, "fail")
    crit = policy_with(critical_cases=("f0",), absolute={"critical_min_pass_rate": 0.9})
    d = decide(crit, arm(STEADY), None, None)
    reason = next(r for r in d.reasons if r.code == "critical_case_below_minimum")
    assert reason.data["case_id"] == "f0"


def test_rule_absolute_directly() -> None:
    summary = summarize_arm(arm({"a": "PPPPP", "b": "FFFFF"}))
    assert rule_absolute(POLICY, summary, ["b"], alone=False) == []
    alone = rule_absolute(POLICY, summary, ["b"], alone=True)
    assert [r.code for r in alone] == ["critical_case_broken"]
    empty = rule_absolute(POLICY, summarize_arm(arm({"a": "IIIII"})), [], alone=True)
    assert [r.code for r in empty] == ["nothing_to_judge"]


# ------------------------------------------------------------------ issue 11: drift


def test_drift_with_no_comparable_stored_case_warns() -> None:
    d = decide(POLICY, arm(STEADY), arm(STEADY), arm({"other": "PPPPP"}))
    reason = next(r for r in d.reasons if r.code == "drift_not_checked")
    assert reason.severity == "warn" and "NOT checked" in reason.message
    assert "baseline_reproduced" not in codes(d)


def test_a_single_broken_baseline_case_is_not_a_warning_without_a_test() -> None:
    now = dict(STEADY) | {"s00": "FFFFF"}
    drift, reasons = rule_drift(POLICY, arm(now), arm(STEADY))
    assert drift is not None and not drift.detected and drift.broken == ("s00",)
    assert {r.code: r.severity for r in reasons}["baseline_case_broken"] == "info"


def test_drift_uses_the_exact_family_two_sided() -> None:
    stored = {f"c{i:02d}": "PPPPP" for i in range(50)}
    harsher = dict(stored) | {f"c{i:02d}": "FFFFF" for i in range(7)}
    check = drift_check(arm(harsher), arm(stored))
    assert check.detected and check.broken_test is not None and check.broken_test.observed == 7
    kinder = drift_check(arm(stored), arm(harsher))  # the other direction is drift too
    assert kinder.detected


# ------------------------------------------------------------------ rule functions


def test_rule_validity_and_rule_infra() -> None:
    assert rule_validity(True, ()) == []
    assert [r.code for r in rule_validity(False, ("x",))] == ["invalid_run"]
    s = summarize_arm(arm({"a": "PPIPP", "b": "PPPPP"}))
    assert [r.code for r in rule_infra(POLICY, [("candidate", s), ("baseline", None)])] == [
        "infra_errors_over_limit"
    ]


def test_rule_missing_names_cases() -> None:
    assert rule_missing(POLICY, ["a", "b"], [], "comparison") == []
    (reason,) = rule_missing(POLICY, ["a", "b"], ["b"], "comparison")
    assert reason.data["cases"] == ["b"] and "re-run" in reason.message


def test_rule_budget_and_non_inferiority_directly() -> None:
    d = decide(POLICY, arm(STEADY), arm(STEADY), None)
    assert d.comparison is not None
    assert rule_budget(d.comparison) == []
    assert [r.code for r in rule_non_inferiority(POLICY, d.comparison)] == ["non_inferiority_shown"]


def test_regressed_cases_orders_critical_then_evidence() -> None:
    base = {"a": "PPPPP", "b": "PPPPP", "c": "PPPPP", "d": "PPPPP"}
    cand = {"a": "PPPPF", "b": "FFFFF", "c": "PPFPP", "d": "PPPPP"}
    d = decide(POLICY, arm(cand), arm(base), None)
    assert d.comparison is not None
    assert regressed_cases(d.comparison, ["c"]) == ["c", "b", "a"]


def test_operating_characteristics_line_is_an_info_reason() -> None:
    line = "at N = 45, k = 5 this gate catches a 10-point concentrated drop with probability 0.99"
    d = decide(POLICY, arm(STEADY), arm(STEADY), None, operating_characteristics=line)
    assert any(r.code == "operating_characteristics" and r.message == line for r in d.reasons)


# ------------------------------------------------- baseline replayed from recorded responses

REPLAYED_NOTE = (
    "the baseline arm was re-executed from recorded model responses (not a fresh sample): "
    "the candidate is compared with the stored baseline's 5 trials per case; the "
    "re-executed arm measures evaluator and environment drift only"
)


def test_a_replayed_baseline_arm_is_not_the_reference_the_stored_one_is() -> None:
    stored = dict(STEADY, f0="PPPFP")
    replayed = dict(STEADY, f0="PPPPP")  # the verifier flaked once on replay
    d = decide(POLICY, arm(STEADY), arm(replayed), arm(stored), baseline_replayed=True)
    assert d.baseline_replayed and d.verdict == "pass"
    (note,) = [r for r in d.reasons if r.code == "baseline_replayed"]
    assert (note.severity, note.message) == ("info", REPLAYED_NOTE)
    assert d.comparison is not None
    row = {r.case_id: r for r in d.comparison.rows}["f0"]
    assert row.baseline is not None and row.baseline.passes == 4  # the stored trials
    assert "baseline_reproduced" in codes(d)  # the replayed arm still checks drift
    fresh = decide(POLICY, arm(STEADY), arm(replayed), arm(stored))
    assert not fresh.baseline_replayed and "baseline_replayed" not in codes(fresh)
    assert fresh.comparison is not None
    assert {r.case_id: r for r in fresh.comparison.rows}["f0"].baseline.passes == 5  # type: ignore[union-attr]


def test_a_replayed_baseline_compares_the_candidate_with_the_stored_trials() -> None:
    # Worse than the stored baseline on 8 stable cases: judged against its stored trials.
    worse = dict(STEADY, **{f"s{i:02d}": "FFFFF" for i in range(8)})
    d = decide(POLICY, arm(worse), arm(STEADY), arm(STEADY), baseline_replayed=True)
    assert d.verdict == "fail" and "regression" in codes(d, "fail"), codes(d)
    assert d.comparison is not None and d.comparison.e1.mean_baseline == pytest.approx(
        summarize_arm(arm(STEADY)).pass_rate.mean
    )


def test_an_evaluator_change_shows_as_drift_under_baseline_replay() -> None:
    # Same recorded responses, today's verifier rejects 8 cases that used to pass.
    broken = dict(STEADY, **{f"s{i:02d}": "FFFFF" for i in range(8)})
    d = decide(POLICY, arm(STEADY), arm(broken), arm(STEADY), baseline_replayed=True)
    assert d.verdict == "blocked" and "baseline_drift" in codes(d, "blocked")
    assert "baseline_replayed" in codes(d, "info")


def test_baseline_replayed_needs_the_stored_baseline() -> None:
    with pytest.raises(ValueError, match="stored baseline"):
        decide(POLICY, arm(STEADY), arm(STEADY), None, baseline_replayed=True)


def test_a_reason_names_its_case_or_cases() -> None:
    from harness.gate.rules import make_reason

    assert make_reason("x", "fail", "m", case_id="a", p=0.1).named_cases() == ("a",)
    assert make_reason("x", "warn", "m", cases=["a", "b"]).named_cases() == ("a", "b")
    assert make_reason("x", "info", "m", cases=("c",)).named_cases() == ("c",)
    assert make_reason("x", "info", "m", n_cases=3).named_cases() == ()
    assert make_reason("x", "info", "m", cases="not-a-list").named_cases() == ()
