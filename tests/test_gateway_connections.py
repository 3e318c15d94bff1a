"""The gateway's connections are bounded: in number, in time, and by the phase's end.

An agent that opens many connections and stalls them (half a request head) must cost the
harness a bounded number of threads, and every connection must end with its phase.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from harness.cases.model import Limits
from harness.gateway import Gateway, Session, _http
from harness.gateway._http import ENDPOINT_CONNECTIONS, QuietServer
from harness.project import Price, Upstream

HALF_HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
_UP = Upstream(
    base_url="http://127.0.0.1:9/v1",  # never called: no request here completes
    model="m",
    key_env="K",
    price=Price(input_per_mtok=1.0, output_per_mtok=1.0),
    trial_concurrency=1,  # two phases at once (a slot of the four each)
)


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    gw = Gateway(keys={"K": "sk-x"})
    with gw.serving():
        yield gw


def _stall(path: str, n: int) -> list[socket.socket]:
    """Open ``n`` connections that each send half a request head and wait."""
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(path)
        # Turned away (503) and closed before this half head is sent: the answer is read.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(HALF_HEAD)
        socks.append(s)
    return socks


def _read_all(s: socket.socket) -> bytes:
    """Read until the gateway closes the connection (reset counts as closed)."""
    out = b""
    try:
        while chunk := s.recv(65536):
            out += chunk
    except ConnectionResetError:
        pass
    return out


def _wait_for(cond: Callable[[], bool], seconds: float) -> float:
    """Wait for ``cond``; return how long it took."""
    start = time.monotonic()
    while not cond():
        assert time.monotonic() - start < seconds, "timed out"
        time.sleep(0.02)
    return time.monotonic() - start


def _threads() -> int:
    return threading.active_count()


def _close_all(socks: list[socket.socket]) -> None:
    for s in socks:
        s.close()


def test_connections_over_the_bound_are_turned_away_without_a_thread(gateway: Gateway) -> None:
    session = gateway.open_session("t", _UP, Limits())
    before = _threads()
    extra = 40
    socks = _stall(session.socket_path, ENDPOINT_CONNECTIONS + extra)
    try:
        turned = [_read_all(s) for s in socks[ENDPOINT_CONNECTIONS:]]
        assert all(t.startswith(b"HTTP/1.1 503 ") and b'"connections"' in t for t in turned)
        assert _threads() - before <= ENDPOINT_CONNECTIONS  # one thread per served connection
        # The phase's end shuts down the stalled connections at once: their threads return.
        session.close()
        assert all(_read_all(s) == b"" for s in socks[:ENDPOINT_CONNECTIONS])
        # at once, not at the 10 s request deadline (margin for 2 busy cores)
        assert _wait_for(lambda: _threads() <= before, 20.0) < 6.0
    finally:
        _close_all(socks)


def test_a_stalled_request_head_is_closed_after_its_deadline(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(QuietServer, "request_seconds", 0.5)
    with gateway.open_session("t", _UP, Limits()) as session:
        before = _threads()
        socks = _stall(session.socket_path, 5)
        try:
            start = time.monotonic()
            assert all(_read_all(s) == b"" for s in socks)  # shut down, nothing answered
            assert time.monotonic() - start < 8.0  # the 0.5 s deadline, not the 10 s socket timeout
            _wait_for(lambda: _threads() <= before, 5.0)
            # The places are free again: a new connection is served, not turned away.
            again = _stall(session.socket_path, 1)
            assert _read_all(again[0]) == b""
            _close_all(again)
        finally:
            _close_all(socks)


def test_the_process_bound_holds_over_all_sessions(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Connections of earlier tests' servers still count until they close (each within its
    # request bound): start from none, or the bound of ten below is partly spent already.
    _wait_for(lambda: _http._PROCESS_SLOTS._used == 0, 15.0)
    monkeypatch.setattr(_http._PROCESS_SLOTS, "bound", 10)
    sessions: list[Session] = [gateway.open_session(f"t{i}", _UP, Limits()) for i in range(2)]
    socks: list[socket.socket] = []
    try:
        for s in sessions:
            socks += _stall(s.socket_path, 12)
        ready: list[socket.socket] = []

        def six_answered() -> bool:
            ready[:] = select.select(socks, [], [], 0.1)[0]
            return len(ready) >= 6

        _wait_for(six_answered, 5.0)
        time.sleep(0.3)  # nothing more is answered: each socket's own 4 and ten more served
        assert six_answered() and len(ready) == 6
        assert all(_read_all(s).startswith(b"HTTP/1.1 503 ") for s in ready)
    finally:
        for session in sessions:
            session.close()
        _close_all(socks)


def test_phases_flooding_the_process_bound_never_turn_away_another_phases_call(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team round eighteen: sixteen flooding trials took all 1,024 of the process's
    connections and a seventeenth trial's single call was answered 503."""
    _wait_for(lambda: _http._PROCESS_SLOTS._used == 0, 15.0)
    monkeypatch.setattr(_http._PROCESS_SLOTS, "bound", 10)
    flood, victim = (gateway.open_session(name, _UP, Limits()) for name in ("flood", "victim"))
    socks: list[socket.socket] = []
    try:
        socks += _stall(flood.socket_path, 30)  # its own 4 and the process's 10; 16 turned away
        _wait_for(lambda: len(select.select(socks, [], [], 0.1)[0]) >= 16, 5.0)
        mine = _stall(victim.socket_path, 2)  # a few calls of its own
        socks += mine
        time.sleep(0.3)
        assert select.select(mine, [], [], 0.5)[0] == []  # served, not answered 503
    finally:
        for session in (flood, victim):
            session.close()
        _close_all(socks)
