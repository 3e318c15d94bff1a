"""The order a run starts its trials in: longest cases first, each case's trials seeded.

Two workers finish together only if the long trials are not left for last; the arms of one
case stay interleaved in the run's seeded order (paired comparisons see the same drift).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from types import SimpleNamespace

from harness.run import execute
from harness.store.records import Arm, TrialKey


class _Handle:
    def __init__(self, seed: int, done: set[str]) -> None:
        self.record = SimpleNamespace(seed=seed)
        self._done = done
        self.added: list[str] = []

    def done(self) -> set[str]:
        return self._done

    def add_trial(self, record, blobs) -> bool:
        self.added.append(record)
        return True


class _InOrder:
    """Runs specs one at a time in the order given (what a one-worker pool does)."""

    def __init__(self) -> None:
        self.order: list[TrialKey] = []

    def run(self, specs: Sequence[SimpleNamespace]) -> Iterator[SimpleNamespace]:
        for s in specs:
            self.order.append(s.key)
            yield SimpleNamespace(record=s.key.slug(), blobs={})

    def close(self) -> None:
        pass


def _specs(cases: Sequence[str], k: int) -> list[SimpleNamespace]:
    return [
        SimpleNamespace(
            key=TrialKey(arm=arm, release=arm.value, case_id=c, case_version=1, trial=t)
        )
        for c in cases
        for arm in (Arm.CANDIDATE, Arm.BASELINE)
        for t in range(k)
    ]


def test_longest_cases_first_unknown_before_them_seeded_within_a_case() -> None:
    specs = _specs(["quick", "slow", "new", "middling"], k=3)
    expected = {"quick": 0.5, "slow": 9.0, "middling": 2.0}  # "new" was never proven
    handle, executor = _Handle(seed=7, done=set()), _InOrder()
    ran, skipped = execute(handle, specs, executor, expected=expected)  # type: ignore[arg-type]
    assert (ran, skipped) == (24, 0)
    cases = [k.case_id for k in executor.order]
    assert list(dict.fromkeys(cases)) == ["new", "slow", "middling", "quick"]
    assert cases == sorted(cases, key=["new", "slow", "middling", "quick"].index)  # in blocks
    seeded = [s.key for s in specs]
    random.Random(7).shuffle(seeded)
    for case in expected:
        assert [k for k in executor.order if k.case_id == case] == [
            k for k in seeded if k.case_id == case
        ]
    arms = [k.arm for k in executor.order if k.case_id == "slow"]
    assert arms != sorted(arms, key=lambda a: a.value)  # the arms interleave


def test_without_figures_the_seeded_order_is_kept_and_recorded_trials_are_skipped() -> None:
    specs = _specs(["a", "b"], k=2)
    done = {specs[0].key.slug()}
    handle, executor = _Handle(seed=3, done=done), _InOrder()
    assert execute(handle, specs, executor) == (7, 1)  # type: ignore[arg-type]
    seeded = [s.key for s in specs[1:]]
    random.Random(3).shuffle(seeded)
    assert executor.order == seeded
