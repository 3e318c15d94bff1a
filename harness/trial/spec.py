"""The trial spec: everything a worker needs to run one trial, as plain data."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.env.model import BuiltEnv
from harness.gateway import LinkAddress
from harness.project import Release
from harness.store.records import TrialKey

__all__ = ["TrialSpec"]


@dataclass(frozen=True)
class TrialSpec:
    """Everything a worker needs to run one trial: plain, picklable data."""

    key: TrialKey
    project_root: str
    case_dir: str
    case_digest: str
    release: Release
    system_digest: str
    backend: str
    downgrade: frozenset[str] = frozenset()
    replay_tarball: bytes | None = None
    """For the ``replay`` adapter: the recorded candidate tree to re-verify."""
    record_path: str = ""
    """This trial's record, relative to the store (quoted in feedback: never a host path)."""
    image: str | None = None
    """Case image (container backends): both phases start from it, its workspace seeded."""
    run_seed: int = 0
    """The run's recorded seed; the agent's ``HARNESS_SEED`` derives from it."""
    environment: BuiltEnv | None = None
    """The case's built environment: first on PATH in the verifier and the agent's shell."""
    agent_environment: BuiltEnv | None = None
    """The release's agent environment: mounted in the agent phase only."""
    proven: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Per JUnit artifact path, the tests the reference solution passed in the case's
    red/green proof (:mod:`harness.preflight`): a trial that skips one of them fails.
    Empty when no proof is on record (a case without an environment)."""
    gateway_link: LinkAddress | None = field(default=None, repr=False, compare=False)
    """How a worker without the gateway in its process reaches it (``--executor dask``):
    set by the executor, never part of an identity or a record."""
