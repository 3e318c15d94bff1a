"""Release reports: a portable folder per run, and the release history across runs.

Every report is rendered from one :class:`~harness.report.data.ReportData`, built from
the run's stored records only, so all formats show the same decision and the same numbers::

    write_report_folder(project, store, run_id, decision=None)  -> ReportFolder
        reports/<run_id>/{index.html, evidence/, files/, records/,
                          junit.xml, summary.md, report.json}
        runs/<run_id>/summary.json in the store, and reports/index.html (the history)
        reports/latest/: the same files, a stable path for CI (see :mod:`.latest`)

The folder is built beside its final place and swapped in (see :mod:`.folder`); no file
in it links outside it or names a host path.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.decision import RunDecision
from harness.errors import ConfigError
from harness.names import MAX_RUN_ID, check_name, inside
from harness.project import Project
from harness.report.data import (
    ReportData,
    build_report,
    build_report_and_decision,
    report_from_decision,
)
from harness.report.folder import (
    FORMATS,
    Format,
    ReportFolder,
    Scrubber,
    StagedFolder,
    copy_evidence,
    evidence_pages,
    folder_size,
    write_file,
)
from harness.report.history import write_history, write_summary
from harness.report.html import render_evidence_page, render_html
from harness.report.junit import render_junit
from harness.report.latest import point_latest
from harness.report.markdown import render_markdown
from harness.report.schema import report_document
from harness.store.store import Store

__all__ = [
    "FORMATS",
    "ReportData",
    "ReportFolder",
    "build_report",
    "json_document",
    "render_html",
    "render_junit",
    "render_markdown",
    "write_history",
    "write_html_report",
    "write_report_folder",
    "write_reports",
]


def json_document(data: ReportData) -> dict[str, Any]:
    """Return ``report.json``'s content as JSON-ready data (see ``harness schema report``)."""
    doc: dict[str, Any] = report_document(data).model_dump(mode="json")
    return doc


def _json_bytes(data: ReportData) -> bytes:
    # Compact: it is for machines (a 1,000-case run's document is a third smaller).
    return (report_document(data).model_dump_json() + "\n").encode("utf-8")


def write_report_folder(
    project: Project,
    store: Store,
    run_id: str,
    decision: RunDecision | None = None,
    *,
    formats: Iterable[Format] = FORMATS,
    junit_baseline: bool = False,
    history: bool = True,
    latest: bool = True,
) -> ReportFolder:
    """Write the portable report folder ``<reports_dir>/<run_id>/`` and refresh the history.

    ``decision``, when the caller has just computed it (``harness run``), is used as is
    instead of being recomputed from the store. ``formats`` picks the files (all by
    default); the evidence is copied in with the HTML. ``junit_baseline`` adds the
    re-executed baseline as a second JUnit suite. The run's summary is stored and the
    history page ``<reports_dir>/index.html`` rewritten unless ``history`` is False.
    ``<reports_dir>/latest/`` then holds the same files (swapped in atomically) unless
    ``latest`` is False: it always names the report folder written last.

    Raises:
        StoreError: the run or one of its records is missing or corrupt.
        ConfigError: the report cannot be written (names the folder), or the run's
            baseline cannot be loaded.
        InvalidRunError: the run's recorded policy cannot be checked any more.

    """
    wanted = set(formats)
    if decision is None or decision.run_id != run_id:
        data, decision, trials = build_report_and_decision(project, store, run_id)
    else:
        trials = store.trials(run_id)
        data = report_from_decision(project, store, decision, trials)
    scrub = Scrubber({"store": store.root, "project": project.root})
    check_name(run_id, kind="run", field="RUN", max_len=MAX_RUN_ID)
    dest = inside(project.reports_dir, project.reports_dir / run_id)
    staged = StagedFolder(dest)
    try:
        out = staged.path
        written: dict[str, Path] = {}
        if "html" in wanted:
            copier = copy_evidence(out, store, data, scrub, trials)
            pages = evidence_pages(data)
            ev_pages: dict[str, int] = {}
            for n, groups in enumerate(pages, 1):
                for g in groups:
                    ev_pages[g.anchor] = n
                    ev_pages.update((ev.anchor, n) for ev in g.items)
            for n, groups in enumerate(pages, 1):
                page = render_evidence_page(data, groups, n, len(pages), copier.files, ev_pages)
                write_file(out / "evidence" / f"{n}.html", scrub(page).encode(), "reports_dir")
            html = scrub(render_html(data, copier.files, ev_pages))
            written["index"] = write_file(out / "index.html", html.encode(), "reports_dir")
        if "junit" in wanted:
            body = render_junit(data, baseline=junit_baseline).decode("utf-8")
            written["junit"] = write_file(out / "junit.xml", scrub(body).encode(), "reports_dir")
        if "markdown" in wanted:
            md = render_markdown(data, html_path="index.html" if "html" in wanted else None)
            written["summary"] = write_file(out / "summary.md", scrub(md).encode(), "reports_dir")
        if "json" in wanted:
            doc = scrub(_json_bytes(data).decode("utf-8"))
            written["json_path"] = write_file(out / "report.json", doc.encode(), "reports_dir")
    except BaseException:
        staged.abort()
        raise
    staged.commit()
    n_files, size = folder_size(dest)
    latest_dir = point_latest(project.reports_dir, dest) if latest else None
    hist = None
    if history:
        # A read-only store still gets its report; the history then lacks this run.
        with contextlib.suppress(ConfigError):
            write_summary(store, decision)
        hist = write_history(store, project.reports_dir)
    return ReportFolder(
        root=dest,
        index=_moved(written.get("index"), out, dest),
        junit=_moved(written.get("junit"), out, dest),
        summary=_moved(written.get("summary"), out, dest),
        json_path=_moved(written.get("json_path"), out, dest),
        history=hist,
        latest=latest_dir,
        evidence_files=n_files - len(written),
        bytes=size,
    )


def _moved(path: Path | None, staged: Path, dest: Path) -> Path | None:
    return None if path is None else dest / path.relative_to(staged)


def write_html_report(
    project: Project, store: Store, run_id: str, decision: RunDecision | None = None
) -> Path:
    """Write the report folder with its HTML page only; return ``index.html``'s path.

    Raises:
        StoreError: the run or one of its records is missing or corrupt.
        ConfigError: the report cannot be written, or the run's baseline cannot be loaded.
        InvalidRunError: the run's recorded policy cannot be checked any more.

    """
    folder = write_report_folder(project, store, run_id, decision, formats=("html",))
    assert folder.index is not None
    return folder.index


def write_reports(
    project: Project,
    store: Store,
    run_id: str,
    *,
    junit: Path | None,
    summary: Path | None,
    json_path: Path | None,
) -> list[Path]:
    """Write the report folder and, when asked, copies of its JUnit, Markdown and JSON files.

    Returns the written paths, the HTML report first.

    Raises:
        StoreError: the run or one of its records is missing or corrupt.
        ConfigError: an output path is a directory or cannot be written (names the option).
        InvalidRunError: the run's recorded policy cannot be checked any more.

    """
    for path, option in ((junit, "--junit"), (summary, "--summary"), (json_path, "--json")):
        if path is not None and path.is_dir():
            write_file(path, b"", option)  # raises the ConfigError naming the option
    folder = write_report_folder(project, store, run_id)
    paths = [p for p in (folder.index,) if p is not None]
    for extra, src, option in (
        (junit, folder.junit, "--junit"),
        (summary, folder.summary, "--summary"),
        (json_path, folder.json_path, "--json"),
    ):
        if extra is not None and src is not None:
            paths.append(write_file(extra, src.read_bytes(), option))
    return paths
