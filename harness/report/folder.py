"""The portable report folder: everything a reviewer or a CI job needs, in one directory.

::

    reports/<run_id>/
      index.html          the decision, the cases the gate names with their evidence, tables
      evidence/<n>.html   every trial that did not pass, a page per ~200 trials
      junit.xml           CI test results (the candidate; ``baseline`` on request)
      summary.md          CI job summary
      report.json         the report as JSON (``harness schema report``)
      files/<hex>.txt     logs, feedback, long diffs and a failed trial's model transcript
                          (requests and responses, key-free): copied from the store, capped
      records/<slug>.json run records of the judgment-lane trials

The run record of every trial shown as evidence, and its diff when short, are in the
evidence page itself (beside the trial), so a 1,000-case run writes hundreds of files,
not tens of thousands.

Nothing in the folder links outside it, and no host path appears in any file: the project
root and the store path are replaced by ``<project>`` and ``<store>`` in everything that
is written (records and logs included). The folder is built next to its final place and
swapped in, so a reader never sees a half-written report and stale files never linger.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from harness.errors import ConfigError, StoreError
from harness.report.data import Evidence, EvidenceGroup, PathRef, ReportData
from harness.store.records import RunRecord
from harness.store.store import Store

__all__ = [
    "FILE_CAP",
    "FORMATS",
    "PREVIEW_CHARS",
    "TRIAL_BUDGET",
    "EvidenceFile",
    "Format",
    "ReportFolder",
    "Scrubber",
]

Format = Literal["html", "junit", "markdown", "json"]
FORMATS: tuple[Format, ...] = ("html", "junit", "markdown", "json")

FILE_CAP = 64 * 1024
"""Bytes kept of one copied file (head and tail; the middle is cut with a marker)."""
TRIAL_BUDGET = 256 * 1024
"""Bytes of copied files per trial: a trial with many huge logs cannot fill the folder."""
PREVIEW_CHARS = 4000
"""Characters of a diff shown inline in a page (the whole capped file is one click away)."""
EVIDENCE_PER_PAGE = 200
"""Trials per evidence page: a run with thousands of failures still opens quickly."""

# Blob kinds worth copying: text a reviewer reads. The candidate tree is an archive of the
# whole workspace (large, binary); its identity is shown, the diff is the readable form.
_COPIED_BLOBS = frozenset(
    {
        "verifier stdout",
        "verifier stderr",
        "agent stdout",
        "agent stderr",
        "candidate diff",
        "feedback given",
    }
)


# Left out of a record shown beside its trial: the excerpts are printed right above it,
# and the full logs are files of their own (the record names their blobs).
_SHOWN_APART: dict[str, Any] = {
    "attempts": {"__all__": {"agent": {"excerpt"}, "verifier": {"excerpt"}}}
}


class ReportFolder(BaseModel):
    """What :func:`harness.report.write_report_folder` wrote."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    root: Path
    """The run's report folder, ``<reports_dir>/<run_id>``."""
    index: Path | None
    """``index.html`` (None when HTML was not asked for)."""
    junit: Path | None
    summary: Path | None
    json_path: Path | None
    history: Path | None
    """The release history page ``<reports_dir>/index.html``, refreshed."""
    latest: Path | None = None
    """``<reports_dir>/latest/``, now holding this folder's files (None when not asked)."""
    evidence_files: int
    """Files copied from the store (logs, diffs, records)."""
    bytes: int
    """Total size of the folder."""

    @property
    def paths(self) -> list[Path]:
        """The written report files, the HTML page first."""
        return [p for p in (self.index, self.junit, self.summary, self.json_path) if p]


class Scrubber:
    """Replaces host paths (project root, store path) in text written to the folder."""

    def __init__(self, roots: Mapping[str, Path]) -> None:
        pairs: dict[str, str] = {}
        for label, root in roots.items():
            for form in {str(root), str(root.absolute()), str(root.resolve())}:
                if len(form) > 1:
                    pairs[form] = f"<{label}>"
        # Longest first: the store usually lives inside the project.
        self._pairs = sorted(pairs.items(), key=lambda kv: -len(kv[0]))

    def __call__(self, text: str) -> str:
        """Return ``text`` with every known host path replaced by its placeholder."""
        for host, placeholder in self._pairs:
            if host in text:
                text = text.replace(host, placeholder)
        return text


@dataclass(frozen=True)
class EvidenceFile:
    """A stored file copied into the folder, or shown inline beside its trial."""

    href: str | None
    """Path relative to the folder root (``files/…``, ``records/…``); None: inline only."""
    size: int
    """Bytes of the stored original."""
    truncated: bool
    preview: str | None = None
    """A diff's head, or a run record's JSON, shown inline."""


