"""``harness images`` and ``harness env``: build what trials execute in."""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.common import handle_errors, out, project_option


@click.group()
def images() -> None:
    """Container images of cases (Docker backend)."""


@images.command("build")
@project_option
@click.option("--case", "only", multiple=True, help="Build only this case (repeatable).")
@handle_errors
def images_build(project_dir: Path, only: tuple[str, ...]) -> None:
    """Build each case's image (base image + starting tree); a no-op when unchanged."""
    from harness.cases.load import load_cases
    from harness.env.plan import prepare_for_backend
    from harness.planning import case_images
    from harness.project import load_project

    project = load_project(project_dir)
    active = [lc for lc in load_cases(project.cases_dir, only or None) if lc.active]
    _, env_bases = prepare_for_backend(project, active, {}, "docker")
    built = case_images(active, env_bases)
    for cid, image_id in sorted(built.items()):
        out.print(f"{cid}: {image_id}", highlight=False)


@click.group("env")
def env_group() -> None:
    """Lock and build the declared Python environments (see docs/environments.md)."""


@env_group.command("lock")
@project_option
@handle_errors
def env_lock(project_dir: Path) -> None:
    """Write each declared environment's lock (pins + hashes) from its requirements."""
    from harness.env.cli import lock_all
    from harness.project import load_project

    for line in lock_all(load_project(project_dir)):
        out.print(line, highlight=False)


@env_group.command("build")
@project_option
@handle_errors
def env_build(project_dir: Path) -> None:
    """Build (or reuse from the cache) every declared environment; print their digests."""
    from harness.env.cli import build_all
    from harness.project import load_project

    for line in build_all(load_project(project_dir)):
        out.print(line, highlight=False)
