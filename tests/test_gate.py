"""harness.gate: every verdict rule of issue 4, with its reason codes as data."""

from __future__ import annotations

import numpy as np
import pytest

from harness.gate import Decision, decide, drift_check, rerun_plan
from harness.policy import Policy
from harness.records import Outcome
from harness.stats import ArmData, summarize_arm

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
    assert {
        "baseline_reproduced",
        "no_significant_regression_pass_rate",
        "no_significant_regression_pass_hat_k",
        "non_inferiority_shown",
    } <= codes(d1)
    assert d1.compared and d1.comparison is not None and d1.drift is not None
    assert d1.imputed_verdict is None  # nothing missing
    assert d1.policy_version == "test" and d1.policy_digest.startswith("sha256:")


def test_large_significant_regression_fails() -> None:
    worse = dict(STEADY) | {f"s{i:02d}": "PFPFF" for i in range(12)}
    d = decide(POLICY, arm(worse), arm(STEADY), arm(STEADY))
    assert d.verdict == "fail"
    assert {"regression_pass_rate", "regression_pass_hat_k"} <= codes(d, "fail")
    reason = next(r for r in d.reasons if r.code == "regression_pass_hat_k")
    assert reason.data["method"] == "mcnemar_exact"
    assert reason.data["discordant"] == [12, 0]
    assert reason.data["p_holm"] < POLICY.alpha
    assert d.reasons[0].severity == "fail"  # most severe first


def test_significant_but_small_drop_warns() -> None:
    base = {f"c{i:03d}": "PPPPP" for i in range(400)}
    cand = dict(base) | {f"c{i:03d}": "PPPFP" for i in range(40)}  # mean drop 0.02
    policy = policy_with(thresholds={"pass_hat_k_drop": 0.5})
    d = decide(policy, arm(cand), arm(base), arm(base))
    assert d.verdict == "warn"
    assert {"small_regression_pass_rate", "small_regression_pass_hat_k"} <= codes(d, "warn")
    assert not codes(d, "fail")
    # the same data under a policy whose pass^k threshold is met fails
    assert decide(POLICY, arm(cand), arm(base), arm(base)).verdict == "fail"


def test_non_inferiority_not_shown_on_a_tiny_noisy_set() -> None:
    base = {"a": "PFPFP", "b": "PPFFP", "c": "FFPPP"}
    cand = {"a": "PFFFP", "b": "PPFPP", "c": "FPFPP"}
    d = decide(POLICY, arm(cand), arm(base), arm(base))
    assert "non_inferiority_not_shown" in codes(d, "warn")
    assert d.verdict == "warn"


def test_regressions_over_budget_warn() -> None:
    # flaky baseline cases make a few flips expected noise ...
    noisy = dict(STEADY) | {"s00": "PPPPF", "s01": "PPFPP"}
    d = decide(POLICY, arm(noisy), arm(STEADY), arm(STEADY))
    assert d.comparison is not None and d.comparison.budget.budget >= 2
    assert "regressions_over_budget" not in codes(d)
    # ... a perfectly stable baseline leaves no budget: one flip is over it (a warning)
    stable = {c: s for c, s in STEADY.items() if not c.startswith("f")}
    d = decide(POLICY, arm(stable | {"s00": "PPPPF"}), arm(stable), arm(stable))
    assert d.verdict == "warn" and codes(d, "warn") == {"regressions_over_budget"}
    reason = next(r for r in d.reasons if r.code == "regressions_over_budget")
    assert reason.data["cases"] == ["s00"]
    assert (reason.data["observed"], reason.data["budget"]) == (1, 0)


def test_critical_case_broken_fails_even_when_statistics_are_quiet() -> None:
    cand = dict(STEADY) | {"s05": "FFFFF"}
    quiet = decide(POLICY, arm(cand), arm(STEADY), arm(STEADY))
    assert "fail" not in {r.severity for r in quiet.reasons}
    policy = policy_with(critical_cases=("s05",))
    d = decide(policy, arm(cand), arm(STEADY), arm(STEADY))
    assert d.verdict == "fail" and "critical_case_broken" in codes(d, "fail")
    via_case_file = decide(POLICY, arm(cand), arm(STEADY), arm(STEADY), critical_cases=["s05"])
    assert via_case_file.verdict == "fail"
    flaky_only = dict(STEADY) | {"s05": "FFPFF"}
    assert "critical_case_broken" not in codes(
        decide(policy, arm(flaky_only), arm(STEADY), arm(STEADY))
    )


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
    from harness.gate import decide
    from harness.policy import Policy
    from harness.records import Outcome
    from harness.stats import ArmData

    P, F = Outcome.PASS, Outcome.FAIL
    base = {f"c{i}": (P,) * 5 for i in range(10)} | {"flaky": (P, F, P, F, P)}
    cand = dict(base) | {"c0": (P, P, F, P, P)}
    d = decide(Policy(version="t"), ArmData(k=5, cases=cand), ArmData(k=5, cases=base), None)
    codes = {r.code: r for r in d.reasons}
    assert "regressions_within_budget" in codes or "regressions_over_budget" in codes
    reason = codes.get("regressions_within_budget") or codes["regressions_over_budget"]
    assert "c0" in reason.message
