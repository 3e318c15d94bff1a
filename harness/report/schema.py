"""The JSON documents the CLI prints, as pydantic models; their JSON schemas come from these.

One model per output (``harness schema NAME`` prints its schema; docs/json.md lists them):

* ``report`` — ``report.json`` in a report folder and ``harness report --json``;
* ``gate`` — ``harness gate --json``;
* ``show`` — ``harness show --json``;
* ``runs`` — ``harness runs --json``;
* ``summary`` — the per-run summary the history is built from.

They share their parts: the release record, the gate's decision and the run records are
the same models everywhere, so one schema describes each wherever it appears.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from harness.frozen import Frozen
from harness.gate.decide import Decision
from harness.report.data import ReportCore, ReportData
from harness.report.history import RunsDocument, RunSummary
from harness.store.records import ReleaseRecord, ResultRecord, RunRecord

__all__ = [
    "SCHEMAS",
    "GateDocument",
    "ReportDocument",
    "ShowDocument",
    "json_schema",
    "report_document",
]


class ReportDocument(ReportCore):
    """``report.json``: the decision, the arms, the per-case table, the judgment lane."""

    schema_version: Literal[2] = 2


class GateDocument(Frozen):
    """``harness gate --json``: the decision recomputed from the stored records."""

    run_id: str
    release: str
    system_digest: str
    verdict: str
    notes: list[str]
    judgment_cases: list[str]
    decision: Decision


class ShowDocument(Frozen):
    """``harness show --json``: the release record, every run record, every gate result."""

    schema_version: Literal[1] = 1
    run_id: str
    release: ReleaseRecord
    trials: tuple[RunRecord, ...]
    results: tuple[ResultRecord, ...]
    """Gate results written for the run, oldest first."""


SCHEMAS: dict[str, type[BaseModel]] = {
    "gate": GateDocument,
    "report": ReportDocument,
    "runs": RunsDocument,
    "show": ShowDocument,
    "summary": RunSummary,
}


def json_schema(name: str) -> dict[str, Any]:
    """Return the JSON schema (draft 2020-12) of output ``name`` (a key of :data:`SCHEMAS`)."""
    schema = SCHEMAS[name].model_json_schema(mode="serialization")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"harness/{name}.schema.json"
    return schema


def report_document(data: ReportData) -> ReportDocument:
    """Return the ``report.json`` document of a report: its :class:`ReportCore` fields."""
    core = set(ReportCore.model_fields) - {"schema_version"}  # each has its own version
    return ReportDocument(**{name: getattr(data, name) for name in sorted(core)})
