"""The gateway's accounting under attack: concurrent calls against a token budget, calls in
flight when the phase ends, overlapping upstream waits, and the settled signal — with the
real gateway and a real scripted upstream on loopback, locally and over the Dask link."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scripted_upstream import MODEL, Script, ScriptedUpstream
from test_gateway import KEY, _request, upstream_spec
from test_gateway_link import _scope
from test_trial_gateway import KEY as TRIAL_KEY
from test_trial_gateway import _spec, upstream

from harness.cases.model import Limits
from harness.gateway import Gateway, RemoteSession, Session, _upstream
from harness.gateway import _gateway as gw_module
from harness.gateway._gateway import REFUSED_BYTES, REFUSED_CALLS
from harness.gateway._http import HELD_BYTES, Call
from harness.gateway._reserve import IMAGE_TOKENS, SAFE_MAX_TOKENS, request_bounds, union_seconds

__all__ = ["upstream"]  # the scripted upstream fixture


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    gw = Gateway(keys={"SCRIPTED_KEY": KEY})
    with gw.serving():
        yield gw


def _body(i: int, **kw: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": f"go {i}"}], **kw}


def _at_once(n: int, fn: Any) -> list[Any]:
    """Run ``fn(i)`` for ``i < n`` in threads released together; return the results."""
    start = threading.Barrier(n)
    out: list[Any] = [None] * n

    def run(i: int) -> None:
        start.wait()
        out[i] = fn(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return out


def _served_tokens(up: ScriptedUpstream) -> tuple[int, int]:
    ok = [s for s in up.served if s.status == 200]
    return sum(s.input_tokens for s in ok), sum(s.output_tokens for s in ok)


def test_twenty_concurrent_calls_cannot_beat_a_200_token_budget(gateway: Gateway) -> None:
    """Each call asks for 60 completion tokens; before, all 20 passed the check (1,200+)."""
    script = Script(["ls"], completion_tokens=60, gather=20, gather_seconds=3.0)
    with ScriptedUpstream(script) as up:
        spec = upstream_spec(up, concurrency=20)
        with gateway.open_session("t1", spec, Limits(tokens=200)) as s:
            replies = _at_once(
                20, lambda i: _request(s.socket_path, s.token, _body(i, max_tokens=60))
            )
        usage = s.usage()
        served_in, served_out = _served_tokens(up)
    prompt = max(x.input_tokens for x in up.served)
    # Completions never exceed the budget; the total only by the one call forwarded alone
    # whose prompt cannot be known beforehand (see harness/gateway/_reserve.py).
    assert served_out <= 200
    assert served_in + served_out <= 200 + prompt, (served_in, served_out)
    # Every forwarded call was asked for at most what remained, and all are on the record.
    assert all(r.get("max_tokens", 0) <= 60 for r in up.requests)
    assert (usage.input_tokens, usage.output_tokens) == (served_in, served_out)
    forwarded = [c for c in usage.calls if c.refused != "budget" or c.response_blob]
    assert len(forwarded) == len(up.served)
    assert usage.budget is not None and s.settled.is_set()
    assert sum(1 for status, _ in replies if status == 200) >= 1


def test_n_and_max_tokens_are_clamped_in_the_forwarded_body(gateway: Gateway) -> None:
    with ScriptedUpstream(Script(["ls"], completion_tokens=500)) as up:
        with gateway.open_session("t1", upstream_spec(up), Limits(tokens=1000)) as s:
            body = _body(0, n=8, max_tokens=400)
            status, _ = _request(s.socket_path, s.token, body)
            size = len(json.dumps(body).encode())
        sent = up.requests[0]
    assert status == 200
    assert sent["n"] == 8 and sent["max_tokens"] * 8 <= 1000 - size
    for bad in ({"n": "8"}, {"n": 0}, {"max_tokens": 1.5}, {"max_completion_tokens": True}):
        with ScriptedUpstream(Script(["ls"])) as up2:
            with gateway.open_session("t2", upstream_spec(up2), Limits(tokens=1000)) as s2:
                status, doc = _request(s2.socket_path, s2.token, _body(0, **bad))
            assert (status, doc["error"]["code"]) == (400, "format") and not up2.served


@pytest.mark.parametrize(
    "bad",
    [{"stream": 1}, {"stream": "true"}, {"stream_options": "include_usage"}],
    ids=["stream-1", "stream-str", "options-str"],
)
def test_a_stream_flag_a_lenient_server_would_coerce_is_the_agents_400(
    gateway: Gateway, bad: dict[str, Any]
) -> None:
    """Red team round eighteen: "stream": 1 went out as a plain call, a lenient server
    streamed, and the gateway took the SSE body for a broken upstream (infra, blocked)."""
    with ScriptedUpstream(Script(["ls"])) as up:
        with gateway.open_session("t1", upstream_spec(up), Limits()) as s:
            status, doc = _request(s.socket_path, s.token, _body(0, **bad))
        usage = s.usage()
    assert (status, doc["error"]["code"]) == (400, "format"), doc
    assert not up.requests and usage.fault is None


@given(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5), st.floats()))
def test_request_bounds_passes_only_a_boolean_stream(stream: Any) -> None:
    verdict = request_bounds({"stream": stream})
    assert isinstance(verdict, str) == (stream is not None and not isinstance(stream, bool))


def test_an_upstream_that_ignores_max_tokens_is_a_fault(gateway: Gateway) -> None:
    script = Script(["ls"], completion_tokens=500, obey_max_tokens=False)
    with (
        ScriptedUpstream(script) as up,
        gateway.open_session("t1", upstream_spec(up), Limits(tokens=2000)) as s,
    ):
        status, doc = _request(s.socket_path, s.token, _body(0, max_tokens=50))
    assert (status, doc["error"]["code"]) == (502, "upstream")
    usage = s.usage()
    assert usage.fault and "over the max_tokens" in usage.fault
    assert usage.output_tokens == 500  # paid, so charged and on the record


def test_a_call_that_takes_the_phase_over_its_budget_is_the_agents_never_a_fault(
    gateway: Gateway,
) -> None:
    """However the upstream was made to serve more than it was sent (a provider's own
    field, a quirk), a total over ``limits.tokens`` is the agent's budget_exceeded."""
    script = Script(["ls"], completion_tokens=500, obey_max_tokens=False)
    with (
        ScriptedUpstream(script) as up,
        gateway.open_session("t1", upstream_spec(up), Limits(tokens=300)) as s,
    ):
        status, doc = _request(s.socket_path, s.token, _body(0, max_tokens=50))
    usage = s.usage()
    assert (status, doc["error"]["code"]) == (403, "budget")
    assert usage.fault is None and usage.budget is not None
    assert usage.output_tokens == 500 and s.settled.is_set()


