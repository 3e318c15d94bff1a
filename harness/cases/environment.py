"""The declared Python environment: ``environment:`` in case.yaml and harness.yaml.

An *environment* is an input like the case itself: an interpreter version constraint, a
lock file pinning every Python distribution with its hashes, and for container images the
system packages the image must provide. Where it is declared decides what its relative
paths are relative to: a case's ``environment`` to the case folder, ``harness.yaml``'s
``environment`` (the task-set default) and a release's ``agent.environment`` to the project.

Only the declaration lives here, beside the case models that use it; building, probing and
pinning it is :mod:`harness.env`, which sits above the configuration.
"""

from __future__ import annotations

import re
from typing import Annotated

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pydantic import AfterValidator, Field

from harness.frozen import Frozen

__all__ = ["Environment", "relative_path"]


def relative_path(value: str, folder: str | None = None) -> str:
    """Normalise a relative path (``/`` separators, no ``.``); refuse absolute or climbing ones.

    ``folder`` names the folder it must stay inside in the errors (e.g. ``the case folder``).
    """
    inside = f" inside {folder}" if folder else ""
    if not value or value.startswith("/") or re.match(r"^[A-Za-z]:", value):
        raise ValueError(f"expected a relative path{inside}, got {value!r}")
    parts = [p for p in value.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        climbs = f"escapes {folder}" if folder else "climbs out of its folder"
        raise ValueError(f"path {value!r} {climbs} ('..' is not allowed)")
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


class Environment(Frozen):
    """A declared Python environment (``environment:`` in case.yaml or harness.yaml)."""

    python: Annotated[str, AfterValidator(_specifier)] = ">=3.11"
    """Interpreter version constraint (PEP 440); a bare ``3.11`` means ``==3.11.*``."""
    lock: Annotated[str, Field(min_length=1), AfterValidator(relative_path)]
    """Requirements lock: every distribution pinned ``name==version`` with ``--hash`` lines
    (``harness env lock`` writes it from ``requirements``)."""
    requirements: Annotated[str, AfterValidator(relative_path)] | None = None
    """Loose input of ``harness env lock`` (requirements syntax); optional."""
    system_packages: tuple[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.+-]*$")], ...] = ()
    """Debian packages the container image must provide (checked, never installed: the
    containers here cannot reach a package mirror)."""
