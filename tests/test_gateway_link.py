"""The gateway link (what Dask workers use): a trial in a process without the gateway reaches
the coordinator's over real loopback HTTP; the link's secret, scope and failures."""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import urllib3
from test_trial_gateway import KEY, _spec, handler, model_agent, upstream
from test_trial_gateway import _post as _unix_post

from harness.cases.load import load_case
from harness.cases.model import Limits
from harness.errors import ConfigError, InfraError
from harness.gateway import (
    Gateway,
    LinkAddress,
    LinkScope,
    RecordedCall,
    RemoteSession,
    active_gateway,
    request_key,
    session_label,
)
from harness.gateway import link_host as link_host_of
from harness.sandbox.fake import FakeSandbox
from harness.store.records import Arm, FailureType, Outcome
from harness.trial.execute import run_trial
from harness.trial.spec import TrialSpec

__all__ = ["upstream"]  # the scripted upstream fixture


def _scope(spec: TrialSpec) -> LinkScope:
    k, up = spec.key, spec.release.upstream
    assert up is not None
    limits = load_case(Path(spec.case_dir)).case.limits
    return LinkScope(trials={(k.arm.value, k.release, k.case_id, k.case_version): (up, limits)})


@pytest.fixture
def linked(make_case, make_spec, upstream) -> Iterator[tuple[Gateway, TrialSpec]]:  # type: ignore[no-untyped-def]
    """A coordinator's gateway serving its link (not this process's active gateway: the trial
    runs as on a worker) and a trial spec that carries the link."""
    spec = _spec(make_spec, make_case("limits: {turns: 2}\n"), upstream)
    gw = Gateway(keys={"TRIAL_KEY": KEY})
    link = gw.serve_link(_scope(spec), "127.0.0.1")
    try:
        yield gw, dataclasses.replace(spec, gateway_link=link)
    finally:
        gw.close()


def test_a_trial_without_the_gateway_in_its_process_is_served_over_the_link(
    linked, upstream
) -> None:
    _, spec = linked
    assert active_gateway() is None
    out = run_trial(spec, FakeSandbox(handler(model_agent(2))))
    rec = out.record
    assert rec.verdict.outcome is Outcome.PASS, rec.verdict.reason
    model = rec.attempts[0].model
    assert model is not None and model.turns == 2 and len(upstream.served) == 2
    assert model.input_tokens == sum(s.input_tokens for s in upstream.served)
    assert model.output_tokens == sum(s.output_tokens for s in upstream.served)
    assert all(s.authorization == f"Bearer {KEY}" for s in upstream.served)
    for c in model.calls:  # the transcript came back with the trial's output
        assert c.request_blob in out.blobs and c.response_blob in out.blobs
    assert spec.gateway_link is not None
    for secret in (KEY, spec.gateway_link.secret):
        assert secret not in rec.model_dump_json()
        assert all(secret.encode() not in b for b in out.blobs.values())


def test_the_link_is_not_part_of_a_spec_identity_nor_shown(linked) -> None:
    _, spec = linked
    assert spec.gateway_link is not None
    assert spec == dataclasses.replace(spec, gateway_link=None)
    assert spec.gateway_link.secret not in repr(spec) + repr(spec.gateway_link)


def test_budget_and_upstream_fault_over_the_link_are_judged_as_locally(linked, upstream) -> None:
    _, spec = linked
    out = run_trial(spec, FakeSandbox(handler(model_agent(5))))
    verdict = out.record.verdict
    assert (verdict.outcome, verdict.failure_type) == (
        Outcome.FAIL,
        FailureType.BUDGET_EXCEEDED,
    )
    assert "limit is 2 turns" in verdict.reason and len(upstream.served) == 2
    upstream.script.fault = "500"
    out = run_trial(dataclasses.replace(spec, key=spec.key.model_copy(update={"trial": 1})),
                    FakeSandbox(handler(model_agent(2))))  # fmt: skip
    assert out.record.verdict.outcome is Outcome.INFRA_ERROR
    assert "upstream answered 500" in out.record.verdict.reason


def _post(link: LinkAddress, path: str, body: bytes, secret: str | None, method: str = "POST"):  # type: ignore[no-untyped-def]
    headers = {} if secret is None else {"Authorization": f"Bearer {secret}"}
    return urllib3.request(method, link.url + path, body=body, headers=headers, retries=False)


