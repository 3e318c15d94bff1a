"""The record store: content-addressed blobs, immutable run records, a manifest per run.

Layout under the store folder (``.harness/`` by default)::

    blobs/sha256/ab/<hex>                 stdout, stderr, diffs, candidate trees
    runs/<run_id>/release.json            opened before the first trial (policy digest in it)
    runs/<run_id>/trials/<slug>.json      one immutable run record per trial
    runs/<run_id>/validity.json           the end-of-run system re-check and the run's seal
    runs/<run_id>/result-<n>.json         gate decisions, each a new file
    runs/<run_id>/manifest.jsonl          every committed file, its digest, a hash chain
    runs/<run_id>/summary.json            derived summary for the history (rewritten by reports)
    runs/<run_id>/.lock                   held by the one process writing this run

Every file is written to a temporary name, fsynced, then hard-linked to its final name,
which fails if the name exists: records are never overwritten or edited. A write that
fails (disk full, read-only) removes its temporary file and raises
:class:`~harness.errors.StoreWriteError`.

**The manifest is the commit point.** A file is part of a run once its entry (path,
sha256, the blobs it refers to, chain head) is appended to ``manifest.jsonl``. A record
written just before a ``kill -9`` but not yet in the manifest is not part of the run: the
next writer removes it and runs the trial again; readers never see it. Readers (``show``,
``gate``, ``report``, ``baseline promote``) verify each file and blob they use against the
manifest and raise :class:`~harness.errors.StoreIntegrityError` naming the file that
changed. ``validity.json`` seals the run: it holds the chain head of every entry before
it, so a record edited *and* re-entered in a recomputed manifest is detected too. See
``docs/store.md`` for what is out of reach (rewriting the seal as well).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import os
import signal
import tempfile
from pathlib import Path
from typing import IO, TypeVar

from pydantic import BaseModel, ValidationError

from harness._safefs import storable
from harness.digest import canonical_json, digest_bytes, digest_json
from harness.errors import StoreError, StoreIntegrityError, StoreWriteError
from harness.names import MAX_RUN_ID, check_name, inside
from harness.sandbox.owner import sweep_store_debris
from harness.store.records import (
    GENESIS,
    ManifestEntry,
    ReleaseRecord,
    ResultRecord,
    RunRecord,
    StepClock,
    ValidityRecord,
)

__all__ = ["MANIFEST", "RunHandle", "Store"]

M = TypeVar("M", bound=BaseModel)

MANIFEST = "manifest.jsonl"
RELEASE = "release.json"
VALIDITY = "validity.json"
_CRASH_ENV = "_HARNESS_TEST_CRASH_AFTER_RECORD"
"""Tests only: kill this process with SIGKILL after writing the N-th record file and
before its manifest entry, to prove that the manifest is the commit point."""


def _fail(path: Path, exc: OSError) -> StoreWriteError:
    why = exc.strerror or str(exc)
    return StoreWriteError(
        f"cannot write the store at {path}: {why}; nothing was half-written "
        "(free space or fix permissions, then re-run the same command to resume)"
    )


def _fsync_dir(path: Path) -> None:
    dfd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _mkdir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _fail(path, exc) from None


def _write_once(path: Path, data: bytes, sync: bool = True) -> bool:
    """Atomically create ``path`` with ``data``; return False if it already exists.

    Raises:
        StoreWriteError: the file could not be written; no temporary file is left.
    """
    _mkdir(path.parent)
    tmp: str | None = None
    try:
        # The writer's pid in the name lets a later writer sweep it once we are dead.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".tmp-p{os.getpid()}-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        if sync:
            _fsync_dir(path.parent)
        return True
    except OSError as exc:
        raise _fail(path, exc) from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def _append(fd: int, path: Path, line: bytes, sync: bool = True) -> None:
    """Append one line to ``fd`` and fsync it; on failure truncate back (no torn line)."""
    try:
        size = os.fstat(fd).st_size
    except OSError as exc:
        raise _fail(path, exc) from None
    try:
        view = memoryview(line)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    except OSError as exc:
        # If even this fails, the torn tail has no newline: readers ignore it and the
        # next writer trims it.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
            os.fsync(fd)
        raise _fail(path, exc) from None


def _parse(path: Path, data: bytes, model: type[M]) -> M:
    try:
        return model.model_validate_json(data)
    except (ValidationError, ValueError) as exc:
        raise StoreIntegrityError(f"{path}: unreadable or corrupt record: {exc}") from None


def _read_model(path: Path, model: type[M]) -> M:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise StoreError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return _parse(path, data, model)


def _chain(seq: int, path: str, digest: str, blobs: tuple[str, ...], prev: str) -> ManifestEntry:
    body = {"seq": seq, "path": path, "digest": digest, "blobs": list(blobs), "prev": prev}
    return ManifestEntry(
        seq=seq, path=path, digest=digest, blobs=blobs, prev=prev, head=digest_json(body)
    )


def _load_manifest(run_dir: Path) -> tuple[list[ManifestEntry], int]:
    """Return the committed entries, chain-checked, and the byte length they span.

    A last line without its newline is an append cut short: not committed, ignored.

    Raises:
        StoreIntegrityError: a committed line is malformed or breaks the hash chain.
    """
    path = run_dir / MANIFEST
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], 0
    except OSError as exc:
        raise StoreError(f"{path}: cannot read: {exc.strerror or exc}") from None
    end = data.rfind(b"\n") + 1
    entries: list[ManifestEntry] = []
    prev = GENESIS
    for n, line in enumerate(data[:end].splitlines(), start=1):
        try:
            e = ManifestEntry.model_validate_json(line)
        except (ValidationError, ValueError):
            raise StoreIntegrityError(f"{path}:{n}: manifest line is corrupt") from None
        want = _chain(len(entries), e.path, e.digest, e.blobs, prev)
        if e != want:
            raise StoreIntegrityError(
                f"{path}:{n}: manifest entry for {e.path} breaks the hash chain "
                "(a line was edited, dropped or reordered)"
            )
        entries.append(e)
        prev = e.head
    return entries, end


def _record_json(record: BaseModel) -> bytes:
    """``record`` as the stored JSON text; a string UTF-8 cannot hold is stored as U+FFFD.

    Everything the sandbox hands back is made storable where it is parsed; this is the last
    line: a lone surrogate that reached a record anyway must not fail the run (exit 5) nor
    block resuming it, so the record is rebuilt from its strings with U+FFFD in their place.
    """
    try:
        return record.model_dump_json(indent=2).encode()
    except ValueError:  # pydantic's serialization error (or encoding's) is a ValueError
        fixed = storable(record.model_dump(mode="python"))
        return type(record).model_validate(fixed).model_dump_json(indent=2).encode()


class Store:
    """A folder of blobs and runs."""

    def __init__(self, root: Path, *, sync: bool = True) -> None:
        """Open the store at ``root``.

        ``sync=False`` skips fsync (tests and benchmarks only): a crash of the process
        still loses nothing committed, a crash of the machine may.
        """
        self.root = root
        self.sync = sync
        self._good_blobs: set[str] = set()
        self._manifests: dict[str, tuple[tuple[int, int, int], list[ManifestEntry]]] = {}

    # -- blobs -------------------------------------------------------------------------
    def blob_path(self, digest: str) -> Path:
        """Where the blob with ``digest`` lives."""
        hexd = digest.split(":", 1)[-1]
        if len(hexd) != 64 or any(c not in "0123456789abcdef" for c in hexd):
            raise StoreIntegrityError(f"{digest!r} is not a blob digest")
        return self.root / "blobs" / "sha256" / hexd[:2] / hexd

    def put_blob(self, data: bytes) -> str:
        """Store ``data`` (idempotent) and return its digest.

        Raises:
            StoreWriteError: the blob could not be written.
        """
        digest = digest_bytes(data)
        path = self.blob_path(digest)
        if not path.exists():
            _write_once(path, data, self.sync)
        return digest

    def get_blob(self, digest: str) -> bytes:
        """Return the blob's bytes, verifying them against the digest.

        Raises:
            StoreIntegrityError: the blob is missing or corrupt.
        """
        path = self.blob_path(digest)
        try:
            data = path.read_bytes()
        except OSError:
            raise StoreIntegrityError(f"blob {digest} is missing ({path})") from None
        if digest_bytes(data) != digest:
            raise StoreIntegrityError(f"blob {digest} is corrupt ({path})")
        return data

    def _check_blob(self, digest: str) -> None:
        if digest not in self._good_blobs:
            self.get_blob(digest)
            self._good_blobs.add(digest)

    # -- runs --------------------------------------------------------------------------
    def put_record(self, rel: str, data: bytes) -> bool:
        """Atomically create ``rel`` under the store root with ``data``; False if it exists.

        For records outside a run (baseline pools): written once, never edited.

        Raises:
            StoreWriteError: the file could not be written; nothing is left half-written.
        """
        return _write_once(self.root / rel, data, self.sync)

    def run_dir(self, run_id: str) -> Path:
        """Folder of run ``run_id``.

        Raises:
            ConfigError: ``run_id`` is not a safe name or would lead outside the store.
        """
        check_name(run_id, kind="run", field="RUN", max_len=MAX_RUN_ID)
        return inside(self.root, self.root / "runs" / run_id, field="RUN")

    def run_ids(self) -> list[str]:
        """Every run with a release record, oldest first."""
        runs = self.root / "runs"
        if not runs.is_dir():
            return []
        found = [d for d in runs.iterdir() if (d / RELEASE).is_file()]
        return [d.name for d in sorted(found, key=lambda d: (d / RELEASE).stat().st_mtime)]

    def resolve_run(self, ref: str) -> str:
        """Resolve a run id, a unique prefix, or ``latest``.

        Raises:
            ConfigError: ``ref`` is not a safe run name.
            StoreError: no run or several runs match.
        """
        if ref != "latest":
            check_name(ref, kind="run", field="RUN", max_len=MAX_RUN_ID)
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

    # -- verified reads ----------------------------------------------------------------
    def manifest(self, run_id: str) -> list[ManifestEntry]:
        """Return the run's committed entries, chain and seal checked.

        Raises:
            StoreIntegrityError: the manifest is missing, corrupt, or no longer reaches
                the chain head sealed in ``validity.json``.
        """
        rdir = self.run_dir(run_id)
        try:
            st = (rdir / MANIFEST).stat()
            stamp: tuple[int, int, int] | None = (st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            stamp = None
        cached = self._manifests.get(run_id)
        if cached is not None and stamp is not None and cached[0] == stamp:
            return list(cached[1])  # unchanged since this store verified it
        entries, _ = _load_manifest(rdir)
        if not entries or entries[0].path != RELEASE:
            raise StoreIntegrityError(
                f"{rdir / MANIFEST}: missing or does not start with {RELEASE}; the run's "
                "records cannot be verified (written by an older harness, or the manifest "
                "was removed): re-run it with `harness run --fresh`"
            )
        seal = next((e for e in entries if e.path == VALIDITY), None)
        if seal is not None:
            v = _parse(rdir / VALIDITY, self._committed(rdir, seal), ValidityRecord)
            n = v.manifest_entries
            head = entries[n - 1].head if 0 < n <= len(entries) else GENESIS
            if n > len(entries) or head != v.manifest_head:
                raise StoreIntegrityError(
                    f"{rdir / MANIFEST}: does not reach the chain head sealed in "
                    f"{rdir / VALIDITY} (entries were rewritten after the run was sealed)"
                )
        if stamp is not None:
            self._manifests[run_id] = (stamp, entries)
        return list(entries)

    def _committed(self, rdir: Path, entry: ManifestEntry) -> bytes:
        """Return a committed file's bytes, checked against its entry (and its blobs)."""
        path = rdir / entry.path
        try:
            data = path.read_bytes()
        except OSError:
            raise StoreIntegrityError(
                f"{path}: committed in the run's manifest but missing"
            ) from None
        if digest_bytes(data) != entry.digest:
            raise StoreIntegrityError(
                f"{path}: changed since it was committed (its sha256 differs from the "
                "run's manifest); the run's evidence cannot be trusted"
            )
        for blob in entry.blobs:
            self._check_blob(blob)
        return data

    def release(self, run_id: str) -> ReleaseRecord:
        """Return the release record of a run, verified against the manifest."""
        rdir = self.run_dir(run_id)
        entry = self.manifest(run_id)[0]
        return _parse(rdir / RELEASE, self._committed(rdir, entry), ReleaseRecord)

    def trials(self, run_id: str) -> list[RunRecord]:
        """Every committed run record of a run, verified, sorted by slug.

        Raises:
            StoreIntegrityError: a record or a blob it refers to changed.
        """
        rdir = self.run_dir(run_id)
        entries = sorted(
            (e for e in self.manifest(run_id) if e.path.startswith("trials/")),
            key=lambda e: e.path,
        )
        return [_parse(rdir / e.path, self._committed(rdir, e), RunRecord) for e in entries]

    def trial_slugs(self, run_id: str) -> set[str]:
        """Slugs of the trials committed so far (for resume)."""
        return _slugs(_load_manifest(self.run_dir(run_id))[0])

    def validity(self, run_id: str) -> ValidityRecord | None:
        """Return the end-of-run check and seal, or None when the run has not finished."""
        rdir = self.run_dir(run_id)
        seal = next((e for e in self.manifest(run_id) if e.path == VALIDITY), None)
        if seal is None:
            return None
        return _parse(rdir / VALIDITY, self._committed(rdir, seal), ValidityRecord)

    def results(self, run_id: str) -> list[ResultRecord]:
        """Gate results written for a run, oldest first."""
        rdir = self.run_dir(run_id)
        return [
            _parse(rdir / e.path, self._committed(rdir, e), ResultRecord)
            for e in self.manifest(run_id)
            if e.path.startswith("result-")
        ]

    def summary_path(self, run_id: str) -> Path:
        """Return where the run's derived summary for the release history lives."""
        return self.run_dir(run_id) / "summary.json"

    def open_run(self, record: ReleaseRecord) -> RunHandle:
        """Open (or resume) a run for writing; holds the run's lock until closed.

        Raises:
            StoreError: another process holds the run, or the stored release record
                differs from ``record`` in anything but its creation time.
            StoreWriteError: the run folder cannot be written.
        """
        return RunHandle(self, record)


