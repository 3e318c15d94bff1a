"""The `Sandbox` protocol every backend implements, and the data it returns.

A backend turns a :class:`~harness.cases.model.PhaseContract` into an isolated place to
run commands. The contract is all-or-nothing: a bound the backend cannot enforce raises
:class:`~harness.errors.ContractUnenforceableError` when the session opens (fail closed),
unless the caller passed that bound in ``downgrade``; the downgrade is then reported in
:attr:`SandboxSession.downgraded` so it reaches the run record.

Contract of :meth:`SandboxSession.exec`:

* a command that runs and fails (non-zero exit, killed by a bound) **returns** an
  :class:`ExecResult` whose :attr:`~ExecResult.termination` says which bound fired;
* a sandbox that cannot run the command at all **raises**
  :class:`~harness.errors.SandboxUnavailableError`.

Layout inside every sandbox: the workspace (``paths.workspace``) is the only writable
tree that survives between commands of a session, besides ``paths.io``, a private folder
for protocol files (the agent's result, the request) that is never part of the candidate.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from harness.cases.model import PhaseContract

__all__ = [
    "DROP_BOX",
    "DROP_BOX_MODE",
    "IO_MB",
    "SANDBOX_GID",
    "SANDBOX_IO",
    "SANDBOX_UID",
    "SANDBOX_WORKSPACE",
    "START_LINE",
    "Bound",
    "DropBox",
    "ExecResult",
    "Sandbox",
    "SandboxPaths",
    "SandboxSession",
    "SealedView",
    "Termination",
    "ViewMount",
    "is_start_checked",
    "lock_plan",
    "session_env",
    "split_start",
    "start_checked",
]

SANDBOX_UID = 65534
"""Every sandboxed command runs as this unprivileged uid (``nobody``), never as root.

A uid check, not a capability check, guards host kernel state such as
``/proc/sys/kernel/core_pattern``: a process that is uid 0 on the host can change it even
with every capability dropped. The workspace and the protocol folder are owned by it."""
SANDBOX_GID = 65534
"""The group of :data:`SANDBOX_UID` (``nogroup``); supplementary groups are cleared."""
SANDBOX_WORKSPACE = "/workspace"
"""Where the workspace appears inside every sandbox (no host path is visible)."""
SANDBOX_IO = "/harness/io"
"""Where the protocol folder appears inside every sandbox."""

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""The minimal system's ``PATH``; a view's ``path_prefix`` comes first, nothing else."""


class Termination(str, enum.Enum):
    """Why a command stopped. Which bound fired is data, never a string to match."""

    EXIT = "exit"
    """The process exited on its own (any status)."""
    WALL_CLOCK = "wall_clock"
    CPU = "cpu"
    MEMORY = "memory"
    PIDS = "pids"
    DISK = "disk"
    SIGNAL = "signal"
    """Killed by a signal that no bound of ours explains."""


class Bound(BaseModel):
    """The bound that fired: its kind, the configured limit and the observed value."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Termination
    limit: float
    """Configured limit, in the unit of the kind (seconds, MiB, processes)."""
    observed: float | None = None
    """What was measured when it fired, where the backend can tell."""


class ExecResult(BaseModel):
    """What one command did inside a sandbox."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    argv: tuple[str, ...]
    exit_code: int | None
    """Exit status, or ``None`` when the process was killed by a signal."""
    signal: int | None = None
    """Terminating signal number, if any."""
    termination: Termination
    bound: Bound | None = None
    """Set when ``termination`` is a resource bound."""
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    """True when stdout exceeded the contract's ``output_bytes`` and was cut."""
    stderr_truncated: bool = False
    stdout_total: int = 0
    """Bytes the command wrote to stdout, including any cut."""
    stderr_total: int = 0
    duration_s: float = Field(ge=0)
    cpu_s: float | None = None
    peak_memory_mb: float | None = None

    @property
    def ok(self) -> bool:
        """True when the process exited on its own with status 0."""
        return self.termination is Termination.EXIT and self.exit_code == 0