def test_the_link_refuses_a_wrong_secret_and_trials_outside_the_run(linked) -> None:
    _, spec = linked
    link = spec.gateway_link
    assert link is not None
    opening = json.dumps({"key": spec.key.model_dump(mode="json"), "attempt": 1}).encode()
    for secret in (None, "", "not-the-secret", link.secret[:-1], link.secret + "x"):
        resp = _post(link, "/link/v1/open", opening, secret)
        assert resp.status == 401 and resp.json()["error"]["code"] == "link_auth"
    other = [
        spec.key.model_copy(update={"release": "another"}),
        spec.key.model_copy(update={"arm": Arm.BASELINE}),
        spec.key.model_copy(update={"case_id": "nope"}),
        spec.key.model_copy(update={"case_version": 99}),
    ]
    for key in other:
        body = json.dumps({"key": key.model_dump(mode="json"), "attempt": 1}).encode()
        resp = _post(link, "/link/v1/open", body, link.secret)
        assert resp.status == 404 and resp.json()["error"]["code"] == "unknown_trial"
    assert _post(link, "/link/v1/open", b'{"key": 1}', link.secret).status == 400
    assert _post(link, "/link/v1/call/guessed", b"{}", link.secret).status == 404
    assert _post(link, "/link/v1/open", b"", link.secret, method="GET").status == 405
    assert _post(link, "/link/v1/open", opening, link.secret).status == 200
    # A length the link will not read is refused before the secret is even looked at.
    url = urlsplit(link.url)
    with socket.create_connection((url.hostname, url.port), timeout=20) as raw:
        raw.sendall(b"POST /link/v1/open HTTP/1.1\r\nHost: x\r\nContent-Length: 16777217\r\n\r\n")
        assert raw.recv(4096).split(b" ", 2)[1] == b"413"
    wrong = LinkAddress(url=link.url, secret="not-the-secret")
    upstream = spec.release.upstream
    assert upstream is not None
    with pytest.raises(InfraError, match="link secret"):
        RemoteSession(wrong, spec.key, 1, upstream)


def test_an_unreachable_coordinator_is_infra_error(make_case, make_spec, upstream) -> None:
    spec = _spec(make_spec, make_case(), upstream)
    gw = Gateway(keys={"TRIAL_KEY": KEY})
    link = gw.serve_link(_scope(spec), "127.0.0.1")
    gw.close()  # the coordinator is gone before the agent phase starts
    out = run_trial(
        dataclasses.replace(spec, gateway_link=link), FakeSandbox(handler(model_agent(1)))
    )
    assert out.record.verdict.outcome is Outcome.INFRA_ERROR
    assert (
        "gateway_link" in out.record.verdict.reason and "unreachable" in out.record.verdict.reason
    )


def test_a_link_lost_mid_phase_is_infra_error_not_the_agents(linked, upstream) -> None:
    gw, spec = linked
    upstream.script.hooks[1] = gw.close  # the coordinator stops while serving the second call
    out = run_trial(spec, FakeSandbox(handler(model_agent(2))))
    assert out.record.verdict.outcome is Outcome.INFRA_ERROR, out.record.verdict.reason
    assert "gateway_link" in out.record.verdict.reason


def test_a_call_cut_on_the_link_is_infra_error_even_when_the_link_comes_back(
    linked, upstream
) -> None:
    gw, spec = linked
    # A network blip: the connection carrying the second call is cut; closing works again.
    upstream.script.hooks[1] = gw._link._server.drop_connections
    out = run_trial(spec, FakeSandbox(handler(model_agent(2))))
    verdict = out.record.verdict
    assert verdict.outcome is Outcome.INFRA_ERROR and "gateway link" in verdict.reason, verdict
    model = out.record.attempts[0].model
    assert model is not None and model.turns == 2  # the coordinator's measurements came back