def _slugs(entries: list[ManifestEntry]) -> set[str]:
    return {e.path[len("trials/") : -len(".json")] for e in entries if e.path.startswith("trials/")}


class RunHandle:
    """The single writer of one run. Use as a context manager."""

    def __init__(self, store: Store, record: ReleaseRecord) -> None:
        self.store = store
        self._manifest_fd: int | None = None
        self.run_id = record.run_id
        self.dir = store.run_dir(record.run_id)
        _mkdir(self.dir / "trials")
        try:
            self._lock: IO[bytes] | None = (self.dir / ".lock").open("ab")
        except OSError as exc:
            raise _fail(self.dir / ".lock", exc) from None
        try:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            self._lock = None
            raise StoreError(
                f"run {record.run_id} is being written by another harness process "
                f"(lock {self.dir / '.lock'}); wait for it or use a different store"
            ) from None
        try:
            self.record = self._open(record)
        except BaseException:
            self.close()
            raise

    def _open(self, record: ReleaseRecord) -> ReleaseRecord:
        # We hold the run's lock: temporary files here are debris of a killed writer.
        for debris in [*self.dir.glob(".tmp-*"), *(self.dir / "trials").glob(".tmp-*")]:
            debris.unlink(missing_ok=True)
        sweep_store_debris(self.store.root)
        self._entries, end = _load_manifest(self.dir)
        self._done = _slugs(self._entries)
        mpath = self.dir / MANIFEST
        if mpath.exists() and mpath.stat().st_size != end:
            with mpath.open("r+b") as fh:  # a torn last line: never committed
                fh.truncate(end)
        try:
            self._manifest_fd = os.open(mpath, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise _fail(mpath, exc) from None
        path = self.dir / RELEASE
        if not _write_once(path, _record_json(record), self.store.sync):
            existing = _read_model(path, ReleaseRecord)
            mine = record.model_dump(exclude={"created_at", "seed"})
            if existing.model_dump(exclude={"created_at", "seed"}) != mine:
                raise StoreError(
                    f"run {record.run_id} exists with a different release record; "
                    "refusing to mix evidence"
                )
            record = existing
        if not self._entries:
            self._commit(RELEASE)
        else:
            self.store._committed(self.dir, self._entries[0])
        # Files written by a killed writer after their last commit were never part of
        # the run: drop them so their trials run again (never reported as tampering).
        committed = {e.path for e in self._entries}
        for p in [*(self.dir / "trials").glob("*.json"), *self.dir.glob("result-*.json")]:
            if str(p.relative_to(self.dir)) not in committed:
                p.unlink()
        if VALIDITY not in committed:
            (self.dir / VALIDITY).unlink(missing_ok=True)
        self._written = 0
        return record

    @property
    def head(self) -> str:
        """The manifest's chain head now."""
        return self._entries[-1].head if self._entries else GENESIS

    def _commit(self, rel: str, blobs: tuple[str, ...] = (), data: bytes | None = None) -> None:
        if data is None:
            data = (self.dir / rel).read_bytes()
        entry = _chain(len(self._entries), rel, digest_bytes(data), blobs, self.head)
        line = canonical_json(entry.model_dump(mode="json")) + b"\n"
        if self._manifest_fd is None:
            raise StoreError(f"run {self.run_id} is closed for writing")
        _append(self._manifest_fd, self.dir / MANIFEST, line, self.store.sync)
        self._entries.append(entry)
        if rel.startswith("trials/"):
            self._done.add(rel[len("trials/") : -len(".json")])

    def _write_and_commit(self, rel: str, data: bytes, blobs: tuple[str, ...] = ()) -> None:
        path = self.dir / rel
        if not _write_once(path, data, self.store.sync):
            path.unlink()  # uncommitted leftover of this writer: replace it
            _write_once(path, data, self.store.sync)
        if rel.startswith("trials/"):
            self._written += 1
            if os.environ.get(_CRASH_ENV) == str(self._written):
                os.kill(os.getpid(), signal.SIGKILL)
        self._commit(rel, blobs, data)

    def done(self) -> set[str]:
        """Slugs of trials already committed."""
        return set(self._done)

    def add_trial(self, record: RunRecord, blobs: dict[str, bytes]) -> bool:
        """Write blobs, the run record, then commit it; False if it was already committed.

        A record that carries its trial's steps gets the time of the blobs' write as its
        ``store`` step.

        Raises:
            StoreWriteError: a blob or the record could not be written (nothing committed).
        """
        slug = record.key.slug()
        if slug in self._done:
            return False
        clock = StepClock()
        with clock.step("store"):
            digests = tuple(sorted({self.store.put_blob(data) for data in blobs.values()}))
        if record.steps is not None:  # a record measured by the trial: add the store's step
            steps = record.steps.model_copy(update={"store": clock.totals["store"]})
            record = record.model_copy(update={"steps": steps})
        rel = f"trials/{slug}.json"
        self._write_and_commit(rel, _record_json(record), digests)
        return True

    def seal(self, valid: bool, reasons: list[str]) -> ValidityRecord:
        """Write ``validity.json`` once (anchoring every entry so far); return the stored one."""
        existing = next((e for e in self._entries if e.path == VALIDITY), None)
        if existing is not None:
            return _parse(
                self.dir / VALIDITY, self.store._committed(self.dir, existing), ValidityRecord
            )
        v = ValidityRecord(
            valid=valid,
            reasons=tuple(reasons),
            checked_at=dt.datetime.now(dt.UTC),
            manifest_entries=len(self._entries),
            manifest_head=self.head,
        )
        self._write_and_commit(VALIDITY, _record_json(v))
        return v

    def add_result(self, result: ResultRecord) -> Path:
        """Commit a new gate result file (never overwrites an earlier one)."""
        n = sum(e.path.startswith("result-") for e in self._entries) + 1
        rel = f"result-{n}.json"
        self._write_and_commit(rel, _record_json(result))
        return self.dir / rel

    def close(self) -> None:
        """Release the run lock."""
        if self._manifest_fd is not None:
            os.close(self._manifest_fd)
            self._manifest_fd = None
        if self._lock is not None:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    def __enter__(self) -> RunHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
