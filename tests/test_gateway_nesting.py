"""The gateway refuses a deeply nested JSON body cleanly: a 400, no traceback, no upstream call.

``json`` recurses once per nesting level: 100,000 ``[`` raised ``RecursionError`` in the
server thread (a traceback, no answer) instead of the refusal a malformed body gets.
"""

from __future__ import annotations

import pytest
from scripted_upstream import ScriptedUpstream
from test_gateway import _raw, _session, gateway, scripted  # noqa: F401  (fixtures)

from harness.gateway import Gateway

NESTED = [
    b"[" * 100_000,  # unbalanced: json gives up with a ValueError before recursing deep
    b"[" * 100_000 + b"]" * 100_000,  # balanced: json recurses once per level
    b'{"model": ' * 50_000 + b"1" + b"}" * 50_000,
]


@pytest.mark.parametrize("body", NESTED)
def test_a_deeply_nested_body_is_a_clean_400(
    gateway: Gateway,  # noqa: F811
    scripted: ScriptedUpstream,  # noqa: F811
    capfd: pytest.CaptureFixture[str],
    body: bytes,
) -> None:
    with _session(gateway, scripted) as s:
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {s.token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        status, doc = _raw(s.socket_path, head.encode() + body)
    assert (status, doc["error"]["code"]) == (400, "format"), doc
    assert scripted.served == []
    assert "Traceback" not in capfd.readouterr().err