DROP_BOX_MODE = 0o1733
"""A drop box's mode: anyone may add a file, nobody but its root owner list or remove one."""
IO_MB = 16
"""Size of every backend's protocol folder (its own tmpfs, where the host can mount one):
a workspace filled to its disk bound never leaves the harness without room for its files."""
DROP_BOX = SANDBOX_IO + "/.drop-box"
"""Where a session's drop box goes by default (a backend may make it when the session opens)."""


class DropBox(BaseModel):
    """What a drop box held when the harness read it back (see ``make_drop_box``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    files: dict[str, bytes] = Field(default_factory=dict)
    """Regular files by name, each at most the reader's ``max_bytes``."""
    odd: tuple[str, ...] = ()
    """What only a sandboxed command can have done: the box replaced or not the harness's,
    an entry that is not a regular file, a file over ``max_bytes``, more than ``max_files``."""


class SandboxPaths(BaseModel):
    """Absolute paths as seen by commands inside the sandbox."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workspace: str
    io: str


class ViewMount(BaseModel):
    """A host directory shown read-only inside the sandbox at a fixed path."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str
    """Absolute host path (local backend: bound read-only; docker: copied into the image)."""
    target: str
    """Absolute path inside the sandbox, e.g. ``/opt/harness/env/<digest>``."""

    @field_validator("source", "target")
    @classmethod
    def _absolute(cls, value: str) -> str:
        parts = PurePosixPath(value).parts
        if not value.startswith("/") or ".." in parts or len(parts) < 2:
            raise ValueError(f"{value!r} must be an absolute path below / without '..'")
        return value