def test_a_phase_opened_again_supersedes_the_earlier_session(linked) -> None:
    _, spec = linked
    up = spec.release.upstream
    assert spec.gateway_link is not None and up is not None
    first = RemoteSession(spec.gateway_link, spec.key, 1, up)
    second = RemoteSession(spec.gateway_link, spec.key, 1, up)  # a rerun on another worker
    body = {"model": up.model, "messages": [{"role": "user", "content": "x"}]}
    status, doc = _unix_post(first.socket_path, first.token, body)
    assert (status, doc["error"]["code"]) == (502, "link")  # the superseded one is gone
    assert _unix_post(second.socket_path, second.token, body)[0] == 200
    second.close()
    with pytest.raises(InfraError, match="no such open session"):
        first.close()


def test_link_host_is_loopback_for_a_local_cluster_and_routes_to_a_scheduler() -> None:
    assert link_host_of(None) == "127.0.0.1"
    assert link_host_of("tcp://127.0.0.1:8786") == "127.0.0.1"
    assert link_host_of("localhost:8786") in ("127.0.0.1", "::1")
    # A remote scheduler (TEST-NET-2; a UDP connect sends nothing): the local address of the
    # route to it, which this machine can listen on; no route at all is a config error.
    try:
        routed = link_host_of("tcp://198.51.100.7:8786")
    except ConfigError as exc:
        assert exc.field == "--scheduler"
    else:
        assert not ipaddress.ip_address(routed).is_loopback
        with socket.socket(socket.AF_INET6 if ":" in routed else socket.AF_INET) as s:
            s.bind((routed, 0))
    for bad in ("tcp://", "tcp://:8786", "tcp://no-such-host.invalid:8786"):
        with pytest.raises(ConfigError) as err:
            link_host_of(bad)
        assert err.value.field == "--scheduler"


def test_a_limits_mismatch_uses_the_coordinators_limits(make_case, make_spec, upstream) -> None:
    """The worker cannot raise its budget: the coordinator's plan holds the limits."""
    spec = _spec(make_spec, make_case(), upstream)  # the case says no turn limit...
    k, up = spec.key, spec.release.upstream
    assert up is not None
    scope = LinkScope(
        trials={(k.arm.value, k.release, k.case_id, k.case_version): (up, Limits(turns=1))}
    )
    gw = Gateway(keys={"TRIAL_KEY": KEY})
    try:
        link = gw.serve_link(scope, "127.0.0.1")
        out = run_trial(
            dataclasses.replace(spec, gateway_link=link), FakeSandbox(handler(model_agent(3)))
        )
    finally:
        gw.close()
    assert out.record.verdict.failure_type is FailureType.BUDGET_EXCEEDED  # ...the plan says 1
    assert len(upstream.served) == 1


def test_model_replay_over_the_link_with_the_upstream_stopped(
    make_case, make_spec, upstream
) -> None:
    from test_trial_gateway import obeying_agent

    spec = _spec(make_spec, make_case(), upstream)
    recording = Gateway(keys={"TRIAL_KEY": KEY})
    try:
        link = recording.serve_link(_scope(spec), "127.0.0.1")
        spec = dataclasses.replace(spec, gateway_link=link)
        first = run_trial(spec, FakeSandbox(handler(obeying_agent)))
    finally:
        recording.close()
    model = first.record.attempts[0].model
    assert first.record.verdict.outcome is Outcome.PASS and model is not None
    calls = [
        RecordedCall(
            request_key=request_key(first.blobs[c.request_blob]),
            response=first.blobs[c.response_blob or ""],
            status=c.status,
            stream=c.stream,
        )
        for c in model.calls
    ]
    upstream.stop()  # the model is gone: only the recorded responses remain
    replaying = Gateway(keys={}, replay_only=True)
    replaying.add_replay(session_label(spec.key, 1), calls, "recorded")
    try:
        assert spec.release.upstream is not None
        link = replaying.serve_link(_scope(spec), "127.0.0.1")
        again = run_trial(
            dataclasses.replace(spec, gateway_link=link), FakeSandbox(handler(obeying_agent))
        )
    finally:
        replaying.close()
    assert again.record.verdict.outcome is Outcome.PASS, again.record.verdict.reason
    assert again.record.attempts[0].candidate_digest == first.record.attempts[0].candidate_digest
    replayed = again.record.attempts[0].model
    assert replayed is not None and replayed.replayed_from == "recorded" and replayed.turns == 3
