"""Promoted baselines (``baselines/<name>/``): git-friendly copies of a finished run.

``baseline.json`` holds the release record and the system definition needed to
re-execute the baseline system; ``records/`` holds its run records. At gate time the
baseline system is re-run on the same case versions; the stored records are the fixed
reference the re-run is checked against for drift.
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

from harness.digest import tree_digest
from harness.errors import ConfigError, StoreError
from harness.project import Release
from harness.records import PhaseRecord, ReleaseRecord, RunRecord
from harness.store import Store

__all__ = ["Baseline", "BaselineFile", "load_baseline", "portable", "promote"]


class BaselineFile(BaseModel):
    """``baselines/<name>/baseline.json``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    name: str
    promoted_at: dt.datetime
    release: ReleaseRecord
    """The release record of the promoted run (system definition included)."""


@dataclass(frozen=True)
class Baseline:
    """A loaded baseline."""

    file: BaselineFile
    records: list[RunRecord]
    digest: str
    """Tree digest of the baseline folder: a re-promoted baseline is a different one."""

    @property
    def release_definition(self) -> Release:
        """The baseline system's release, rebuilt from its stored definition."""
        sysdef = self.file.release.system
        fields = {k: sysdef[k] for k in ("agent", "components", "retry")}
        if sysdef.get("upstream") is not None:  # the baseline reaches its model the same way
            fields["upstream"] = sysdef["upstream"]
        return Release.model_validate(fields)


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
    attempts = tuple(
        a.model_copy(
            update={
                "agent": _phase(a.agent),
                "verifier": _phase(a.verifier),
                "diff_blob": None,
                "candidate_blob": None,
                "feedback_blob": None,
            }
        )
        for a in rec.attempts
    )
    return rec.model_copy(update={"attempts": attempts})


def promote(
    store: Store, run_id: str, name: str, baselines_dir: Path, *, force: bool = False
) -> Path:
    """Copy run ``run_id`` into ``baselines/<name>/``.

    Raises:
        StoreError: the run has no trials.
        ConfigError: the baseline exists and ``force`` is not given.
    """
    release = store.release(run_id)
    validity = store.run_dir(run_id) / "validity.json"
    if not validity.is_file():
        raise StoreError(
            f"run {run_id} has not finished; only a finished, valid run can be promoted"
        )
    if not json.loads(validity.read_text()).get("valid"):
        raise StoreError(
            f"run {run_id} is invalid (its system changed while it ran); it cannot be a baseline"
        )
    records = [r for r in store.trials(run_id) if r.key.arm.value == "candidate"]
    if not records:
        raise StoreError(f"run {run_id} has no candidate trials to promote")
    dest = baselines_dir / name
    if dest.exists() and not force:
        raise ConfigError(
            f"baseline {name!r} already exists at {dest}; pass --force to replace it "
            "(the old one stays in git history)",
            field="--name",
        )
    tmp = Path(tempfile.mkdtemp(dir=baselines_dir.parent if baselines_dir.exists() else None))
    try:
        (tmp / "records").mkdir()
        bf = BaselineFile(name=name, promoted_at=dt.datetime.now(dt.UTC), release=release)
        (tmp / "baseline.json").write_text(bf.model_dump_json(indent=2))
        for rec in records:
            (tmp / "records" / f"{rec.key.slug()}.json").write_text(
                portable(rec).model_dump_json(indent=2)
            )
        baselines_dir.mkdir(parents=True, exist_ok=True)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return dest


def load_baseline(baselines_dir: Path, name: str) -> Baseline:
    """Load ``baselines/<name>``.

    Raises:
        ConfigError: no such baseline, or its files are malformed.
    """
    folder = baselines_dir / name
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
    return Baseline(file=bf, records=records, digest=tree_digest(folder))
