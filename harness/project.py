"""``harness.yaml`` → :class:`Project`: releases, paths, policy file.

A release says how to invoke the agent and lists the components that define the system
(model id, prompt version, tool definitions, orchestration code, sandbox image, retry
policy). The *system digest* hashes those components, the content of every referenced
file, the task-set digest and the harness version.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from harness._yaml import load_model
from harness.cases.environment import Environment
from harness.digest import digest_bytes, digest_file, tree_digest
from harness.errors import ConfigError
from harness.frozen import FrozenInput
from harness.names import Name
from harness.sandbox.base import SYSTEM_PATH
from harness.system import SystemDefinition

__all__ = [
    "AGENT_DIR",
    "MAX_JOBS",
    "MAX_K",
    "AgentSpec",
    "Components",
    "Price",
    "Project",
    "ProjectFile",
    "Release",
    "RetryPolicy",
    "SimulatedSettings",
    "Upstream",
    "agent_code_digests",
    "load_project",
]

PROJECT_FILE = "harness.yaml"
AGENT_DIR = "/opt/harness/agent"
"""Where a release's declared agent files appear (read-only) in the agent sandbox."""

MAX_K: Final = 100
"""Most trials per case and arm a run may ask for (``--k``); pass^k is flat long before."""
MAX_JOBS: Final = 256
"""Most trials run at once (``--jobs``)."""
_MAX_SECONDS: Final = 7 * 24 * 3600


def _inside_project(value: str) -> str:
    """Accept a path relative to the project naming something inside it (not the root)."""
    if not value or value.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", value):
        raise ValueError(f"expected a path relative to the project folder, got {value!r}")
    parts = [p for p in value.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"path {value!r} leaves the project folder ('..' is not allowed)")
    if not parts:
        raise ValueError(f"path {value!r} names the project folder itself; name a folder in it")
    return "/".join(parts)


ProjectPath = Annotated[str, AfterValidator(_inside_project)]
_Probability = Annotated[float, Field(ge=0, le=1)]


class SimulatedSettings(FrozenInput):
    """Settings of the labelled ``simulated`` demo agent (no LLM: applies or botches)."""

    skill: dict[str, _Probability] = Field(default_factory=dict)
    """Probability of applying the reference change, per case id; ``default`` for the rest."""
    overclaim: float = Field(default=0.0, ge=0, le=1)
    """Probability of claiming success after botching."""
    abstain: dict[str, _Probability] = Field(default_factory=dict)
    """Probability of abstaining, per case id (``default`` for the rest)."""
    learns_from_feedback: float = Field(default=0.0, ge=0, le=1)
    """On a correction attempt that received feedback, probability of fixing."""

    def skill_for(self, case_id: str) -> float:
        """Skill for ``case_id``, falling back to ``default`` (1.0 when absent)."""
        return self.skill.get(case_id, self.skill.get("default", 1.0))

    def abstain_for(self, case_id: str) -> float:
        """Abstention probability for ``case_id`` (``default`` for the rest, else 0)."""
        return self.abstain.get(case_id, self.abstain.get("default", 0.0))


