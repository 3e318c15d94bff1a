"""Frozen models of a golden-set case (``cases/<id>/case.yaml``).

A case keeps together everything one trial needs: the request handed to the agent, the
starting repository state, the tools and limits, the sandbox contract of each phase,
and the verifier that decides. Paths inside a case are relative to the case folder and
may not escape it.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from harness.cases.environment import Environment, relative_path
from harness.frozen import Frozen, FrozenInput

__all__ = [
    "ArchiveRepo",
    "ArtifactRule",
    "Case",
    "FeedbackChannel",
    "FolderRepo",
    "GitRepo",
    "HiddenFile",
    "Limits",
    "PhaseContract",
    "Protection",
    "Reference",
    "RepoSource",
    "Retired",
    "SandboxContract",
    "Verifier",
]

CASE_SCHEMA_VERSION: Final = 1
_ID_RE = r"^[a-z0-9][a-z0-9._-]{0,63}$"

# Upper bounds of a case's sizes: far above any real need, low enough that a typo (or an
# extra 000) is an error naming the field instead of a run that never ends or an rlimit
# the kernel refuses. Documented in docs/inputs.md.
MAX_SECONDS: Final = 7 * 24 * 3600
"""Any wall-clock or CPU bound: a week."""
MAX_MEMORY_MB: Final = 1 << 20
"""1 TiB."""
MAX_DISK_MB: Final = 1 << 24
"""16 TiB."""
MAX_PIDS: Final = 1 << 22
"""Linux's largest ``pid_max``."""
MAX_OUTPUT_BYTES: Final = 1 << 28
"""256 MiB per captured stream (it is held in memory)."""
_ENV_NAME_RE = r"^[A-Za-z_][A-Za-z0-9_]*$"


def _argv(value: tuple[str, ...]) -> tuple[str, ...]:
    """Refuse a command whose program name is empty."""
    if value and not value[0].strip():
        raise ValueError("the program (first element of the command) is empty")
    return value


Argv = Annotated[tuple[str, ...], Field(min_length=1), AfterValidator(_argv)]


def _relative_path(value: str) -> str:
    """Reject absolute paths and paths that climb out of the case folder."""
    return relative_path(value, "the case folder")


RelPath = Annotated[str, Field(min_length=1), AfterValidator(_relative_path)]


class FolderRepo(FrozenInput):
    """Starting state kept as a folder inside the case."""

    kind: Literal["folder"] = "folder"
    path: RelPath
    """Folder, relative to the case folder, copied as the agent's workspace."""


class GitRepo(FrozenInput):
    """Starting state as a git repository (local path or URL) checked out at a commit."""

    kind: Literal["git"] = "git"
    url: str
    """Repository location; a relative path is resolved against the case folder."""
    commit: Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")]
    """Full 40-hex commit id (a branch name would let the starting state move)."""


class ArchiveRepo(FrozenInput):
    """Starting state as a tar or zip archive inside the case, pinned by sha256."""

    kind: Literal["archive"] = "archive"
    path: RelPath
    """Archive file, relative to the case folder (.tar, .tar.gz, .tgz, .zip)."""
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    """Expected sha256 (hex) of the archive bytes; a mismatch is a case error."""


RepoSource = Annotated[FolderRepo | GitRepo | ArchiveRepo, Field(discriminator="kind")]


class Limits(FrozenInput):
    """Budgets handed to the agent (``HARNESS_LIMITS``); exceeding one fails the trial."""

    turns: int | None = Field(default=None, ge=1, le=100_000)
    """Maximum agent turns, as reported by the agent's result."""
    tokens: int | None = Field(default=None, ge=1, le=1_000_000_000)
    """Maximum total tokens, as reported by the agent's result usage."""
    wall_seconds: float = Field(default=600.0, gt=0, le=MAX_SECONDS)
    """Wall-clock budget of the agent phase (also its sandbox timeout when smaller)."""


