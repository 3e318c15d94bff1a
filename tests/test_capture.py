"""The bounded-output loop every local sandbox command runs under (real processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from harness import _proc
from harness._proc import capture

# Writes ``n`` numbered lines, one write each, ``gap`` seconds apart, then its exit time.
CHATTY = """
import os, sys, time
n, gap = int(sys.argv[1]), float(sys.argv[2])
for i in range(n):
    os.write(2, b"line %06d\\n" % i)
    time.sleep(gap)
os.write(1, b"exit %.6f\\n" % time.monotonic())
"""


def _start(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", CHATTY, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    reads: list[int] = []
    real = os.read

    def counting(fd: int, n: int) -> bytes:
        reads.append(fd)
        return real(fd, n)

    monkeypatch.setattr(os, "read", counting)
    return reads


def test_a_long_process_writing_line_by_line_is_read_in_paces_and_nothing_is_lost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 2,000 writes over ~1 s: a reader woken by each write reads ~2,000 times (and costs
    # the writer a wake-up each); a paced one reads every few milliseconds.
    monkeypatch.setattr(_proc, "_PACE_AFTER", 0.0)
    reads = _count_reads(monkeypatch)
    proc = _start("2000", "0.0004")
    got = capture(proc, stdin=None, deadline=time.monotonic() + 60, cap=1 << 20)
    assert got.returncode == 0 and got.killed is None
    lines = got.stderr.decode().splitlines()
    assert lines == [f"line {i:06d}" for i in range(2000)]
    assert got.stderr_total == len(got.stderr)
    assert len(reads) < 500, f"{len(reads)} reads for 2,000 writes: not paced"


def test_the_processes_exit_ends_a_pause_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # With a pace far longer than the process's life after its last write, only the exit
    # ending the pause returns the capture promptly.
    monkeypatch.setattr(_proc, "_PACE", 20.0)
    monkeypatch.setattr(_proc, "_PACE_AFTER", 0.0)
    proc = _start("40", "0.01")
    got = capture(proc, stdin=None, deadline=time.monotonic() + 60, cap=1 << 20)
    returned = time.monotonic()
    exited = float(got.stdout.split()[1])
    assert got.returncode == 0
    assert len(got.stderr.decode().splitlines()) == 40
    assert returned - exited < 5.0, f"capture returned {returned - exited:.2f} s after the exit"


def test_a_paced_process_is_still_killed_at_its_deadline() -> None:
    proc = _start("1000000", "0.001")
    began = time.monotonic()
    got = capture(proc, stdin=None, deadline=began + 1.0, cap=4096, kill=proc.kill)
    assert got.killed == "wall_clock"
    assert time.monotonic() - began < 10.0
    assert len(got.stderr) == 4096 and got.stderr_total > 4096  # kept the cap, counted the rest


def test_a_process_filling_the_pipe_is_counted_whole_and_kept_to_its_cap() -> None:
    code = "import os\nblock = b'x' * 65536\nfor _ in range(320): os.write(1, block)\n"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    got = capture(proc, stdin=None, deadline=time.monotonic() + 60, cap=1 << 20)
    assert got.returncode == 0
    assert got.stdout_total == 320 * 65536 and len(got.stdout) == 1 << 20
