"""`harness policy check` and the gate on the bundled example, through the CLI."""

from __future__ import annotations

import json
import resource
import shutil
import time
from pathlib import Path

import pytest
from support import harness

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """A copy of the bundled example project (cases, baseline, policy, releases)."""
    dest = tmp_path / "example"
    dest.mkdir()
    for name in ("cases", "baselines", "orchestration", "env", "examples"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("harness.yaml", "policy.yaml"):
        shutil.copy(ROOT / name, dest / name)
    return dest


def test_policy_check_prints_its_table_fast_and_caches_it(example: Path) -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    done = harness(example, "policy", "check")
    elapsed = time.monotonic() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert done.returncode == 0, done.stdout + done.stderr
    # issue 11: under 30 s on the bundled example. The machine running the tests may be
    # shared: judge the CPU the command used, and give the wall clock a wide margin.
    assert cpu < 30, cpu
    assert elapsed < 180, elapsed
    for row in ("false fail", "false warn", "diffuse", "partial", "concentrated"):
        assert row in done.stdout
    assert "at N = 8, k = 5 this gate catches a 10-point concentrated drop" in done.stdout
    assert list((example / ".harness" / "cache").glob("opchar-*.json"))
    again = harness(example, "policy", "check", "--json")
    assert again.returncode == 0 and "cached result" in again.stderr
    data = json.loads(again.stdout)
    assert data["inputs"]["k"] == 5 and set(data["detect"]) == {
        "diffuse",
        "partial",
        "concentrated",
    }


def test_policy_check_without_a_baseline_is_a_clear_usage_error(example: Path) -> None:
    done = harness(example, "policy", "check", "--baseline", "nope")
    assert done.returncode == 2 and "no baseline 'nope'" in done.stderr
    assert "Traceback" not in done.stderr
    bad = harness(example, "policy", "check", "--reps", "1")
    assert bad.returncode == 2 and "--reps" in bad.stderr


@pytest.mark.slow
def test_bundled_regressed_release_fails_with_critical_cases_named(example: Path) -> None:
    # issue 11: 0.80 -> 0.50 with both critical cases 5/5 -> 1/5 got WARN (exit 0 with
    # --warn-ok); it must FAIL, and --warn-ok must not rescue it
    assert harness(example, "policy", "check").returncode == 0  # then the report carries it
    done = harness(
        example,
        "run",
        "--release",
        "candidate-regressed",
        "--k",
        "5",
        "--baseline",
        "production-previous",
        "--no-report",
        "--warn-ok",
        timeout=900,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    gate = json.loads(harness(example, "gate", "--json").stdout)
    assert gate["verdict"] == "fail"
    cand = gate["decision"]["candidate"]
    assert cand["pass_rate"]["mean"] == pytest.approx(0.50)
    by_case = {c["case_id"]: c for c in cand["cases"]}
    for crit in ("escaped-quote-row-merge", "join-minimal-quoting"):
        assert (by_case[crit]["passes"], by_case[crit]["n"]) == (1, 5)
    fails = [r for r in gate["decision"]["reasons"] if r["severity"] == "fail"]
    assert {r["data"].get("case_id") for r in fails} >= {
        "escaped-quote-row-merge",
        "join-minimal-quoting",
    }
    codes = {r["code"]: r for r in gate["decision"]["reasons"]}
    assert "operating_characteristics" in codes
    assert "concentrated drop" in codes["operating_characteristics"]["message"]


def test_policy_check_json_carries_the_pool_section(example: Path) -> None:
    """With baseline.pool the JSON holds what the text prints: sizes, sources, spread."""
    policy = example / "policy.yaml"
    plain = policy.read_text()
    pool_line = "  pool: {live_trials: 2, conditional_share: 0.05}\n"
    at = "  drift_tolerance: 0.10\n"
    policy.write_text(plain.replace(at, at + pool_line))
    args = ("policy", "check", "--reps", "50", "--pool-samples", "5", "--pool-releases", "5")
    done = harness(example, *args, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(done.stdout)
    assert data["inputs"]["k"] == 5  # the operating characteristics are still there
    section = data["pool"]
    assert section["baseline"] == "production-previous" and section["conditional_share"] == 0.05
    (pool,) = section["pools"]
    # no gated run yet: the pool is the promoted run's 5 trials per case, nothing live
    assert pool["runs"] == [] and pool["cases"]
    assert all(c == {"trials": 5, "promoted": 5, "live": 0} for c in pool["cases"].values())
    assert [r["name"] for r in pool["spreads"]] == [
        "promoted trials alone",
        "pools of this size (now)",
        "after 5 more runs",
    ]
    for row in pool["spreads"]:
        assert row["spread"]["pools"] == 5 and 0 <= row["spread"]["share_above"] <= 1
    assert pool["posterior"]["fail"]["reps"] == 500
    # the lowered FAIL level of a comparison against 5 fixed + 2 live trials per case
    assert 0 < pool["fail_level"] < pool["alpha"] == 0.05
    text = harness(example, *args)
    assert text.returncode == 0, text.stdout + text.stderr
    assert pool["summary"] in text.stdout and "FAIL level against this pool" in text.stdout
    # without a pool in the policy the section is null
    policy.write_text(plain)
    assert json.loads(harness(example, *args, "--json").stdout)["pool"] is None