class PhaseContract(FrozenInput):
    """Sandbox contract for one phase. Every bound is enforced or the trial is infra_error."""

    image: str | None = None
    """Container image for container backends; ignored by the local backend."""
    network: Literal["none", "host"] = "none"
    """``none`` denies all network access (a fresh network namespace)."""
    timeout_seconds: float = Field(default=300.0, gt=0, le=MAX_SECONDS)
    """Wall-clock bound; the whole process tree is killed when it fires."""
    cpu_seconds: float | None = Field(default=None, gt=0, le=MAX_SECONDS)
    """CPU-time bound of the phase's processes."""
    cpus: float | None = Field(default=None, gt=0, le=1024)
    """CPU share (container backends)."""
    memory_mb: int = Field(default=2048, ge=16, le=MAX_MEMORY_MB)
    """Memory bound, swap included."""
    pids: int = Field(default=256, ge=8, le=MAX_PIDS)
    """Maximum number of processes and threads alive at once."""
    disk_mb: int | None = Field(default=1024, ge=1, le=MAX_DISK_MB)
    """Bound on bytes written in the sandbox's writable area; ``null`` for none."""
    output_bytes: int = Field(default=1 << 20, ge=1024, le=MAX_OUTPUT_BYTES)
    """Per-stream cap on captured stdout/stderr; truncation is recorded."""
    read_only_root: bool = True
    """Everything outside the workspace (and a private /tmp) is read-only."""
    env: tuple[Annotated[str, Field(pattern=_ENV_NAME_RE)], ...] = ()
    """Host environment variables allowed through (by name); nothing else leaks in."""
    user: str | None = None
    """Run as this user (container backends); ``null`` keeps the backend default, the
    unprivileged uid 65534. Root (``root``, ``0``) is refused: no sandboxed process is
    host root."""

    @field_validator("user")
    @classmethod
    def _not_root(cls, v: str | None) -> str | None:
        if v is not None and v.partition(":")[0].strip() in ("", "0", "root"):
            raise ValueError(
                f"user {v!r}: sandboxed commands never run as root; name an unprivileged "
                "user or leave it out (uid 65534)"
            )
        return v


class SandboxContract(FrozenInput):
    """Separate contracts for the agent phase and the verifier phase."""

    agent: PhaseContract = PhaseContract()
    verifier: PhaseContract = PhaseContract()
    candidate_files: int = Field(default=20_000, ge=1)
    """Most entries (files, links, directories) a candidate tree may hold; over it the
    trial fails with the ``files`` bound before the harness copies or hashes anything."""
    candidate_mb: int = Field(default=200, ge=1)
    """Most bytes (MiB, regular files) a candidate tree may hold; over it: ``disk``.

    Every path counts: a file with hard links counts its full size once per link."""


class ArtifactRule(FrozenInput):
    """A file the verifier must leave behind, and what must hold of it."""

    path: RelPath
    """Path relative to the workspace."""
    rule: Literal["exists", "non_empty", "junit", "json"] = "non_empty"
    """``junit`` parses JUnit XML; ``json`` must parse as JSON."""
    min_tests: int = Field(default=1, ge=0)
    """For ``junit``: fewer executed tests than this is ``no_tests``."""
    fail_to_pass: tuple[str, ...] = ()
    """For ``junit``: tests (``classname::name`` or ``name``) that must be present and pass."""
    pass_to_pass: tuple[str, ...] = ()
    """For ``junit``: tests that passed before the change and must still pass."""


class HiddenFile(FrozenInput):
    """A file copied into the verifier sandbox only; the agent never sees it."""

    src: RelPath
    """Source, relative to the case folder."""
    dest: RelPath
    """Destination, relative to the workspace; overwrites whatever the candidate has there."""


DEFAULT_PROTECTED: Final = (
    "tests/**",
    "test/**",
    "testing/**",
    "**/conftest.py",
    "**/pytest.ini",
    "**/.pytest.ini",
    "**/pytest.toml",
    "**/.pytest.toml",
    "**/tox.ini",
    "**/setup.cfg",
    "**/pyproject.toml",
    "**/sitecustomize.py",
    "**/usercustomize.py",
    "**/*.pth",
    "**/*.dist-info/**",
    "**/*.egg-info/**",
    "**/*.egg-link",
)
"""Python/pytest defaults: test folders and everything that configures or extends the
runner (config files count only through their runner sections, see docs/verifier-tree.md)."""


class Protection(FrozenInput):
    """What the candidate may not change: the verifier restores it from the starting state."""

    defaults: bool = True
    """Protect :data:`DEFAULT_PROTECTED` besides ``paths``."""
    paths: tuple[str, ...] = ()
    """More glob patterns, relative to the workspace (``*`` within a name, ``**`` across
    folders); the destinations of hidden files are always protected."""
    allow: tuple[str, ...] = ()
    """Patterns the candidate may change after all (the task is to change those tests)."""


class Mutant(FrozenInput):
    """A known-wrong version of the code, which the candidate's tests must catch.

    For cases whose task is to write a test. The verifier's command runs on it in a fresh
    sandbox on the same tree, at the same path, with ``replace``'s files in place of the
    workspace's, and at the same time as the judged run: nothing but those files (not the
    clock) tells the runs apart.
    Every test of ``must_fail`` must be in the run's JUnit reports and fail (or error)
    there, every time it ran; else the trial fails (``test_failure``).
    """

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,39}$")
    """Names the check on the verdict (``mutant.<name>``)."""
    replace: tuple[HiddenFile, ...] = Field(min_length=1)
    """Files of the case folder (``src``, never shown to the agent) written over the tree's
    ``dest`` for this run only."""
    must_fail: tuple[str, ...] = Field(min_length=1)
    """Tests (``classname::name``, ``name`` or a pytest node id) that must fail on it."""