class AgentSpec(FrozenInput):
    """How the agent is invoked in the agent-phase sandbox."""

    adapter: Literal["command", "simulated", "replay"] = "command"
    command: tuple[str, ...] = ()
    """argv for the ``command`` adapter (gets the HARNESS_* protocol variables);
    ``{agent}`` is replaced by the folder holding ``files`` inside the sandbox."""
    files: tuple[str, ...] = ()
    """The agent's own code and data (files or folders, relative to the project): copied
    read-only into the agent sandbox at ``{agent}/<path>`` and hashed into the system
    digest. Nothing else of the project reaches the sandbox."""
    simulated: SimulatedSettings | None = None
    replay_run: Name | None = None
    """For ``replay``: the run whose recorded candidates are re-applied."""
    environment: Environment | None = None
    """The agent's own Python environment (paths relative to the project): mounted only in
    the agent phase at ``/opt/harness/agent-env``, never on ``PATH``; call it by absolute
    path (``/opt/harness/agent-env/bin/python``)."""

    @field_validator("command")
    @classmethod
    def _no_host_paths(cls, argv: tuple[str, ...]) -> tuple[str, ...]:
        if any("{project}" in a for a in argv):
            raise ValueError(
                "'{project}' names a host path, which the sealed agent sandbox cannot see; "
                "list the agent's files under agent.files and refer to them as "
                f"'{{agent}}/<path>' (they appear read-only at {AGENT_DIR})"
            )
        return argv

    @field_validator("files")
    @classmethod
    def _relative(cls, paths: tuple[str, ...]) -> tuple[str, ...]:
        for rel in paths:
            parts = Path(rel).parts
            if not rel or Path(rel).is_absolute() or ".." in parts or rel in (".", "./"):
                raise ValueError(
                    f"agent file {rel!r} must be a path inside the project (relative, no '..')"
                )
        return paths

    @model_validator(mode="after")
    def _command_fits_adapter(self) -> AgentSpec:
        if self.adapter == "command":
            if not self.command:
                raise ValueError("the command adapter needs a non-empty `command` (an argv list)")
            if not self.command[0].strip():
                raise ValueError("the program (first element of `command`) is empty")
        elif self.command:
            raise ValueError(f"`command` is only used by the command adapter, not {self.adapter!r}")
        if self.simulated is not None and self.adapter != "simulated":
            raise ValueError(f"`simulated` settings are ignored by the {self.adapter!r} adapter")
        return self


class RetryPolicy(FrozenInput):
    """Correction attempts: allowed only when a verifier run produced new evidence."""

    max_attempts: int = Field(default=1, ge=1, le=10)
    stop_on_identical_failure: bool = True
    stop_on_infra_error: bool = True
    wall_seconds: float | None = Field(default=None, gt=0, le=_MAX_SECONDS)
    """Budget of wall seconds per trial across attempts (waits for the upstream's lease,
    which are other trials' time, are not counted)."""
    infra_retries: int = Field(default=1, ge=0, le=5)
    """How many times an infra_error is retried as infrastructure (never as feedback): a
    candidate already taken is verified again; an agent phase is run again unless an
    upstream fault on one of the agent's own model calls ended it (never tried again)."""


class Components(FrozenInput):
    """What defines the system under test; all of it goes into the system digest."""

    model: str = ""
    prompt_version: str = ""
    tools: tuple[str, ...] = ()
    """Tool definitions (names or files relative to the project)."""
    orchestration: tuple[ProjectPath, ...] = ()
    """Orchestration code paths (files or folders, relative to the project), hashed."""
    sandbox_image: str | None = None
    extra: dict[str, str] = Field(default_factory=dict)


class Price(FrozenInput):
    """What the upstream charges, in currency units per million tokens."""

    input_per_mtok: float = Field(ge=0)
    """Price of one million prompt (input) tokens."""
    output_per_mtok: float = Field(ge=0)
    """Price of one million completion (output) tokens."""


