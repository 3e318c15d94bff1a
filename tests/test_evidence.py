"""The harness-held evidence stream, judged against JUnit reports (pure functions)."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.trial.evidence import _TAKEN as TAKEN
from harness.trial.evidence import check_reports, parse_stream, read_keys, strip_stream
from harness.trial.runner_guard import canary_token

NONCE = "n0nce"
KEY = bytes(range(32))
KEY2 = bytes(range(32, 64))
"""A second pytest process's key (each guarded process makes its own)."""
PATH = "/workspace/reports/junit.xml"
CANARY = f"::harness_canary_{canary_token(NONCE)}"


def signed(body: bytes, key: bytes = KEY) -> bytes:
    """A record line as the guard writes it: public tag, JSON, HMAC under its key."""
    tag = hashlib.sha256(b"harness-tag:" + key).hexdigest()[:32].encode()
    mac = hmac.new(key, body, hashlib.sha256).hexdigest().encode()
    return b"\n@@harness:" + tag + b"@@ " + body + b" " + mac + b"\n"


_PLACES: dict[bytes, int] = {}


@pytest.fixture(autouse=True)
def _places_start_at_zero() -> None:
    _PLACES.clear()


def rec(key: bytes = KEY, **fields: object) -> bytes:
    """The next record of ``key``'s process (its place in the sequence comes first)."""
    place = _PLACES.get(key, 0)
    _PLACES[key] = place + 1
    return signed(json.dumps({"q": place, **fields}).encode(), key)


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
        parse_stream(err, [KEY, KEY2]), {PATH: data}, NONCE, pytest_command=pytest_command
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
    assert b"harness_canary" in edited and KEY.hex().encode() not in err  # no key written
    found = problems(edited, ok)
    assert any("forged or malformed" in p for p in found), found


def test_a_record_under_another_key_is_tampering_even_beside_a_true_stream() -> None:
    """A key no guard left in the drop box (guessed, or made by candidate code) is no quiet
    noise, and neither is a marker that is no tag at all."""
    err = stream(("t.m::a", "passed"))
    ok = report(("t.m::a", "passed"))
    assert problems(err, ok) == []
    guessed = rec(b"g" * 32, k="end", run="r", exit=0)
    for extra in (guessed, b"\n@@harness:zz@@ {}\n"):
        found = problems(err + extra, ok)
        assert any("did not leave in the harness's drop box" in p for p in found), found


def _run_records(run: str, *, end: bool = True, junit: str = PATH, key: bytes = KEY) -> list[bytes]:
    out = [
        rec(key, k="start", run=run, junit=junit, dir="/workspace"),
        rec(key, k="n", run=run, n=2),
    ]
    for test_id, outcome in (("t.m::a", "passed"), (CANARY, "failed")):
        for when in ("setup", "call", "teardown"):
            o = outcome if when == "call" else "passed"
            out.append(rec(key, k="t", run=run, id=test_id, when=when, o=o))
    return out + ([rec(key, k="end", run=run, exit=0)] if end else [])


def test_a_run_cut_short_and_followed_by_another_writing_its_report_is_tampering() -> None:
    """An outside red team replaced the test process mid-collection with a pytest of its own
    (gutted copies of the tests) that wrote the report: the first run never ended."""
    ok = report(("t.m::a", "passed"))
    first, second = _run_records("r1", end=False)[:2], _run_records("r2", key=KEY2)
    found = problems(b"".join(first + second), ok)
    assert any("started never ended" in p for p in found), found
    _PLACES.clear()
    assert problems(b"".join(_run_records("r1")), ok) == []


def test_a_second_run_writing_a_report_is_tampering_after_or_during_the_first() -> None:
    """An outside red team's second route: the real run skipped the hidden tests, then a
    wrapper's later step (candidate code) ran a complete pytest of its own over gutted
    tests, with the secret the wrapper keeps, writing the same report."""
    ok = report(("t.m::a", "passed"))
    a, b = _run_records("r1"), _run_records("r2", key=KEY2)
    for stream_ in (a + b, a[:3] + b + a[3:]):  # one after the other; one inside the other
        found = problems(b"".join(stream_), ok)
        assert any("2 test runs wrote this report" in p for p in found), found
    _PLACES.pop(KEY2)  # another process of the second key
    other = _run_records("r2", junit="/workspace/reports/other.xml", key=KEY2)
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
    assert any("forged or malformed" in p for p in problems(forged, ok))
    after_end = stream(("t.m::a", "passed")) + rec(
        k="t", run="r", id="t.m::z", when="call", o="passed"
    )
    assert problems(after_end, ok)


