"""The harness-held evidence stream, judged against JUnit reports (pure functions)."""

from __future__ import annotations

import hashlib
import hmac
import json

from harness.trial.evidence import check_reports, parse_stream, strip_stream
from harness.trial.runner_guard import canary_token

NONCE = "n0nce"
PATH = "/workspace/reports/junit.xml"
CANARY = f"::harness_canary_{canary_token(NONCE)}"


def signed(body: bytes, nonce: str = NONCE) -> bytes:
    """A record line as the guard writes it: public tag, JSON, HMAC under the secret."""
    tag = hashlib.sha256(b"harness-tag:" + nonce.encode()).hexdigest()[:32].encode()
    mac = hmac.new(nonce.encode(), body, hashlib.sha256).hexdigest().encode()
    return b"\n@@harness:" + tag + b"@@ " + body + b" " + mac + b"\n"


def rec(nonce: str = NONCE, **fields: object) -> bytes:
    return signed(json.dumps(fields).encode(), nonce)


def stream(*tests: tuple[str, str], end: bool = True, canary: str = "failed") -> bytes:
    out = b"some output\n" + rec(k="start", run="r", junit=PATH, dir="/workspace")
    out += rec(k="n", run="r", n=len(tests) + 1)
    for test_id, outcome in (*tests, (CANARY, canary)):
        for when in ("setup", "call", "teardown"):
            out += rec(
                k="t", run="r", id=test_id, when=when, o=outcome if when == "call" else "passed"
            )
    if end:
        out += rec(k="end", run="r", exit=1)
    return out


def report(*cases: tuple[str, str]) -> bytes:
    body = "".join(
        f'<testcase classname="{c.split("::")[0]}" name="{c.split("::")[1]}">'
        + ("<failure/>" if s == "failed" else "<skipped/>" if s == "skipped" else "")
        + "</testcase>"
        for c, s in cases
    )
    return f'<testsuites><testsuite name="pytest">{body}</testsuite></testsuites>'.encode()


def problems(err: bytes, data: bytes | None, *, pytest_command: bool = True) -> list[str]:
    return check_reports(
        parse_stream(err, NONCE), {PATH: data}, NONCE, pytest_command=pytest_command
    )


def test_a_report_that_agrees_with_its_stream_is_believed() -> None:
    err = stream(("t.m::a", "passed"), ("t.m::b", "failed"))
    assert problems(err, report(("t.m::a", "passed"), ("t.m::b", "failed"))) == []


def test_every_way_a_report_can_disagree_is_tampering() -> None:
    err = stream(("t.m::a", "passed"), ("t.m::b", "failed"), ("t.m::c", "skipped"))
    forged = problems(
        err, report(("t.m::a", "passed"), ("t.m::b", "passed"), ("t.m::c", "skipped"))
    )
    assert "did not pass" in forged[0] and "t.m::b: failed" in forged[0]
    assert (
        "did not pass"
        in problems(err, report(("t.m::a", "passed"), ("t.m::c", "passed"), ("t.m::b", "failed")))[
            0
        ]
    )
    assert "never run" in problems(err, report(("t.m::z", "passed"), ("t.m::b", "failed")))[0]
    assert "dropped" in problems(err, report(("t.m::a", "passed"), ("t.m::c", "skipped")))[0]


def test_a_genuine_record_edited_on_its_way_out_is_tampering() -> None:
    """An outside red team put a pipe of its own over the guard's descriptor and turned each
    genuine "failed" into "passed" (and the end's exit to 0) as it relayed the records: the
    secret travelled in every marker then, and nothing bound it to the content."""
    ok = report(("t.m::a", "passed"))
    err = stream(("t.m::a", "failed"))
    assert problems(err, report(("t.m::a", "failed"))) == []
    edited = err.replace(b'"o": "failed"', b'"o": "passed"').replace(b"@@ {", b"@@ {", 1)
    assert b"harness_canary" in edited and NONCE.encode() not in err  # no secret written
    found = problems(edited, ok)
    assert any("forged or malformed" in p for p in found), found


