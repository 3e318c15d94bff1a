"""Release history: a small stored summary per run, ``harness runs`` and ``reports/index.html``.

Every report write (and so every ``harness run``) stores a :class:`RunSummary` of the
run's decision next to its records (``runs/<run_id>/summary.json``): the aggregate
estimates with their intervals and one line per case. The history is built from those
summaries and the release records only — never by loading every trial of every run.
A summary is derived data: rewriting it from the same records gives the same content.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from harness.decision import RunDecision
from harness.frozen import Frozen as _Frozen
from harness.report.data import gate_named_cases
from harness.report.summary import ArmTrend, CaseTrend, RunSummary
from harness.store.store import Store

__all__ = [
    "ArmTrend",
    "CaseTrend",
    "RunListing",
    "RunSummary",
    "RunsDocument",
    "list_runs",
    "mark_partial",
    "render_history",
    "summary_from_decision",
    "write_summary",
]


class RunListing(_Frozen):
    """One row of ``harness runs`` (a run, decided or not)."""

    run_id: str
    release: str
    system_digest: str
    task_set: str
    k: int
    baseline: str | None
    created_at: dt.datetime
    verdict: str | None
    """None: the run has no stored decision summary yet (unfinished, or never reported)."""
    decided_at: dt.datetime | None
    candidate: ArmTrend | None
    named_cases: tuple[str, ...]
    report: str | None
    """The run's report page, relative to the reports folder, when it exists."""
    cases: int = 0
    """Cases the run planned (scored and judgment lane)."""
    partial: str | None = None
    """Why the run is partial (fewer cases, or a smaller k, than the fullest run of its
    task set): kept off the release trend. None: a full run."""


class RunsDocument(_Frozen):
    """``harness runs --json``."""

    schema_version: Literal[1] = 1
    runs: tuple[RunListing, ...]
    """Oldest first."""


def summary_from_decision(rd: RunDecision) -> RunSummary:
    """Reduce a run's decision to its :class:`RunSummary` (pure)."""
    rel, dec = rd.release, rd.decision
    return RunSummary(
        run_id=rd.run_id,
        release=rel.release,
        system_digest=rel.system_digest,
        task_set=rel.task_set,
        k=rel.k,
        baseline=rel.baseline,
        created_at=rel.created_at,
        decided_at=dt.datetime.now(dt.UTC),
        verdict=rd.verdict,
        headline=rd.headline,
        candidate=ArmTrend.of(dec.candidate),
        baseline_arm=ArmTrend.of(dec.baseline) if dec.baseline is not None else None,
        named_cases=tuple(sorted(gate_named_cases(dec))),
        cases={
            c.case_id: CaseTrend(
                n=c.n, pass_rate=c.pass_rate, pass_hat_k=c.pass_hat_k, label=c.label
            )
            for c in dec.candidate.cases
        },
        baseline_replayed=dec.baseline_replayed,
    )


def write_summary(store: Store, rd: RunDecision) -> Path:
    """Store the run's summary (replacing an older one) and return its path."""
    from harness.report.folder import write_file

    path = store.summary_path(rd.run_id)
    data = summary_from_decision(rd).model_dump_json(indent=1).encode()
    return write_file(path, data, "store")


def read_summary(store: Store, run_id: str) -> RunSummary | None:
    """Return the run's stored summary; None when there is none or it cannot be read."""
    try:
        return RunSummary.model_validate_json(store.summary_path(run_id).read_bytes())
    except (OSError, ValidationError, ValueError):
        return None


def list_runs(
    store: Store, reports_dir: Path | None = None, release: str | None = None
) -> tuple[list[RunListing], dict[str, RunSummary]]:
    """Every run of the store (oldest first), optionally of one release, with summaries.

    Raises:
        StoreError: a release record is unreadable.
    """
    rows: list[RunListing] = []
    summaries: dict[str, RunSummary] = {}
    for run_id in store.run_ids():
        s = read_summary(store, run_id)
        rec = store.release(run_id)
        if s is None:
            base = dict(
                release=rec.release,
                system_digest=rec.system_digest,
                task_set=rec.task_set,
                k=rec.k,
                baseline=rec.baseline,
                created_at=rec.created_at,
            )
        else:
            summaries[run_id] = s
            base = dict(
                release=s.release,
                system_digest=s.system_digest,
                task_set=s.task_set,
                k=s.k,
                baseline=s.baseline,
                created_at=s.created_at,
            )
        if release is not None and base["release"] != release:
            continue
        page = None
        if reports_dir is not None and (reports_dir / run_id / "index.html").is_file():
            page = f"{run_id}/index.html"
        rows.append(
            RunListing(
                run_id=run_id,
                **base,
                verdict=s.verdict if s else None,
                decided_at=s.decided_at if s else None,
                candidate=s.candidate if s else None,
                named_cases=s.named_cases if s else (),
                report=page,
                cases=len(rec.cases),
            )
        )
    rows.sort(key=lambda r: (r.created_at, r.run_id))
    return mark_partial(rows), summaries


def mark_partial(rows: Sequence[RunListing]) -> list[RunListing]:
    """Mark the runs with fewer cases, or a smaller k, than the fullest run of their task set."""
    full: dict[str, tuple[int, int]] = {}
    for r in rows:
        full[r.task_set] = max(full.get(r.task_set, (0, 0)), (r.cases, r.k))
    marked = []
    for r in rows:
        cases, k = full[r.task_set]
        why = None
        if r.cases < cases:
            why = f"{r.cases} of {cases} cases"
        elif r.k < k:
            why = f"k={r.k} (full runs k={k})"
        marked.append(r.model_copy(update={"partial": why}))
    return marked


# ----------------------------------------------------------------------------- plots


def render_history(rows: Sequence[RunListing], summaries: dict[str, RunSummary]) -> str:
    """Render ``reports/index.html``: a row per run, trend plots per release and per case."""
    from harness.report.html import template_env

    env = template_env()
    loader = env.loader
    assert loader is not None
    style, _, _ = loader.get_source(env, "report.css")
    from harness.report.trend import release_heat_map, release_trend

    # rows are oldest first; partial runs stay in the table, off the trend
    full = [summaries[r.run_id] for r in rows if r.run_id in summaries and not r.partial]
    baselines = sorted({s.baseline for s in full if s.baseline})
    trend = (release_trend(full), release_heat_map(full)) if full else None
    return env.get_template("history.html.j2").render(
        rows=list(reversed(rows)),
        trend=trend,
        baselines=baselines,
        style=style,
        partial=sum(1 for r in rows if r.partial),
        generated_at=dt.datetime.now(dt.UTC),
    )


def write_history(store: Store, reports_dir: Path) -> Path:
    """Refresh ``<reports_dir>/index.html`` from every run's stored summary.

    Raises:
        ConfigError: the page cannot be written.
        StoreError: a release record is unreadable.
    """
    from harness.report.folder import write_file

    rows, summaries = list_runs(store, reports_dir)
    html = render_history(rows, summaries)
    return write_file(reports_dir / "index.html", html.encode("utf-8"), "reports_dir")
