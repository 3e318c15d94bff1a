"""harness.replay: which arms model replay serves, and the gateway's per-arm switch."""

from __future__ import annotations

import pytest

from harness.cases.model import Limits
from harness.errors import ConfigError
from harness.gateway import Gateway, RecordedCall
from harness.project import Price, Upstream
from harness.replay import replay_scope
from harness.store.records import Arm

BOTH = {Arm.CANDIDATE, Arm.BASELINE}


@pytest.mark.parametrize(
    ("source", "baseline", "arms"),
    [
        (None, None, set()),
        (None, "b", set()),
        ("run-1", None, BOTH),
        ("run-1", "b", BOTH),  # a recorded run: a reproduction of every arm
        ("baseline:b", None, BOTH),  # no gate: the candidate reproduces b's trajectories
        ("baseline:b", "b", {Arm.BASELINE}),  # its own baseline: drift only, candidate live
    ],
)
def test_replay_scope(source: str | None, baseline: str | None, arms: set[Arm]) -> None:
    assert replay_scope(source, baseline) == arms


def test_another_baseline_s_responses_are_refused_naming_the_option() -> None:
    with pytest.raises(ConfigError, match="replays only its own baseline") as exc:
        replay_scope("baseline:b", "a")
    assert exc.value.field == "--model-replay"


def test_the_gateway_replays_only_the_arms_it_is_told() -> None:
    up = Upstream(
        base_url="http://127.0.0.1:9/v1",
        model="m",
        key_env="K",
        price=Price(input_per_mtok=1.0, output_per_mtok=1.0),
    )
    gw = Gateway(keys={}, replay_arms={Arm.BASELINE.value})
    call = RecordedCall(request_key="sha256:x", response=b"{}", status=200, stream=False)
    gw.add_replay("baseline--c--v1--t000--a1", [call], "baseline:b")
    try:
        label = "--c--v1--t{:03d}--a1"
        replayed = gw.open_session("baseline" + label.format(0), up, Limits())
        unrecorded = gw.open_session("baseline" + label.format(1), up, Limits())
        live = gw.open_session("candidate" + label.format(0), up, Limits())
        assert replayed.close().replayed_from == "baseline:b"
        # A baseline trial without recorded calls is never sent upstream.
        assert unrecorded.close().replayed_from == "no recorded calls for this trial"
        assert live.close().replayed_from is None
    finally:
        gw.close()
