"""The system definition as a model: its digest and its records as they were before it.

The fixtures under ``tests/data/system/`` were written by the harness before the definition
was a model (a dict): a real run's release record (``candidate``, with environments) and one
with every optional part (``mini-swe-agent``: upstream, agent files, environments, agent
environment, case images). The bundled baseline was promoted long before.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from pydantic import ValidationError
from support import system_definition

from harness.digest import digest_json
from harness.store.baseline import BaselineFile
from harness.store.records import ReleaseRecord
from harness.system import SystemDefinition

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data" / "system"
RECORDS = sorted(DATA.glob("*.release.json"))


def test_the_fixtures_cover_every_optional_part() -> None:
    assert [p.name for p in RECORDS] == ["candidate.release.json", "mini-swe-agent.release.json"]
    keys = set().union(*(json.loads(p.read_text())["system"] for p in RECORDS))
    assert keys == set(SystemDefinition.model_fields)


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.name)
def test_a_stored_run_keeps_its_system_digest_and_its_bytes(path: Path) -> None:
    raw = path.read_text(encoding="utf-8")
    record = ReleaseRecord.model_validate_json(raw)
    assert record.system.digest() == record.system_digest
    # The same digest as the dict it was written from, read straight from the file.
    assert digest_json(json.loads(raw)["system"]) == record.system_digest
    assert record.model_dump_json(indent=2) == raw  # what the store writes, byte for byte


def test_the_bundled_baseline_keeps_its_system_digest() -> None:
    path = ROOT / "baselines" / "production-previous" / "baseline.json"
    baseline = BaselineFile.model_validate_json(path.read_text(encoding="utf-8"))
    assert baseline.release.system.digest() == baseline.release.system_digest
    stored = json.loads(path.read_text(encoding="utf-8"))["release"]["system"]
    assert baseline.release.system.model_dump(mode="json") == stored


def test_an_unset_part_is_absent_not_null() -> None:
    sysdef = system_definition()
    dumped = sysdef.model_dump(mode="json")
    assert "upstream" not in dumped and "case_images" not in dumped
    assert "upstream" not in json.loads(_record_json(sysdef))["system"]
    assert sysdef.digest() == digest_json(dumped)


def _record_json(sysdef: SystemDefinition) -> str:
    return ReleaseRecord(
        run_id="r",
        release="cand",
        system_digest=sysdef.digest(),
        system=sysdef,
        task_set="t",
        task_set_digest="sha256:t",
        cases={},
        k=1,
        backend="local",
        created_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        harness_version="0",
    ).model_dump_json()


def test_replace_sets_checks_and_drops_parts() -> None:
    sysdef = system_definition()
    with_images = sysdef.replace(case_images={"a": "img"}, environments=None)
    assert with_images.case_images == {"a": "img"} and with_images.environments is None
    assert with_images.replace(case_images=None) == sysdef
    assert with_images.replace(case_images={}).model_dump()["case_images"] == {}
    with pytest.raises(ValidationError):
        sysdef.replace(surprise=1)
    with pytest.raises(ValidationError):
        sysdef.replace(case_images=["a"])


def test_a_record_without_the_definitions_required_parts_is_refused() -> None:
    raw = json.loads((DATA / "candidate.release.json").read_text())
    del raw["system"]["orchestration_digests"]
    with pytest.raises(ValidationError, match="orchestration_digests"):
        ReleaseRecord.model_validate(raw)
