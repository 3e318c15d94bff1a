"""``harness.yaml`` → :class:`Project`: releases, paths, policy file.

A release says how to invoke the agent and lists the components that define the system
(model id, prompt version, tool definitions, orchestration code, sandbox image, retry
policy). The *system digest* hashes those components, the content of every referenced
file, the task-set digest and the harness version.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from harness._yaml import load_model
from harness.digest import digest_bytes, digest_file, digest_json, tree_digest
from harness.env.model import Environment
from harness.errors import ConfigError

__all__ = [
    "AGENT_DIR",
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


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class SimulatedSettings(_Frozen):
    """Settings of the labelled ``simulated`` demo agent (no LLM: applies or botches)."""

    skill: dict[str, float] = Field(default_factory=dict)
    """Probability of applying the reference change, per case id; ``default`` for the rest."""
    overclaim: float = Field(default=0.0, ge=0, le=1)
    """Probability of claiming success after botching."""
    abstain: dict[str, float] = Field(default_factory=dict)
    """Probability of abstaining, per case id (``default`` for the rest)."""
    learns_from_feedback: float = Field(default=0.0, ge=0, le=1)
    """On a correction attempt that received feedback, probability of fixing."""

    def skill_for(self, case_id: str) -> float:
        """Skill for ``case_id``, falling back to ``default`` (1.0 when absent)."""
        return self.skill.get(case_id, self.skill.get("default", 1.0))

    def abstain_for(self, case_id: str) -> float:
        """Abstention probability for ``case_id`` (``default`` for the rest, else 0)."""
        return self.abstain.get(case_id, self.abstain.get("default", 0.0))


class AgentSpec(_Frozen):
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
    replay_run: str | None = None
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


class RetryPolicy(_Frozen):
    """Correction attempts: allowed only when a verifier run produced new evidence."""

    max_attempts: int = Field(default=1, ge=1, le=10)
    stop_on_identical_failure: bool = True
    stop_on_infra_error: bool = True
    wall_seconds: float | None = Field(default=None, gt=0)
    """Budget of wall seconds per trial across attempts."""
    infra_retries: int = Field(default=1, ge=0, le=5)
    """How many times an infra_error is retried as infrastructure (never as feedback)."""


class Components(_Frozen):
    """What defines the system under test; all of it goes into the system digest."""

    model: str = ""
    prompt_version: str = ""
    tools: tuple[str, ...] = ()
    """Tool definitions (names or files relative to the project)."""
    orchestration: tuple[str, ...] = ()
    """Orchestration code paths (files or folders, relative to the project), hashed."""
    sandbox_image: str | None = None
    extra: dict[str, str] = Field(default_factory=dict)


class Price(_Frozen):
    """What the upstream charges, in currency units per million tokens."""

    input_per_mtok: float = Field(ge=0)
    """Price of one million prompt (input) tokens."""
    output_per_mtok: float = Field(ge=0)
    """Price of one million completion (output) tokens."""


class Upstream(_Frozen):
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
    """Bound on one upstream response (all of it, streamed or not); slower is infra_error."""
    retries: int = Field(default=2, ge=0, le=5)
    """Retries of a refused connection, a 429 or a 5xx, with exponential backoff."""
    concurrency: int = Field(default=4, ge=1, le=256)
    """Calls in flight to this upstream at once, shared by every trial of the run."""
    requests_per_minute: float | None = Field(default=None, gt=0)
    """Rate limit of calls to this upstream, shared by every trial of the run."""


class Release(_Frozen):
    """One release of the agent system."""

    agent: AgentSpec
    components: Components = Components()
    retry: RetryPolicy = RetryPolicy()
    upstream: Upstream | None = None
    """The model provider reached through the gateway (``None``: the agent calls no model)."""


class ProjectFile(_Frozen):
    """The ``harness.yaml`` file."""

    schema_version: Literal[1] = 1
    task_set: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]+$")] = "golden"
    """Name of the task set (its lock file is ``<cases_dir>/<task_set>.lock.yaml``)."""
    cases_dir: str = "cases"
    store_dir: str = ".harness"
    reports_dir: str = "reports"
    baselines_dir: str = "baselines"
    policy: str | None = None
    """Promotion policy file, relative to the project."""
    backend: Literal["local", "docker"] = "local"
    environment: Environment | None = None
    """Task-set default environment of cases that declare none (paths relative to the
    project)."""
    releases: dict[str, Release] = Field(min_length=1)


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
    ) -> dict[str, Any]:
        """Everything that defines release ``name``'s system, with file contents hashed.

        Raises:
            ConfigError: an orchestration path does not exist.
        """
        release = self.release(name)
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
        definition: dict[str, Any] = {
            "release": name,
            "agent_code": agent_code_digests(release),
            "agent": release.agent.model_dump(
                mode="json", exclude={"environment"} if release.agent.environment is None else None
            ),
            "components": release.components.model_dump(mode="json"),
            "orchestration_digests": hashed,
            "retry": release.retry.model_dump(mode="json"),
            "task_set_digest": task_set_digest,
            "harness_version": harness_version,
        }
        if release.upstream is not None:
            # The key's name is configuration; its value never enters a record.
            definition["upstream"] = release.upstream.model_dump(mode="json")
        if release.agent.files:
            definition["agent_files"] = self.agent_file_digests(name, release)
        return definition

    def agent_file_digests(self, name: str, release: Release) -> dict[str, str]:
        """Digest of each declared agent file or folder (what the sandbox will get).

        Raises:
            ConfigError: a declared path does not exist in the project.
        """
        out: dict[str, str] = {}
        for rel in release.agent.files:
            path = self.root / rel
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

    def system_digest(self, name: str, task_set_digest: str, harness_version: str) -> str:
        """Digest of :meth:`system_definition`."""
        return digest_json(self.system_definition(name, task_set_digest, harness_version))


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
    if not path.is_file():
        raise ConfigError(
            f"no {PROJECT_FILE} here; run from a project folder or pass --project", file=path
        )
    file, _ = load_model(path, ProjectFile)
    return Project(root=root.resolve(), file=file)
