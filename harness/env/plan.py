"""Which environment each trial phase gets, and how it is shown inside the sandbox.

* a case's environment is ``case.environment`` or else the project's ``environment``
  (the task-set default); it is first on ``PATH`` in the verifier phase *and* inside the
  agent's shell, so the agent's ``python -m pytest`` sees the project's packages;
* a release's ``agent.environment`` is mounted only in the agent phase, at
  :data:`~harness.env.model.AGENT_ENV_PATH`, never on ``PATH`` (the agent calls it by
  absolute path).

Every distinct environment is built once per run (:func:`prepare_envs`). Before each
trial :func:`check_envs` compares the prefix's stat fingerprint with the one taken at build
time: a changed environment is an ``evaluator_error``, never the candidate's fault.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.cases.load import CASE_FILE, LoadedCase
from harness.env.build import build_env, probe
from harness.env.model import AGENT_ENV_PATH, BuiltEnv, EnvSource
from harness.env.probe import env_digest, fingerprint
from harness.errors import ConfigError, EvaluatorError
from harness.project import PROJECT_FILE, Project, Release
from harness.sandbox.base import SealedView, ViewMount

__all__ = [
    "PreparedEnvs",
    "agent_env_source",
    "case_env_source",
    "check_envs",
    "merge_views",
    "phase_view",
    "prepare_envs",
    "prepare_for_backend",
]


def case_env_source(project: Project | None, lc: LoadedCase) -> EnvSource | None:
    """Return the environment ``lc`` runs in: its own, else the project's default, or none."""
    if lc.case.environment is not None:
        return EnvSource(
            spec=lc.case.environment, base=lc.dir, file=lc.dir / CASE_FILE, field="environment"
        )
    if project is not None and project.file.environment is not None:
        return EnvSource(
            spec=project.file.environment,
            base=project.root,
            file=project.root / PROJECT_FILE,
            field="environment",
        )
    return None


def agent_env_source(project: Project, name: str, release: Release) -> EnvSource | None:
    """Return the agent environment release ``name`` declares, if any."""
    spec = release.agent.environment
    if spec is None:
        return None
    return EnvSource(
        spec=spec,
        base=project.root,
        file=project.root / PROJECT_FILE,
        field=f"releases.{name}.agent.environment",
    )


@dataclass(frozen=True)
class PreparedEnvs:
    """The built environments of one run."""

    cases: dict[str, BuiltEnv] = field(default_factory=dict)
    """case id → its environment (cases without one are absent)."""
    agents: dict[str, BuiltEnv] = field(default_factory=dict)
    """release name → its agent environment."""

    def system_entry(self, release: str, case_ids: Iterable[str]) -> dict[str, Any]:
        """Return the environment fields of ``release``'s system definition (None: absent).

        For :meth:`harness.system.SystemDefinition.replace`: ``environments`` (case id →
        digest, None when no case has one) and ``agent_environment``.
        """
        cases = {c: self.cases[c].digest for c in sorted(case_ids) if c in self.cases}
        agent = self.agents.get(release)
        return {
            "environments": cases or None,
            "agent_environment": agent.digest if agent is not None else None,
        }


def prepare_envs(
    project: Project,
    cases: Iterable[LoadedCase],
    releases: Mapping[str, Release],
    *,
    verify: bool = False,
) -> PreparedEnvs:
    """Build (or reuse) every distinct environment of ``cases`` and ``releases``' agents.

    ``verify`` re-probes each environment's installed files (after a run): a prefix whose
    content no longer has its recorded digest is reported under the digest it has now.

    Raises:
        ConfigError: bad environment input (exit 2).
        InfraError: the package index is unreachable or a build failed (exit 4).
    """
    built: dict[tuple[Path, str], BuiltEnv] = {}

    def get(src: EnvSource) -> BuiltEnv:
        key = (src.lock_path.resolve(), src.spec.python)
        if key not in built:
            env = build_env(src)
            if verify:
                now = env_digest(probe(f"{env.prefix}/bin/python", f"re-checking {env.prefix}"))
                env = env.model_copy(update={"digest": now})
            built[key] = env
        return built[key]

    out = PreparedEnvs()
    for lc in cases:
        src = case_env_source(project, lc)
        if src is not None:
            out.cases[lc.id] = get(src)
    for name, release in releases.items():
        src = agent_env_source(project, name, release)
        if src is not None:
            out.agents[name] = get(src)
    return out


