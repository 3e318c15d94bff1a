"""Frozen models of a located declaration and of a built trial environment.

The declaration itself, :class:`~harness.cases.environment.Environment`, lives with the
configuration models that use it; :class:`EnvSource` pairs it with the folder its relative
paths are resolved against.

A *built* environment is named by its :attr:`BuiltEnv.digest`, computed from what was
actually installed (interpreter implementation, version and ABI, platform, every
distribution with a digest of its installed files), never from what was requested.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict

from harness.cases.environment import Environment
from harness.frozen import Frozen as _Frozen

__all__ = [
    "AGENT_ENV_PATH",
    "ENV_MOUNT_ROOT",
    "BuiltEnv",
    "EnvIdentity",
    "EnvSource",
]

ENV_MOUNT_ROOT: Final = "/opt/harness/env"
"""Inside a sandbox, a case environment lives at ``<ENV_MOUNT_ROOT>/<12 hex of its digest>``."""
AGENT_ENV_PATH: Final = "/opt/harness/agent-env"
"""Inside the agent phase, the release's agent environment (call it by absolute path)."""


class EnvSource(BaseModel):
    """An environment declaration together with where it was declared."""

    model_config = ConfigDict(frozen=True)

    spec: Environment
    base: Path
    """Folder the spec's relative paths are resolved against."""
    file: Path
    """The file that declares it (for error messages)."""
    field: str
    """Its field in that file, e.g. ``environment`` or ``releases.x.agent.environment``."""

    @property
    def lock_path(self) -> Path:
        """Absolute path of the lock file."""
        return self.base / self.spec.lock


class EnvIdentity(_Frozen):
    """What was installed, as the environment's own interpreter reports it."""

    implementation: str
    """``cpython``, ``pypy``…"""
    version: str
    """Full interpreter version, e.g. ``3.11.2``."""
    soabi: str
    """ABI the interpreter was built for (``cpython-311-x86_64-linux-gnu``)."""
    platform: str
    """``sysconfig.get_platform()``, e.g. ``linux-x86_64``."""
    distributions: dict[str, dict[str, str]]
    """Normalised name → ``{version, files}``; ``files`` digests the installed files."""
    build: str = ""
    """``sys.version`` (build date, compiler): recorded, not part of the digest, so that
    the same interpreter release packaged twice (host and image) keeps one identity."""

    def digest_input(self) -> dict[str, object]:
        """Return the part of the identity the digest covers."""
        return self.model_dump(mode="json", exclude={"build"})


class BuiltEnv(_Frozen):
    """A built environment on this machine (local backend: a prefix on the host)."""

    digest: str
    """``sha256:`` over :meth:`EnvIdentity.digest_input`."""
    identity: EnvIdentity
    prefix: str
    """Host directory of the environment (a relocatable venv)."""
    interpreter: str
    """Base interpreter the venv uses (must be visible inside the sandbox)."""
    fingerprint: str
    """Cheap stat fingerprint of the prefix (paths, sizes, mtimes) checked before each trial."""
    build_key: str
    """Cache key: the lock's bytes, the constraint and the base interpreter."""
    build_seconds: float = 0.0

    @property
    def mount(self) -> str:
        """Where the environment appears inside a sandbox."""
        return f"{ENV_MOUNT_ROOT}/{self.digest.split(':', 1)[-1][:12]}"
