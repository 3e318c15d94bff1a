"""Commands that read stored runs: ``harness gate``, ``harness show``, ``harness runs``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table

from harness.cli.common import (
    EXIT_CODES,
    err,
    handle_errors,
    json_option,
    open_run,
    open_store,
    out,
    print_decision,
    project_option,
    stored_run,
)
from harness.errors import ConfigError

if TYPE_CHECKING:
    from harness.store.records import ResultRecord


@click.command(epilog=EXIT_CODES)
@stored_run
@click.option("--warn-ok", is_flag=True, help="Exit 0 on a warn verdict.")
@click.option("--json", "as_json", is_flag=True, help="Print the decision as JSON.")
@handle_errors
def gate(project_dir: Path, run_ref: str, warn_ok: bool, as_json: bool) -> None:
    """Recompute the promotion decision of RUN from its stored records."""
    from harness.decision import decide_run

    project, store, run_id = open_run(project_dir, run_ref)
    decision = decide_run(project, store, run_id, write=False)
    if as_json:
        out.print_json(data=decision.to_json())
    else:
        print_decision(decision)
    sys.exit(decision.exit_code(warn_ok=warn_ok))


@click.command()
@stored_run
@click.option("--case", "cases", multiple=True, help="Only this case's trials (repeatable).")
@click.option("--failed", is_flag=True, help="Only trials that did not pass.")
@click.option(
    "--arm",
    type=click.Choice(["candidate", "baseline"]),
    default=None,
    help="Only the candidate's or the re-executed baseline's trials.",
)
@json_option("show")
@handle_errors
def show(
    project_dir: Path,
    run_ref: str,
    cases: tuple[str, ...],
    failed: bool,
    arm: str | None,
    as_json: bool,
) -> None:
    """Show a run: the decision first, then its release record and its trials' verdicts.

    The filters (--case, --failed, --arm) narrow the trial table and the --json trials.
    """
    from harness.report.schema import ShowDocument
    from harness.store.records import Outcome

    _, store, run_id = open_run(project_dir, run_ref)
    record = store.release(run_id)
    everything = store.trials(run_id)
    unknown = sorted(set(cases) - set(record.cases))
    if unknown:
        raise ConfigError(
            f"no such case in run {run_id}: {', '.join(unknown)} (it has "
            f"{', '.join(sorted(record.cases))})",
            field="--case",
        )
    trials = [
        t
        for t in everything
        if (not cases or t.key.case_id in cases)
        and (not failed or t.outcome is not Outcome.PASS)
        and (arm is None or t.key.arm.value == arm)
    ]
    results = store.results(run_id)
    if as_json:
        doc = ShowDocument(
            run_id=run_id, release=record, trials=tuple(trials), results=tuple(results)
        )
        click.echo(doc.model_dump_json(indent=2))
        return
    _print_stored_decision(results)
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
    table = Table(box=None, pad_edge=False)
    # The trial name is what a reviewer copies: never truncated or wrapped.
    table.add_column(
        "trial",
        no_wrap=True,
        overflow="fold",
        min_width=len(max((t.key.slug() for t in trials), key=len, default="trial")),
    )
    for col in ("verdict", "attempts", "stop"):
        table.add_column(col, no_wrap=True)
    # The harness's own seconds beside the verifier's command (— for records without steps).
    table.add_column("verifier s", justify="right", no_wrap=True)
    table.add_column("harness s", justify="right", no_wrap=True)
    table.add_column("reason", overflow="fold")
    for t in trials:
        v = t.verdict
        lineage = " → ".join(
            f"{a.verdict.outcome.value}"
            + (f"({a.verdict.failure_type.value})" if a.verdict.failure_type else "")
            for a in t.attempts
        )
        verdict = v.outcome.value + (f" ({v.failure_type.value})" if v.failure_type else "")
        own = t.overhead_s()
        ver = sum(a.verifier.duration_s for a in t.attempts if a.verifier)
        table.add_row(
            t.key.slug(),
            verdict,
            lineage if len(t.attempts) > 1 else "1",
            t.stop_reason,
            f"{ver:.2f}",
            "—" if own is None else f"{own:.2f}",
            v.reason[:200],
        )
    out.print(table, markup=False, highlight=False)
    shown = f"{len(trials)} of {len(everything)} trials shown"
    filters = [f for f, on in (("--case", cases), ("--failed", failed), ("--arm", arm)) if on]
    out.print(shown + (f" (filtered by {', '.join(filters)})" if filters else ""), highlight=False)


def _print_stored_decision(results: list[ResultRecord]) -> None:
    """Print the last stored gate decision: the verdict, then one line per reason."""
    if not results:
        out.print("[bold]not decided yet[/]: the run has not finished (no gate result stored)")
        return
    color = {"pass": "green", "warn": "yellow", "fail": "red", "blocked": "magenta"}
    verdict = results[-1].verdict
    out.print(
        f"[bold {color[verdict]}]{verdict.upper()}[/]  (`harness gate` recomputes it)",
        highlight=False,
    )
    for line in results[-1].reason_lines():
        out.print(
            f"  - {line}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    out.print("")


@click.command()
@project_option
@click.option("--release", default=None, help="Only runs of this release.")
@json_option("runs")
@handle_errors
def runs(project_dir: Path, release: str | None, as_json: bool) -> None:
    """List the runs in the store, oldest first: release, system, decision, pass rates."""
    from harness.report.history import RunsDocument, list_runs

    project, store = open_store(project_dir)
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

    table = Table(box=None, pad_edge=False)
    table.add_column("run", no_wrap=True)
    for col in (
        "release",
        "system",
        "started",
        "baseline",
        "decision",
        "cases",
        "k",
        "trials",
        "pass rate",
        "pass^k",
        "named",
    ):
        table.add_column(col, no_wrap=col != "named")
    for r in rows:
        c = r.candidate
        table.add_row(
            r.run_id,
            r.release,
            r.system_digest[7:19],
            f"{r.created_at:%Y-%m-%d %H:%M}",
            r.baseline or "—",
            r.verdict or "not decided",
            str(r.cases) + ("*" if r.partial else ""),
            str(r.k),
            str(c.trials) if c else "—",
            ci(c.pass_rate if c else None),
            ci(c.pass_hat_k if c else None),
            str(len(r.named_cases)) if r.verdict else "",
        )
    out.print(table, markup=False, highlight=False)
    for r in rows:
        if r.partial:
            out.print(
                f"* {r.run_id} is partial ({r.partial}): kept off the release trend",
                highlight=False,
            )
    if not rows:
        err.print("no runs" + (f" of release {release}" if release else ""), highlight=False)
