"""Promoted baselines (``baselines/<name>/``): git-friendly copies of a finished run.

``baseline.json`` holds the release record and the system definition needed to
re-execute the baseline system; ``records/`` holds its run records. At gate time the
baseline system is re-run on the same case versions; the stored records are the fixed
reference the re-run is checked against for drift.

``transcripts/<hex>`` holds the model transcript the records refer to (every recorded
request and response body of the gateway, one file per content digest), so
``harness run --model-replay baseline:<name>`` can serve the baseline's responses without
the local store. Their total size is capped at :data:`TRANSCRIPT_CAP` bytes per baseline:
over the cap, promotion is refused (exit 2) and nothing is written.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from harness.digest import digest_bytes, tree_digest
from harness.errors import ConfigError, StoreError, StoreIntegrityError, StoreWriteError
from harness.names import Name, check_name, inside
from harness.project import Release
from harness.sandbox.owner import owner_alive
from harness.store.records import AttemptRecord, PhaseRecord, ReleaseRecord, RunRecord
from harness.store.store import Store

__all__ = [
    "BASELINE_REPLAY",
    "TRANSCRIPT_CAP",
    "Baseline",
    "BaselineFile",
    "load_baseline",
    "portable",
    "promote",
    "transcript_blobs",
]

TRANSCRIPT_CAP = 50 * 1024 * 1024
"""Most bytes of recorded model transcript one baseline keeps (50 MiB)."""
TRANSCRIPTS = "transcripts"
BASELINE_REPLAY = "baseline:"
"""Prefix of ``--model-replay baseline:NAME``: replay a promoted baseline's transcript."""


class BaselineFile(BaseModel):
    """``baselines/<name>/baseline.json``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    name: Name
    promoted_at: dt.datetime
    release: ReleaseRecord
    """The release record of the promoted run (system definition included)."""
    manifest_head: str | None = None
    """Chain head of the promoted run's store manifest: anchors that run's evidence in git."""


@dataclass(frozen=True)
class Baseline:
    """A loaded baseline."""

    file: BaselineFile
    records: list[RunRecord]
    digest: str
    """Tree digest of the baseline folder: a re-promoted baseline is a different one."""
    folder: Path | None = None
    """Where the baseline was loaded from (named in errors)."""

    @property
    def release_definition(self) -> Release:
        """The baseline system's release, rebuilt from its stored definition.

        Raises:
            ConfigError: the stored agent definition no longer runs under the sealed view
                (e.g. a ``{project}`` host path): the baseline must be re-promoted.
        """
        sysdef = self.file.release.system
        fields = {"agent": sysdef.agent, "components": sysdef.components, "retry": sysdef.retry}
        if sysdef.upstream is not None:  # the baseline reaches its model the same way
            fields["upstream"] = sysdef.upstream
        try:
            return Release.model_validate(fields)
        except ValidationError as exc:
            raise self.stale(f"its stored release definition is no longer valid: {exc}") from None

    def check_agent_files(self, now: dict[str, str]) -> None:
        """Refuse a baseline whose declared agent files differ from the project's ``now``.

        Raises:
            ConfigError: a file the baseline's agent declared changed since promotion.
        """
        stored = self.file.release.system.agent_files or {}
        if stored != now:
            changed = sorted(k for k in {*stored, *now} if stored.get(k) != now.get(k))
            raise self.stale(
                f"its agent files changed since it was promoted ({', '.join(changed)}), "
                "so the system the baseline measured cannot be re-executed"
            )

    def transcript(self, digest: str) -> bytes:
        """Return a recorded request or response body kept under ``transcripts/``.

        Raises:
            StoreIntegrityError: the file is missing or its content has another digest.
        """
        hexd = digest.split(":", 1)[-1]
        if self.folder is None or len(hexd) != 64 or hexd.strip("0123456789abcdef"):
            raise StoreIntegrityError(f"baseline {self.file.name!r} has no transcript {digest}")
        path = self.folder / TRANSCRIPTS / hexd
        try:
            data = path.read_bytes()
        except OSError:
            raise StoreIntegrityError(
                f"transcript {digest} of baseline {self.file.name!r} is missing ({path}); "
                "re-promote the baseline"
            ) from None
        if digest_bytes(data) != digest:
            raise StoreIntegrityError(f"transcript {digest} is corrupt ({path})")
        return data

    def stale(self, why: str) -> ConfigError:
        """Build the error for a baseline that cannot be re-executed (re-promotion hint)."""
        name = self.file.name
        return ConfigError(
            f"baseline {name!r} cannot be re-executed under the sealed view: {why}. "
            f"Re-run its release and re-promote it: `harness run --release <release> --k N` "
            f"then `harness baseline promote RUN --name {name} --force`",
            file=(self.folder / "baseline.json") if self.folder else None,
            field="release.system.agent",
        )


_SESSION = re.compile(r"(/[^\s'\"]*)?/harness-[A-Za-z0-9._-]+/")


def _phase(phase: PhaseRecord | None) -> PhaseRecord | None:
    if phase is None:
        return None
    argv = tuple(_SESSION.sub("$SANDBOX/", a) for a in phase.argv)
    return phase.model_copy(
        update={"argv": argv, "excerpt": "", "stdout_blob": None, "stderr_blob": None}
    )


def portable(rec: RunRecord) -> RunRecord:
    """Return a run record fit for git: verdicts and evidence, no host output or paths.

    Output excerpts (which quote host paths) and blob addresses (which point into a
    local store that is not in git) are dropped; sandbox session paths in argv become
    ``$SANDBOX``. Verdicts, failure types, reasons, checks, claims and candidate
    identities are kept: they are what the gate compares.
    """
    return rec.model_copy(update={"attempts": tuple(_portable_attempt(a) for a in rec.attempts)})


def _portable_attempt(a: AttemptRecord) -> AttemptRecord:
    return a.model_copy(
        update={
            "agent": _phase(a.agent),
            "verifier": _phase(a.verifier),
            "mutants": tuple(p for p in map(_phase, a.mutants) if p is not None),
            "diff_blob": None,
            "candidate_blob": None,
            "feedback_blob": None,
            "infra_tries": tuple(_portable_attempt(t) for t in a.infra_tries),
        }
    )


def transcript_blobs(records: list[RunRecord]) -> list[str]:
    """Return the request and response blobs of every recorded model call of ``records``."""
    out: set[str] = set()
    for rec in records:
        for a in rec.tries():
            for c in a.model.calls if a.model is not None else ():
                out.add(c.request_blob)
                if c.response_blob:
                    out.add(c.response_blob)
    return sorted(out)


def _transcripts(store: Store, run_id: str, records: list[RunRecord]) -> dict[str, bytes]:
    """Read (and verify) the run's transcript blobs, refusing a total over the cap."""
    digests = transcript_blobs(records)
    size = sum(store.blob_path(d).stat().st_size for d in digests if store.blob_path(d).is_file())
    if size > TRANSCRIPT_CAP:
        raise ConfigError(
            f"run {run_id}'s recorded model transcript is {size} bytes ({size / 2**20:.1f} MiB), "
            f"over the cap of {TRANSCRIPT_CAP} bytes a baseline keeps; promote a run with fewer "
            "trials (a smaller --k or fewer cases)",
            field="RUN",
        )
    return {d: store.get_blob(d) for d in digests}


