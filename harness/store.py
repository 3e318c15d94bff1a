"""The record store: content-addressed blobs, immutable run records, release records.

Layout under the store folder (``.harness/`` by default)::

    blobs/sha256/ab/<hex>                 stdout, stderr, diffs, candidate trees
    runs/<run_id>/release.json            opened before the first trial (policy digest in it)
    runs/<run_id>/trials/<slug>.json      one immutable run record per trial
    runs/<run_id>/result-<n>.json         gate decisions, each a new file
    runs/<run_id>/.lock                   held by the one process writing this run

Every file is written to a temporary name, fsynced, then hard-linked to its final name,
which fails if the name exists: records are never overwritten or edited. A run killed
mid-way keeps every record it finished; the next run with the same identity resumes.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from pathlib import Path
from typing import IO, Any, TypeVar

from pydantic import BaseModel, ValidationError

from harness.digest import digest_bytes
from harness.errors import StoreError
from harness.records import ReleaseRecord, RunRecord

__all__ = ["RunHandle", "Store"]

M = TypeVar("M", bound=BaseModel)


def _write_once(path: Path, data: bytes) -> bool:
    """Atomically create ``path`` with ``data``; return False if it already exists."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        return True
    finally:
        os.unlink(tmp)


def _read_model(path: Path, model: type[M]) -> M:
    try:
        return model.model_validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError) as exc:
        raise StoreError(f"{path}: unreadable or corrupt record: {exc}") from None


class Store:
    """A folder of blobs and runs."""

    def __init__(self, root: Path) -> None:
        self.root = root

    # -- blobs -------------------------------------------------------------------------
    def blob_path(self, digest: str) -> Path:
        """Where the blob with ``digest`` lives."""
        hexd = digest.split(":", 1)[-1]
        return self.root / "blobs" / "sha256" / hexd[:2] / hexd

    def put_blob(self, data: bytes) -> str:
        """Store ``data`` (idempotent) and return its digest."""
        digest = digest_bytes(data)
        path = self.blob_path(digest)
        if not path.exists():
            _write_once(path, data)
        return digest

    def get_blob(self, digest: str) -> bytes:
        """Return the blob's bytes, verifying them against the digest.

        Raises:
            StoreError: the blob is missing or corrupt.
        """
        path = self.blob_path(digest)
        try:
            data = path.read_bytes()
        except OSError:
            raise StoreError(f"blob {digest} is missing from {self.root}") from None
        if digest_bytes(data) != digest:
            raise StoreError(f"blob {digest} is corrupt ({path})")
        return data

    # -- runs --------------------------------------------------------------------------
    def run_dir(self, run_id: str) -> Path:
        """Folder of run ``run_id``."""
        return self.root / "runs" / run_id

    def run_ids(self) -> list[str]:
        """Every run with a release record, oldest first."""
        runs = self.root / "runs"
        if not runs.is_dir():
            return []
        found = [d for d in runs.iterdir() if (d / "release.json").is_file()]
        return [d.name for d in sorted(found, key=lambda d: (d / "release.json").stat().st_mtime)]

    def resolve_run(self, ref: str) -> str:
        """Resolve a run id, a unique prefix, or ``latest``.

        Raises:
            StoreError: no run or several runs match.
        """
        ids = self.run_ids()
        if ref == "latest":
            if not ids:
                raise StoreError(f"no runs in {self.root}")
            return ids[-1]
        if ref in ids:
            return ref
        matches = [i for i in ids if i.startswith(ref)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise StoreError(f"no run {ref!r} in {self.root}")
        raise StoreError(f"run {ref!r} is ambiguous: {', '.join(matches)}")

    def release(self, run_id: str) -> ReleaseRecord:
        """Return the release record of a run."""
        return _read_model(self.run_dir(run_id) / "release.json", ReleaseRecord)

    def trials(self, run_id: str) -> list[RunRecord]:
        """Every run record of a run, sorted by slug."""
        tdir = self.run_dir(run_id) / "trials"
        if not tdir.is_dir():
            return []
        return [_read_model(p, RunRecord) for p in sorted(tdir.glob("*.json"))]

    def trial_slugs(self, run_id: str) -> set[str]:
        """Slugs of the trials already recorded (for resume)."""
        tdir = self.run_dir(run_id) / "trials"
        return {p.stem for p in tdir.glob("*.json")} if tdir.is_dir() else set()

    def results(self, run_id: str) -> list[dict[str, Any]]:
        """Gate results written for a run, oldest first."""
        rdir = self.run_dir(run_id)
        paths = sorted(rdir.glob("result-*.json"), key=lambda p: int(p.stem.split("-")[1]))
        return [json.loads(p.read_text()) for p in paths]

    def open_run(self, record: ReleaseRecord) -> RunHandle:
        """Open (or resume) a run for writing; holds the run's lock until closed.

        Raises:
            StoreError: another process holds the run, or the stored release record
                differs from ``record`` in anything but its creation time.
        """
        return RunHandle(self, record)


class RunHandle:
    """The single writer of one run. Use as a context manager."""

    def __init__(self, store: Store, record: ReleaseRecord) -> None:
        self.store = store
        self.run_id = record.run_id
        self.dir = store.run_dir(record.run_id)
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "trials").mkdir(exist_ok=True)
        self._lock: IO[bytes] | None = (self.dir / ".lock").open("ab")
        try:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            self._lock = None
            raise StoreError(
                f"run {record.run_id} is being written by another harness process "
                f"(lock {self.dir / '.lock'}); wait for it or use a different store"
            ) from None
        # We hold the run's lock: temporary files here are debris of a killed writer.
        for debris in [*self.dir.glob(".tmp-*"), *(self.dir / "trials").glob(".tmp-*")]:
            debris.unlink(missing_ok=True)
        path = self.dir / "release.json"
        if not _write_once(path, record.model_dump_json(indent=2).encode()):
            existing = _read_model(path, ReleaseRecord)
            mine = record.model_dump(exclude={"created_at", "seed"})
            if existing.model_dump(exclude={"created_at", "seed"}) != mine:
                self.close()
                raise StoreError(
                    f"run {record.run_id} exists with a different release record; "
                    "refusing to mix evidence"
                )
            record = existing
        self.record = record

    def done(self) -> set[str]:
        """Slugs of trials already recorded."""
        return self.store.trial_slugs(self.run_id)

    def add_trial(self, record: RunRecord, blobs: dict[str, bytes]) -> bool:
        """Write blobs then the run record; False if that trial was already recorded."""
        for data in blobs.values():
            self.store.put_blob(data)
        path = self.dir / "trials" / f"{record.key.slug()}.json"
        return _write_once(path, record.model_dump_json(indent=2).encode())

    def write_once(self, name: str, data: bytes) -> bool:
        """Create file ``name`` in the run folder once; False if it already exists."""
        return _write_once(self.dir / name, data)

    def add_result(self, data: dict[str, Any]) -> Path:
        """Append a new gate result file (never overwrites an earlier one)."""
        n = len(list(self.dir.glob("result-*.json"))) + 1
        while True:
            path = self.dir / f"result-{n}.json"
            if _write_once(path, json.dumps(data, indent=2, sort_keys=True).encode()):
                return path
            n += 1

    def close(self) -> None:
        """Release the run lock."""
        if self._lock is not None:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    def __enter__(self) -> RunHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