def _cap(data: bytes, cap: int) -> tuple[bytes, bool]:
    if len(data) <= cap:
        return data, False
    half = max(0, cap // 2 - 64)
    cut = len(data) - 2 * half
    marker = f"\n\n[… {cut:,} bytes cut by harness: the copy keeps the head and the tail …]\n\n"
    return data[:half] + marker.encode() + data[-half:], True


class _Copier:
    """Copies the stored files behind evidence into the folder, each once."""

    def __init__(
        self, out: Path, store: Store, scrub: Scrubber, records: Mapping[str, RunRecord]
    ) -> None:
        self.out = out
        self.store = store
        self.records = records
        self.scrub = scrub
        self.files: dict[str, EvidenceFile] = {}
        self.count = 0

    def _put(self, rel: str, text: str) -> None:
        path = self.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.scrub(text), encoding="utf-8")
        self.count += 1

    def add(self, ref: PathRef, budget: int, *, inline: bool = True) -> int:
        """Copy ``ref`` (within ``budget`` bytes); return the bytes it used.

        With ``inline``, a run record and a diff short enough to show whole are kept for
        the page (:attr:`EvidenceFile.preview`) instead of becoming files.
        """
        if not ref.exists or ref.ref in self.files:
            return 0
        if ref.kind == "record":
            rec = self.records.get(ref.ref)
            if rec is None:
                return 0
            text = self.scrub(
                rec.model_dump_json(indent=1, exclude_defaults=True, exclude=_SHOWN_APART)
            )
            if inline:
                self.files[ref.ref] = EvidenceFile(None, len(text), False, text)
                return len(text)
            rel = f"records/{ref.ref}.json"
            self._put(rel, text)
            self.files[ref.ref] = EvidenceFile(rel, len(text), False)
            return len(text)
        transcript = ref.label.startswith("model ")
        if ref.label not in _COPIED_BLOBS and not transcript:
            return 0
        if transcript and budget <= 0:
            return 0  # a transcript only within the trial's budget: the store has the rest
        try:
            data = self.store.get_blob(ref.ref)
        except StoreError:
            return 0
        kept, cut = _cap(data, max(1024, min(FILE_CAP, budget)))
        text = kept.decode("utf-8", "replace")
        if ref.label == "candidate diff" and inline and len(text) <= PREVIEW_CHARS:
            self.files[ref.ref] = EvidenceFile(None, len(data), cut, self.scrub(text))
            return len(kept)
        rel = f"files/{ref.ref.split(':', 1)[-1][:24]}.txt"
        self._put(rel, text)
        preview = None
        if ref.label == "candidate diff":
            preview = self.scrub(text[:PREVIEW_CHARS]) + "\n[… the rest is in the file …]"
        self.files[ref.ref] = EvidenceFile(rel, len(data), cut, preview)
        return len(kept)

    def add_trial(self, refs: Iterable[PathRef]) -> None:
        """Copy one trial's files under :data:`TRIAL_BUDGET` (record first, then logs)."""
        left = TRIAL_BUDGET
        for ref in refs:
            left -= self.add(ref, left)


def evidence_pages(data: ReportData) -> list[list[EvidenceGroup]]:
    """Split the evidence groups (candidate first) into pages of about 200 trials."""
    groups = [*data.failures, *data.infra_errors, *data.evaluator_errors]
    groups.sort(key=lambda g: (g.arm != "candidate", g.case_id, g.anchor))
    pages: list[list[EvidenceGroup]] = [[]]
    size = 0
    for g in groups:
        if pages[-1] and size + len(g.items) > EVIDENCE_PER_PAGE:
            pages.append([])
            size = 0
        pages[-1].append(g)
        size += len(g.items)
    return [p for p in pages if p]


def copy_evidence(
    out: Path, store: Store, data: ReportData, scrub: Scrubber, trials: Iterable[RunRecord]
) -> _Copier:
    """Copy every evidence trial's record, diff and logs, and judgment-lane records."""
    items: list[Evidence] = [
        ev
        for gs in (data.failures, data.infra_errors, data.evaluator_errors)
        for g in gs
        for ev in g.items
    ]
    wanted = {(ev.arm == "candidate", ev.case_id, ev.trial) for ev in items}
    wanted |= {(True, j.case_id, m.trial) for j in data.judgment for m in j.marks}
    records = {
        r.key.slug(): r
        for r in trials
        if (r.key.arm.value == "candidate", r.key.case_id, r.key.trial) in wanted
    }
    copier = _Copier(out, store, scrub, records)
    for ev in items:
        copier.add_trial(ev.paths)
    for j in data.judgment:
        for ref in j.records:
            copier.add(ref, TRIAL_BUDGET, inline=False)
    return copier


def write_file(path: Path, data: bytes, option: str) -> Path:
    """Atomically (re)write ``path``; a bad destination is a ConfigError naming it.

    A path that exists and is not a regular file (``/dev/stdout``, a symlink, a named pipe,
    a device) is written through, never renamed onto: the rename would replace the
    device or link itself with a regular file.
    """
    if path.is_dir():
        raise ConfigError("is a directory; expected a file path to write", file=path, field=option)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        try:
            with path.open("wb") as fh:
                fh.write(data)
        except OSError as exc:
            raise ConfigError(
                f"cannot write here: {exc.strerror or exc}", file=path, field=option
            ) from None
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise ConfigError(
            f"cannot write the report here: {exc.strerror or exc}", file=path, field=option
        ) from None
    return path


class StagedFolder:
    """A folder built beside its destination and swapped into place on :meth:`commit`."""

    def __init__(self, dest: Path) -> None:
        self.dest = dest
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            self.path = Path(
                tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
            )
        except OSError as exc:
            raise ConfigError(
                f"cannot write the report here: {exc.strerror or exc}",
                file=dest,
                field="reports_dir",
            ) from None

    def commit(self) -> None:
        """Replace ``dest`` with the staged folder (the old one is removed)."""
        try:
            os.chmod(self.path, 0o755)
            old = None
            if self.dest.exists():
                old = self.dest.with_name(f".{self.dest.name}.old-{os.getpid()}")
                shutil.rmtree(old, ignore_errors=True)
                os.replace(self.dest, old)
            os.replace(self.path, self.dest)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        except OSError as exc:
            self.abort()
            raise ConfigError(
                f"cannot write the report here: {exc.strerror or exc}",
                file=self.dest,
                field="reports_dir",
            ) from None

    def abort(self) -> None:
        """Remove the staged folder."""
        shutil.rmtree(self.path, ignore_errors=True)


def folder_size(root: Path) -> tuple[int, int]:
    """Return (files, bytes) under ``root``."""
    n = size = 0
    for dirpath, _, names in os.walk(root):
        for name in names:
            n += 1
            size += (Path(dirpath) / name).stat().st_size
    return n, size
