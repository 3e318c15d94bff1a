"""The trial's agent phase through the model gateway (FakeSandbox agent, real HTTP on both
sides: the gateway's unix socket and the scripted upstream on loopback)."""

from __future__ import annotations

import dataclasses
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scripted_upstream import MODEL, Script, ScriptedUpstream
from support import system_definition
from test_trial import _honest_verifier

from harness.cases.model import Limits
from harness.gateway import Gateway
from harness.project import Price, RetryPolicy, Upstream
from harness.sandbox.base import ExecResult
from harness.sandbox.fake import ExecCall, FakeSandbox, exited
from harness.store.records import FailureType, Outcome
from harness.trial.execute import run_trial

KEY = "sk-trial-real-key-5f1c0a"


def _post(sock: str, token: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    data = json.dumps(body).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:9\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    )
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(sock)
        s.sendall(head.encode() + data)
        raw = b""
        while chunk := s.recv(65536):
            raw += chunk
    head_b, _, body_b = raw.partition(b"\r\n\r\n")
    status = int(head_b.split()[1])
    return status, json.loads(body_b) if b"text/event-stream" not in head_b else {}


def model_agent(calls: int, *, fix: bool = True, **ask: Any):  # type: ignore[no-untyped-def]
    """An agent that asks the model ``calls`` times through the relayed endpoint, then fixes.

    ``ask``: more fields of each request (``stream``, ``max_tokens``…).
    """

    def agent(call: ExecCall) -> ExecResult:
        assert call.view is not None and call.view.endpoint is not None
        assert call.argv[:2] == ("/bin/sh", "-c") and "OPENAI_BASE_URL" in call.argv[2]
        token = call.env["OPENAI_API_KEY"]
        assert call.env["HARNESS_MODEL"] == MODEL and KEY not in json.dumps(call.env)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "fix"}]
        for _ in range(calls):
            body = {"model": MODEL, "messages": messages, **ask}
            status, doc = _post(call.view.endpoint, token, body)
            if status != 200:
                break
            if ask.get("stream"):
                continue  # an SSE body: the agent only needs to know it was answered
            messages += [doc["choices"][0]["message"], {"role": "tool", "content": "ok"}]
        if fix:
            (call.workspace / "pkg" / "mod.py").write_text("def answer():\n    return 42\n")
        Path(call.env["HARNESS_RESULT"]).write_text(json.dumps({"status": "submitted"}))
        return exited(call.argv, 0)

    return agent


def handler(agent):  # type: ignore[no-untyped-def]
    def handle(call: ExecCall) -> ExecResult:
        return agent(call) if "--agent" in call.label else _honest_verifier(call)

    return handle


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream(Script(["ls", "cat pkg/mod.py", "sed -i s/41/42/ pkg/mod.py"])) as up:
        yield up


def _spec(  # type: ignore[no-untyped-def]
    make_spec, case_dir: Path, up: ScriptedUpstream, response_seconds: float = 20
):
    spec = make_spec(case_dir)
    upstream = Upstream(
        base_url=up.base_url,
        model=MODEL,
        key_env="TRIAL_KEY",
        price=Price(input_per_mtok=1.0, output_per_mtok=4.0),
        retries=0,
        response_seconds=response_seconds,
    )
    return dataclasses.replace(spec, release=spec.release.model_copy(update={"upstream": upstream}))


def test_model_calls_are_measured_into_the_record(make_case, make_spec, upstream) -> None:
    with Gateway(keys={"TRIAL_KEY": KEY}).serving():
        out = run_trial(
            _spec(make_spec, make_case(), upstream), FakeSandbox(handler(model_agent(3)))
        )
    rec = out.record
    assert rec.verdict.outcome is Outcome.PASS, rec.verdict.reason
    model = rec.attempts[0].model
    assert model is not None and model.turns == 3 and model.answered_model == MODEL
    assert model.input_tokens == sum(s.input_tokens for s in upstream.served)
    assert model.output_tokens == sum(s.output_tokens for s in upstream.served)
    assert model.cost == pytest.approx((model.input_tokens + 4 * model.output_tokens) / 1e6)
    for c in model.calls:
        assert c.request_blob in out.blobs and c.response_blob in out.blobs
    assert all(KEY.encode() not in b for b in out.blobs.values())
    assert KEY not in rec.model_dump_json()


