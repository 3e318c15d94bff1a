"""Load ``cases/<id>/case.yaml`` folders into :class:`LoadedCase` objects with digests."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness._yaml import load_model
from harness.cases.model import ArchiveRepo, Case, FolderRepo
from harness.digest import digest_json, tree_manifest
from harness.errors import CaseError

__all__ = ["CASE_FILE", "LoadedCase", "case_digest", "load_case", "load_cases"]

CASE_FILE = "case.yaml"
_IGNORED = ("__pycache__", ".pytest_cache", ".DS_Store")


@dataclass(frozen=True)
class LoadedCase:
    """A validated case, where it lives, and its content identity."""

    case: Case
    dir: Path
    digest: str
    """sha256 over the canonical case content and every file in the case folder."""
    files: dict[str, str]
    """Relative path → file digest for every file of the case folder."""

    @property
    def id(self) -> str:
        """Case id."""
        return self.case.id

    @property
    def version(self) -> int:
        """Case version."""
        return self.case.version

    @property
    def active(self) -> bool:
        """False for retired cases."""
        return self.case.retired is None

    def path(self, rel: str) -> Path:
        """Absolute path of a file referenced relative to the case folder."""
        return self.dir / rel


def case_digest(case: Case, files: dict[str, str]) -> str:
    """Digest of a case: its canonical model content plus the manifest of its folder."""
    return digest_json({"case": case.identity(), "files": files})


def _inside(base: Path, rel: str, case_file: Path, field: str) -> Path:
    target = (base / rel).resolve()
    if not target.is_relative_to(base.resolve()):
        raise CaseError(
            f"path {rel!r} resolves outside the case folder (symlink?)", file=case_file, field=field
        )
    return target


def _check_files(case: Case, case_dir: Path, case_file: Path) -> None:
    """Every file the case references exists inside the case folder."""
    repo = case.repo
    if isinstance(repo, FolderRepo):
        if not _inside(case_dir, repo.path, case_file, "repo.path").is_dir():
            raise CaseError(
                f"expected a folder at {repo.path!r} inside the case",
                file=case_file,
                field="repo.path",
            )
    elif isinstance(repo, ArchiveRepo):
        archive = _inside(case_dir, repo.path, case_file, "repo.path")
        if not archive.is_file():
            raise CaseError(
                f"expected an archive file at {repo.path!r}", file=case_file, field="repo.path"
            )
        actual = hashlib.sha256(archive.read_bytes()).hexdigest()
        if actual != repo.sha256:
            raise CaseError(
                f"archive sha256 is {actual}, expected {repo.sha256}",
                file=case_file,
                field="repo.sha256",
            )
    for i, hidden in enumerate(case.verifier.hidden):
        if not _inside(case_dir, hidden.src, case_file, f"verifier.hidden.{i}.src").exists():
            raise CaseError(
                f"hidden file {hidden.src!r} does not exist",
                file=case_file,
                field=f"verifier.hidden.{i}.src",
            )
    for i, mutant in enumerate(case.verifier.mutants):
        for j, file in enumerate(mutant.replace):
            where = f"verifier.mutants.{i}.replace.{j}.src"
            if not _inside(case_dir, file.src, case_file, where).is_file():
                raise CaseError(
                    f"mutant file {file.src!r} is not a file", file=case_file, field=where
                )
    if (
        case.reference is not None
        and not _inside(case_dir, case.reference.patch, case_file, "reference.patch").is_file()
    ):
        raise CaseError(
            f"reference patch {case.reference.patch!r} does not exist",
            file=case_file,
            field="reference.patch",
        )


def load_case(case_dir: Path) -> LoadedCase:
    """Load and validate one case folder.

    Raises:
        CaseError: malformed YAML, unknown key, wrong type, missing or escaping file, or a
            folder name that differs from the case id.
    """
    case_file = case_dir / CASE_FILE
    case, _ = load_model(case_file, Case, CaseError)
    if case.id != case_dir.name:
        raise CaseError(
            f"case id {case.id!r} must equal its folder name {case_dir.name!r}",
            file=case_file,
            field="id",
        )
    _check_files(case, case_dir, case_file)
    files = tree_manifest(case_dir, exclude=_IGNORED)
    return LoadedCase(case=case, dir=case_dir, digest=case_digest(case, files), files=files)


def _case_dirs(cases_dir: Path) -> list[Path]:
    """Folders of ``cases_dir`` holding a case file; refuse one that only looks like it."""
    found: list[Path] = []
    for d in sorted(cases_dir.iterdir()):
        case_file = d / CASE_FILE
        if case_file.is_file():
            found.append(d)
        elif case_file.exists() or case_file.is_symlink():
            raise CaseError(
                f"{CASE_FILE} is not a regular file (a folder, a broken link or a device); "
                "a case is defined by that file",
                file=case_file,
            )
        elif (d / "case.yml").exists():
            raise CaseError(
                f"found case.yml; the case file must be named {CASE_FILE}", file=d / "case.yml"
            )
    return found


def load_cases(cases_dir: Path, only: Iterable[str] | None = None) -> list[LoadedCase]:
    """Load every ``<id>/case.yaml`` under ``cases_dir``, sorted by id.

    Raises:
        CaseError: any case is invalid, or ``only`` names an unknown case.
    """
    if not cases_dir.is_dir():
        what = "is not a folder" if cases_dir.exists() else "does not exist"
        raise CaseError(f"cases folder {what}", file=cases_dir, field="cases_dir")
    loaded = [load_case(d) for d in _case_dirs(cases_dir)]
    seen: dict[str, Path] = {}
    for lc in loaded:
        if lc.id in seen:
            raise CaseError(
                f"duplicate case id {lc.id!r} (also in {seen[lc.id]})",
                file=lc.dir / CASE_FILE,
                field="id",
            )
        seen[lc.id] = lc.dir
    if only is not None:
        wanted = list(only)
        unknown = sorted(set(wanted) - set(seen))
        if unknown:
            raise CaseError(
                f"unknown case id(s): {', '.join(unknown)}; known: {', '.join(sorted(seen))}",
                file=cases_dir,
            )
        loaded = [lc for lc in loaded if lc.id in set(wanted)]
    return loaded
