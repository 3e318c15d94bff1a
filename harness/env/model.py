"""Frozen models of a declared trial environment and of a built one.

An *environment* is an input like the case itself: an interpreter version constraint, a
lock file pinning every Python distribution with its hashes, and for container images the
system packages the image must provide. Where it is declared decides what its relative
paths are relative to: a case's ``environment`` to the case folder, ``harness.yaml``'s
``environment`` (the task-set default) and a release's ``agent.environment`` to the project.

A *built* environment is named by its :attr:`BuiltEnv.digest`, computed from what was
actually installed (interpreter implementation, version and ABI, platform, every
distribution with a digest of its installed files), never from what was requested.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Final

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from harness.frozen import Frozen as _Frozen

__all__ = [
    "AGENT_ENV_PATH",
    "ENV_MOUNT_ROOT",
    "BuiltEnv",
    "EnvIdentity",
    "EnvSource",
    "Environment",
]

ENV_MOUNT_ROOT: Final = "/opt/harness/env"
"""Inside a sandbox, a case environment lives at ``<ENV_MOUNT_ROOT>/<12 hex of its digest>``."""
AGENT_ENV_PATH: Final = "/opt/harness/agent-env"
"""Inside the agent phase, the release's agent environment (call it by absolute path)."""


def _relative(value: str) -> str:
    if not value or value.startswith("/") or re.match(r"^[A-Za-z]:", value):
        raise ValueError(f"expected a relative path, got {value!r}")
    parts = [p for p in value.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"path {value!r} climbs out of its folder ('..' is not allowed)")
    return "/".join(parts)


def _specifier(value: str) -> str:
    text = value.strip()
    if re.fullmatch(r"\d+(\.\d+){0,2}", text):  # a bare version means that release series
        text = f"=={text}.*" if text.count(".") < 2 else f"=={text}"
    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        raise ValueError(
            f"{value!r} is not a version constraint (PEP 440, e.g. '>=3.11,<3.13' or '3.11')"
        ) from None
    return text


class Environment(_Frozen):
    """A declared Python environment (``environment:`` in case.yaml or harness.yaml)."""

    python: Annotated[str, AfterValidator(_specifier)] = ">=3.11"
    """Interpreter version constraint (PEP 440); a bare ``3.11`` means ``==3.11.*``."""
    lock: Annotated[str, Field(min_length=1), AfterValidator(_relative)]
    """Requirements lock: every distribution pinned ``name==version`` with ``--hash`` lines
    (``harness env lock`` writes it from ``requirements``)."""
    requirements: Annotated[str, AfterValidator(_relative)] | None = None
    """Loose input of ``harness env lock`` (requirements syntax); optional."""
    system_packages: tuple[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.+-]*$")], ...] = ()
    """Debian packages the container image must provide (checked, never installed: the
    containers here cannot reach a package mirror)."""


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
