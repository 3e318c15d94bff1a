"""Release history: a small stored summary per run, ``harness runs`` and ``reports/index.html``.

Every report write (and so every ``harness run``) stores a :class:`RunSummary` of the
run's decision next to its records (``runs/<run_id>/summary.json``): the aggregate
estimates with their intervals and one line per case. The history is built from those
summaries and the release records only — never by loading every trial of every run.
A summary is derived data: rewriting it from the same records gives the same content.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from harness.decision import RunDecision
from harness.frozen import Frozen as _Frozen
from harness.gate.stats import MeanCI
from harness.report.data import gate_named_cases
from harness.report.html import Plot, Shape
from harness.report.summary import ArmTrend, CaseTrend, RunSummary
from harness.store.store import Store

__all__ = [
    "ArmTrend",
    "CaseTrend",
    "RunListing",
    "RunSummary",
    "RunsDocument",
    "case_trend_plot",
    "list_runs",
    "mark_partial",
    "release_trend_plot",
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
        run_id=rd.run_id, release=rel.release, system_digest=rel.system_digest,
        task_set=rel.task_set, k=rel.k, baseline=rel.baseline, created_at=rel.created_at,
        decided_at=dt.datetime.now(dt.UTC), verdict=rd.verdict, headline=rd.headline,
        candidate=ArmTrend.of(dec.candidate),
        baseline_arm=ArmTrend.of(dec.baseline) if dec.baseline is not None else None,
        named_cases=tuple(sorted(gate_named_cases(dec))),
        cases={c.case_id: CaseTrend(n=c.n, pass_rate=c.pass_rate, pass_hat_k=c.pass_hat_k,
                                    label=c.label) for c in dec.candidate.cases},
        baseline_replayed=dec.baseline_replayed,
    )  # fmt: skip


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


def list_runs(store: Store, reports_dir: Path | None = None, release: str | None = None
              ) -> tuple[list[RunListing], dict[str, RunSummary]]:  # fmt: skip
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
            base = dict(release=rec.release, system_digest=rec.system_digest,
                        task_set=rec.task_set, k=rec.k, baseline=rec.baseline,
                        created_at=rec.created_at)  # fmt: skip
        else:
            summaries[run_id] = s
            base = dict(release=s.release, system_digest=s.system_digest, task_set=s.task_set,
                        k=s.k, baseline=s.baseline, created_at=s.created_at)  # fmt: skip
        if release is not None and base["release"] != release:
            continue
        page = None
        if reports_dir is not None and (reports_dir / run_id / "index.html").is_file():
            page = f"{run_id}/index.html"
        rows.append(RunListing(
            run_id=run_id, **base,
            verdict=s.verdict if s else None, decided_at=s.decided_at if s else None,
            candidate=s.candidate if s else None, named_cases=s.named_cases if s else (),
            report=page, cases=len(rec.cases)))  # fmt: skip
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


def release_trend_plot(release: str, runs: Sequence[RunSummary]) -> Plot:
    """Candidate pass rate and pass^k with 95% intervals, run after run, for one release."""
    width, height, left, right, top, bottom = 560, 190, 40, 14, 10, 32
    n = len(runs)
    span_x, span_y = width - left - right, height - top - bottom

    def x_of(j: int, off: float = 0.0) -> float:
        return left + span_x * (j + 0.5) / max(1, n) + off

    def y_of(v: float) -> float:
        return top + span_y * (1 - min(1.0, max(0.0, v)))

    shapes: list[Shape] = []
    for t in (0.0, 0.5, 1.0):
        shapes.append(Shape("line", x=left, y=y_of(t), x2=width - right, y2=y_of(t), cls="grid"))
        shapes.append(Shape("text", x=left - 6, y=y_of(t) + 4, text=f"{t:g}", cls="tick",
                            anchor="end"))  # fmt: skip
    for metric, cls, off in (("pass_rate", "a-c", -3.0), ("pass_hat_k", "a-b", 3.0)):
        prev: tuple[float, float] | None = None
        for j, s in enumerate(runs):
            m: MeanCI = getattr(s.candidate, metric)
            if m.mean is None:
                prev = None
                continue
            x, y = x_of(j, off), y_of(m.mean)
            tip = (f"{s.run_id} ({s.created_at:%Y-%m-%d}): {metric.replace('_', ' ')} "
                   f"{m.mean:.3f}" + (f" [{m.ci_low:.3f}, {m.ci_high:.3f}]"
                                      if m.ci_low is not None and m.ci_high is not None else "")
                   + f" · {s.verdict}")  # fmt: skip
            if m.ci_low is not None and m.ci_high is not None:
                shapes.append(Shape("line", x=x, y=y_of(m.ci_low), x2=x, y2=y_of(m.ci_high),
                                    cls=f"ci {cls}", title=tip))  # fmt: skip
            if prev is not None:
                shapes.append(Shape("line", x=prev[0], y=prev[1], x2=x, y2=y, cls=f"conn {cls}"))
            shapes.append(Shape("circle", x=x, y=y, r=3.5, cls=f"pt {cls} v-{s.verdict}",
                                title=tip))  # fmt: skip
            prev = (x, y)
    for j, s in enumerate(runs):
        if n <= 12 or j % math.ceil(n / 12) == 0:
            label = f"{s.created_at:%m-%d}"
            shapes.append(Shape("text", x=x_of(j), y=height - bottom + 14, text=label,
                                cls="tick", anchor="middle"))  # fmt: skip
    shapes.append(Shape("text", x=left + span_x / 2, y=height - 3, text="runs, oldest first",
                        cls="tick", anchor="middle"))  # fmt: skip
    return Plot(width, height, f"release {release}: candidate pass rate and pass^k per run "
                "(95% intervals)", tuple(shapes),
                (("a-c", "pass rate"), ("a-b", "pass^k")))  # fmt: skip


MAX_TREND_CASES = 80
"""Cases drawn in a per-case trend grid: those that ever failed first."""


def case_trend_plot(release: str, runs: Sequence[RunSummary]) -> Plot | None:
    """Per-case pass rate, run after run (a cell per case and run), for one release."""
    ids = sorted({cid for s in runs for cid in s.cases})
    if not ids:
        return None

    def worst(cid: str) -> float:
        rates = [s.cases[cid].pass_rate for s in runs if cid in s.cases]
        return min((r for r in rates if r is not None), default=1.0)

    ids.sort(key=lambda cid: (worst(cid), cid))
    shown = ids[:MAX_TREND_CASES]
    cell_w, cell_h, left, top = 18, 12, 200, 6
    width = left + cell_w * len(runs) + 10
    height = top + cell_h * len(shown) + 22
    shapes: list[Shape] = []
    for i, cid in enumerate(shown):
        y = top + i * cell_h
        shapes.append(Shape("text", x=left - 6, y=y + cell_h - 2, text=cid[:32], cls="tick",
                            anchor="end"))  # fmt: skip
        for j, s in enumerate(runs):
            c = s.cases.get(cid)
            rate = c.pass_rate if c is not None else None
            band = "none" if rate is None else str(min(4, int(rate * 4)))
            if c is None:
                tip = f"{cid} · {s.run_id}: no data"
            else:
                shown_rate = "—" if rate is None else f"{rate:.3f}"
                tip = (f"{cid} · {s.run_id}: pass rate {shown_rate}, pass^k {c.pass_hat_k}, "
                       f"{c.n} judged, {c.label}")  # fmt: skip
            shapes.append(Shape("rect", x=left + j * cell_w, y=y, w=cell_w - 2, h=cell_h - 2,
                                cls=f"heat h{band}", title=tip))  # fmt: skip
    more = f" · {len(ids) - len(shown)} steady cases not drawn" if len(ids) > len(shown) else ""
    shapes.append(Shape("text", x=left, y=height - 6, text=f"{len(shown)} cases, least "
                        f"passing first{more}", cls="tick"))  # fmt: skip
    return Plot(width, height, f"release {release}: per-case pass rate per run", tuple(shapes),
                (("heat h0", "< .25"), ("heat h2", ".5 – .75"), ("heat h4", "1")))  # fmt: skip


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
        rows=list(reversed(rows)), trend=trend, baselines=baselines, style=style,
        partial=sum(1 for r in rows if r.partial),
        generated_at=dt.datetime.now(dt.UTC))  # fmt: skip


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