@pytest.mark.parametrize(
    "extra",
    [
        {"n_predict": 1_000_000},  # llama.cpp server
        {"num_predict": 1_000_000},  # Ollama
        {"max_new_tokens": 1_000_000},  # TGI
        {"min_tokens": 1_000_000},  # vLLM
        {"service_tier": "priority"},  # billed at another price
    ],
)
def test_fields_the_gateway_does_not_meter_are_refused_and_never_forwarded(
    gateway: Gateway, extra: dict[str, Any]
) -> None:
    script = Script(["ls"], completion_tokens=10, overrides=("n_predict", "num_predict"))
    name = next(iter(extra))
    with ScriptedUpstream(script) as up:
        with gateway.open_session("t1", upstream_spec(up), Limits(tokens=20_000)) as s:
            status, doc = _request(s.socket_path, s.token, _body(0, max_tokens=100, **extra))
            # the fields the gateway meters still pass, the agent can retry without the field
            ok, _ = _request(
                s.socket_path,
                s.token,
                _body(1, max_tokens=100, temperature=0.2, seed=1, stop=["x"], tools=[]),
            )
        usage = s.usage()
    assert (status, doc["error"]["code"]) == (400, "field")
    assert repr(name) in doc["error"]["message"]
    assert ok == 200 and len(up.requests) == 1 and name not in up.requests[0]
    assert [c.refused for c in usage.calls if c.turn == 0] == ["field"]
    assert usage.budget is None and usage.fault is None
    assert usage.output_tokens == 10