class SealedView(BaseModel):
    """What a phase may see besides its workspace, io dir, private /tmp and minimal system.

    Filled by the trial from declared inputs only: built environments (case and agent), the
    agent's own declared files, and at most one harness-provided endpoint. Nothing else of
    the host reaches the sandbox.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    mounts: tuple[ViewMount, ...] = ()
    path_prefix: tuple[str, ...] = ()
    """Sandbox directories put first on ``PATH``, in order."""
    env: dict[str, str] = Field(default_factory=dict)
    """Variables set for every command of the session (after the contract's allowlist)."""
    endpoint: str | None = None
    """Host unix socket of the one harness-provided endpoint (the model gateway), relayed
    into the agent phase; ``None`` means no endpoint at all."""


START_LINE = b"harness: started\n"
"""The line :func:`start_checked` writes to stderr once the command resolved."""
_UNRESOLVED_LINE = b"harness: not found\n"
_START_SCRIPT = (
    'if command -v -- "$1" >/dev/null 2>&1; then printf "harness: started\\n" >&2; '
    'exec "$@"; fi; printf "harness: not found\\n" >&2; exit 127'
)


def start_checked(argv: Sequence[str]) -> tuple[str, ...]:
    """Return ``argv`` wrapped so it runs only once the session's shell resolves ``argv[0]``.

    The wrapper (``/bin/sh``, before anything of ``argv`` runs) resolves the first word
    (``command -v``: a name on ``PATH`` or an executable path) and writes one line to
    stderr: :data:`START_LINE`, then becomes ``argv``; or "not found" and exits 127. Read
    the result with :func:`split_start`. Nothing of ``argv`` can write before that line,
    so candidate code exiting 127 under the tests is never taken for "the verifier could
    not start", and the check costs no separate command.
    """
    return ("/bin/sh", "-c", _START_SCRIPT, "sh", *argv)


def split_start(res: ExecResult, argv: Sequence[str]) -> tuple[bool, ExecResult]:
    """Return whether :func:`start_checked`'s command started, and its result without the line.

    The result's ``argv`` is ``argv`` (the command as given), its stderr what the command
    wrote. Not started: the first word did not resolve, or the wrapper never said so
    (killed first); either way no code of ``argv`` ran.
    """
    started = res.stderr.startswith(START_LINE)
    if not started:
        return False, res.model_copy(update={"argv": tuple(argv)})
    cut = len(START_LINE)
    return True, res.model_copy(
        update={
            "argv": tuple(argv),
            "stderr": res.stderr[cut:],
            "stderr_total": max(0, res.stderr_total - cut),
        }
    )


def is_start_checked(argv: Sequence[str]) -> bool:
    """Tell whether ``argv`` was made by :func:`start_checked` (the fake backend unwraps it)."""
    return tuple(argv[:4]) == ("/bin/sh", "-c", _START_SCRIPT, "sh") and len(argv) > 4


def session_env(
    base: Mapping[str, str],
    contract: PhaseContract,
    view: SealedView | None,
    extra: Mapping[str, str] | None,
    host_env: Mapping[str, str],
) -> dict[str, str]:
    """Build a command's whole environment, the same on every backend.

    In order: the backend's ``base`` (``HOME``, ``LANG``, ``TMPDIR``...), ``PATH`` = the
    view's ``path_prefix`` then :data:`SYSTEM_PATH` (never the harness's own interpreter
    directory), the contract's allowlisted ``host_env`` variables, the view's ``env``,
    then the command's ``extra``.
    """
    env = dict(base)
    prefix = view.path_prefix if view is not None else ()
    env["PATH"] = ":".join((*prefix, SYSTEM_PATH))
    env.update({k: host_env[k] for k in contract.env if k in host_env})
    if view is not None:
        env.update(view.env)
        if view.endpoint is not None:
            from harness.sandbox._relay import endpoint_url

            env["HARNESS_ENDPOINT"] = endpoint_url()
    env.update(extra or {})
    return env


@runtime_checkable
class SandboxSession(Protocol):
    """One isolated environment for one phase of one trial; disposed of afterwards."""

    @property
    def paths(self) -> SandboxPaths:
        """Paths of the workspace and the private protocol folder, inside the sandbox."""
        ...

    @property
    def downgraded(self) -> tuple[str, ...]:
        """Bounds the caller allowed this session not to enforce."""
        ...

    @property
    def image_id(self) -> str | None:
        """Identity of the environment image, when the backend has one."""
        ...

    def put_tree(self, src: Path, dest: str = "", *, locked: Sequence[str] = ()) -> None:
        """Copy the host directory ``src`` into the workspace at relative ``dest``.

        ``locked``: regular files (relative to ``src``) the sandboxed user may read but never
        change, replace, rename or remove (see :func:`lock_plan`).

        Raises:
            SandboxUnavailableError: the copy could not be made.
        """
        ...

    def get_tree(
        self, dest: Path, *, max_files: int | None = None, max_bytes: int | None = None
    ) -> None:
        """Copy the whole workspace out into the (empty or missing) host directory ``dest``.

        Raises:
            SandboxUnavailableError: the copy could not be made.
            CandidateTooLarge: the workspace holds more than ``max_files`` entries or
                ``max_bytes`` bytes (found before or while copying, never after).
        """
        ...

    def write_file(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` (absolute inside the sandbox, under workspace or io)."""
        ...

    def read_file(self, path: str, limit: int | None = None) -> bytes | None:
        """Read up to ``limit`` bytes of ``path`` inside the sandbox; ``None`` if absent."""
        ...

    def remove(self, path: str) -> None:
        """Remove a file or tree at ``path`` inside the sandbox, if present."""
        ...

    def make_drop_box(self, path: str) -> None:
        """Create the folder ``path`` under the io folder as a drop box.

        Owned by root (by the harness's user when the harness runs without root), mode
        :data:`DROP_BOX_MODE`: a sandboxed command may add a file it names, but never list
        the folder, nor remove, rename or read another's file without knowing its name.

        Raises:
            SandboxUnavailableError: the folder could not be made.
        """
        ...

    def read_drop_box(self, path: str, *, max_files: int, max_bytes: int) -> DropBox:
        """Read back what sandboxed commands left in the drop box at ``path``.

        Never follows a link, never opens anything but a regular file, never reads more
        than ``max_files`` files of ``max_bytes`` each; anything else is in ``odd``.
        """
        ...

    def exec(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        """Run ``argv`` under the session's contract.

        ``env`` is added to the minimal environment (PATH, HOME, LANG) and the contract's
        allowlisted host variables; nothing else from the host reaches the command.
        ``timeout`` may only shorten the contract's wall-clock bound. ``cwd`` defaults to
        the workspace.

        Raises:
            SandboxUnavailableError: the command could not be started at all.
        """
        ...

    def interrupt(self) -> None:
        """Kill the commands running now (safe from another thread); the session stays open.

        The interrupted ``exec`` returns its result as usual (killed by a signal). Used to
        stop an agent phase whose outcome is already decided (e.g. by the model gateway).
        """
        ...

    def close(self) -> None:
        """Kill anything still running and remove every trace of the session."""
        ...

    def __enter__(self) -> SandboxSession: ...

    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class Sandbox(Protocol):
    """A sandbox backend: opens isolated sessions that honour a phase contract."""

    name: str

    @property
    def drop_box_owner(self) -> int:
        """The uid that owns the drop boxes sessions make (:meth:`SandboxSession.make_drop_box`).

        Root, or the harness's own user where commands run as that user; what a command's
        guard checks a box against before leaving anything in it.
        """
        ...

    def open(
        self,
        contract: PhaseContract,
        *,
        label: str,
        downgrade: frozenset[str] = frozenset(),
        view: SealedView | None = None,
    ) -> SandboxSession:
        """Open a fresh session with an empty workspace.

        ``label`` names the session for cleanup and logs (release, case, trial, phase).
        ``downgrade`` lists bound names (``network``, ``memory``, ``pids``, ``cpu``,
        ``disk``, ``read_only_root``) the caller accepts not being enforced.
        ``view`` adds what the phase may see besides the minimal system: read-only mounts
        at fixed sandbox paths, directories first on ``PATH``, variables for every command,
        and the relayed endpoint. A view the backend cannot provide is never dropped.

        Raises:
            ContractUnenforceableError: a bound cannot be enforced and was not downgraded.
            SandboxUnavailableError: the backend cannot create a session or cannot provide
                ``view`` (e.g. no way to relay its endpoint).
        """
        ...

    def describe(self) -> Mapping[str, str]:
        """Backend facts for the run record (version, isolation mechanisms in use)."""
        ...


def lock_plan(dest: str, locked: Sequence[str]) -> tuple[list[str], list[str]]:
    """Return the workspace-relative entries to lock and the folders above them.

    A locked file is owned by root with mode 0644 (0755 when it was executable), a locked
    folder (an empty
    ``__pycache__``, so that no compiled module can be planted next to a locked one) by
    root with mode 0755: ownership is the lock, so a copy the run makes is its own to edit
    (as a verifier that copies the tree and patches its copy expects). Every folder from
    the workspace down to them is owned by root with mode 1777: the sandboxed user may
    still create files anywhere (tests write next to their modules), but the sticky bit
    keeps it from removing or renaming what it does not own, so a locked entry can be
    neither edited nor replaced. ``""`` is the workspace.
    """
    base = PurePosixPath(dest) if dest else PurePosixPath()
    entries = [str(base / rel) for rel in locked]
    folders: set[str] = set()
    for rel in entries:
        parent = PurePosixPath(rel).parent
        while True:
            folders.add("" if str(parent) == "." else str(parent))
            if str(parent) == ".":
                break
            parent = parent.parent
    folders -= set(entries)
    return entries, sorted(folders, key=lambda f: (f.count("/"), f))
