"""The ``harness`` command line: parse, call the library, print, exit with a code.

Every command is a short pipeline of library calls; a :class:`~harness.errors.HarnessError`
becomes a one-line message on stderr and its exit code (see :mod:`harness.exitcodes`).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness import __version__
from harness.exitcodes import ExitCode, exit_for_exception
from harness.project import MAX_JOBS, MAX_K

if TYPE_CHECKING:
    from harness.project import Project
    from harness.store import Store

F = TypeVar("F", bound=Callable[..., Any])
err = Console(stderr=True, width=None if sys.stderr.isatty() else 140)
out = Console(width=None if sys.stdout.isatty() else 140)


def _handle_errors(fn: F) -> F:
    """Turn any exception into a one-line message and its exit code; never a traceback.

    The mapping is :func:`harness.exitcodes.exit_for_exception`; what it does not know is
    an internal error (exit 5) with a request to report it.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (SystemExit, click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt:
            err.print(
                "[bold red]interrupted:[/] finished trials are stored; "
                "re-run the same command to resume",
                highlight=False,
            )
            sys.exit(130)
        except Exception as exc:
            code, prefix = exit_for_exception(exc)
            message = str(exc) or type(exc).__name__
            if code is ExitCode.INTERNAL:
                message = (
                    f"{type(exc).__name__}: {message}. This is a bug in harness {__version__}; "
                    "please report it with the command you ran "
                    "(HARNESS_TRACEBACK=1 prints the traceback)"
                )
                if os.environ.get("HARNESS_TRACEBACK") == "1":
                    traceback.print_exc()
            err.print(f"[bold red]{prefix}:[/] {escape(message)}", highlight=False, soft_wrap=True)
            sys.exit(code)

    return wrapper  # type: ignore[return-value]


project_option = click.option(
    "--project",
    "project_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Project folder holding harness.yaml.",
)


def _stored_run(fn: F) -> F:
    """Add the options of a command that reads one stored run: ``--project`` and ``RUN``."""
    return project_option(click.argument("run_ref", default="latest")(fn))


def _json_option(schema_name: str) -> Callable[[F], F]:
    """``--json``: print the document ``harness schema <schema_name>`` describes."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help=f"Machine-readable output (`harness schema {schema_name}`).",
    )


def _open_store(project_dir: Path) -> tuple[Project, Store]:
    from harness.project import load_project
    from harness.store import Store

    project = load_project(project_dir)
    return project, Store(project.store_dir)


def _open_run(project_dir: Path, run_ref: str) -> tuple[Project, Store, str]:
    project, store = _open_store(project_dir)
    return project, store, store.resolve_run(run_ref)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="harness")
def main() -> None:
    """Golden-set release testing for coding agents: execution decides whether work moves."""


# ------------------------------------------------------------------------------ run


@main.command()
@project_option
@click.option("--release", required=True, help="Release (in harness.yaml) to test.")
@click.option(
    "--k",
    "k",
    type=click.IntRange(1, MAX_K),
    default=5,
    show_default=True,
    help=f"Trials per case (1 to {MAX_K}).",
)
@click.option("--baseline", default=None, help="Promoted baseline to re-execute and compare with.")
@click.option(
    "--backend",
    type=click.Choice(["local", "docker"]),
    default=None,
    help="Sandbox backend (default: harness.yaml's).",
)
@click.option(
    "--executor",
    "executor_name",
    type=click.Choice(["local", "dask"]),
    default="local",
    show_default=True,
    help="Where trials run.",
)
@click.option("--scheduler", default=None, help="Dask scheduler address (with --executor dask).")
@click.option(
    "--jobs",
    type=click.IntRange(1, MAX_JOBS),
    default=None,
    help=f"Parallel trials, 1 to {MAX_JOBS} (default: core count).",
)
@click.option("--case", "only", multiple=True, help="Run only this case (repeatable).")
@click.option(
    "--allow-unenforced",
    "downgrade",
    multiple=True,
    help="Accept that the backend cannot enforce this bound (recorded in the release "
    "record): network, memory, pids, cpu, disk, read_only_root.",
)
@click.option("--fresh", is_flag=True, help="Start a new run instead of resuming the same one.")
@click.option(
    "--model-replay",
    default=None,
    metavar="RUN|baseline:NAME",
    help="Serve the model's responses recorded by RUN, or kept by a promoted baseline with "
    "baseline:NAME (upstream stopped); a request that differs is infra_error. With "
    "--baseline NAME and baseline:NAME only the baseline arm is replayed (drift at no model "
    "cost) and the candidate, called live, is compared with the stored baseline's trials.",
)
@click.option("--warn-ok", is_flag=True, help="Exit 0 on a warn verdict.")
@click.option("--no-report", is_flag=True, help="Do not write the HTML report.")
@_handle_errors
def run(
    project_dir: Path,
    release: str,
    k: int,
    baseline: str | None,
    backend: str | None,
    executor_name: str,
    scheduler: str | None,
    jobs: int | None,
    only: tuple[str, ...],
    downgrade: tuple[str, ...],
    fresh: bool,
    model_replay: str | None,
    warn_ok: bool,
    no_report: bool,
) -> None:
    """Run every case K times for RELEASE, judge, and gate against the baseline."""
    from harness.project import load_project
    from harness.run import RunRequest, run_release

    project = load_project(project_dir)
    request = RunRequest(
        release=release,
        k=k,
        baseline=baseline,
        backend=backend,
        executor=executor_name,
        scheduler=scheduler,
        jobs=jobs,
        only=only,
        downgrade=downgrade,
        fresh=fresh,
        report=not no_report,
        model_replay=model_replay,
    )
    with _RunView(release, baseline, k) as view:
        outcome = run_release(project, request, view)
    _print_run_table(outcome.decision)
    replay_of = project.release(release).agent.replay_run
    if project.release(release).agent.adapter == "replay" and replay_of:
        from harness.store import Store

        store = Store(project.store_dir)
        _print_flips(store, outcome.run_id, store.resolve_run(replay_of))
    for path in outcome.reports:
        err.print(f"report: {path}", highlight=False)
    _print_decision(outcome.decision)
    sys.exit(outcome.decision.exit_code(warn_ok=warn_ok))


class _RunView:
    """Renders a run's events: a rich progress bar on a terminal, heartbeat lines in CI logs."""

    HEARTBEAT_S = 30.0
    """Seconds between heartbeat lines when stdout is not a terminal and nothing finished."""

    def __init__(self, release: str, baseline: str | None, k: int) -> None:
        self._release, self._baseline, self._k = release, baseline, k
        self._tty = err.is_terminal
        self._progress: Progress | None = None
        self._task: Any = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._start = time.monotonic()
        self._last = self._start
        self._total = 0
        self._done = 0
        self._per_case: dict[str, int] = {}
        self._cases_done = 0

    def __enter__(self) -> _RunView:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        if self._progress is not None:
            self._progress.stop()

    def swept(self, removed: int) -> None:
        err.print(f"swept {removed} leftover sandbox(es) of killed runs", highlight=False)

    def note(self, message: str) -> None:
        err.print(message, highlight=False)

    def started(self, plan: Any, run_id: str, done_before: int) -> None:
        err.print(
            f"run [bold]{run_id}[/] · release {self._release} · system "
            f"{plan.record.system_digest[7:19]} · {len(plan.cases)} cases × k={self._k}"
            + (f" × 2 arms (baseline {self._baseline})" if self._baseline else "")
            + (f" · resuming, {done_before} trials already recorded" if done_before else ""),
            highlight=False,
        )
        self._total, self._done = len(plan.specs), done_before
        for spec in plan.specs:
            self._per_case[spec.key.case_id] = self._per_case.get(spec.key.case_id, 0) + 1
        if self._tty:
            self._progress = Progress(
                TextColumn("[progress.description]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err,
                transient=False,
            )
            self._progress.start()
            self._task = self._progress.add_task("trials", total=self._total, completed=self._done)
        else:
            self._heartbeat("started")
            self._ticker = threading.Thread(target=self._tick, name="heartbeat", daemon=True)
            self._ticker.start()

    def planned(self, total: int, done: int) -> None:
        with self._lock:
            self._total, self._done = total, done
        if self._progress is not None:
            self._progress.update(self._task, total=total, completed=done)
        else:
            self._heartbeat(f"flaky reruns added: {total} trials in all")

    def trial_finished(self, record: Any, written: bool) -> None:
        case_finished = False
        with self._lock:
            self._done += 1
            left = self._per_case.get(record.key.case_id)
            if left is not None:
                self._per_case[record.key.case_id] = left - 1
                if left == 1:
                    self._cases_done += 1
                    case_finished = True
        if self._progress is not None:
            self._progress.advance(self._task)
        elif case_finished or time.monotonic() - self._last >= self.HEARTBEAT_S:
            self._heartbeat(f"{record.key.slug()}: {record.verdict.outcome.value}")

    def _tick(self) -> None:
        while not self._stop.wait(5.0):
            if time.monotonic() - self._last >= self.HEARTBEAT_S:
                self._heartbeat("still running")

    def _heartbeat(self, what: str) -> None:
        with self._lock:
            self._last = now = time.monotonic()
            line = (
                f"[{int(now - self._start)}s] {self._done}/{self._total} trials · "
                f"{self._cases_done}/{len(self._per_case)} cases finished · {what}"
            )
        err.print(line, highlight=False, markup=False, soft_wrap=True)


def _print_run_table(decision: Any) -> None:
    table = Table(title=f"run {decision.run_id}", show_lines=False)
    for col in (
        "case",
        "arm",
        "trials",
        "pass",
        "fail",
        "infra",
        "pass rate",
        "pass^k",
        "pass@k",
        "label",
    ):
        table.add_column(
            col, justify="right" if col not in ("case", "arm", "trials", "label") else "left"
        )
    for row in decision.case_rows():
        table.add_row(*row)
    out.print(table)


def _print_flips(store: Any, run_id: str, source: str) -> None:
    from harness.replay import verdict_flips

    flips = verdict_flips(store, run_id, source)
    out.print(f"re-verified the candidates of {source}: {len(flips)} verdict flip(s)")
    for f in flips:
        out.print(
            f"  flip {f.case_id} t{f.trial}: {f.recorded.value} → {f.now.value}  {f.reason[:80]}",
            highlight=False,
            markup=False,
        )


def _print_decision(decision: Any) -> None:
    color = {"pass": "green", "warn": "yellow", "fail": "red", "blocked": "magenta"}[
        decision.verdict
    ]
    out.print(f"[bold {color}]{decision.verdict.upper()}[/]  {decision.headline}", highlight=False)
    for reason in decision.reasons:
        out.print(f"  - {reason}", highlight=False, soft_wrap=True, markup=False)


# ------------------------------------------------------------------------------ gate/show


@main.command()
@_stored_run
@click.option("--warn-ok", is_flag=True, help="Exit 0 on a warn verdict.")
@click.option("--json", "as_json", is_flag=True, help="Print the decision as JSON.")
@_handle_errors
def gate(project_dir: Path, run_ref: str, warn_ok: bool, as_json: bool) -> None:
    """Recompute the promotion decision of RUN from its stored records."""
    from harness.decision import decide_run

    project, store, run_id = _open_run(project_dir, run_ref)
    decision = decide_run(project, store, run_id, write=False)
    if as_json:
        out.print_json(data=decision.to_json())
    else:
        _print_decision(decision)
    sys.exit(decision.exit_code(warn_ok=warn_ok))


@main.command()
@_stored_run
@_json_option("show")
@_handle_errors
def show(project_dir: Path, run_ref: str, as_json: bool) -> None:
    """Show a run: its release record and every trial's verdict and attempts."""
    from harness.report.schema import ShowDocument

    _, store, run_id = _open_run(project_dir, run_ref)
    record = store.release(run_id)
    trials = store.trials(run_id)
    if as_json:
        doc = ShowDocument(run_id=run_id, release=record, trials=tuple(trials),
                           results=tuple(store.results(run_id)))  # fmt: skip
        click.echo(doc.model_dump_json(indent=2))
        return
    out.print(
        f"[bold]run {run_id}[/]  release {record.release}  k={record.k}  backend {record.backend}"
    )
    out.print(f"system   {record.system_digest}")
    out.print(f"task set {record.task_set} {record.task_set_digest}")
    out.print(f"policy   {record.policy_digest or '(none)'}")
    if record.baseline:
        out.print(f"baseline {record.baseline} {record.baseline_system_digest}")
    if record.downgrade:
        out.print(f"[yellow]unenforced bounds accepted: {', '.join(record.downgrade)}[/]")
    table = Table()
    # The trial name is what a reviewer copies: never truncated or wrapped.
    table.add_column("trial", no_wrap=True, overflow="fold", min_width=len(max(
        (t.key.slug() for t in trials), key=len, default="trial")))  # fmt: skip
    for col in ("verdict", "failure", "attempts", "stop", "candidate"):
        table.add_column(col)
    table.add_column("reason", overflow="fold")
    for t in trials:
        v = t.verdict
        lineage = " → ".join(
            f"{a.verdict.outcome.value}"
            + (f"({a.verdict.failure_type.value})" if a.verdict.failure_type else "")
            for a in t.attempts
        )
        cand = (t.attempts[-1].candidate_digest or "")[7:19]
        table.add_row(
            t.key.slug(),
            v.outcome.value,
            v.failure_type.value if v.failure_type else "",
            lineage,
            t.stop_reason,
            cand,
            v.reason[:200],
        )
    out.print(table, markup=False, highlight=False)


# ------------------------------------------------------------------------------ report


_FORMAT_FLAGS = ("html", "junit", "markdown", "json")


@main.command()
@_stored_run
@click.option(
    "--format",
    "formats",
    multiple=True,
    type=click.Choice(_FORMAT_FLAGS),
    help="Write only these files into the report folder (repeatable; default: all).",
)
@click.option("--junit-baseline", is_flag=True, help="Add the re-executed baseline to junit.xml.")
@click.option(
    "--junit",
    "junit_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also copy the JUnit XML here.",
)
@click.option(
    "--summary",
    "summary_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also copy the Markdown summary here (CI job summary).",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also copy report.json here (`harness schema report`).",
)
@_handle_errors
def report(
    project_dir: Path,
    run_ref: str,
    formats: tuple[str, ...],
    junit_baseline: bool,
    junit_path: Path | None,
    summary_path: Path | None,
    json_path: Path | None,
) -> None:
    """Write the report folder reports/RUN/ (HTML + evidence, JUnit, Markdown, JSON)."""
    from harness.errors import ConfigError
    from harness.report import write_report_folder
    from harness.report.folder import write_file

    project, store, run_id = _open_run(project_dir, run_ref)
    extras = {"junit": (junit_path, "--junit"), "markdown": (summary_path, "--summary"),
              "json": (json_path, "--json")}  # fmt: skip
    for path, option in extras.values():
        if path is not None and path.is_dir():
            raise ConfigError("is a directory; expected a file path to write", file=path,
                              field=option)  # fmt: skip
    wanted = set(formats or _FORMAT_FLAGS) | {k for k, (p, _) in extras.items() if p}
    folder = write_report_folder(
        project,
        store,
        run_id,
        formats=[f for f in _FORMAT_FLAGS if f in wanted],  # type: ignore[misc]
        junit_baseline=junit_baseline,
    )
    for p in folder.paths:
        out.print(str(p), highlight=False)
    made = {"junit": folder.junit, "markdown": folder.summary, "json": folder.json_path}
    for key, (path, option) in extras.items():
        src = made[key]
        if path is not None and src is not None:
            out.print(str(write_file(path, src.read_bytes(), option)), highlight=False)
    if folder.history is not None:
        out.print(f"history: {folder.history}", highlight=False)


# ------------------------------------------------------------------------------ runs/export/schema


@main.command()
@project_option
@click.option("--release", default=None, help="Only runs of this release.")
@_json_option("runs")
@_handle_errors
def runs(project_dir: Path, release: str | None, as_json: bool) -> None:
    """List the runs in the store, oldest first: release, system, decision, pass rates."""
    from harness.report.history import RunsDocument, list_runs

    project, store = _open_store(project_dir)
    rows, _ = list_runs(store, project.reports_dir, release)
    if as_json:
        click.echo(RunsDocument(runs=tuple(rows)).model_dump_json(indent=2))
        return

    def ci(m: Any) -> str:
        if m is None or m.mean is None:
            return "—"
        if m.ci_low is None:
            return f"{m.mean:.3f}"
        return f"{m.mean:.3f} [{m.ci_low:.2f}, {m.ci_high:.2f}]"

    table = Table()
    table.add_column("run", no_wrap=True)
    for col in ("release", "system", "started", "decision", "k", "pass rate", "pass^k", "named"):
        table.add_column(col, no_wrap=col != "named")
    for r in rows:
        c = r.candidate
        table.add_row(r.run_id, r.release, r.system_digest[7:19],
                      f"{r.created_at:%Y-%m-%d %H:%M}", r.verdict or "not decided", str(r.k),
                      ci(c.pass_rate if c else None), ci(c.pass_hat_k if c else None),
                      str(len(r.named_cases)) if r.verdict else "")  # fmt: skip
    out.print(table, markup=False, highlight=False)
    if not rows:
        err.print("no runs" + (f" of release {release}" if release else ""), highlight=False)


@main.command("export")
@_stored_run
@click.option("--table", "table_name", type=click.Choice(["trials", "cases"]), default="trials",
              show_default=True, help="A row per trial, or per case and arm.")  # fmt: skip
@click.option("--format", "fmt", type=click.Choice(["csv", "parquet"]), default="csv",
              show_default=True, help="parquet needs pyarrow (harness[parquet]).")  # fmt: skip
@click.option("--output", "-o", "output", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="File to write (default: RUN-TABLE.FORMAT here).")  # fmt: skip
@_handle_errors
def export_cmd(project_dir: Path, run_ref: str, table_name: str, fmt: str,
               output: Path | None) -> None:  # fmt: skip
    """Export a run's trials or cases as CSV or Parquet."""
    from harness.report.export import (
        CASE_COLUMNS,
        TRIAL_COLUMNS,
        case_rows,
        trial_rows,
        write_table,
    )

    project, store, run_id = _open_run(project_dir, run_ref)
    path = output or Path(f"{run_id}-{table_name}.{fmt}")
    if table_name == "trials":
        rows, columns = trial_rows(run_id, store.trials(run_id)), TRIAL_COLUMNS
    else:
        from harness.report import build_report

        rows, columns = case_rows(build_report(project, store, run_id)), CASE_COLUMNS
    write_table(rows, columns, fmt, path)  # type: ignore[arg-type]
    out.print(f"{path} ({len(rows)} rows)", highlight=False)


@main.command()
@click.argument(
    "name", required=False, type=click.Choice(["gate", "report", "runs", "show", "summary"])
)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write every schema as NAME.schema.json into this folder.")  # fmt: skip
@_handle_errors
def schema(name: str | None, out_dir: Path | None) -> None:
    """Print the JSON schema of a --json output (gate, report, runs, show, summary)."""
    from harness.errors import ConfigError
    from harness.report.folder import write_file
    from harness.report.schema import SCHEMAS, json_schema

    if out_dir is not None:
        for key in sorted(SCHEMAS) if name is None else [name]:
            body = json.dumps(json_schema(key), indent=2, sort_keys=True) + "\n"
            out.print(str(write_file(out_dir / f"{key}.schema.json", body.encode(), "--out")),
                      highlight=False)  # fmt: skip
        return
    if name is None:
        raise ConfigError("name a schema (gate, report, runs, show, summary) or give --out",
                          field="NAME")  # fmt: skip
    click.echo(json.dumps(json_schema(name), indent=2, sort_keys=True))


# ------------------------------------------------------------------------------ cases


@main.group()
def cases() -> None:
    """List, lock, check and validate the golden-set cases."""


@cases.command("list")
@project_option
@_handle_errors
def cases_list(project_dir: Path) -> None:
    """List cases with version, lane and digest."""
    from harness.cases.load import load_cases
    from harness.project import load_project

    project = load_project(project_dir)
    table = Table()
    for col in ("id", "version", "lane", "expect", "critical", "retired", "digest"):
        table.add_column(col, no_wrap=True)
    table.add_column("title", overflow="ellipsis", no_wrap=True, max_width=60)
    for lc in load_cases(project.cases_dir):
        c = lc.case
        table.add_row(
            c.id,
            str(c.version),
            c.lane,
            c.expect,
            "yes" if c.critical else "",
            str(c.retired.date) if c.retired else "",
            lc.digest[7:19],
            c.title,
        )
    out.print(table)


@cases.command("lock")
@project_option
@_handle_errors
def cases_lock(project_dir: Path) -> None:
    """Pin new case versions in the task-set lock (refuses changed locked versions)."""
    from harness.cases.load import load_cases
    from harness.cases.lock import lock_cases, read_lock, write_lock
    from harness.project import load_project

    project = load_project(project_dir)
    loaded = load_cases(project.cases_dir)
    lock, added = lock_cases(loaded, read_lock(project.lock_path, project.file.task_set))
    if added:
        write_lock(project.lock_path, lock)
        for a in added:
            out.print(f"locked {a}", highlight=False)
    else:
        out.print("lock is up to date", highlight=False)


@cases.command("check")
@project_option
@_handle_errors
def cases_check(project_dir: Path) -> None:
    """Fail when a locked case version's content changed (names the files)."""
    from harness.cases.load import load_cases
    from harness.cases.lock import check_lock, read_lock
    from harness.project import load_project

    project = load_project(project_dir)
    mismatches = check_lock(
        load_cases(project.cases_dir), read_lock(project.lock_path, project.file.task_set)
    )
    if mismatches:
        for m in mismatches:
            err.print(f"[red]✗[/] {escape(m.describe())}", highlight=False, soft_wrap=True)
        sys.exit(ExitCode.USAGE)
    out.print("all cases match the lock", highlight=False)


@cases.command("validate")
@project_option
@click.option("--backend", type=click.Choice(["local", "docker"]), default=None)
@click.option("--case", "only", multiple=True, help="Validate only this case (repeatable).")
@click.option("--allow-unenforced", "downgrade", multiple=True)
@_handle_errors
def cases_validate(
    project_dir: Path, backend: str | None, only: tuple[str, ...], downgrade: tuple[str, ...]
) -> None:
    """Prove each verifier fails on the starting state and passes on the reference."""
    from harness.cases.load import load_cases
    from harness.env.preflight import validate_in_envs
    from harness.project import load_project
    from harness.sandbox.registry import get_backend

    project = load_project(project_dir)
    loaded = load_cases(project.cases_dir, only or None)
    results = validate_in_envs(
        project, loaded, get_backend(backend or project.file.backend), frozenset(downgrade)
    )
    broken = 0
    for r in results:
        mark = {"ok": "[green]✓[/]", "broken": "[red]✗[/]", "skipped": "[dim]-[/]"}[r.status]
        out.print(f"{mark} {r.case_id}: {escape(r.message)}", highlight=False, soft_wrap=True)
        broken += r.status == "broken"
    if broken:
        err.print(f"{broken} case(s) have a verifier that cannot go red or cannot go green")
        sys.exit(ExitCode.USAGE)


# ------------------------------------------------------------------------------ baseline


@main.group()
def baseline() -> None:
    """Promote and inspect baselines."""


@baseline.command("promote")
@project_option
@click.argument("run_ref")
@click.option("--name", required=True, help="Baseline name, e.g. production-previous.")
@click.option("--force", is_flag=True, help="Replace an existing baseline of that name.")
@_handle_errors
def baseline_promote(project_dir: Path, run_ref: str, name: str, force: bool) -> None:
    """Store finished run RUN as baseline NAME (git-friendly files)."""
    from harness.baseline import promote

    project, store = _open_store(project_dir)
    dest = promote(store, store.resolve_run(run_ref), name, project.baselines_dir, force=force)
    out.print(f"promoted to {dest}", highlight=False)


# ------------------------------------------------------------------------------ images


@main.group()
def images() -> None:
    """Container images of cases (Docker backend)."""


@images.command("build")
@project_option
@click.option("--case", "only", multiple=True, help="Build only this case (repeatable).")
@_handle_errors
def images_build(project_dir: Path, only: tuple[str, ...]) -> None:
    """Build each case's image (base image + starting tree); a no-op when unchanged."""
    from harness.cases.load import load_cases
    from harness.env.plan import prepare_for_backend
    from harness.plan import case_images
    from harness.project import load_project

    project = load_project(project_dir)
    active = [lc for lc in load_cases(project.cases_dir, only or None) if lc.active]
    _, env_bases = prepare_for_backend(project, active, {}, "docker")
    built = case_images(active, env_bases)
    for cid, image_id in sorted(built.items()):
        out.print(f"{cid}: {image_id}", highlight=False)


# ------------------------------------------------------------------------------ env


@main.group("env")
def env_group() -> None:
    """Lock and build the declared Python environments (see docs/environments.md)."""


@env_group.command("lock")
@project_option
@_handle_errors
def env_lock(project_dir: Path) -> None:
    """Write each declared environment's lock (pins + hashes) from its requirements."""
    from harness.env.cli import lock_all
    from harness.project import load_project

    for line in lock_all(load_project(project_dir)):
        out.print(line, highlight=False)


@env_group.command("build")
@project_option
@_handle_errors
def env_build(project_dir: Path) -> None:
    """Build (or reuse from the cache) every declared environment; print their digests."""
    from harness.env.cli import build_all
    from harness.project import load_project

    for line in build_all(load_project(project_dir)):
        out.print(line, highlight=False)


# ------------------------------------------------------------------------------ sandbox


@main.group()
def sandbox() -> None:
    """Sandbox maintenance."""


def _label_pairs(_ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]) -> Any:
    pairs = [v.partition("=") for v in value]
    bad = [v for v, (k, eq, _) in zip(value, pairs, strict=True) if not (k and eq)]
    if bad:
        raise click.BadParameter(f"{bad[0]!r} is not KEY=VALUE")
    return {k: v for k, _, v in pairs}


@sandbox.command("prune")
@click.option(
    "--all",
    "everything",
    is_flag=True,
    help="Also remove containers and volumes of LIVE runs and of owners this host cannot "
    "judge (another host, an older harness). Local folders are always orphans only.",
)
@click.option(
    "--label",
    "labels",
    multiple=True,
    metavar="KEY=VALUE",
    callback=_label_pairs,
    help="Only sweep containers and volumes that also carry this label (repeatable).",
)
@_handle_errors
def sandbox_prune(everything: bool, labels: dict[str, str]) -> None:
    """Remove what killed runs left behind: containers, volumes, local sessions.

    Only leftovers whose owning harness process is gone are removed (each carries its
    owner's host, pid and boot id), so this is safe while other runs are in progress.
    """
    from harness.sandbox.prune import prune_all

    for line in prune_all(everything=everything, labels=labels):
        out.print(line, highlight=False, markup=False)


# ------------------------------------------------------------------------------ policy


@main.group()
def policy() -> None:
    """Check what the promotion policy can and cannot see."""


@policy.command("check")
@project_option
@click.option("--baseline", default=None, help="Promoted baseline whose pass rates to use.")
@click.option(
    "--k",
    "k",
    type=click.IntRange(1, 100),
    default=None,
    help="Trials per case (default: baseline's).",
)
@click.option(
    "--reps",
    type=click.IntRange(50, 100_000),
    default=1000,
    show_default=True,
    help="Simulations per row.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the simulation.")
@click.option("--recommend", is_flag=True, help="Also try k = 3, 5, 7, 10, 15, 20; recommend one.")
@click.option(
    "--target",
    type=click.FloatRange(0, 1),
    default=0.90,
    show_default=True,
    help="Detection to reach (--recommend).",
)
@click.option("--no-cache", is_flag=True, help="Simulate even when a cached result exists.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@_handle_errors
def policy_check(
    project_dir: Path,
    baseline: str | None,
    k: int | None,
    reps: int,
    seed: int,
    recommend: bool,
    target: float,
    no_cache: bool,
    as_json: bool,
) -> None:
    """Simulate this gate for the project's cases, k and baseline: false alarms, detection."""
    from harness.opchar import check_project
    from harness.project import load_project

    project = load_project(project_dir)
    result, cached = check_project(
        project,
        baseline,
        k,
        reps=reps,
        seed=seed,
        use_cache=not no_cache,
        target=target,
        recommend=(3, 5, 7, 10, 15, 20) if recommend else (),
    )
    if as_json:
        click.echo(result.model_dump_json(indent=2))
    else:
        for line in result.render():
            out.print(line, highlight=False, soft_wrap=True)
    source = "cached result" if cached else f"simulated in {result.seconds:.1f}s"
    err.print(f"{source} · {project.store_dir.name}/cache", highlight=False)


if __name__ == "__main__":  # pragma: no cover
    main()