class Upstream(FrozenInput):
    """The model provider the harness's gateway forwards the agent's calls to.

    The agent never sees this: it talks to the gateway with a per-trial token, and the
    gateway injects the real key read from ``key_env`` on the harness host.
    """

    provider: Literal["openai"] = "openai"
    """Wire format of the upstream: ``openai`` (an OpenAI-compatible chat completions API)."""
    base_url: Annotated[str, Field(pattern=r"^https?://[^\s/]+(/\S*)?$")]
    """API root including the version, e.g. ``https://api.openai.com/v1``."""
    model: str = Field(min_length=1)
    """The pinned model id: the only name the agent may ask for, and the id the upstream must
    answer with (pin a dated id, e.g. ``gpt-4o-mini-2024-07-18``)."""
    key_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
    """Name of the host environment variable holding the API key (never stored)."""
    price: Price
    response_seconds: float = Field(default=120.0, gt=0, le=3600)
    """Bound on one upstream response (all of it, streamed or not), from the moment it is sent.
    No answer within it, or an answer that stops for a whole bound, is ``infra_error``; an
    answer still arriving when it runs out is cut: the agent's ``budget_exceeded``."""
    retries: int = Field(default=2, ge=0, le=5)
    """Retries of a refused connection, a 429 or a 5xx, with exponential backoff."""
    concurrency: int = Field(default=4, ge=1, le=256)
    """Calls in flight to this upstream at once, for the whole run."""
    requests_per_minute: float | None = Field(default=None, gt=0)
    """Rate limit of calls to this upstream, for the whole run."""
    trial_concurrency: int | None = Field(default=None, ge=1, le=256)
    """Calls in flight at once for one agent phase: its lease of ``concurrency`` (and its
    share of ``requests_per_minute``), held from before its agent starts to its end, whatever
    ``--jobs`` is. Default: all of ``concurrency`` (one phase at a time calls this upstream);
    ``concurrency // trial_concurrency`` phases call it at once."""

    @model_validator(mode="after")
    def _trial_share_fits(self) -> Upstream:
        if self.trial_concurrency is not None and self.trial_concurrency > self.concurrency:
            raise ValueError(
                f"trial_concurrency ({self.trial_concurrency}) must not exceed concurrency "
                f"({self.concurrency})"
            )
        return self

    @property
    def trial_share(self) -> int:
        """Slots one agent phase leases (``trial_concurrency``, else ``concurrency``)."""
        return self.trial_concurrency or self.concurrency

    def identity(self) -> dict[str, Any]:
        """Return the upstream as configured, for the system's digest.

        An unset ``trial_concurrency`` is left out: systems stored before it existed keep
        their digests.
        """
        doc = self.model_dump(mode="json")
        if doc["trial_concurrency"] is None:
            del doc["trial_concurrency"]
        return doc


class Release(FrozenInput):
    """One release of the agent system."""

    agent: AgentSpec
    components: Components = Components()
    retry: RetryPolicy = RetryPolicy()
    upstream: Upstream | None = None
    """The model provider reached through the gateway (``None``: the agent calls no model)."""


class ProjectFile(FrozenInput):
    """The ``harness.yaml`` file."""

    schema_version: Literal[1] = 1
    task_set: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]+$")] = "golden"
    """Name of the task set (its lock file is ``<cases_dir>/<task_set>.lock.yaml``)."""
    cases_dir: ProjectPath = "cases"
    store_dir: ProjectPath = ".harness"
    reports_dir: ProjectPath = "reports"
    baselines_dir: ProjectPath = "baselines"
    """These four folders lie inside the project, apart from each other."""
    policy: ProjectPath | None = None
    """Promotion policy file, relative to the project."""
    backend: Literal["local", "docker"] = "local"
    environment: Environment | None = None
    """Task-set default environment of cases that declare none (paths relative to the
    project)."""
    releases: dict[Name, Release] = Field(min_length=1)
    """Release name → release; names are safe slugs (they name run folders and reports)."""

    @model_validator(mode="after")
    def _folders_apart(self) -> ProjectFile:
        folders = [(n, getattr(self, n)) for n in _FOLDERS]
        for i, (name, path) in enumerate(folders):
            for other, other_path in folders[i + 1 :]:
                if path == other_path or f"{path}/".startswith(f"{other_path}/"):
                    raise ValueError(f"{name} {path!r} lies inside {other} {other_path!r}")
                if f"{other_path}/".startswith(f"{path}/"):
                    raise ValueError(f"{other} {other_path!r} lies inside {name} {path!r}")
        return self


_FOLDERS = ("cases_dir", "store_dir", "reports_dir", "baselines_dir")


