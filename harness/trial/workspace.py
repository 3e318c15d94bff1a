"""Starting states and candidates on the host side.

:func:`materialize` builds a case's starting tree in a host folder (copied from the case
folder, checked out from git, or extracted from a pinned archive). :func:`snapshot`
turns the workspace the agent left behind into a :class:`Candidate`: its tree digest is
the candidate identity, its diff is for reviewers, its tarball lets ``replay`` re-apply it.
"""

from __future__ import annotations

import difflib
import io
import os
import shutil
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from harness import _proc
from harness._safefs import UnsafeArchive, safe_extract, tree_entries
from harness.cases.load import LoadedCase
from harness.cases.model import ArchiveRepo, FolderRepo, GitRepo
from harness.digest import digest_json, tree_manifest
from harness.errors import CaseError, InfraError

__all__ = [
    "Candidate",
    "display_path",
    "extract_tree",
    "materialize",
    "pack_tree",
    "snapshot",
    "unified_diff",
]

_MAX_DIFF_FILE = 1 << 20


@dataclass(frozen=True)
class Candidate:
    """The workspace an agent produced, identified by content."""

    digest: str
    manifest: dict[str, str]
    diff: bytes
    tarball: bytes
    changed: bool
    stats: dict[str, int]


def materialize(lc: LoadedCase, dest: Path) -> None:
    """Write the starting state of ``lc`` into the empty or missing folder ``dest``.

    Raises:
        CaseError: the archive or repository does not hold what the case pins.
        InfraError: git could not be run.
    """
    repo = lc.case.repo
    if isinstance(repo, FolderRepo):
        shutil.copytree(lc.path(repo.path), dest, symlinks=True, dirs_exist_ok=True)
    elif isinstance(repo, ArchiveRepo):
        dest.mkdir(parents=True, exist_ok=True)
        archive = lc.path(repo.path)
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                for name in zf.namelist():
                    if name.startswith("/") or ".." in Path(name).parts:
                        raise CaseError(f"archive member {name!r} escapes", file=archive)
                zf.extractall(dest)
        else:
            try:
                with tarfile.open(archive) as tf:
                    safe_extract(tf, dest)
            except (tarfile.TarError, OSError, UnsafeArchive) as exc:
                raise CaseError(f"cannot extract archive: {exc}", file=archive) from None
    elif isinstance(repo, GitRepo):
        url = repo.url
        if "://" not in url and not url.startswith("git@") and not Path(url).is_absolute():
            url = str((lc.dir / url).resolve())
        dest.mkdir(parents=True, exist_ok=True)
        steps = [
            ["git", "init", "-q", str(dest)],
            ["git", "-C", str(dest), "fetch", "-q", "--depth=1", url, repo.commit],
            ["git", "-C", str(dest), "checkout", "-q", "FETCH_HEAD"],
        ]
        for argv in steps:
            done = _proc.run(argv, timeout=300)
            if done.returncode != 0:
                msg = done.stderr.decode(errors="replace").strip()
                raise InfraError(
                    f"git failed for {lc.id}: {' '.join(argv[:3])}: {msg}", reason="git"
                )
        shutil.rmtree(dest / ".git")


def pack_tree(root: Path) -> bytes:
    """Deterministic gzip-less tarball of ``root`` (sorted, zeroed times and owners)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for path in tree_entries(root):
            rel = path.relative_to(root).as_posix()
            info = tf.gettarinfo(str(path), arcname=rel)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if info.isreg():
                with path.open("rb") as fh:
                    tf.addfile(info, fh)
            else:
                tf.addfile(info)
    return buf.getvalue()


def extract_tree(data: bytes, dest: Path) -> None:
    """Extract a tarball made by :func:`pack_tree` into ``dest`` (:func:`safe_extract`).

    A symlink leaving the tree is kept as an inert link, as the agent left it: the
    verifier-owned tree leaves it out and records it (:mod:`harness.trial.vtree`), as it did when
    the candidate was first verified, so a replay reaches the same verdict.
    """
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        safe_extract(tf, dest, outside_links="keep")


def _text(path: Path) -> list[str] | None:
    """Read a regular file as diff lines; never follow a link (the candidate's)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:  # a symlink (ELOOP), a missing file: shown by name only
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_DIFF_FILE:
                return None
            data = fh.read()
        if b"\0" in data:
            return None
        return data.decode("utf-8").splitlines(keepends=True)
    except (OSError, UnicodeDecodeError):
        return None


def display_path(rel: str) -> str:
    """Show a path for a diff header: one line of text, odd bytes and newlines escaped."""
    text = os.fsencode(rel).decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def unified_diff(
    before: Path, after: Path, old: dict[str, str], new: dict[str, str]
) -> tuple[bytes, dict[str, int]]:
    """Unified diff between two trees given their manifests, plus counts."""
    out: list[str] = []
    stats = {"files_changed": 0, "insertions": 0, "deletions": 0}
    for rel in sorted(set(old) | set(new)):
        if old.get(rel) == new.get(rel):
            continue
        stats["files_changed"] += 1
        a = _text(before / rel) if rel in old else []
        b = _text(after / rel) if rel in new else []
        if a is None or b is None:
            out.append(f"Binary or large file {display_path(rel)} differs\n")
            continue
        for line in difflib.unified_diff(
            a,
            b,
            fromfile=f"a/{display_path(rel)}" if rel in old else "/dev/null",
            tofile=f"b/{display_path(rel)}" if rel in new else "/dev/null",
        ):
            if not line.endswith("\n"):
                line += "\n\\ No newline at end of file\n"
            if line.startswith("+") and not line.startswith("+++"):
                stats["insertions"] += 1
            elif line.startswith("-") and not line.startswith("---"):
                stats["deletions"] += 1
            out.append(line)
    return "".join(out).encode("utf-8"), stats


def snapshot(start: Path, start_manifest: dict[str, str], workspace: Path) -> Candidate:
    """Identify the candidate left in ``workspace`` relative to the starting tree."""
    manifest = tree_manifest(workspace)
    diff, stats = unified_diff(start, workspace, start_manifest, manifest)
    return Candidate(
        digest=digest_json(manifest),
        manifest=manifest,
        diff=diff,
        tarball=pack_tree(workspace),
        changed=manifest != start_manifest,
        stats=stats,
    )