def test_the_records_are_stripped_from_what_the_reviewer_reads() -> None:
    err = stream(("t.m::a", "passed"))
    shown = strip_stream(err, [KEY])
    assert b"@@harness" not in shown and b"some output" in shown
    assert strip_stream(b"plain\n", [KEY]) == b"plain\n"
    # No blank line left where a record was (an excerpt of 2,000 records was all newlines).
    around = b"before\n" + err + b"after\n"
    assert strip_stream(around, [KEY]) == b"before\n" + shown + b"after\n"
    assert b"\n\n" not in strip_stream(around, [KEY])
    foreign = err + rec(b"g" * 32, k="end", run="r", exit=0)
    assert strip_stream(foreign, [KEY]).count(b"@@harness") == 1  # the candidate's: shown


def test_the_drop_box_gives_keys_and_names_everything_else() -> None:
    keys, odd = read_keys(
        {"a": KEY.hex().encode(), "b": b"not a key", "c": KEY.hex().upper().encode()}
    )
    assert keys == [KEY]
    assert len(odd) == 2 and all("not a key" in o for o in odd), odd


@given(st.dictionaries(st.text(max_size=20), st.binary(max_size=80), max_size=8))
def test_reading_keys_never_raises_and_accounts_for_every_file(files: dict[str, bytes]) -> None:
    keys, odd = read_keys(files)
    assert len(keys) + len(odd) == len(files)
    assert all(len(k) == 32 for k in keys)


def test_a_run_is_finished_only_under_the_key_that_started_it() -> None:
    """Candidate code can leave a key of its own in the drop box: records under it for the
    real run (its id is public) never finish that run."""
    other = b"o" * 32
    ok = report(("t.m::a", "passed"))
    real = b"out\n" + rec(k="start", run="r", junit=PATH, dir="/workspace")
    forged = (
        b"".join(
            rec(other, k="t", run="r", id=test_id, when=when, o=o)
            for test_id, o in (("t.m::a", "passed"), (CANARY, "failed"))
            for when in ("setup", "call", "teardown")
        )
        + rec(other, k="n", run="r", n=2)
        + rec(other, k="end", run="r", exit=0)
    )
    found = check_reports(
        parse_stream(real + forged, [KEY, other]), {PATH: ok}, NONCE, pytest_command=True
    )
    assert any("forged or malformed" in p for p in found), found
    assert any("ended before the run did" in p for p in found), found


def test_a_record_taken_off_the_stream_or_put_back_elsewhere_is_tampering() -> None:
    """The test process can open the stream's pipe again for reading (/proc/self/fd) and take
    records back off it before the harness reads them (tests/test_runner_guard.py does it
    for real): each process numbers its records, and a gap or a swap is seen."""
    ok = report(("t.m::a", "passed"))
    head = [rec(k="start", run="r", junit=PATH, dir="/workspace"), rec(k="n", run="r", n=2)]
    walk = rec(k="x", pid=3, what="audit: gc.get_objects", where="lib.py:3")
    tests = [
        rec(k="t", run="r", id=test_id, when=when, o="failed" if test_id == CANARY else "passed")
        for test_id in ("t.m::a", CANARY)
        for when in ("setup", "call", "teardown")
    ]
    honest = [*head, walk, *tests, rec(k="end", run="r", exit=0)]
    assert any("gc.get_objects" in p for p in problems(b"".join(honest), ok))
    assert not any("taken off" in p for p in problems(b"".join(honest), ok))
    taken = honest[:2] + honest[3:]  # the walk's record taken back
    assert problems(b"".join(taken), ok) == [
        f"the harness guard saw tampering in the test process: {TAKEN}"
    ]
    late = [*taken, walk]  # ... or put back after the end
    assert any("taken off the evidence stream" in p for p in problems(b"".join(late), ok))
    other = _run_records("r2", junit="/workspace/reports/other.xml", key=KEY2)
    mixed = [r for pair in zip(honest, other, strict=False) for r in pair] + honest[len(other) :]
    assert not any("taken off" in p for p in problems(b"".join(mixed), ok))  # two processes