def test_turn_budget_at_the_gateway_fails_the_trial(make_case, make_spec, upstream) -> None:
    case = make_case("limits: {turns: 2}\n")
    with Gateway(keys={"TRIAL_KEY": KEY}).serving():
        out = run_trial(_spec(make_spec, case, upstream), FakeSandbox(handler(model_agent(5))))
    rec = out.record
    assert rec.verdict.outcome is Outcome.FAIL
    assert rec.verdict.failure_type is FailureType.BUDGET_EXCEEDED
    assert "limit is 2 turns" in rec.verdict.reason
    attempt = rec.attempts[0]
    assert attempt.model is not None and attempt.model.turns == 2 and attempt.agent is not None
    assert len(upstream.served) == 2


def test_upstream_500_is_infra_error(make_case, make_spec, upstream) -> None:
    upstream.script.fault = "500"
    with Gateway(keys={"TRIAL_KEY": KEY}).serving():
        out = run_trial(
            _spec(make_spec, make_case(), upstream), FakeSandbox(handler(model_agent(2)))
        )
    assert out.record.verdict.outcome is Outcome.INFRA_ERROR
    assert "upstream answered 500" in out.record.verdict.reason
    assert out.record.attempts[0].model is not None


def test_a_completion_running_past_the_response_bound_is_the_agents_fail(
    make_case, make_spec, upstream
) -> None:
    """A streamed answer that goes on for 6 s under a 2 s bound: the agent asked too much."""
    upstream.script.fault, upstream.script.slow_seconds = "trickle", 6.0
    spec = _spec(make_spec, make_case(), upstream, response_seconds=2)
    agent = model_agent(2, stream=True, max_tokens=100_000)
    with Gateway(keys={"TRIAL_KEY": KEY}).serving():
        out = run_trial(spec, FakeSandbox(handler(agent)))
    verdict = out.record.verdict
    assert verdict.outcome is Outcome.FAIL, verdict.reason
    assert verdict.failure_type is FailureType.BUDGET_EXCEEDED
    assert "2s response bound (response_seconds)" in verdict.reason, verdict.reason
    model = out.record.attempts[0].model
    assert model is not None and model.fault is None and model.turns == 1
    assert [c.refused for c in model.calls] == ["response_seconds"]
    assert len(upstream.served) == 1


def test_an_upstream_silent_past_the_response_bound_stays_infra_error(
    make_case, make_spec, upstream
) -> None:
    """The same request, but the upstream sends nothing for 6 s: the provider's fault."""
    upstream.script.fault, upstream.script.slow_seconds = "slow", 6.0
    spec = _spec(make_spec, make_case(), upstream, response_seconds=2)
    agent = model_agent(2, stream=True, max_tokens=100_000)
    with Gateway(keys={"TRIAL_KEY": KEY}).serving():
        out = run_trial(spec, FakeSandbox(handler(agent)))
    verdict = out.record.verdict
    assert verdict.outcome is Outcome.INFRA_ERROR, verdict.reason
    assert "slower than the 2s bound" in verdict.reason


def test_no_gateway_in_the_process_is_infra_error(make_case, make_spec, upstream) -> None:
    out = run_trial(_spec(make_spec, make_case(), upstream), FakeSandbox(handler(model_agent(1))))
    assert out.record.verdict.outcome is Outcome.INFRA_ERROR
    assert "no gateway" in out.record.verdict.reason


def obeying_agent(call: ExecCall) -> ExecResult:
    """An agent whose candidate depends on what the model says: it logs every command."""
    assert call.view is not None and call.view.endpoint is not None
    token = call.env["OPENAI_API_KEY"]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix"}]
    log = []
    for _ in range(3):
        status, doc = _post(call.view.endpoint, token, {"model": MODEL, "messages": messages})
        if status != 200:
            return exited(call.argv, 1)
        msg = doc["choices"][0]["message"]
        log.append(json.loads(msg["tool_calls"][0]["function"]["arguments"])["command"])
        messages += [msg, {"role": "tool", "content": call.env.get("AGENT_VARIANT", "ok")}]
    (call.workspace / "commands.log").write_text("\n".join(log) + "\n")
    (call.workspace / "pkg" / "mod.py").write_text("def answer():\n    return 42\n")
    Path(call.env["HARNESS_RESULT"]).write_text(json.dumps({"status": "submitted"}))
    return exited(call.argv, 0)


