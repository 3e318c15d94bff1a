"""``harness run``: run a release's cases, judge and gate, with a live progress view."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness.cli.common import (
    EXIT_CODES,
    err,
    handle_errors,
    out,
    print_decision,
    project_option,
)
from harness.project import MAX_JOBS, MAX_K


@click.command(epilog=EXIT_CODES)
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
@handle_errors
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
        from harness.store.store import Store

        store = Store(project.store_dir)
        _print_flips(store, outcome.run_id, store.resolve_run(replay_of))
    for path in outcome.reports:
        err.print(f"report: {path}", highlight=False)
    print_decision(outcome.decision)
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
