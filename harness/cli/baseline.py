"""``harness baseline``: promote a finished run to a named baseline."""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.common import handle_errors, open_store, out, project_option


@click.group()
def baseline() -> None:
    """Promote and inspect baselines."""


@baseline.command("promote")
@project_option
@click.argument("run_ref")
@click.option("--name", required=True, help="Baseline name, e.g. production-previous.")
@click.option("--force", is_flag=True, help="Replace an existing baseline of that name.")
@handle_errors
def baseline_promote(project_dir: Path, run_ref: str, name: str, force: bool) -> None:
    """Store finished run RUN as baseline NAME (git-friendly files)."""
    from harness.store.baseline import promote

    project, store = open_store(project_dir)
    dest = promote(store, store.resolve_run(run_ref), name, project.baselines_dir, force=force)
    out.print(f"promoted to {dest}", highlight=False)