def test_a_record_under_another_secret_is_tampering_even_beside_a_true_stream() -> None:
    """A guessed secret (or one read from memory and not this run's) is no quiet noise."""
    err = stream(("t.m::a", "passed"))
    ok = report(("t.m::a", "passed"))
    assert problems(err, ok) == []
    guessed = rec("guess", k="end", run="r", exit=0)
    found = problems(err + guessed, ok)
    assert any("a secret not this run's" in p for p in found), found


def _run_records(run: str, *, end: bool = True, junit: str = PATH) -> list[bytes]:
    out = [rec(k="start", run=run, junit=junit, dir="/workspace"), rec(k="n", run=run, n=2)]
    for test_id, outcome in (("t.m::a", "passed"), (CANARY, "failed")):
        for when in ("setup", "call", "teardown"):
            o = outcome if when == "call" else "passed"
            out.append(rec(k="t", run=run, id=test_id, when=when, o=o))
    return out + ([rec(k="end", run=run, exit=0)] if end else [])


def test_a_run_cut_short_and_followed_by_another_writing_its_report_is_tampering() -> None:
    """An outside red team replaced the test process mid-collection with a pytest of its own
    (gutted copies of the tests) that wrote the report: the first run never ended."""
    ok = report(("t.m::a", "passed"))
    first, second = _run_records("r1", end=False)[:2], _run_records("r2")
    found = problems(b"".join(first + second), ok)
    assert any("started never ended" in p for p in found), found
    assert problems(b"".join(_run_records("r1")), ok) == []


def test_a_second_run_writing_a_report_is_tampering_after_or_during_the_first() -> None:
    """An outside red team's second route: the real run skipped the hidden tests, then a
    wrapper's later step (candidate code) ran a complete pytest of its own over gutted
    tests, with the secret the wrapper keeps, writing the same report."""
    ok = report(("t.m::a", "passed"))
    a, b = _run_records("r1"), _run_records("r2")
    for stream_ in (a + b, a[:3] + b + a[3:]):  # one after the other; one inside the other
        found = problems(b"".join(stream_), ok)
        assert any("2 test runs wrote this report" in p for p in found), found
    other = _run_records("r2", junit="/workspace/reports/other.xml")
    assert problems(b"".join(a + other), ok) == []  # one report each: as before


def test_a_missing_or_cut_stream_is_tampering_not_no_evidence() -> None:
    ok = report(("t.m::a", "passed"))
    assert "no harness-held evidence" in problems(b"", ok)[0]
    assert problems(b"", None) == []  # no report: judged as a missing artifact
    assert (
        problems(
            b"", b"<testsuite><testcase classname='x' name='y'/></testsuite>", pytest_command=False
        )
        == []
    )
    assert "ended before" in problems(stream(("t.m::a", "passed"), end=False), ok)[0]


def test_the_canary_must_fail_in_the_stream_and_run_whenever_tests_ran() -> None:
    ok = report(("t.m::a", "passed"))
    assert "canary test passed" in problems(stream(("t.m::a", "passed"), canary="passed"), ok)[0]
    no_canary = stream(("t.m::a", "passed")).replace(CANARY.encode(), b"t.m::a")
    assert problems(no_canary, ok)


def test_guard_records_and_forged_records_are_tampering() -> None:
    ok = report(("t.m::a", "passed"))
    err = stream(("t.m::a", "passed")) + rec(
        k="x", pid=3, what="audit: gc.get_objects", where="calc.py:3"
    )
    assert "gc.get_objects at calc.py:3" in problems(err, ok)[0]
    forged = stream(("t.m::a", "passed")) + signed(b"{not json")
    assert "forged or malformed" in problems(forged, ok)[0]
    after_end = stream(("t.m::a", "passed")) + rec(
        k="t", run="r", id="t.m::z", when="call", o="passed"
    )
    assert problems(after_end, ok)


def test_the_records_are_stripped_from_what_the_reviewer_reads() -> None:
    err = stream(("t.m::a", "passed"))
    shown = strip_stream(err, NONCE)
    assert b"@@harness" not in shown and b"some output" in shown
    assert strip_stream(b"plain\n", NONCE) == b"plain\n"