class Verifier(FrozenInput):
    """How execution decides: a command, its expected exit status, required artifacts."""

    command: Argv
    """argv run in the workspace of a fresh verifier sandbox (use ``[sh, -c, ...]`` for shell)."""
    expected_exit: int = Field(default=0, ge=0, le=255)
    """Exit status that counts as success (together with every artifact rule)."""
    artifacts: tuple[ArtifactRule, ...] = ()
    """Files that must exist afterwards, with their rules."""
    hidden: tuple[HiddenFile, ...] = ()
    """Files injected only into the verifier sandbox."""
    protect: Protection = Protection()
    """Paths restored from the starting state before verifying (tampering is recorded)."""
    mutants: tuple[Mutant, ...] = ()
    """Known-wrong versions of the code the candidate's tests must catch (see :class:`Mutant`);
    they need a ``junit`` artifact."""

    @field_validator("command", mode="before")
    @classmethod
    def _split_string(cls, v: object) -> object:
        if isinstance(v, str):
            if not v.strip():
                raise ValueError("the command is an empty string")
            return ("sh", "-c", v)
        return v

    @model_validator(mode="after")
    def _mutants_are_judged(self) -> Verifier:
        if self.mutants and not any(rule.rule == "junit" for rule in self.artifacts):
            raise ValueError("mutants need a junit artifact: their tests are read from it")
        names = [m.name for m in self.mutants]
        if len(set(names)) != len(names):
            raise ValueError(f"mutant names must be unique, got {names}")
        return self


class Reference(FrozenInput):
    """A reference solution, never shown to the agent; proves the verifier can go green."""

    patch: RelPath
    """Unified diff (``git apply`` format), relative to the case folder."""


class Retired(FrozenInput):
    """A retired case is kept for history but no longer run."""

    date: dt.date
    reason: str = Field(min_length=1)


class FeedbackChannel(FrozenInput):
    """Signals a correction attempt may see (what the deployed agent could also observe)."""

    public_command: Argv | None = None
    """A command whose output the deployed agent could see (e.g. the public test suite)."""
    hidden_diagnostics: bool = False
    """Whether hidden-test names and messages may reach the agent (default: never)."""


class Case(FrozenInput):
    """One versioned golden-set case."""

    schema_version: Literal[1] = CASE_SCHEMA_VERSION
    id: Annotated[str, Field(pattern=_ID_RE)]
    """Stable identity; the folder name must equal it."""
    version: Annotated[int, Field(ge=1)]
    """Bumped whenever anything about the case changes."""
    title: str = ""
    request: Annotated[str, Field(min_length=1)]
    """The task as handed to the agent (markdown)."""
    repo: RepoSource
    tools: tuple[str, ...] = ()
    """Tool names the agent may use (``HARNESS_TOOLS``)."""
    limits: Limits = Limits()
    contract: SandboxContract = SandboxContract()
    verifier: Verifier
    reference: Reference | None = None
    lane: Literal["exec", "judgment"] = "exec"
    """``judgment`` cases have no executable oracle: reported apart, never scored."""
    expect: Literal["change", "abstain"] = "change"
    """``abstain``: the correct outcome is to decline (impossible or unsafe request)."""
    feedback: FeedbackChannel = FeedbackChannel()
    critical: bool = False
    """A critical case broken by the candidate fails the gate outright."""
    tags: tuple[str, ...] = ()
    retired: Retired | None = None
    environment: Environment | None = None
    """The verifier's (and the agent's shell's) Python environment; paths relative to the
    case folder. Without it the task set's default in harness.yaml applies."""

    def identity(self) -> dict[str, object]:
        """Canonical content for the case digest.

        Fields added after schema 1 shipped enter it only when set, so that cases written
        before them keep their identity.
        """
        data = self.model_dump(mode="json")
        if self.environment is None:
            del data["environment"]
        if self.verifier.protect == Protection():
            del data["verifier"]["protect"]
        if not self.verifier.mutants:
            del data["verifier"]["mutants"]
        for name in ("candidate_files", "candidate_mb"):
            if getattr(self.contract, name) == SandboxContract.model_fields[name].default:
                del data["contract"][name]
        return data

    @model_validator(mode="after")
    def _exec_needs_verifier_reference(self) -> Case:
        if self.lane == "exec" and self.expect == "change" and self.reference is None:
            raise ValueError(
                "an exec-lane case needs a `reference` solution so that "
                "`harness cases validate` can prove its verifier goes green"
            )
        return self
