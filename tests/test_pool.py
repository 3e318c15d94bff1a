"""Baseline pools: the policy field, the pool's records and window, the pure rates."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from support import system_definition

from harness.gate.decide import decide
from harness.gate.policy import Policy, PoolPolicy, load_policy, policy_data, policy_digest
from harness.gate.pool_rates import pool_spread, pooled_verdict, posterior_rates, recent_window
from harness.gate.stats import ArmData
from harness.pool import PoolKey, append_run, open_pool, pool_id, pool_view
from harness.store.records import (
    Arm,
    AttemptRecord,
    Outcome,
    ReleaseRecord,
    RunRecord,
    TrialKey,
    Verdict,
)
from harness.store.store import Store

ROOT = Path(__file__).resolve().parents[1]
P, F = Outcome.PASS, Outcome.FAIL
T0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


# ---------------------------------------------------------------------------- policy digest


def test_a_policy_without_a_pool_keeps_its_recorded_digest() -> None:
    loaded = load_policy(ROOT / "policy.yaml")
    stored = json.loads((ROOT / "baselines" / "production-previous" / "baseline.json").read_text())
    assert loaded.digest == stored["release"]["policy_digest"]
    assert "pool" not in policy_data(loaded.policy)["baseline"]


def test_a_pool_enters_the_digest_only_when_set() -> None:
    plain = Policy(version="1")
    pooled = Policy.model_validate({"version": "1", "baseline": {"pool": {"live_trials": 2}}})
    assert policy_digest(plain) != policy_digest(pooled)
    assert policy_data(pooled)["baseline"]["pool"] == {
        "live_trials": 2,
        "max_runs": None,
        "max_age_days": None,
    }
    other = Policy.model_validate({"version": "1", "baseline": {"pool": {"live_trials": 1}}})
    assert policy_digest(other) != policy_digest(pooled)


@pytest.mark.parametrize("bad", [{"live_trials": -1}, {"live_trials": 1, "max_runs": 0}, {}])
def test_a_bad_pool_policy_is_refused(bad: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValidationError):
        Policy.model_validate({"version": "1", "baseline": {"pool": bad}})


# ---------------------------------------------------------------------------- records


KEY = PoolKey(
    baseline="prod", baseline_digest="sha256:" + "a" * 64, environment="e", backend="local"
)


def _record(run_id: str, created: dt.datetime, digest: str = "d1") -> ReleaseRecord:
    return ReleaseRecord(
        run_id=run_id,
        release="cand",
        system_digest="s",
        system=system_definition(),
        task_set="t",
        task_set_digest="t",
        cases={"a": digest},
        k=2,
        backend="local",
        baseline="prod",
        baseline_pool=pool_id(KEY),
        created_at=created,
        harness_version="0",
    )


def _live(outcome: Outcome, digest: str = "d1") -> RunRecord:
    v = Verdict(outcome=outcome)
    return RunRecord(
        key=TrialKey(arm=Arm.BASELINE, release="prod", case_id="a", case_version=1, trial=0),
        case_digest=digest,
        system_digest="s",
        backend="local",
        attempts=(AttemptRecord(attempt=1, verdict=v),),
        verdict=v,
        started_at=T0,
        finished_at=T0,
        harness_version="0",
    )


def test_entries_are_written_once_and_a_run_sees_only_earlier_runs(tmp_path: Path) -> None:
    store = Store(tmp_path, sync=False)
    pid = open_pool(store, KEY)
    assert open_pool(store, KEY) == pid  # idempotent, same key
    for i, out in enumerate((P, F, P)):
        rec = _record(f"r{i}", T0 + dt.timedelta(days=i))
        assert append_run(store, rec, [_live(out)])
    path = tmp_path / "pools" / pid / "entries" / "r0.json"
    before = path.read_bytes()
    assert not append_run(store, _record("r0", T0), [_live(F)])
    assert path.read_bytes() == before  # never edited
    policy = PoolPolicy(live_trials=1)
    view = pool_view(store, pid, {"a": "d1"}, [], policy, before=T0 + dt.timedelta(days=2), k=2)
    assert view.arm.cases["a"] == (P, F)  # r2 started at the cut-off: not seen
    assert [r for r, _ in view.runs] == ["r0", "r1"]
    # max_runs keeps the latest runs; max_age_days drops old ones; both are reported.
    late = T0 + dt.timedelta(days=10)
    last = pool_view(
        store, pid, {"a": "d1"}, [], PoolPolicy(live_trials=1, max_runs=1), before=late, k=2
    )
    assert last.arm.cases["a"] == (P,) and last.dropped == ("r0", "r1")
    young = pool_view(
        store, pid, {"a": "d1"}, [], PoolPolicy(live_trials=1, max_age_days=8), before=late, k=2
    )
    assert [r for r, _ in young.runs] == ["r2"]
    # A new case version sees none of the old version's trials.
    assert pool_view(store, pid, {"a": "d2"}, [], policy, before=late, k=2).arm.cases == {}


def test_another_key_under_an_existing_pool_id_is_refused(tmp_path: Path) -> None:
    store = Store(tmp_path, sync=False)
    pid = open_pool(store, KEY)
    (tmp_path / "pools" / pid / "pool.json").write_text(
        KEY.model_copy(update={"backend": "docker"}).model_dump_json()
    )
    from harness.errors import StoreIntegrityError

    with pytest.raises(StoreIntegrityError, match="another pool"):
        open_pool(store, KEY)


# ---------------------------------------------------------------------------- pure rates

POLICY = load_policy(ROOT / "policy.yaml").policy.model_copy(
    update={"critical_cases": (), "required_cases": ()}
)


def _arm(counts: list[int], sizes: list[int], k: int) -> ArmData:
    return ArmData(
        k=k,
        cases={
            f"case-{i:03d}": (P,) * c + (F,) * (n - c)
            for i, (c, n) in enumerate(zip(counts, sizes, strict=True))
        },
    )


def _tail(passes: list[int], sizes: list[int], t: int) -> np.ndarray:
    """Passes among the last ``t`` trials of arms built by :func:`_arm` (passes first)."""
    return np.array([max(0, min(t, n) - (n - c)) for c, n in zip(passes, sizes, strict=True)])


@st.composite
def _pooled_inputs(draw: st.DrawFn) -> tuple[list[int], list[int], list[int], int, list[int], int]:
    n_cases = draw(st.integers(3, 8))
    k = draw(st.integers(2, 5))
    s = draw(st.integers(1, 2))
    sizes = draw(st.lists(st.integers(k, 12), min_size=n_cases, max_size=n_cases))
    pool = [draw(st.integers(0, m)) for m in sizes]
    live = draw(st.lists(st.integers(0, s), min_size=n_cases, max_size=n_cases))
    cand = draw(st.lists(st.integers(0, k), min_size=n_cases, max_size=n_cases))
    return pool, sizes, live, s, cand, k


@settings(max_examples=40, deadline=None)
@given(_pooled_inputs())
def test_pooled_verdict_on_counts_is_the_gates_verdict(
    x: tuple[list[int], list[int], list[int], int, list[int], int],
) -> None:
    pool, sizes, live, s, cand, k = x
    fast = pooled_verdict(
        POLICY,
        np.array(pool),
        np.array(sizes),
        np.array(live),
        s,
        np.array(cand),
        k,
        recent=recent_window(_tail(pool, sizes, k - s), np.array(sizes), np.array(live), s, k),
    )
    full = decide(
        POLICY,
        _arm(cand, [k] * len(cand), k),
        _arm(live, [s] * len(live), s),
        _arm(pool, sizes, k),
        baseline_pooled=True,
    )
    assert full.baseline_pooled and full.verdict == fast, [r.code for r in full.reasons]


@settings(max_examples=15, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 10), st.integers(0, 10)), min_size=3, max_size=6),
    st.integers(0, 2),
    st.integers(0, 1000),
)
def test_pool_spread_is_a_seeded_distribution_of_rates(
    cases: list[tuple[int, int]], live: int, seed: int
) -> None:
    trials = [max(a, b) + 1 for a, b in cases]
    passes = [min(a, b) for a, b in cases]
    got = pool_spread(POLICY, passes, trials, k=3, live=live, pools=6, releases=8, seed=seed)
    again = pool_spread(POLICY, passes, trials, k=3, live=live, pools=6, releases=8, seed=seed)
    assert got == again
    assert 0 <= got.median <= got.p90 <= 1 and 0 <= got.mean <= 1
    assert 0 <= got.share_above <= 1
    # Every rate is a count over `releases` releases.
    assert abs(got.mean * 6 * 8 - round(got.mean * 6 * 8)) < 1e-9


@settings(max_examples=10, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=3, max_size=6), st.integers(0, 1000))
def test_posterior_rates_carry_their_wilson_interval(passes: list[int], seed: int) -> None:
    got = posterior_rates(POLICY, passes, [6] * len(passes), k=3, live=1, reps=40, seed=seed)
    for rate in (got.fail, got.warn, got.blocked):
        assert rate.low <= rate.rate <= rate.high and rate.reps == 40


def test_a_larger_pool_narrows_the_conditional_spread() -> None:
    """The claim of docs/gate.md on a small grid: 5 vs 25 trials per case (same truth)."""
    passes, trials = [9, 9, 5, 3, 10, 8, 6, 10, 2, 7], [10] * 10
    small = pool_spread(POLICY, passes, trials, size=[5] * 10, k=5, live=0, pools=60, releases=30)
    large = pool_spread(POLICY, passes, trials, size=[25] * 10, k=5, live=0, pools=60, releases=30)
    assert large.p90 < small.p90


# ------------------------------------------------- the broken-case clause on recent trials


def _pooled_case(pool: tuple[Outcome, ...]) -> dict[str, object]:
    """40 cases: case-000's pool is ``pool`` (15 trials), its 2 live trials pass, the
    candidate fails it 0/5; the other 39 pass every trial in every arm."""
    others = [f"case-{i:03d}" for i in range(1, 40)]
    cand = ArmData(k=5, cases={"case-000": (F,) * 5} | {c: (P,) * 5 for c in others})
    live = ArmData(k=2, cases={"case-000": (P, P)} | {c: (P, P) for c in others})
    stored = ArmData(k=5, cases={"case-000": pool} | {c: (P,) * 15 for c in others})
    return {"candidate": cand, "baseline": live, "stored_baseline": stored}


def test_a_case_broken_in_the_pools_recent_trials_fails_the_pooled_gate() -> None:
    """15/17 → 0/5 on one of 40 cases: significant, a mean drop of 0.022 only. Its two
    fails are the pool's oldest trials, so its 5 most recent (2 live + the pool's last 3)
    all passed: a fresh 5-trial re-run would have seen the case break. FAIL, and the
    regression reason says which window it judged."""
    d = decide(POLICY, **_pooled_case((F, F) + (P,) * 13), baseline_pooled=True)  # type: ignore[arg-type]
    assert d.verdict == "fail" and d.rule is not None and d.rule.material
    reg = next(r for r in d.reasons if r.code == "regression")
    assert reg.data["broken_recent"] == ["case-000"] and reg.data["recent_trials"] == 5
    assert reg.data["broken"] == []  # not all-pass in the whole pool + live
    assert "5 most recent trials per case" in reg.message and "case-000" in reg.message


def test_the_window_is_the_most_recent_trials_not_any_five() -> None:
    """The same counts with the two fails last in the pool: its recent trials are not
    all-pass, the drop is significant but not material, and the gate warns."""
    d = decide(POLICY, **_pooled_case((P,) * 13 + (F, F)), baseline_pooled=True)  # type: ignore[arg-type]
    assert d.verdict == "warn" and d.rule is not None and not d.rule.material
    warn = next(r for r in d.reasons if r.code == "possible_regression")
    assert warn.data["broken_recent"] == [] and warn.data["recent_trials"] == 5


def test_a_gate_without_a_pool_names_no_recent_window() -> None:
    """Without a pool the magnitude rule reads the whole reference, as before."""
    args = _pooled_case((F, F) + (P,) * 13)
    d = decide(POLICY, args["candidate"], args["stored_baseline"], None)  # type: ignore[arg-type]
    assert all("broken_recent" not in r.data and "recent_trials" not in r.data for r in d.reasons)


@st.composite
def _ordered_pool(draw: st.DrawFn) -> tuple[list[list[bool]], list[list[bool]], list[int], int]:
    """Pool and live trials per case in the order they ran, candidate passes, k."""
    n_cases, k, s = draw(st.integers(3, 8)), draw(st.integers(2, 5)), draw(st.integers(1, 2))
    trial = st.booleans()
    pool = [draw(st.lists(trial, min_size=k, max_size=12)) for _ in range(n_cases)]
    live = [draw(st.lists(trial, min_size=s, max_size=s)) for _ in range(n_cases)]
    cand = [draw(st.integers(0, k)) for _ in range(n_cases)]
    return pool, live, cand, k


@settings(max_examples=60, deadline=None)
@given(_ordered_pool())
def test_pooled_verdict_with_the_recent_window_is_the_gates_verdict(
    x: tuple[list[list[bool]], list[list[bool]], list[int], int],
) -> None:
    """The window in counts (the live trials + the pool's last k - s) is the one decide
    takes from the trials' order, whatever that order."""
    pool, live, cand, k = x
    s = len(live[0])
    outs = {True: P, False: F}
    arm = lambda trials, kk: ArmData(  # noqa: E731
        k=kk,
        cases={f"case-{i:03d}": tuple(outs[t] for t in ts) for i, ts in enumerate(trials)},
    )
    sizes = np.array([len(p) for p in pool])
    tail = np.array([sum(p[len(p) - (k - s) :]) if k > s else 0 for p in pool])
    fast = pooled_verdict(
        POLICY,
        np.array([sum(p) for p in pool]),
        sizes,
        np.array([sum(t) for t in live]),
        s,
        np.array(cand),
        k,
        recent=recent_window(tail, sizes, np.array([sum(t) for t in live]), s, k),
    )
    full = decide(
        POLICY,
        _arm(cand, [k] * len(cand), k),
        arm(live, s),
        arm(pool, k),
        baseline_pooled=True,
    )
    assert full.verdict == fast, [r.code for r in full.reasons]


def test_recent_window_refuses_more_live_trials_than_k() -> None:
    with pytest.raises(ValueError, match="live trials"):
        recent_window(np.zeros(2, int), np.full(2, 5), np.zeros(2, int), 3, 2)