class Project(BaseModel):
    """A loaded project: the file's content plus resolved paths."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    root: Path
    file: ProjectFile

    @property
    def cases_dir(self) -> Path:
        """Folder holding ``<id>/case.yaml`` folders."""
        return self.root / self.file.cases_dir

    @property
    def store_dir(self) -> Path:
        """Record store folder."""
        return self.root / self.file.store_dir

    @property
    def reports_dir(self) -> Path:
        """Where reports are written."""
        return self.root / self.file.reports_dir

    @property
    def baselines_dir(self) -> Path:
        """Promoted baselines."""
        return self.root / self.file.baselines_dir

    @property
    def lock_path(self) -> Path:
        """Task-set lock file."""
        return self.cases_dir / f"{self.file.task_set}.lock.yaml"

    @property
    def policy_path(self) -> Path | None:
        """Promotion policy file, when configured."""
        return self.root / self.file.policy if self.file.policy else None

    def release(self, name: str) -> Release:
        """Return release ``name`` or raise a ConfigError listing the known ones."""
        try:
            return self.file.releases[name]
        except KeyError:
            known = ", ".join(sorted(self.file.releases))
            raise ConfigError(
                f"unknown release {name!r}; expected one of: {known}",
                file=self.root / PROJECT_FILE,
                field="releases",
            ) from None

    def system_definition(
        self, name: str, task_set_digest: str, harness_version: str
    ) -> SystemDefinition:
        """Everything that defines release ``name``'s system, with file contents hashed.

        Raises:
            ConfigError: an orchestration path does not exist.
        """
        release = self.release(name)
        self.check_agent_program(name)
        hashed: dict[str, str] = {}
        for rel in release.components.orchestration:
            path = self.root / rel
            if path.is_dir():
                hashed[rel] = tree_digest(path, exclude=("__pycache__",))
            elif path.is_file():
                hashed[rel] = digest_file(path)
            else:
                raise ConfigError(
                    "orchestration path does not exist",
                    file=self.root / PROJECT_FILE,
                    field=f"releases.{name}.components.orchestration",
                )
        return SystemDefinition(
            release=name,
            agent_code=agent_code_digests(release),
            agent=release.agent.model_dump(
                mode="json", exclude={"environment"} if release.agent.environment is None else None
            ),
            components=release.components.model_dump(mode="json"),
            orchestration_digests=hashed,
            retry=release.retry.model_dump(mode="json"),
            task_set_digest=task_set_digest,
            harness_version=harness_version,
            # The key's name is configuration; its value never enters a record.
            upstream=release.upstream.identity() if release.upstream is not None else None,
            agent_files=self.agent_file_digests(name, release) if release.agent.files else None,
        )

    def agent_file_digests(self, name: str, release: Release) -> dict[str, str]:
        """Digest of each declared agent file or folder (what the sandbox will get).

        Raises:
            ConfigError: a declared path does not exist in the project.
        """
        out: dict[str, str] = {}
        for rel in release.agent.files:
            path = self.root / rel
            self._not_the_harness_own(name, rel)
            if path.is_dir():
                out[rel] = tree_digest(path, exclude=("__pycache__",))
            elif path.is_file():
                out[rel] = digest_file(path)
            else:
                raise ConfigError(
                    f"agent file {rel!r} does not exist in the project",
                    file=self.root / PROJECT_FILE,
                    field=f"releases.{name}.agent.files",
                )
        return out

    def _not_the_harness_own(self, name: str, rel: str) -> None:
        """Refuse an agent file that is, holds or lies in a folder of the harness's own.

        The cases (hidden tests, reference solutions), the store, the baselines and the
        reports are what judges the agent: shown to it, they would decide its verdicts.
        """
        mine = os.path.realpath(self.root / rel)
        for field, what in (
            ("cases_dir", "the cases (hidden tests and reference solutions)"),
            ("store_dir", "the record store"),
            ("baselines_dir", "the baselines"),
            ("reports_dir", "the reports"),
        ):
            folder = os.path.realpath(self.root / getattr(self.file, field))
            if (
                mine == folder
                or mine.startswith(folder + os.sep)
                or folder.startswith(mine + os.sep)
            ):
                raise ConfigError(
                    f"agent file {rel!r} would show the agent {what} ({field} "
                    f"{getattr(self.file, field)!r}): list only the agent's own files",
                    file=self.root / PROJECT_FILE,
                    field=f"releases.{name}.agent.files",
                )

    def check_agent_program(self, name: str) -> None:
        """Refuse a command agent whose program is certainly missing.

        Only what the host can tell is checked, never assuming a host path is visible in
        the sandbox: a project-relative script (``{project}/x`` or ``dir/x``) must be a file
        in the project; on the local backend (whose minimal system is the host's) an absolute
        program must exist and a bare name must be on the sandbox's system PATH. On docker
        absolute paths and bare names are the image's business.

        Raises:
            ConfigError: the program cannot be found; names harness.yaml and the field.
        """
        agent = self.release(name).agent
        if agent.adapter != "command":
            return
        program = agent.command[0]
        problem = _missing_program(self.root, program, self.file.backend, agent.files)
        if problem:
            raise ConfigError(
                problem, file=self.root / PROJECT_FILE, field=f"releases.{name}.agent.command"
            )

    def system_digest(self, name: str, task_set_digest: str, harness_version: str) -> str:
        """Digest of :meth:`system_definition`."""
        return self.system_definition(name, task_set_digest, harness_version).digest()


def _missing_program(
    root: Path, program: str, backend: str, files: tuple[str, ...] = ()
) -> str | None:
    """Why ``program`` (a command agent's argv[0]) cannot run, or None when it may.

    The sealed sandbox sees no project path: a program is a declared agent file
    (``{agent}/rel``), a path the sandbox provides (``/opt/harness/...``: declared
    environments and agent files), or a program of the minimal system.
    """
    if program.startswith("{agent}/"):
        rel = program.removeprefix("{agent}/")
        declared = any(rel == f or rel.startswith(f.rstrip("/") + "/") for f in files)
        if not declared:
            return f"agent program {program!r} is not among the declared agent.files"
        target = (root / rel).resolve()
        if not target.is_relative_to(root.resolve()):
            return f"agent program {program!r} lies outside the project folder"
        if not target.is_file():
            return f"agent program {program!r} is not a file in the project"
        return None
    if "/" in program and not program.startswith("/"):
        return (
            f"agent program {program!r} is a relative path, but the sealed sandbox cannot see "
            f"the project: list it under agent.files and call it as '{{agent}}/{program}'"
        )
    if backend != "local" or program.startswith(AGENT_DIR.rsplit("/", 1)[0] + "/"):
        return None
    if program.startswith("/"):
        if not os.path.exists(program):
            return f"agent program {program!r} does not exist"
        return None
    if shutil.which(program, path=SYSTEM_PATH) is None:
        return f"agent program {program!r} is not on the sandbox's PATH ({SYSTEM_PATH})"
    return None


def agent_code_digests(release: Release) -> dict[str, str]:
    """Digests of agent code that ships with harness (the simulated demo agent)."""
    if release.agent.adapter != "simulated":
        return {}
    from importlib import resources

    script = resources.files("harness.agents").joinpath("simulated_agent.py").read_bytes()
    return {"simulated_agent.py": digest_bytes(script)}


def load_project(root: Path) -> Project:
    """Load ``<root>/harness.yaml``.

    Raises:
        ConfigError: the file is missing, malformed or does not match the schema.
    """
    path = root / PROJECT_FILE
    if not (path.exists() or path.is_symlink()):
        raise ConfigError(
            f"no {PROJECT_FILE} in {root}; run from a project folder or give it to the "
            "command, e.g. `harness run --project DIR ...`",
            file=path,
            field="--project",
        )
    file, _ = load_model(path, ProjectFile)
    for name in _FOLDERS:
        target = root / getattr(file, name)
        if (target.exists() or target.is_symlink()) and not target.is_dir():
            raise ConfigError(
                f"{getattr(file, name)!r} exists and is not a folder", file=path, field=name
            )
    if file.policy is not None and (root / file.policy).is_dir():
        raise ConfigError(
            f"{file.policy!r} is a folder; expected the policy file", file=path, field="policy"
        )
    return Project(root=root.resolve(), file=file)
