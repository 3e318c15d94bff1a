"""The library side of ``harness env lock`` and ``harness env build``: text lines out."""

from __future__ import annotations

import time
from collections.abc import Iterator

from harness.cases.load import load_cases
from harness.digest import short
from harness.env.build import build_env, compile_lock
from harness.env.model import EnvSource
from harness.env.plan import agent_env_source, case_env_source
from harness.project import Project

__all__ = ["build_all", "declared_sources", "lock_all"]


def declared_sources(project: Project) -> list[tuple[str, EnvSource]]:
    """Every declared environment as (who uses it, source), each lock file once."""
    found: list[tuple[str, EnvSource]] = []
    for lc in load_cases(project.cases_dir):
        if lc.active:
            src = case_env_source(project, lc)
            if src is not None:
                found.append((f"case {lc.id}", src))
    for name, release in project.file.releases.items():
        src = agent_env_source(project, name, release)
        if src is not None:
            found.append((f"agent of {name}", src))
    by_lock: dict[tuple[str, str], tuple[list[str], EnvSource]] = {}
    for who, src in found:
        key = (str(src.lock_path.resolve()), src.spec.python)
        by_lock.setdefault(key, ([], src))[0].append(who)
    return [(", ".join(_summary(users)), src) for users, src in by_lock.values()]


def _summary(users: list[str]) -> list[str]:
    return users if len(users) <= 3 else [*users[:2], f"… ({len(users)} users)"]


def lock_all(project: Project) -> Iterator[str]:
    """Lock every declared environment that names a ``requirements`` input."""
    for who, src in declared_sources(project):
        if src.spec.requirements is None:
            yield f"skipped {src.spec.lock} ({who}): no `requirements` declared"
            continue
        path = compile_lock(src)
        shown = path.relative_to(project.root) if path.is_relative_to(project.root) else path
        yield f"locked {shown} ({who})"


def build_all(project: Project) -> Iterator[str]:
    """Build every declared environment once; report digest, prefix and time."""
    for who, src in declared_sources(project):
        t0 = time.monotonic()
        built = build_env(src)
        took = time.monotonic() - t0
        yield (
            f"{short(built.digest)} {src.spec.lock} python {built.identity.version} "
            f"({len(built.identity.distributions)} distributions) → {built.prefix} "
            f"[{took:.2f}s] ({who})"
        )