def test_model_replay_with_the_upstream_stopped_gives_identical_candidates(
    make_case, make_spec, upstream, tmp_path
) -> None:
    import datetime as dt

    from harness.replay import recorded_calls
    from harness.store.records import ReleaseRecord
    from harness.store.store import Store

    case = make_case()
    spec = _spec(make_spec, case, upstream)
    with Gateway(keys={"TRIAL_KEY": KEY}).serving():
        first = run_trial(spec, FakeSandbox(handler(obeying_agent)))
    assert first.record.verdict.outcome is Outcome.PASS, first.record.verdict.reason
    store = Store(tmp_path / "store")
    now = dt.datetime.now(dt.UTC)
    rel = ReleaseRecord(
        run_id="recorded", release="cand", system_digest="sha256:s", system=system_definition(),
        task_set="golden", task_set_digest="sha256:t", cases={}, k=1, backend="fake",
        created_at=now, harness_version="0",
    )  # fmt: skip
    with store.open_run(rel) as h:
        h.add_trial(first.record, first.blobs)
    upstream.stop()  # the model is gone: only the recorded responses remain

    def replaying(agent_handler):  # type: ignore[no-untyped-def]
        gw = Gateway(keys={}, replay_only=True)
        for label, calls in recorded_calls(store, "recorded").items():
            gw.add_replay(label, calls, "recorded")
        with gw.serving():
            return run_trial(spec, FakeSandbox(handler(agent_handler)))

    again = replaying(obeying_agent)
    assert again.record.verdict.outcome is Outcome.PASS, again.record.verdict.reason
    assert again.record.attempts[0].candidate_digest == first.record.attempts[0].candidate_digest
    model = again.record.attempts[0].model
    assert model is not None and model.replayed_from == "recorded" and model.turns == 3

    def diverging(call: ExecCall) -> ExecResult:
        return obeying_agent(dataclasses.replace(call, env={**call.env, "AGENT_VARIANT": "no"}))

    diverged = replaying(diverging)
    assert diverged.record.verdict.outcome is Outcome.INFRA_ERROR
    assert "trajectory diverged at turn 2" in diverged.record.verdict.reason


def test_waiting_for_another_trials_lease_is_not_the_trials_retry_budget(
    make_case, make_spec, upstream
) -> None:
    """Red team round eighteen: a trial waited 4 s for the lease another trial's phase held,
    inside its agent step, and its correction attempt was refused for a retry budget
    its own attempts never spent. The wait is the trial's ``lease`` step now."""
    spec = _spec(make_spec, make_case(), upstream)
    retry = RetryPolicy(max_attempts=2, wall_seconds=3.0)
    spec = dataclasses.replace(spec, release=spec.release.model_copy(update={"retry": retry}))
    assert spec.release.upstream is not None
    attempts = iter([False, True])  # the first attempt leaves the bug, the second fixes it

    def agent(call: ExecCall) -> ExecResult:
        return model_agent(1, fix=next(attempts))(call)

    gateway = Gateway(keys={"TRIAL_KEY": KEY})
    with gateway.serving():
        other = gateway.open_session("other-trial", spec.release.upstream, Limits())
        releaser = threading.Timer(4.0, other.close)
        releaser.start()
        try:
            out = run_trial(spec, FakeSandbox(handler(agent)))
        finally:
            releaser.join()
    rec = out.record
    outcomes = [a.verdict.outcome for a in rec.attempts]
    assert outcomes == [Outcome.FAIL, Outcome.PASS], rec.stop_reason
    assert rec.steps is not None and rec.steps.lease > 3.0
    assert rec.steps.agent < 3.0  # the wait is not in the agent's step