def _sweep_dead_promotions(baselines_dir: Path) -> None:
    """Remove the half-built folders of promotions killed before their final rename."""
    for d in baselines_dir.glob(".promote-p*-*"):
        m = re.match(r"\.promote-p(\d+)-", d.name)
        if m and not owner_alive(int(m.group(1)), d):
            shutil.rmtree(d, ignore_errors=True)


def promote(
    store: Store, run_id: str, name: str, baselines_dir: Path, *, force: bool = False
) -> Path:
    """Copy run ``run_id`` into ``baselines/<name>/``, its model transcript included.

    Raises:
        ConfigError: ``name`` is not a safe name, the baseline exists and ``force``
            is not given, or the transcript exceeds :data:`TRANSCRIPT_CAP`.
        StoreError: the run has not finished, is invalid or has no trials.
        StoreIntegrityError: a record or blob of the run changed since it was committed.
        StoreWriteError: the baseline folder cannot be written (nothing is left half-written).
    """
    check_name(name, kind="baseline", field="--name")
    dest = inside(baselines_dir, baselines_dir / name, field="--name")
    validity = store.validity(run_id)
    if validity is None:
        raise StoreError(
            f"run {run_id} has not finished; only a finished, valid run can be promoted"
        )
    if not validity.valid:
        raise StoreError(
            f"run {run_id} is invalid (its system changed while it ran); it cannot be a baseline"
        )
    release = store.release(run_id)
    records = [r for r in store.trials(run_id) if r.key.arm.value == "candidate"]
    if not records:
        raise StoreError(f"run {run_id} has no candidate trials to promote")
    if dest.exists() and not force:
        raise ConfigError(
            f"baseline {name!r} already exists at {dest}; pass --force to replace it "
            "(the old one stays in git history)",
            field="--name",
        )
    head = store.manifest(run_id)[-1].head
    transcripts = _transcripts(store, run_id, records)
    tmp: Path | None = None
    try:
        baselines_dir.mkdir(parents=True, exist_ok=True)
        _sweep_dead_promotions(baselines_dir)
        tmp = Path(tempfile.mkdtemp(dir=baselines_dir, prefix=f".promote-p{os.getpid()}-"))
        (tmp / "records").mkdir()
        bf = BaselineFile(
            name=name, promoted_at=dt.datetime.now(dt.UTC), release=release, manifest_head=head
        )
        (tmp / "baseline.json").write_text(bf.model_dump_json(indent=2))
        for rec in records:
            (tmp / "records" / f"{rec.key.slug()}.json").write_text(
                portable(rec).model_dump_json(indent=2)
            )
        if transcripts:
            (tmp / TRANSCRIPTS).mkdir()
        for digest, data in transcripts.items():
            (tmp / TRANSCRIPTS / digest.split(":", 1)[-1]).write_bytes(data)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    except OSError as exc:
        raise StoreWriteError(
            f"cannot write baseline {name!r} under {baselines_dir}: {exc.strerror or exc}; "
            "nothing was changed"
        ) from None
    finally:
        if tmp is not None and tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def load_baseline(baselines_dir: Path, name: str) -> Baseline:
    """Load ``baselines/<name>``.

    Raises:
        ConfigError: an unsafe name, no such baseline, or its files are malformed.
    """
    check_name(name, kind="baseline", field="--baseline")
    folder = inside(baselines_dir, baselines_dir / name, field="--baseline")
    path = folder / "baseline.json"
    if not path.is_file():
        known = sorted(p.name for p in baselines_dir.iterdir()) if baselines_dir.is_dir() else []
        raise ConfigError(
            f"no baseline {name!r} (known: {', '.join(known) or 'none'}); "
            "create one with `harness baseline promote RUN --name NAME`",
            file=path,
        )
    try:
        bf = BaselineFile.model_validate_json(path.read_bytes())
        records = [
            RunRecord.model_validate_json(p.read_bytes())
            for p in sorted((folder / "records").glob("*.json"))
        ]
    except (ValidationError, json.JSONDecodeError) as exc:
        raise ConfigError(f"baseline is malformed: {exc}", file=path) from None
    return Baseline(file=bf, records=records, digest=tree_digest(folder), folder=folder)
