"""The verifier's start check: one command, and nothing candidate code writes changes it.

:func:`~harness.sandbox.base.start_checked` resolves the verifier's first word in the same
start as the verifier and says so on stderr before anything of the command runs;
:func:`~harness.sandbox.base.split_start` reads that line. Whatever the command writes
afterwards (a forged "not found" line, binary noise) cannot turn a started verifier into
"could not start", and the reviewer sees the command's stderr without the line.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from harness.sandbox.base import START_LINE, is_start_checked, split_start, start_checked
from harness.sandbox.fake import exited

ARGV = ("python", "-m", "pytest", "-q")


@given(st.binary(max_size=200))
def test_a_started_command_stays_started_whatever_it_writes_next(tail: bytes) -> None:
    wrapped = start_checked(ARGV)
    started, res = split_start(exited(wrapped, 127, stderr=START_LINE + tail), ARGV)
    assert started
    assert res.stderr == tail and res.stderr_total == len(tail)
    assert res.argv == ARGV and res.exit_code == 127


@given(st.binary(max_size=200).filter(lambda b: not b.startswith(START_LINE)))
def test_without_the_line_first_nothing_started(stderr: bytes) -> None:
    started, res = split_start(exited(start_checked(ARGV), 127, stderr=stderr), ARGV)
    assert not started
    assert res.argv == ARGV


def test_the_line_written_later_does_not_count() -> None:
    started, _ = split_start(exited(ARGV, 0, stderr=b"noise\n" + START_LINE), ARGV)
    assert not started


def test_the_wrapper_runs_the_command_itself_and_is_recognised() -> None:
    wrapped = start_checked(ARGV)
    assert wrapped[-len(ARGV) :] == ARGV and wrapped[0] == "/bin/sh"
    assert is_start_checked(wrapped) and not is_start_checked(ARGV)
    assert not is_start_checked(wrapped[:4])  # the wrapper without a command
