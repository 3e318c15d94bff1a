"""``--keep-git``: the parent kept as a git repository that cannot recover the fix.

The repository is bare, holds one branch at the parent and nothing else: no other ref,
no tag, no reflog, every object packed after a prune. :func:`prove_no_fix` then checks,
object by object, that neither the fix commit, its tree, nor the fix's version of any
changed path is stored in it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from harness.authoring._git import FixCommit, git
from harness.errors import ConfigError

__all__ = ["START_REF", "keep_parent", "prove_no_fix"]

START_REF = "refs/heads/start"


def _run(repo: Path, *args: str) -> str:
    done = git(repo, *args)
    if not done.ok:
        raise ConfigError(
            f"git {' '.join(args[:3])} failed: {done.stderr.decode(errors='replace').strip()}",
            file=repo,
        )
    return done.stdout.decode(errors="replace")


def keep_parent(fix: FixCommit, dest: Path) -> None:
    """Write a bare repository at ``dest`` holding the parent and its history only."""
    dest.mkdir(parents=True)
    _run(dest, "init", "-q", "--bare")
    _run(dest, "fetch", "-q", "--no-tags", str(fix.repo.resolve()), f"{fix.parent}:{START_REF}")
    _run(dest, "symbolic-ref", "HEAD", START_REF)
    _run(dest, "reflog", "expire", "--expire=now", "--all")
    _run(dest, "gc", "-q", "--prune=now")
    for name in ("logs", "hooks", "FETCH_HEAD", "ORIG_HEAD", "description"):
        target = dest / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    prove_no_fix(fix, dest)


def prove_no_fix(fix: FixCommit, kept: Path) -> None:
    """Refuse a kept repository from which the fix could be recovered.

    Raises:
        ConfigError: another ref, a tag, a reflog exists, or an object of the fix (the
            commit, its tree, the fix's content of a changed path) is stored.
    """
    refs = _run(kept, "for-each-ref", "--format=%(refname) %(objectname)").split("\n")
    refs = [r for r in refs if r.strip()]
    if refs != [f"{START_REF} {fix.parent}"]:
        raise ConfigError(f"the kept repository holds other refs: {refs}", file=kept)
    if (kept / "logs").exists():
        raise ConfigError("the kept repository holds a reflog", file=kept)
    stored = {
        line.split()[0]
        for line in _run(kept, "cat-file", "--batch-all-objects", "--batch-check").splitlines()
        if line.strip()
    }
    fix_objects = {fix.sha: "the fix commit", _rev(fix, f"{fix.sha}^{{tree}}"): "the fix's tree"}
    for c in fix.changed:
        if c.status != "D":
            fix_objects.setdefault(_rev(fix, f"{fix.sha}:{c.path}"), f"the fix's {c.path}")
    leaked = sorted(what for oid, what in fix_objects.items() if oid in stored)
    if leaked:
        raise ConfigError(
            f"--keep-git: the parent's history already holds {', '.join(leaked[:5])} (an older "
            "commit had the same content); a repository with history would hand the fix "
            "over. Leave out --keep-git (the default archive has no history)",
            file=fix.repo,
        )


def _rev(fix: FixCommit, spec: str) -> str:
    return _run(fix.repo, "rev-parse", "--verify", spec).strip()
