"""Read one fix commit out of a git repository: its parent, message and changed paths.

Every git call goes through :func:`harness._proc.run`. A path that is not a repository, a
name that is not a commit, a root or a merge commit are the user's input
(:class:`~harness.errors.ConfigError`, exit 2).
"""

from __future__ import annotations

import gzip
import io
from dataclasses import dataclass
from pathlib import Path

from harness import _proc
from harness.errors import ConfigError

__all__ = ["ChangedPath", "FixCommit", "git", "open_commit"]


def git(repo: Path, *args: str, timeout: float = 300) -> _proc.Completed:
    """Run ``git -C repo ARGS`` (no pager, no user config that changes output)."""
    return _proc.run(
        ["git", "-c", "core.quotepath=off", "-c", "diff.noprefix=false", "-C", str(repo), *args],
        timeout=timeout,
    )


def _text(done: _proc.Completed) -> str:
    return done.stdout.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class ChangedPath:
    """One path the commit changed (renames are a deletion plus an addition)."""

    status: str
    """``A`` added, ``M`` modified, ``D`` deleted, ``T`` type changed."""
    path: str


@dataclass(frozen=True)
class FixCommit:
    """A non-merge, non-root commit: the fix, and the parent it applies to."""

    repo: Path
    sha: str
    parent: str
    message: str
    changed: tuple[ChangedPath, ...]

    def blob(self, path: str) -> bytes:
        """Content of ``path`` in the fix commit."""
        return git(self.repo, "cat-file", "blob", f"{self.sha}:{path}").stdout

    def parent_archive(self) -> bytes:
        """Return the parent's tree as a gzip'd tar with no history (deterministic bytes)."""
        done = git(self.repo, "archive", "--format=tar", self.parent)
        if not done.ok:
            raise ConfigError(
                f"git archive of {self.parent} failed: {_text(done).strip()}", file=self.repo
            )
        buf = io.BytesIO()
        with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
            gz.write(done.stdout)
        return buf.getvalue()

    def diff(self, paths: list[str]) -> bytes:
        """``git apply``-able diff of ``paths`` from the parent to the fix (binary-safe)."""
        if not paths:
            return b""
        specs = [f":(literal){p}" for p in paths]
        done = git(
            self.repo,
            "diff",
            "--binary",
            "--full-index",
            "--no-renames",
            "--no-color",
            "--no-ext-diff",
            self.parent,
            self.sha,
            "--",
            *specs,
        )
        if not done.ok:
            raise ConfigError(f"git diff failed: {_text(done).strip()}", file=self.repo)
        return done.stdout


def open_commit(repo: Path, commit: str) -> FixCommit:
    """Resolve ``commit`` in ``repo`` and read what it changed.

    Raises:
        ConfigError: ``repo`` is not a git repository, ``commit`` is unknown, or it is a
            root or merge commit (a fix has exactly one parent).
    """
    if not repo.is_dir():
        raise ConfigError("is not a folder (expected a git repository)", file=repo)
    top = git(repo, "rev-parse", "--git-dir")
    if not top.ok:
        raise ConfigError("is not a git repository (git rev-parse failed)", file=repo)
    found = git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    if not found.ok or not commit.strip() or commit.startswith("-"):
        raise ConfigError(f"unknown commit {commit!r} (git rev-parse found none)", file=repo)
    sha = _text(found).strip()
    parents = _text(git(repo, "rev-list", "--parents", "-n", "1", sha)).split()[1:]
    if not parents:
        raise ConfigError(
            f"commit {sha[:12]} is a root commit: it has no parent to start from", file=repo
        )
    if len(parents) > 1:
        raise ConfigError(
            f"commit {sha[:12]} is a merge ({len(parents)} parents); name the fix commit "
            "itself (a case starts from exactly one parent)",
            file=repo,
        )
    message = _text(git(repo, "log", "-1", "--format=%B", sha)).strip()
    raw = git(repo, "diff", "--name-status", "--no-renames", "-z", parents[0], sha).stdout
    fields = raw.decode("utf-8", errors="surrogateescape").split("\0")
    changed = tuple(
        ChangedPath(status=fields[i][:1], path=fields[i + 1])
        for i in range(0, len(fields) - 1, 2)
        if fields[i]
    )
    return FixCommit(repo=repo, sha=sha, parent=parents[0], message=message, changed=changed)
