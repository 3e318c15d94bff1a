from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.trial.excerpt import select_excerpt

_KEYWORDS = re.compile(r"FAILED|ERROR|Error|Traceback|assert|short test summary")


def _noise(n: int, width: int = 60) -> list[str]:
    return [f"line {i:06d} " + "." * width for i in range(n)]


def _join(lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode()


def test_small_output_is_returned_whole() -> None:
    assert select_excerpt(b"hello\nworld\n", b"") == "hello\nworld"
    assert select_excerpt(b"", b"") == ""


def test_both_streams_are_labelled() -> None:
    out = select_excerpt(b"out line\n", b"err line\n")
    assert out == "── stdout ──\nout line\n── stderr ──\nerr line"


def test_undecodable_bytes_are_replaced() -> None:
    assert select_excerpt(b"ok \xff\xfe bytes", b"") == "ok \ufffd\ufffd bytes"


def test_pytest_summary_section_is_preferred() -> None:
    lines = [
        *_noise(500),
        "=================== short test summary info ===================",
        "FAILED tests/test_a.py::test_one - assert 1 == 2",
        "FAILED tests/test_a.py::test_two - KeyError: 'x'",
        "=================== 2 failed, 98 passed in 1.20s ===================",
        *_noise(300),
    ]
    out = select_excerpt(_join(lines), b"", limit=1500)
    assert len(out) <= 1500
    for kept in lines[500:504]:
        assert kept in out
    # The four lines are adjacent in the source and stay adjacent in the excerpt.
    assert "\n".join(lines[500:504]) in out


def test_traceback_last_frame_and_exception_are_kept() -> None:
    lines = [
        *_noise(300),
        "Traceback (most recent call last):",
        '  File "/app/main.py", line 10, in <module>',
        "    main()",
        *[f'  File "/app/mod{i}.py", line {i}, in f{i}\n    f{i + 1}()' for i in range(40)],
        '  File "/app/deep.py", line 99, in explode',
        "    raise ValueError('the real cause')",
        "ValueError: the real cause",
        *_noise(300),
    ]
    out = select_excerpt(_join(lines), b"", limit=1200)
    assert '  File "/app/deep.py", line 99, in explode' in out
    assert "    raise ValueError('the real cause')\nValueError: the real cause" in out
    assert "Traceback (most recent call last):" in out
    assert '"/app/mod5.py"' not in out


def test_tail_is_kept_and_gaps_are_marked() -> None:
    lines = _noise(1000)
    out = select_excerpt(_join(lines), b"", limit=800)
    assert out.endswith(lines[-1])
    assert lines[0] not in out
    marker = re.match(r"^\[… (\d+) lines omitted …\]$", out.splitlines()[0])
    assert marker is not None
    kept = len(out.splitlines()) - 1
    assert int(marker.group(1)) == 1000 - kept


def test_markers_count_every_omitted_line() -> None:
    lines = [*_noise(200), "ERROR: database is down", *_noise(200)]
    out = select_excerpt(_join(lines), b"", limit=1000)
    omitted = sum(int(m) for m in re.findall(r"\[… (\d+) lines omitted …\]", out))
    shown = [line for line in out.splitlines() if not line.startswith("[… ")]
    assert omitted + len(shown) == len(lines)
    assert "ERROR: database is down" in shown


def test_error_lines_in_stderr_survive_noisy_stdout() -> None:
    out = select_excerpt(_join(_noise(5000)), b"fatal: Error in module x\n", limit=600)
    assert "Error in module x" in out
    assert "── stderr ──" in out


def test_long_lines_are_shortened() -> None:
    out = select_excerpt(b"x" * 100_000 + b"\nFAILED the end\n", b"", limit=1000)
    assert len(out) <= 1000
    assert "FAILED the end" in out
    assert " … " in out


@pytest.mark.parametrize("limit", [0, 1, 5, 20, 40])
def test_tiny_limits_are_respected(limit: int) -> None:
    assert len(select_excerpt(_join(_noise(50)), b"FAILED x\n", limit=limit)) <= limit


def test_negative_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="limit"):
        select_excerpt(b"", b"", limit=-1)


@given(
    stdout=st.binary(max_size=4000),
    stderr=st.binary(max_size=2000),
    limit=st.integers(min_value=0, max_value=3000),
)
@settings(max_examples=300, deadline=None)
def test_never_exceeds_limit(stdout: bytes, stderr: bytes, limit: int) -> None:
    assert len(select_excerpt(stdout, stderr, limit=limit)) <= limit


@given(
    lines=st.lists(st.text(max_size=120), max_size=200),
    limit=st.integers(min_value=0, max_value=2000),
)
@settings(max_examples=200, deadline=None)
def test_never_exceeds_limit_on_text(lines: list[str], limit: int) -> None:
    data = "\n".join(lines).encode()
    assert len(select_excerpt(data, data, limit=limit)) <= limit


_plain_line = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=150
).filter(lambda s: not _KEYWORDS.search(s))


@given(
    before=st.lists(_plain_line, min_size=0, max_size=30),
    after=st.lists(_plain_line, min_size=0, max_size=30),
    repeat=st.integers(min_value=1, max_value=400),
    failed=st.text(alphabet="abcdefghijklmnopqrstuvwxyz_:/.[]-", max_size=100),
    in_stderr=st.booleans(),
)
@settings(max_examples=100, deadline=None)
def test_failed_line_in_huge_output_is_kept(
    before: list[str], after: list[str], repeat: int, failed: str, in_stderr: bool
) -> None:
    line = f"FAILED {failed}"
    noise_before = before * repeat
    noise_after = after * repeat
    data = _join([*noise_before, line, *noise_after])
    out = select_excerpt(b"", data) if in_stderr else select_excerpt(data, b"")
    assert len(out) <= 4000
    assert line in out.splitlines()


@given(
    lines=st.lists(
        st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=60),
        max_size=300,
    ),
    limit=st.integers(min_value=240, max_value=3000),
)
@settings(max_examples=300, deadline=None)
def test_excerpt_is_whole_lines_and_exact_markers(lines: list[str], limit: int) -> None:
    # Lines short enough never to be shortened: the excerpt must consist of whole source
    # lines and markers that account for every other line (nothing cut mid-line).
    out = select_excerpt("\n".join(lines).encode(), b"", limit=limit)
    source = "\n".join(lines).splitlines()
    if out == "\n".join(source):
        return  # it all fitted
    shown = 0
    omitted = 0
    for line in out.splitlines() if out else []:
        marker = re.fullmatch(r"\[… (\d+) lines omitted …\]", line)
        if marker:
            omitted += int(marker.group(1))
        else:
            assert line in source
            shown += 1
    assert shown + omitted == len(source)


def test_trailing_marker_is_budgeted_for_every_limit() -> None:
    # Error lines fill the budget before the long last line can be kept, so the excerpt
    # ends with a marker; that marker must have been paid for, not cut off the front.
    lines = [f"ERROR {i}" if i % 2 else "noise" for i in range(200)] + ["z" * 70]
    data = "\n".join(lines).encode()
    for limit in range(280, 376):  # the long line is neither shortened nor kept
        out = select_excerpt(data, b"", limit=limit)
        assert len(out) <= limit
        rows = out.splitlines()
        assert rows[-1].endswith("lines omitted …]"), (limit, out)
        assert all(r in lines or re.fullmatch(r"\[… \d+ lines omitted …\]", r) for r in rows), (
            limit,
            out,
        )
