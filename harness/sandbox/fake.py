"""An in-process :class:`~harness.sandbox.base.Sandbox` for unit tests of trial logic.

Like httpx's ``MockTransport``: sessions are real temporary folders, but ``exec`` calls a
Python handler instead of starting a process, so tests script exactly what the agent
and the verifier "do" (write files, exit with a status, hit a bound, or break the
infrastructure by raising). It isolates nothing and must never run real work.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.cases.model import PhaseContract
from harness.sandbox._dropbox import make_host_box, read_host_box
from harness.sandbox._treebound import check_host_tree
from harness.sandbox.base import (
    START_LINE,
    DropBox,
    ExecResult,
    SandboxPaths,
    SandboxSession,
    SealedView,
    Termination,
    is_start_checked,
)
from harness.sandbox.owner import owned_prefix

__all__ = ["ExecCall", "FakeSandbox", "FakeSession", "Handler", "exited"]


@dataclass(frozen=True)
class ExecCall:
    """One call to ``exec`` as the handler sees it."""

    argv: tuple[str, ...]
    env: dict[str, str]
    label: str
    workspace: Path
    io: Path
    view: SealedView | None = None
    """The sealed view the session was opened with (mounts are not made: nothing is)."""


Handler = Callable[[ExecCall], ExecResult]


def exited(
    argv: Sequence[str], code: int = 0, stdout: bytes = b"", stderr: bytes = b""
) -> ExecResult:
    """Build an ``ExecResult`` for a process that exited on its own."""
    return ExecResult(
        argv=tuple(argv),
        exit_code=code,
        termination=Termination.EXIT,
        stdout=stdout,
        stderr=stderr,
        stdout_total=len(stdout),
        stderr_total=len(stderr),
        duration_s=0.0,
    )


class FakeSession:
    """A session over a temporary folder; ``exec`` is delegated to the handler."""

    def __init__(
        self,
        handler: Handler,
        label: str,
        log: list[ExecCall],
        view: SealedView | None = None,
    ) -> None:
        self._root = Path(tempfile.mkdtemp(prefix=owned_prefix("fake")))
        (self._root / "workspace").mkdir()
        (self._root / "io").mkdir()
        self._handler = handler
        self._label = label
        self._log = log
        self.view = view
        self.interrupts = 0
        """How many times :meth:`interrupt` was called."""

    @property
    def paths(self) -> SandboxPaths:
        """Real paths of the temporary workspace and io folders."""
        return SandboxPaths(workspace=str(self._root / "workspace"), io=str(self._root / "io"))

    @property
    def downgraded(self) -> tuple[str, ...]:
        """Nothing is downgraded (nothing is enforced either)."""
        return ()

    @property
    def image_id(self) -> str | None:
        """No image."""
        return None

    def _path(self, path: str) -> Path:
        p = Path(path)
        if not p.resolve().is_relative_to(self._root):
            raise ValueError(f"{path} is outside the session")
        return p

    def put_tree(self, src: Path, dest: str = "", *, locked: Sequence[str] = ()) -> None:
        """Copy ``src`` into the workspace (``locked`` is not enforced: nothing is)."""
        shutil.copytree(src, self._root / "workspace" / dest, symlinks=True, dirs_exist_ok=True)

    def get_tree(
        self, dest: Path, *, max_files: int | None = None, max_bytes: int | None = None
    ) -> None:
        """Copy the workspace out (bounded like the real backends)."""
        check_host_tree(str(self._root / "workspace"), max_files, max_bytes)
        shutil.copytree(self._root / "workspace", dest, symlinks=True, dirs_exist_ok=True)

    def write_file(self, path: str, data: bytes) -> None:
        """Write a file inside the session."""
        p = self._path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)

    def read_file(self, path: str, limit: int | None = None) -> bytes | None:
        """Read a file inside the session, or None."""
        p = self._path(path)
        if not p.is_file():
            return None
        data = p.read_bytes()
        return data if limit is None else data[:limit]

    def make_drop_box(self, path: str) -> None:
        """Make the folder (its mode is set; nothing is enforced)."""
        make_host_box(self._path(path), None)

    def read_drop_box(self, path: str, *, max_files: int, max_bytes: int) -> DropBox:
        """Read the folder back like the local backend."""
        owner = os.geteuid()
        return read_host_box(
            self._path(path), owner=owner, max_files=max_files, max_bytes=max_bytes
        )

    def remove(self, path: str) -> None:
        """Remove a file or folder inside the session."""
        p = self._path(path)
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()

    def exec(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        """Hand the call to the handler (a :func:`start_checked` command always resolves)."""
        if is_start_checked(argv):
            res = self.exec(argv[4:], env=env, cwd=cwd, timeout=timeout, stdin=stdin)
            return res.model_copy(
                update={
                    "argv": tuple(argv),
                    "stderr": START_LINE + res.stderr,
                    "stderr_total": res.stderr_total + len(START_LINE),
                }
            )
        call = ExecCall(
            tuple(argv),
            dict(env or {}),
            self._label,
            self._root / "workspace",
            self._root / "io",
            self.view,
        )
        self._log.append(call)
        return self._handler(call)

    def interrupt(self) -> None:
        """Count the request (a handler is a function call: nothing to kill)."""
        self.interrupts += 1

    def close(self) -> None:
        """Remove the folder."""
        shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> SandboxSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class FakeSandbox:
    """A scripted sandbox backend. ``calls`` records every exec, in order."""

    handler: Handler
    name: str = "fake"
    calls: list[ExecCall] = field(default_factory=list)
    opened: list[str] = field(default_factory=list)
    views: list[SealedView | None] = field(default_factory=list)
    """The view each :meth:`open` was given, in order (parallel to ``opened``)."""

    @property
    def drop_box_owner(self) -> int:
        """The harness's own user: the fake's files are its own."""
        return os.geteuid()

    def open(
        self,
        contract: PhaseContract,
        *,
        label: str,
        downgrade: frozenset[str] = frozenset(),
        view: SealedView | None = None,
    ) -> SandboxSession:
        """Open a fresh temporary session."""
        self.opened.append(label)
        self.views.append(view)
        return FakeSession(self.handler, label, self.calls, view)

    def describe(self) -> Mapping[str, str]:
        """Identify the fake."""
        return {"backend": "fake"}
