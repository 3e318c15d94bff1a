"""Rendering of ``harness cases new``: what was derived and what a human should still read."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rich.markup import escape

from harness.cli.common import err, out
from harness.errors import ConfigError, HarnessError
from harness.exitcodes import ExitCode, exit_for_exception

__all__ = ["read_commits", "run_new"]


def read_commits(path: Path) -> list[str]:
    """Read the commits of a ``--commits-file``: one a line, blank lines and ``#`` comments ignored.

    Raises:
        ConfigError: the file cannot be read or names no commit.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the commits file: {exc}", file=path) from None
    found = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    found = [c for c in found if c]
    if not found:
        raise ConfigError("the commits file names no commit", file=path)
    return found


def _show(result: Any) -> None:
    d = result.derived
    p = out.print
    p(f"[green]✓[/] made case {result.case_id} from commit {result.commit[:12]}", highlight=False)
    p(f"  folder           {result.dir}", highlight=False)
    p(f"  starting state   parent {result.parent[:12]} (no history of the fix)", highlight=False)
    p(f"  hidden tests     {', '.join(result.tests)}", highlight=False)
    p(f"  reference.patch  {len(result.source)} file(s): {', '.join(result.source[:6])}")
    env = result.env.identity
    p(
        f"  environment      {result.env.digest[:19]} python {env.version}, "
        f"{len(env.distributions)} distributions, from "
        f"{', '.join(result.env_sources) or 'pytest alone'}",
        highlight=False,
    )
    p(f"  fail_to_pass     {len(d.fail_to_pass)}: {', '.join(d.fail_to_pass[:8])}", highlight=False)
    p(
        f"  pass_to_pass     {len(d.pass_to_pass)}"
        + (f" (sampled; {d.sampled_out} left out)" if d.sampled_out else ""),
        highlight=False,
    )
    p(f"  flaky (left out) {len(d.flaky)}: {', '.join(d.flaky[:8])}", highlight=False)
    p(f"  deselected       {len(d.deselect) + len(d.ignore)}", highlight=False)
    p(f"  validated        {escape(result.validation)}", highlight=False)
    p(f"  locked           {result.digest}", highlight=False)
    steps = ", ".join(f"{name} {sec:.1f}s" for name, sec in result.steps)
    p(f"  took             {result.seconds:.1f}s ({steps})", highlight=False)
    p("[bold]read before trusting it:[/]")
    for note in result.to_read:
        p(f"  - {escape(note)}", highlight=False)
    p("[bold]request:[/]")
    for line in result.request.splitlines():
        p(f"  │ {escape(line)}", highlight=False)


def run_new(
    project_dir: Path,
    case_id: str,
    repo: Path,
    commits: tuple[str, ...],
    *,
    commits_file: Path | None,
    tests: tuple[str, ...],
    request_file: Path | None,
    keep_git: bool,
    requirements: Path | None,
    python: str,
    repeats: int,
    p2p: int,
    timeout: float,
    backend: str | None,
    jobs: int | None,
) -> int:
    """Make one case (one commit) or one per commit (batch); return the exit code.

    One commit: its error propagates (the CLI maps it). Several: each failure is printed
    and the others still run; the exit code is the worst one.
    """
    from harness.authoring import DEFAULT_TEST_GLOBS, NewCaseOptions, batch_case_id, new_case
    from harness.project import load_project
    from harness.sandbox.registry import get_backend

    wanted = [*commits, *(read_commits(commits_file) if commits_file else [])]
    if not wanted:
        raise ConfigError("name the fix commit with --commit SHA (or --commits-file FILE)")
    project = load_project(project_dir)
    sandbox = get_backend(backend or project.file.backend)
    options = NewCaseOptions(
        tests=tests or DEFAULT_TEST_GLOBS,
        request_file=request_file,
        keep_git=keep_git,
        requirements=requirements,
        python=python,
        repeats=repeats,
        pass_to_pass=p2p,
        timeout=timeout,
        jobs=jobs or os.cpu_count() or 1,
    )
    if len(wanted) == 1:
        _show(new_case(project, case_id, repo, wanted[0], sandbox, options))
        return ExitCode.PASS
    worst, made = ExitCode.PASS, 0
    for commit in wanted:
        cid = batch_case_id(case_id, repo, commit)
        try:
            _show(new_case(project, cid, repo, commit, sandbox, options))
            made += 1
        except HarnessError as exc:
            code, prefix = exit_for_exception(exc)
            worst = max(worst, code)
            err.print(
                f"[red]✗[/] {cid} (commit {commit}): {prefix}: {escape(str(exc))}",
                highlight=False,
                soft_wrap=True,
            )
    out.print(f"{made} of {len(wanted)} commit(s) became validated cases", highlight=False)
    return worst
