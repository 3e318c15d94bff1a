r"""Requirements locks: every distribution pinned by version and by hash.

A lock is pip/uv requirements syntax as ``uv pip compile --generate-hashes`` writes it::

    pytest==8.3.3 \\
        --hash=sha256:70b9… \\
        --hash=sha256:a685…

:func:`read_lock` refuses anything an installer could resolve differently on another
machine: a requirement without ``==`` or without a ``--hash``, editable or nested files.
:func:`compile_lock` writes a lock from the loose ``requirements`` input with uv.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from harness.env.model import EnvSource
from harness.errors import ConfigError

__all__ = ["LockedRequirement", "read_lock"]

_HASH = re.compile(r"--hash[= ](sha256|sha384|sha512):([0-9a-f]+)")
_ALLOWED_OPTIONS = (
    "--index-url",
    "--extra-index-url",
    "--find-links",
    "--no-binary",
    "--only-binary",
    "--prefer-binary",
)


@dataclass(frozen=True)
class LockedRequirement:
    """One pinned distribution of a lock."""

    name: str
    """Normalised distribution name."""
    version: str
    hashes: tuple[str, ...]
    """``algo:hex`` of every acceptable artifact."""
    line: int


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join backslash continuations and drop comments; keep the first physical line number."""
    out: list[tuple[int, str]] = []
    buf, start = "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not buf:
            start = n
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        if buf.strip():
            out.append((start, buf.strip()))
        buf = ""
    if buf.strip():
        out.append((start, buf.strip()))
    return out


def read_lock(src: EnvSource) -> tuple[LockedRequirement, ...]:
    """Parse and check ``src``'s lock file.

    Raises:
        ConfigError: the file is missing or a line is not a hashed ``name==version`` pin
            (names the lock file, its line and the distribution).
    """
    path = src.lock_path
    if not path.is_file():
        raise ConfigError(
            f"lock file {src.spec.lock!r} does not exist (write it with `harness env lock`)",
            file=src.file,
            field=f"{src.field}.lock",
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the lock: {exc}", file=path) from None
    reqs: list[LockedRequirement] = []
    seen: set[str] = set()
    for line_no, line in _logical_lines(text):
        if line.startswith("-"):
            if line.split()[0].split("=")[0] in _ALLOWED_OPTIONS:
                continue
            raise ConfigError(
                f"option {line.split()[0]!r} is not allowed in a lock (only hashed pins)",
                file=path,
                line=line_no,
            )
        hashes = tuple(f"{a}:{h}" for a, h in _HASH.findall(line))
        spec = _HASH.sub("", line).strip()
        try:
            req = Requirement(spec)
        except InvalidRequirement as exc:
            raise ConfigError(f"not a requirement: {exc}", file=path, line=line_no) from None
        name = canonicalize_name(req.name)
        pins = [s for s in req.specifier if s.operator in ("==", "===") and "*" not in s.version]
        if req.url or len(pins) != 1 or len(req.specifier) != 1:
            raise ConfigError(
                f"{req.name} is not pinned to one version (expected {req.name}==X.Y)",
                file=path,
                line=line_no,
                field=name,
            )
        if not hashes:
            raise ConfigError(
                f"{req.name}=={pins[0].version} has no --hash; a lock must pin every "
                "artifact by hash (regenerate it with `harness env lock`)",
                file=path,
                line=line_no,
                field=name,
            )
        if name in seen:
            raise ConfigError(f"{req.name} is pinned twice", file=path, line=line_no, field=name)
        seen.add(name)
        reqs.append(LockedRequirement(name, pins[0].version, hashes, line_no))
    if not reqs:
        raise ConfigError("the lock pins no distribution", file=path, field=f"{src.field}.lock")
    return tuple(reqs)
