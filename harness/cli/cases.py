"""``harness cases``: list, lock, check and validate the golden-set cases."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from harness.cli.common import err, handle_errors, out, project_option
from harness.exitcodes import ExitCode


@click.group()
def cases() -> None:
    """List, lock, check and validate the golden-set cases."""


@cases.command("list")
@project_option
@handle_errors
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
@handle_errors
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
@handle_errors
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
@handle_errors
def cases_validate(
    project_dir: Path, backend: str | None, only: tuple[str, ...], downgrade: tuple[str, ...]
) -> None:
    """Prove each verifier fails on the starting state and passes on the reference."""
    from harness.cases.load import load_cases
    from harness.preflight import validate_in_envs
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
    for lc in loaded:
        verifier = lc.case.verifier if lc.case.lane != "judgment" else None
        if verifier is not None and not any(a.rule == "junit" for a in verifier.artifacts):
            out.print(
                f"[yellow]![/] {lc.id}: judged by its verifier's exit status alone (no JUnit "
                "artifact): no test count and no evidence stream, so code under test can end "
                "the run with status 0 itself; add an artifact with `rule: junit` and "
                "`min_tests`",
                highlight=False,
                soft_wrap=True,
            )
    if broken:
        err.print(f"{broken} case(s) have a verifier that cannot go red or cannot go green")
        sys.exit(ExitCode.USAGE)


@cases.command("new")
@project_option
@click.argument("case_id", metavar="ID")
@click.option(
    "--from-git",
    "repo",
    required=True,
    type=click.Path(path_type=Path),
    help="Git repository holding the fix commit.",
)
@click.option(
    "--commit",
    "commits",
    multiple=True,
    help="The fix commit (repeatable: one case per commit, named ID-<sha8>).",
)
@click.option(
    "--commits-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="A file of fix commits, one a line (# comments): one case each, named ID-<sha8>.",
)
@click.option("--tests", "tests", multiple=True, help="Glob of test files (repeatable).")
@click.option("--request", "request_file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--keep-git", is_flag=True, help="Keep the parent as a git repository.")
@click.option("--requirements", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--python", default=">=3.11", show_default=True)
@click.option("--repeats", type=click.IntRange(1, 20), default=3, show_default=True)
@click.option("--pass-to-pass", "p2p", type=click.IntRange(0), default=0, help="0: all.")
@click.option("--timeout", type=click.FloatRange(1, 7200), default=300.0, show_default=True)
@click.option("--backend", type=click.Choice(["local", "docker"]), default=None)
@click.option(
    "--jobs",
    type=click.IntRange(1, 64),
    default=None,
    help="Test runs of the derivation side by side (default: core count).",
)
@handle_errors
def cases_new(
    project_dir: Path, case_id: str, repo: Path, commits: tuple[str, ...], **kw: Any
) -> None:
    """Make a validated, locked case from a fix commit (see docs/cases-from-git.md)."""
    from harness.cli.authoring import run_new

    sys.exit(run_new(project_dir, case_id, repo, commits, **kw))
