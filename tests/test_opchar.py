"""harness.gate.opchar: the simulation behind `harness policy check`, its intervals and cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from harness.gate.opchar import (
    OperatingInputs,
    cache_path,
    cached_summary,
    operating_characteristics,
    read_cache,
    shifted,
    wilson,
    write_cache,
)
from harness.gate.policy import Policy, policy_digest

POLICY = Policy(version="t")


def inputs(**kw: object) -> OperatingInputs:
    base: dict[str, object] = {
        "policy_digest": policy_digest(POLICY),
        "k": 5,
        "passes": (5,) * 10 + (3,) * 10,
        "trials": (5,) * 20,
        "reps": 120,
        "seed": 3,
    }
    return OperatingInputs.model_validate(base | kw)


@pytest.mark.parametrize(("x", "n"), [(0, 10), (3, 10), (50, 1000), (1000, 1000)])
def test_wilson_matches_scipy(x: int, n: int) -> None:
    ref = sps.binomtest(x, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert wilson(x, n) == (pytest.approx(ref.low), pytest.approx(ref.high))


def test_shapes_drop_ten_points() -> None:
    p = np.linspace(0.3, 1.0, 20)
    diffuse, n_all = shifted(p, "diffuse")
    assert (p - diffuse).mean() == pytest.approx(0.10) and n_all == 20
    conc, hit = shifted(p, "concentrated")
    assert hit == 2 and (conc == 0).sum() == 2 and conc[-1] == 0.0
    part, hit = shifted(p, "partial")
    assert hit == 4 and part[-1] == pytest.approx(0.5)


def test_simulation_is_seeded_and_sensible() -> None:
    a = operating_characteristics(POLICY, inputs())
    b = operating_characteristics(POLICY, inputs())
    assert a.model_copy(update={"seconds": 0}) == b.model_copy(update={"seconds": 0})
    assert a.false_fail.rate <= 0.10  # guaranteed <= alpha; small reps: some slack
    assert a.detect["concentrated"].rate > a.false_fail.rate
    assert a.false_fail.low <= a.false_fail.rate <= a.false_fail.high
    assert "at N = 20, k = 5 this gate catches a 10-point concentrated drop" in a.summary()
    other = operating_characteristics(POLICY, inputs(seed=4))
    assert other.detect != a.detect


def test_recommendation_picks_the_smallest_k_reaching_the_target() -> None:
    res = operating_characteristics(
        POLICY, inputs(reps=60), recommend=(3, 10), target=0.5, recommend_reps=60
    )
    assert set(res.recommended) == {3, 10}
    ok = [k for k in (3, 10) if min(res.recommended[k].values()) >= 0.5]
    assert res.recommended_k == (ok[0] if ok else None)


def test_cache_is_keyed_by_every_input(tmp_path: Path) -> None:
    inp = inputs(reps=60)
    assert cached_summary(tmp_path, inp) is None
    res = operating_characteristics(POLICY, inp)
    path = write_cache(tmp_path, res)
    assert path == cache_path(tmp_path, inp) and path.parent.name == "cache"
    assert read_cache(tmp_path, inp) == res
    assert cached_summary(tmp_path, inp) == res.summary()
    assert cached_summary(tmp_path, inputs(reps=60, k=6)) is None
    assert cached_summary(tmp_path, inputs(reps=60, passes=(4,) * 10 + (3,) * 10)) is None
    path.write_text("{not json")
    assert read_cache(tmp_path, inp) is None  # a damaged cache is ignored, never trusted