def phase_view(
    case_env: BuiltEnv | None,
    agent_env: BuiltEnv | None,
    phase: str,
    *,
    in_image: bool = False,
) -> SealedView | None:
    """Return the sealed view of one phase.

    The case environment is first on ``PATH``; in the agent phase the agent environment is
    also mounted at its fixed path. ``in_image``: the image already holds the case
    environment (a docker layer), so it is not mounted; the agent environment always is.
    """
    mounts: list[ViewMount] = []
    prefix: list[str] = []
    env: dict[str, str] = {}
    if case_env is not None:
        if not in_image:
            mounts.append(ViewMount(source=case_env.prefix, target=case_env.mount))
        prefix.append(f"{case_env.mount}/bin")
        env["VIRTUAL_ENV"] = case_env.mount
    if phase == "agent" and agent_env is not None:
        if agent_env.prefix:  # a host prefix (on docker too: copied out of its layer)
            mounts.append(ViewMount(source=agent_env.prefix, target=AGENT_ENV_PATH))
        env["HARNESS_AGENT_ENV"] = AGENT_ENV_PATH
    if not (mounts or prefix or env):
        return None
    return SealedView(mounts=tuple(mounts), path_prefix=tuple(prefix), env=env)


def check_envs(envs: Mapping[str, BuiltEnv | None]) -> None:
    """Refuse to run on an environment changed since it was built.

    Raises:
        EvaluatorError: a prefix is gone or its fingerprint differs.
    """
    for role, built in envs.items():
        if built is None:
            continue
        if not built.prefix:  # inside a container image: the image id pins it
            continue
        prefix = Path(built.prefix)
        if not prefix.is_dir() or fingerprint(prefix) != built.fingerprint:
            raise EvaluatorError(
                f"{role} environment {built.digest} at {prefix} changed since it was built; "
                "its digest no longer holds (rebuild with `harness env build`)"
            )


def merge_views(*views: SealedView | None) -> SealedView | None:
    """Combine the views of one phase (declared agent files, environments) in order."""
    present = [v for v in views if v is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]
    endpoints = {v.endpoint for v in present if v.endpoint is not None}
    if len(endpoints) > 1:
        raise ValueError(f"a phase has one endpoint at most, got {sorted(endpoints)}")
    env: dict[str, str] = {}
    for v in present:
        env.update(v.env)
    return SealedView(
        mounts=tuple(m for v in present for m in v.mounts),
        path_prefix=tuple(p for v in present for p in v.path_prefix),
        env=env,
        endpoint=next(iter(endpoints), None),
    )


def prepare_for_backend(
    project: Project,
    cases: Sequence[LoadedCase],
    releases: Mapping[str, Release],
    backend: str,
    *,
    verify: bool = False,
) -> tuple[PreparedEnvs, dict[str, str]]:
    """Environments for ``backend``, and per case the image to build the case image on.

    Local: prefixes on the host (:func:`prepare_envs`). Docker: each distinct case
    environment is an image layer over the case's base image
    (:func:`harness.env.images.build_env_image`); the case image is then built on top of it, so
    the returned mapping is case id → base. An agent environment is built as a layer over
    the default base image (its ``/usr/bin/python3``) and copied out to a host prefix
    (:func:`harness.env.images.export_env`): it is mounted in the agent phase only, like on
    the local backend, never baked into the case image the verifier also runs in.

    Raises:
        ConfigError: bad environment input; on docker, a case whose two phases name
            different images.
        InfraError: the index is unreachable or a build failed.
    """
    if backend != "docker":
        return prepare_envs(project, cases, releases, verify=verify), {}
    from harness.env.images import build_env_image, export_env
    from harness.sandbox.docker import DEFAULT_IMAGE, connect

    out, bases = PreparedEnvs(), {}
    built: dict[tuple[str, Path, str], tuple[str, BuiltEnv]] = {}
    client = connect()
    try:
        for name, release in releases.items():
            src = agent_env_source(project, name, release)
            if src is not None:  # for the base image's python3, mounted in the agent phase
                out.agents[name] = export_env(client, *build_env_image(client, DEFAULT_IMAGE, src))
        for lc in cases:
            src = case_env_source(project, lc)
            if src is None:
                continue
            contract = lc.case.contract
            if contract.agent.image != contract.verifier.image:
                raise ConfigError(
                    "a case with an environment needs one image for both phases on docker",
                    file=lc.dir / CASE_FILE,
                    field="contract.verifier.image",
                )
            base = contract.agent.image or DEFAULT_IMAGE
            key = (base, src.lock_path.resolve(), src.spec.python)
            if key not in built:
                built[key] = build_env_image(client, base, src)
            bases[lc.id], out.cases[lc.id] = built[key]
    finally:
        client.close()
    return out, bases