def test_refused_calls_are_bounded_in_count(gateway: Gateway) -> None:
    """A refused call costs no turn and no token: past a bound it settles the trial."""
    with ScriptedUpstream(Script(["ls"])) as up:
        with gateway.open_session("t1", upstream_spec(up), Limits()) as s:
            replies = [
                _request(s.socket_path, s.token, {**_body(i), "model": "not-the-model"})
                for i in range(REFUSED_CALLS + 10)
            ]
        usage = s.usage()
    codes = [doc["error"]["code"] for _, doc in replies]
    assert codes[:REFUSED_CALLS] == ["model"] * REFUSED_CALLS
    assert set(codes[REFUSED_CALLS:]) == {"refused_calls"}
    assert {st for st, _ in replies[REFUSED_CALLS:]} == {403}
    assert len(usage.calls) == REFUSED_CALLS and len(s.blobs) <= REFUSED_CALLS
    assert usage.budget and "refused calls" in usage.budget and s.settled.is_set()
    assert not up.requests


def test_refused_calls_are_bounded_in_bytes(gateway: Gateway) -> None:
    """2 MB refused bodies: the bodies kept stay under the bound, the trial is settled."""
    pad = "B" * (2 << 20)
    with ScriptedUpstream(Script(["ls"])) as up:
        with gateway.open_session("t1", upstream_spec(up), Limits()) as s:
            for i in range(REFUSED_BYTES // len(pad) + 4):
                body = {
                    "model": "not-the-model",
                    "messages": [{"role": "user", "content": pad + str(i)}],
                }
                _request(s.socket_path, s.token, body)
            kept = sum(len(b) for b in s.blobs.values())
        usage = s.usage()
    assert kept <= REFUSED_BYTES
    assert len(usage.calls) < REFUSED_BYTES // len(pad) + 4
    assert usage.budget and "refused calls" in usage.budget and s.settled.is_set()


def test_request_bodies_sent_upstream_are_bounded_per_phase(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Calls the upstream answers (an error costs a turn, no token) cannot make the harness
    keep bodies without bound: past CALL_BYTES the call is not sent, the trial is settled."""
    import harness.gateway._gateway as gw

    monkeypatch.setattr(gw, "CALL_BYTES", 3 << 20)
    pad = "C" * (1 << 20)
    with ScriptedUpstream(Script(["ls"] * 10)) as up:
        with gateway.open_session("t1", upstream_spec(up), Limits()) as s:
            replies = [
                _request(
                    s.socket_path,
                    s.token,
                    {"model": MODEL, "messages": [{"role": "user", "content": pad + str(i)}]},
                )
                for i in range(5)
            ]
            kept = sum(len(b) for b in s.blobs.values())
        usage = s.usage()
    codes = [doc.get("error", {}).get("code") for _, doc in replies]
    assert [st for st, _ in replies[:2]] == [200, 200] and codes[2] == "request_bytes", codes
    assert {st for st, _ in replies[2:]} == {403}
    assert len(up.requests) == 2 and kept <= (3 << 20) + gw.REFUSED_BYTES
    assert usage.budget and "bytes of request bodies" in usage.budget and s.settled.is_set()


def _image_call(i: int) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": f"look {i}"}]
    parts += [
        {"type": "image_url", "image_url": {"url": f"https://example.com/{j}.png"}}
        for j in range(16)
    ]
    return {"model": MODEL, "messages": [{"role": "user", "content": parts}], "max_tokens": 100}


def test_image_parts_are_reserved_so_concurrent_calls_cannot_overrun(gateway: Gateway) -> None:
    """5 calls of 16 images at once: before, their few hundred bytes each fitted the budget
    together and 88k tokens were charged against 20k. Each image now reserves IMAGE_TOKENS."""
    script = Script(["ls"], completion_tokens=100, image_tokens=1105, gather=5, gather_seconds=2.0)
    with ScriptedUpstream(script) as up:
        with gateway.open_session(
            "t1", upstream_spec(up, concurrency=5), Limits(tokens=20_000)
        ) as s:
            _at_once(5, lambda i: _request(s.socket_path, s.token, _image_call(i)))
        usage = s.usage()
        served_in, served_out = _served_tokens(up)
    prompt = max(x.input_tokens for x in up.served)
    assert IMAGE_TOKENS >= 1105  # the documented bound covers this model's price
    # at most the one lone call's prompt over the budget (see harness/gateway/_reserve.py)
    assert served_in + served_out <= 20_000 + prompt, (served_in, served_out)
    total = usage.input_tokens + usage.output_tokens
    assert total == served_in + served_out
    assert usage.budget == f"{total} tokens used: the limit is 20000"


@pytest.mark.parametrize(
    "part",
    [
        # A PDF: billed as its text plus an image per page, from a few hundred bytes.
        {
            "type": "file",
            "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0x"},
        },
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        "a bare string",
        {"text": "no type"},
    ],
    ids=["file", "input_audio", "string", "untyped"],
)
def test_content_parts_whose_cost_is_not_bounded_are_refused_and_never_forwarded(
    gateway: Gateway, part: Any
) -> None:
    """Red team round eighteen: 12 calls with a PDF part each were reserved at their few
    hundred bytes, all forwarded at once and billed 50k tokens each against a 200k budget."""
    text = {"type": "text", "text": "read this"}
    with ScriptedUpstream(Script(["ls"], completion_tokens=10)) as up:
        with gateway.open_session("t1", upstream_spec(up), Limits(tokens=20_000)) as s:
            body = _body(0, max_tokens=16)
            body["messages"][0]["content"] = [text, part]
            status, doc = _request(s.socket_path, s.token, body)
            # text, image and refusal parts still pass
            ok_body = _body(1, max_tokens=16)
            ok_body["messages"] = [
                {"role": "user", "content": [text, _image_call(0)["messages"][0]["content"][1]]},
                {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
                {"role": "user", "content": [text]},
            ]
            ok, _ = _request(s.socket_path, s.token, ok_body)
        usage = s.usage()
    assert (status, doc["error"]["code"]) == (400, "field"), doc
    assert "content part" in doc["error"]["message"]
    assert ok == 200 and len(up.requests) == 1
    assert [c.refused for c in usage.calls if c.turn == 0] == ["field"]


def _cut_at_phase_end(path: str, token: str, body: dict[str, Any]) -> None:
    """Make a call whose connection the phase's end may shut down (its reply goes nowhere)."""
    with contextlib.suppress(OSError, IndexError):  # cut, or closed before any reply
        _request(path, token, body)


def _slow_calls(s: Session, n: int) -> list[threading.Thread]:
    threads = [
        threading.Thread(
            target=_cut_at_phase_end, args=(s.socket_path, s.token, _body(i)), daemon=True
        )
        for i in range(n)
    ]
    for t in threads:
        t.start()
    return threads


def _wait_for(cond: Any, seconds: float = 30.0) -> None:
    end = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def test_calls_in_flight_when_the_phase_ends_are_charged_and_recorded(gateway: Gateway) -> None:
    with ScriptedUpstream(Script(["ls"], fault="slow", slow_seconds=3.0)) as up:
        s = gateway.open_session("t1", upstream_spec(up, concurrency=4), Limits())
        _slow_calls(s, 3)
        _wait_for(lambda: len(up.served) == 3)  # all three are at the upstream
        usage = s.close()
        served_in, served_out = _served_tokens(up)
    assert len(usage.calls) == 3 and all(c.status == 200 for c in usage.calls)
    assert (usage.input_tokens, usage.output_tokens) == (served_in, served_out)


def test_calls_waiting_for_an_upstream_slot_at_phase_end_are_never_sent(gateway: Gateway) -> None:
    with ScriptedUpstream(Script(["ls"], fault="slow", slow_seconds=3.0)) as up:
        s = gateway.open_session("t1", upstream_spec(up, concurrency=1), Limits())
        _slow_calls(s, 3)
        _wait_for(lambda: len(up.served) == 1)
        time.sleep(0.3)  # the two others queue for the one slot
        usage = s.close()
        time.sleep(3.5)  # a slot frees: nothing more may reach the upstream
        served = len(up.served)
    assert served == 1
    paid = [c for c in usage.calls if c.status == 200]
    assert len(paid) == 1 and usage.input_tokens == up.served[0].input_tokens
    assert sorted(c.refused or "" for c in usage.calls) == ["", "token", "token"]
    assert usage.turns == 1  # the two never sent are not turns (red team round eighteen)


def test_calls_waiting_for_the_rate_limit_at_phase_end_are_refused_at_once(
    gateway: Gateway,
) -> None:
    """Six a minute, one slot: a call a second waits 10 s for its turn. Red team round
    eighteen: the phase's end waited out every queued call's turn (98 s past it) and the
    agent's own over-calling ended as infra_error."""
    with ScriptedUpstream(Script(["ls"])) as up:
        spec = upstream_spec(up, concurrency=1, requests_per_minute=6)
        s = gateway.open_session("t1", spec, Limits())
        _slow_calls(s, 3)
        _wait_for(lambda: len(up.served) == 1)
        time.sleep(0.3)  # the two others wait: one for its turn, one for the slot
        t0 = time.monotonic()
        usage = s.close()
        closed_in = time.monotonic() - t0
    assert closed_in < 3.0, closed_in
    assert len(up.served) == 1 and usage.fault is None
    assert sum(1 for c in usage.calls if c.status == 200) == 1


def test_an_answer_over_the_byte_bound_is_cut_and_the_agents(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team round eighteen: ten 85 MB answers filled the store (blocked, again on every
    resume). One answer is read up to RESPONSE_BYTES (64 KiB here), then cut."""
    monkeypatch.setattr(_upstream, "RESPONSE_BYTES", 64 << 10)
    with ScriptedUpstream(Script(["ls"], pad_bytes=100 << 10)) as up:
        with gateway.open_session("t1", upstream_spec(up), Limits()) as s:
            status, doc = _request(s.socket_path, s.token, _body(0))
            after = _request(s.socket_path, s.token, _body(1))[0]
        usage = s.usage()
    assert (status, doc["error"]["code"]) == (403, "response_bytes"), doc
    assert after == 403 and len(up.requests) == 1  # settled: nothing more is sent
    assert usage.fault is None and usage.budget and "65536 bytes" in usage.budget
    [call] = [c for c in usage.calls if c.turn == 1]
    assert call.refused == "response_bytes" and len(s.blobs[call.response_blob or ""]) == 64 << 10


def test_answers_are_bounded_per_phase(gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    """40 KiB answers against 100 KiB a phase: the third is kept (80 KiB before it), the
    fourth call is not sent and settles the trial as the agent's."""
    monkeypatch.setattr(gw_module, "PHASE_RESPONSE_BYTES", 100 << 10)
    with ScriptedUpstream(Script(["ls"], pad_bytes=40 << 10)) as up:
        with gateway.open_session("t1", upstream_spec(up), Limits()) as s:
            replies = [_request(s.socket_path, s.token, _body(i)) for i in range(4)]
        usage = s.usage()
    assert [st for st, _ in replies] == [200, 200, 200, 403]
    assert replies[3][1]["error"]["code"] == "response_bytes"
    assert len(up.requests) == 3 and usage.budget and usage.fault is None


def test_overlapping_upstream_waits_count_once(gateway: Gateway) -> None:
    with (
        ScriptedUpstream(Script(["ls"], fault="slow", slow_seconds=4.0)) as up,
        gateway.open_session("t1", upstream_spec(up, concurrency=4), Limits()) as s,
    ):
        _at_once(3, lambda i: _request(s.socket_path, s.token, _body(i)))
    usage = s.usage()
    per_call = [c.upstream_wait_s for c in usage.calls]
    assert len(per_call) == 3 and min(per_call) >= 4.0
    # The three waits overlap: the phase waited about 4 s, not their 12 s sum.
    assert 4.0 <= usage.upstream_wait_s < 7.0, usage.upstream_wait_s


def test_union_of_intervals() -> None:
    assert union_seconds([]) == 0.0
    assert union_seconds([(0, 15), (1, 16), (2, 17)]) == 17.0
    assert union_seconds([(0, 1), (2, 3), (2.5, 4)]) == 3.0
    assert union_seconds([(0, 10), (2, 3)]) == 10.0


@contextlib.contextmanager
def _over_link(spec: Any) -> Iterator[RemoteSession]:
    """A Dask worker's end of a phase of ``spec``'s trial, over a real link (closed after)."""
    gw = Gateway(keys={"TRIAL_KEY": TRIAL_KEY})
    try:
        link = gw.serve_link(_scope(spec), "127.0.0.1")
        up = spec.release.upstream
        assert up is not None
        yield RemoteSession(link, spec.key, 1, up)
    finally:
        gw.close()


def test_a_settled_session_says_so_locally_and_over_the_link(
    make_case, make_spec, upstream
) -> None:
    spec = _spec(make_spec, make_case("limits: {turns: 1}\n"), upstream)
    with _over_link(spec) as remote:
        body = _body(0)
        assert _request(remote.socket_path, remote.token, body)[0] == 200
        assert not remote.settled.is_set()
        assert _request(remote.socket_path, remote.token, body)[0] == 403  # over 1 turn
        assert remote.settled.is_set()
        assert remote.close().budget is not None


def test_a_call_cut_at_the_response_bound_settles_the_trial_over_the_link(
    make_case, make_spec, upstream
) -> None:
    """A Dask worker's agent asks for a completion that streams 6 s under a 2 s bound."""
    upstream.script.fault, upstream.script.slow_seconds = "trickle", 6.0
    spec = _spec(make_spec, make_case(), upstream, response_seconds=2)
    with _over_link(spec) as remote:
        status, doc = _request(remote.socket_path, remote.token, _body(0, stream=True))
        assert (status, doc["error"]["code"]) == (403, "response_seconds"), doc
        assert remote.settled.is_set()
        usage = remote.close()
    assert usage.fault is None and usage.budget and "response_seconds" in usage.budget


def test_concurrent_calls_over_the_link_share_one_reservation(
    make_case, make_spec, upstream
) -> None:
    upstream.script.completion_tokens = 60
    spec = _spec(make_spec, make_case("limits: {tokens: 200}\n"), upstream)
    with _over_link(spec) as remote:
        _at_once(12, lambda i: _request(remote.socket_path, remote.token, _body(i, max_tokens=60)))
        usage = remote.close()
    served_in, served_out = _served_tokens(upstream)
    assert served_out <= 200
    assert served_in + served_out <= 200 + max(s.input_tokens for s in upstream.served)
    assert (usage.input_tokens, usage.output_tokens) == (served_in, served_out)


def test_a_request_without_max_tokens_gets_one_only_when_every_model_accepts_it(
    gateway: Gateway,
) -> None:
    script = Script(["ls"], fault="slow", slow_seconds=1.0, completion_tokens=20)
    with ScriptedUpstream(script) as up:
        with gateway.open_session("big", upstream_spec(up), Limits(tokens=1_000_000)) as s:
            # No bound written (a provider refuses one over its model's maximum), so each
            # such call holds the whole remaining budget: they run one at a time.
            _at_once(3, lambda i: _request(s.socket_path, s.token, _body(i)))
        assert all("max_tokens" not in r for r in up.requests) and up.max_inflight == 1
        with gateway.open_session("small", upstream_spec(up), Limits(tokens=1000)) as s2:
            assert _request(s2.socket_path, s2.token, _body(9))[0] == 200
        assert 0 < up.requests[-1]["max_tokens"] <= SAFE_MAX_TOKENS


def test_the_budget_reason_names_the_total_charged(gateway: Gateway) -> None:
    """Calls still in flight when the budget is spent are charged too: the reason's number
    is the phase's final total, not the total when the first call went over."""
    script = Script(
        ["ls"], completion_tokens=500, obey_max_tokens=False, gather=3, gather_seconds=3.0
    )
    with ScriptedUpstream(script) as up:
        with gateway.open_session("t1", upstream_spec(up, concurrency=3), Limits(tokens=600)) as s:
            _at_once(3, lambda i: _request(s.socket_path, s.token, _body(i, max_tokens=10)))
        usage = s.usage()
    total = usage.input_tokens + usage.output_tokens
    assert len(up.served) == 3 and total > 1500
    assert usage.budget == f"{total} tokens used: the limit is 600"


def test_refused_calls_past_the_bound_settle_the_trial_over_the_link(
    make_case, make_spec, upstream
) -> None:
    """Under Dask the coordinator's session keeps the transcript: the bound holds there,
    and the worker learns that the trial is settled from the reply."""
    spec = _spec(make_spec, make_case(""), upstream)
    with _over_link(spec) as remote:
        bad = {**_body(0), "model": "not-the-model"}
        for _ in range(REFUSED_CALLS):
            assert _request(remote.socket_path, remote.token, bad)[0] == 400
        assert not remote.settled.is_set()
        status, doc = _request(remote.socket_path, remote.token, bad)
        assert (status, doc["error"]["code"]) == (403, "refused_calls")
        assert remote.settled.is_set()
        usage = remote.close()
        assert usage.budget is not None and len(usage.calls) == REFUSED_CALLS


def test_a_call_still_on_the_link_when_the_phase_ends_is_never_a_fault(
    make_case, make_spec, upstream
) -> None:
    """Red team round seventeen, under Dask: the agent spent its turn budget with calls
    queued; the phase ended, the coordinator dropped the session, and a call still on its
    way was answered "no such open session", which the worker took for a broken link: the
    budget's fail became infra_error (BLOCKED). A call that races the phase's end is the
    ended phase's; the trial stays the agent's budget."""
    spec = _spec(make_spec, make_case("limits: {turns: 1}\n"), upstream)
    with _over_link(spec) as remote:
        assert _request(remote.socket_path, remote.token, _body(0))[0] == 200
        status, _ = _request(remote.socket_path, remote.token, _body(1))
        assert status == 403 and remote.settled.is_set()  # turn 2 of 1: the agent's budget
        late: list[int] = []
        post = remote._post

        def close_then_a_late_call(op: str, body: bytes, read: float | None = 120.0) -> bytes:
            out = post(op, body, read)
            if op.startswith("close/"):  # the coordinator's session is gone now
                late.append(remote.handle(Call(token=remote.token, body=b"{}")).status)
            return out

        remote._post = close_then_a_late_call  # type: ignore[method-assign]
        usage = remote.close()
    assert late == [401]
    assert usage.fault is None and usage.budget is not None, usage


def test_bodies_held_at_once_are_bounded(gateway: Gateway) -> None:
    """Many concurrent connections cannot make one phase's socket hold their bodies without
    bound: past HELD_BYTES a request is read, dropped and answered 429."""
    size = 12 << 20
    calls = HELD_BYTES // size + 1
    with ScriptedUpstream(Script(["ls"], fault="slow", slow_seconds=3.0)) as up:
        spec = upstream_spec(up, concurrency=calls)
        with gateway.open_session("t1", spec, Limits()) as s:
            big = [_body(i) for i in range(calls)]
            for b in big:
                b["messages"][0]["content"] += "x" * (size - 200)
            replies = _at_once(calls, lambda i: _request(s.socket_path, s.token, big[i]))
            after, _ = _request(s.socket_path, s.token, _body(99))  # released once answered
    statuses = sorted(status for status, _ in replies)
    assert statuses == [200] * (calls - 1) + [429]
    assert [doc["error"]["code"] for st, doc in replies if st == 429] == ["held_bytes"]
    assert after == 200 and len(up.requests) == calls
