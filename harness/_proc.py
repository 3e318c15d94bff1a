"""The one subprocess helper of `harness` (sandbox backends aside).

Every module that needs an external program (git, tar, ...) goes through :func:`run`, so
that timeouts, captured output and a start failure are handled in exactly one way: a
program that starts and fails returns a :class:`Completed` with its status; a program that
cannot start at all (missing binary, bad cwd) or outlives its ``timeout`` raises
:class:`~harness.errors.InfraError`.

:func:`capture` is the bounded-output event loop shared by the sandbox backends that run
processes themselves (``sandbox/local.py``): it keeps the first N bytes of each stream,
counts the rest, enforces a deadline through a caller-supplied ``kill`` and reaps with
``wait4`` so CPU time and peak RSS are known.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import resource
import select
import selectors
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from harness.errors import InfraError

__all__ = ["Captured", "Completed", "capture", "run"]


class Completed(BaseModel):
    """What a finished program did."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    argv: tuple[str, ...]
    returncode: int
    """Exit status; negative ``-N`` when killed by signal ``N``."""
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        """True when the program exited with status 0."""
        return self.returncode == 0


def run(
    argv: Sequence[str],
    *,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    input: bytes | None = None,
    check: bool = False,
) -> Completed:
    """Run ``argv`` to completion and capture its output.

    ``env`` replaces the environment when given (pass ``{**os.environ, ...}`` to extend).
    With ``check=True`` a non-zero status raises instead of returning.

    Raises:
        InfraError: the program could not be started, timed out, or (``check``) failed;
            the message names the program, the status and the tail of its stderr.

    """
    args = tuple(str(a) for a in argv)
    if not args:
        raise ValueError("run() needs a non-empty argv")
    try:
        proc = subprocess.run(
            args,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            timeout=timeout,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise InfraError(
            f"{args[0]}: did not finish within {timeout} s (argv: {list(args)})",
            reason="timeout",
        ) from exc
    except OSError as exc:
        raise InfraError(
            f"{args[0]}: could not start ({exc.strerror or exc}; cwd={cwd})", reason="exec"
        ) from exc
    done = Completed(argv=args, returncode=proc.returncode, stdout=proc.stdout, stderr=proc.stderr)
    if check and not done.ok:
        tail = proc.stderr[-2000:].decode("utf-8", "replace").strip()
        raise InfraError(
            f"{args[0]}: exited with status {proc.returncode} (argv: {list(args)}): {tail}",
            reason="exit",
        )
    return done


class Captured(BaseModel):
    """What :func:`capture` saw of one process."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    returncode: int | None
    stdout: bytes
    stderr: bytes
    stdout_total: int
    stderr_total: int
    killed: Literal["wall_clock", "cpu"] | None
    ended: float
    cpu_s: float | None
    maxrss: int | None
    """Peak RSS in bytes of the process and its waited-for descendants (rusage)."""


def capture(
    proc: subprocess.Popen[bytes],
    *,
    stdin: bytes | None,
    deadline: float,
    cap: int,
    cpu_limit: float | None = None,
    cpu_used: Callable[[], float | None] | None = None,
    kill: Callable[[], None] | None = None,
) -> Captured:
    """Feed ``stdin``, keep the first ``cap`` bytes of each stream, reap with rusage.

    Memory stays bounded (the rest is counted, not kept). At ``deadline``, or when
    ``cpu_used()`` exceeds ``cpu_limit``, ``kill`` is called and the reason recorded; when
    the process exited but descendants hold its pipes open, they are killed after 0.5 s.
    A long process writing in small pieces is read in paces (:class:`_Pacer`).
    """
    kill = kill or proc.kill
    keep = {"out": bytearray(), "err": bytearray()}
    total = {"out": 0, "err": 0}
    killed: Literal["wall_clock", "cpu"] | None = None
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout.fileno(), selectors.EVENT_READ, "out")
    sel.register(proc.stderr.fileno(), selectors.EVENT_READ, "err")
    pending = memoryview(stdin or b"")
    if proc.stdin is not None:
        os.set_blocking(proc.stdin.fileno(), False)
        if pending:
            sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE, "in")
        else:
            proc.stdin.close()
    pacer = _Pacer(proc)
    cpu_checked = float("-inf")
    exited_at: float | None = None
    while sel.get_map():
        now = time.monotonic()
        if killed is None and now >= deadline:
            killed = "wall_clock"
            kill()
        elif cpu_limit is not None and cpu_used is not None and killed is None:
            used = cpu_used() if now - cpu_checked >= _CPU_EVERY else None
            cpu_checked = now if used is not None else cpu_checked
            if used is not None and used > cpu_limit:
                killed = "cpu"
                kill()
        if exited_at is None and _exited(proc.pid):
            exited_at = now
        elif exited_at is not None and now - exited_at > 0.5:
            kill()
        elif killed is None and not pending:
            pacer.pause(now, deadline)
            now = time.monotonic()
        wait = 0.25 if killed is None else 0.05
        for key, _ in sel.select(timeout=max(0.0, min(deadline - now, wait))):
            name = key.data
            if name == "in":
                assert proc.stdin is not None
                try:
                    pending = pending[os.write(key.fd, pending[:65536]) :]
                except BlockingIOError:
                    continue
                except BrokenPipeError:
                    pending = pending[:0]
                if not pending:
                    sel.unregister(key.fd)
                    proc.stdin.close()
                continue
            chunk = os.read(key.fd, _READ)
            pacer.last = len(chunk)
            if not chunk:
                sel.unregister(key.fd)
                continue
            total[name] += len(chunk)
            room = cap - len(keep[name])
            if room > 0:
                keep[name] += chunk[:room]
    sel.close()
    pacer.close()
    for f in (proc.stdin, proc.stdout, proc.stderr):
        if f is not None:
            f.close()
    status, usage = _reap(proc, max(deadline, time.monotonic()) + 5.0, kill)
    ended = time.monotonic() if exited_at is None else exited_at
    return Captured(
        returncode=status,
        stdout=bytes(keep["out"]),
        stderr=bytes(keep["err"]),
        stdout_total=total["out"],
        stderr_total=total["err"],
        killed=killed,
        ended=ended,
        cpu_s=None if usage is None else usage.ru_utime + usage.ru_stime,
        maxrss=None if usage is None else usage.ru_maxrss * 1024,
    )


_CPU_EVERY = 0.1
"""Seconds between two readings of the process tree's CPU time (a cgroup file)."""
_PACE_AFTER = 0.2
"""Seconds a process runs before its output is read in paces rather than per write."""
_PACE = 0.02
"""Seconds between two reads of a paced process's output."""
_READ = 1 << 20
_PACE_BELOW = 64 * 1024
"""A read this large means the pipe is filling: read again at once."""


class _Pacer:
    """Reads a long process that writes in small pieces every few ms, not on each write.

    A test runner streaming a record per test wakes a reader blocked on its pipe with each
    write, and pays for the wake-up itself. Once the process has run ``_PACE_AFTER``
    seconds, the loop pauses ``_PACE`` between reads instead. The process's exit ends a
    pause at once (a pidfd), and a read that found the pipe filling is followed by the
    next at once; the pipe gets 1 MiB of room, so a paced writer rarely waits.
    """

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                # Past the system's limit for this user a smaller pipe only paces slower.
                with contextlib.suppress(OSError, AttributeError):
                    fcntl.fcntl(stream.fileno(), fcntl.F_SETPIPE_SZ, _READ)
        try:
            self._exit_fd: int | None = os.pidfd_open(proc.pid)
        except (OSError, AttributeError):
            self._exit_fd = None  # no pidfd in this kernel: a pause runs its length
        self._began = time.monotonic()
        self.last = 0
        """Bytes the last read returned."""

    def pause(self, now: float, deadline: float) -> None:
        """Wait for the next pace, when this process is paced; never past ``deadline``."""
        if now - self._began <= _PACE_AFTER or self.last >= _PACE_BELOW:
            return
        seconds = min(_PACE, deadline - now)
        if seconds <= 0:
            return
        if self._exit_fd is None:
            time.sleep(seconds)
        else:
            select.select([self._exit_fd], [], [], seconds)

    def close(self) -> None:
        """Release the exit descriptor."""
        if self._exit_fd is not None:
            os.close(self._exit_fd)
            self._exit_fd = None


def _exited(pid: int) -> bool:
    """Tell whether ``pid`` has exited, without reaping it."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def _reap(
    proc: subprocess.Popen[bytes], deadline: float, kill: Callable[[], None]
) -> tuple[int | None, resource.struct_rusage | None]:
    """Wait for ``proc`` with ``wait4`` (for its rusage); kill it at ``deadline``."""
    pause = 0.0005
    while True:
        try:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        except ChildProcessError:
            return proc.poll(), None
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage
        if time.monotonic() > deadline:
            kill()
        time.sleep(pause)
        pause = min(pause * 2, 0.02)
