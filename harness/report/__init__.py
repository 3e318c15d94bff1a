"""Release reports: HTML for reviewers; JUnit XML, a Markdown summary and JSON for CI.

Every report is rendered from one :class:`~harness.report.data.ReportData`, built from
the run's stored records only, so they all show the same decision and the same numbers::

    write_html_report(project, store, run_id)      -> reports/<run_id>/index.html
    write_reports(project, store, run_id, junit=..., summary=..., json_path=...)

Files are written to a temporary name and renamed into place, so a reader never sees a
half-written report.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from harness.decision import RunDecision
from harness.errors import ConfigError
from harness.names import MAX_RUN_ID, check_name, inside
from harness.project import Project
from harness.report.data import ArmCase, ReportData, build_report, report_from_decision
from harness.report.html import render_html
from harness.report.junit import render_junit
from harness.report.markdown import render_markdown
from harness.store import Store

__all__ = [
    "ReportData",
    "build_report",
    "json_document",
    "render_html",
    "render_junit",
    "render_markdown",
    "write_html_report",
    "write_reports",
]


def json_document(data: ReportData) -> dict[str, Any]:
    """Return the decision and the per-case table as JSON-ready data (``--json``)."""

    def num(x: float | None) -> float | None:
        return None if x is None else round(x, 6)

    def arm_case(v: ArmCase | None) -> dict[str, Any] | None:
        if v is None:
            return None
        s = v.summary
        return {
            "trials": s.trials,
            "judged": s.n,
            "passes": s.passes,
            "fails": s.fails,
            "infra_errors": s.infra_errors,
            "evaluator_errors": s.evaluator_errors,
            "pass_rate": num(s.pass_rate),
            "pass_hat_k": num(s.pass_hat_k),
            "pass_at_k": num(s.pass_at_k),
            "run_sd": num(s.run_sd),
            "label": s.label,
            "outcomes": [m.outcome.value for m in v.marks],
            "attempts": [m.attempts for m in v.marks],
            "stop_reasons": v.stop_reasons,
            "claims": v.claims.model_dump(mode="json") if v.claims else None,
        }

    return {
        "schema_version": data.schema_version,
        "run_id": data.run_id,
        "generated_at": data.generated_at.isoformat(),
        "verdict": data.verdict,
        "headline": data.headline,
        "reasons": [r.model_dump(mode="json") for r in data.reasons],
        "notes": list(data.notes),
        "release": data.release.model_dump(mode="json"),
        "decision": data.decision.model_dump(
            mode="json",
            exclude={
                "candidate": {"cases"},
                "baseline": {"cases"},
                "stored_baseline": {"cases"},
                "comparison": {"rows"},
            },
        ),
        "arms": {
            a.key: {
                "title": a.title,
                "release": a.release,
                "claims": a.claims.model_dump(mode="json") if a.claims else None,
                "cost": a.cost.model_dump(mode="json") if a.cost else None,
                "attempts_used": {str(n): c for n, c in a.attempts_used.items()},
                "stop_reasons": a.stop_reasons,
                "runs": [num(x) for x in a.runs],
            }
            for a in data.arms
        },
        "cases": [
            {
                "case_id": c.case_id,
                "critical": c.critical,
                "compared": c.compared,
                "regression": c.regression,
                "improvement": c.improvement,
                "broken": c.broken,
                "delta_pass_rate": num(c.delta_pass_rate),
                "delta_pass_hat_k": num(c.delta_pass_hat_k),
                "baseline_source": c.baseline_source,
                "flags": list(c.flags),
                "candidate": arm_case(c.candidate),
                "baseline": arm_case(c.baseline),
            }
            for c in data.cases
        ],
        "judgment_cases": [
            {
                "case_id": j.case_id,
                "outcomes": [m.outcome.value for m in j.marks],
                "candidates": list(j.candidates),
                "scored": False,
            }
            for j in data.judgment
        ],
    }


def _write(path: Path, data: bytes, option: str) -> Path:
    """Atomically (re)write ``path``; a bad destination is a ConfigError naming it."""
    if path.is_dir():
        raise ConfigError("is a directory; expected a file path to write", file=path,
                          field=option)  # fmt: skip
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
        raise ConfigError(f"cannot write the report here: {exc.strerror or exc}", file=path,
                          field=option) from None  # fmt: skip
    return path


def _html_path(project: Project, run_id: str) -> Path:
    check_name(run_id, kind="run", field="RUN", max_len=MAX_RUN_ID)
    return inside(project.reports_dir, project.reports_dir / run_id / "index.html")


def _write_html(project: Project, data: ReportData) -> Path:
    path = _html_path(project, data.run_id)
    return _write(path, render_html(data, path.parent).encode("utf-8"), "reports_dir")


def write_html_report(
    project: Project, store: Store, run_id: str, decision: RunDecision | None = None
) -> Path:
    """Write ``<project.reports_dir>/<run_id>/index.html`` and return its path.

    ``decision``, when the caller has just computed it (``harness run``), is used as is
    instead of being recomputed from the store.

    Raises:
        StoreError: the run or one of its records is missing or corrupt.
        ConfigError: the report cannot be written, or the run's baseline cannot be loaded.
        InvalidRunError: the run's recorded policy cannot be checked any more.

    """
    if decision is not None and decision.run_id == run_id:
        data = report_from_decision(project, store, decision, store.trials(run_id))
    else:
        data = build_report(project, store, run_id)
    return _write_html(project, data)


def write_reports(
    project: Project,
    store: Store,
    run_id: str,
    *,
    junit: Path | None,
    summary: Path | None,
    json_path: Path | None,
) -> list[Path]:
    """Write the HTML report and, when asked, JUnit XML, a Markdown summary and JSON.

    Returns the written paths, the HTML report first.

    Raises:
        StoreError: the run or one of its records is missing or corrupt.
        ConfigError: an output path is a directory or cannot be written (names the option).
        InvalidRunError: the run's recorded policy cannot be checked any more.

    """
    data = build_report(project, store, run_id)
    html = _write_html(project, data)
    paths = [html]
    if junit is not None:
        paths.append(_write(junit, render_junit(data), "--junit"))
    if summary is not None:
        text = render_markdown(data, html_path=str(html))
        paths.append(_write(summary, text.encode("utf-8"), "--summary"))
    if json_path is not None:
        doc = json.dumps(json_document(data), indent=2, sort_keys=True, allow_nan=False)
        paths.append(_write(json_path, (doc + "\n").encode("utf-8"), "--json"))
    return paths
