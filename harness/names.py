"""Names that become paths: one validator, and a proof that a path stays inside its root.

Release, baseline, run and case names end up as folder and file names under the store,
``baselines/`` and ``reports/``. A name is a *slug*: letters, digits, ``.``, ``_`` and
``-``, starting with a letter or digit, at most :data:`MAX_NAME` characters, never
containing ``..``. So ``../../evil``, ``a/b``, ``.hidden`` and an empty name are refused
where they enter (``harness.yaml``, ``--name``, ``--baseline``, a run reference), and
:func:`inside` re-checks every path the harness writes against the root it belongs to.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Final

from pydantic import AfterValidator

from harness.errors import ConfigError

__all__ = ["MAX_NAME", "MAX_RUN_ID", "Name", "check_name", "inside", "name_problem"]

MAX_NAME: Final = 64
MAX_RUN_ID: Final = 96
"""A run id is a release name plus a digest and an optional ``.N`` suffix."""
_SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def name_problem(value: object, max_len: int = MAX_NAME) -> str | None:
    """Return why ``value`` is not a safe name, or None when it is one."""
    if not isinstance(value, str) or not value:
        return "must be a non-empty name"
    if len(value) > max_len:
        return f"must be at most {max_len} characters (got {len(value)})"
    if ".." in value:
        return f"{value!r} must not contain '..'"
    if not _SLUG.fullmatch(value):
        return (
            f"{value!r} is not a safe name: use letters, digits, '.', '_' and '-', "
            "starting with a letter or digit (no '/', no spaces)"
        )
    return None


def check_name(
    value: str,
    *,
    kind: str,
    file: Path | str | None = None,
    field: str | None = None,
    max_len: int = MAX_NAME,
) -> str:
    """Return ``value`` when it is a safe name.

    Raises:
        ConfigError: naming ``file`` and ``field`` and saying what a name may hold.
    """
    problem = name_problem(value, max_len)
    if problem is not None:
        raise ConfigError(f"{kind} name {problem}", file=file, field=field)
    return value


def _validate(value: str) -> str:
    problem = name_problem(value)
    if problem is not None:
        raise ValueError(f"name {problem}")
    return value


Name = Annotated[str, AfterValidator(_validate)]
"""A string field that must be a safe name (for pydantic models)."""


def inside(root: Path, path: Path, *, field: str | None = None) -> Path:
    """Return ``path`` after proving it resolves inside ``root``.

    Symlinks are resolved on both sides, so a link planted in the tree cannot carry a
    write elsewhere either.

    Raises:
        ConfigError: the path escapes ``root`` (names the path and the root).
    """
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(path))
    if real != real_root and not real.is_relative_to(real_root):
        raise ConfigError(f"refusing to write outside {root}", file=path, field=field)
    return path
