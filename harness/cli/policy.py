"""``harness policy``: simulate what the promotion gate can and cannot detect."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from harness.cli.common import err, handle_errors, out, project_option

if TYPE_CHECKING:
    from harness.pool_check import PoolCheck
    from harness.project import Project


@click.group()
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
@click.option(
    "--pool-samples",
    type=click.IntRange(5, 10_000),
    default=40,
    show_default=True,
    help="Simulated pools per row of the baseline-pool check (policy baseline.pool).",
)
@click.option(
    "--pool-releases",
    type=click.IntRange(5, 10_000),
    default=50,
    show_default=True,
    help="Unchanged releases judged against each simulated pool.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handle_errors
def policy_check(
    project_dir: Path,
    baseline: str | None,
    k: int | None,
    reps: int,
    seed: int,
    recommend: bool,
    target: float,
    no_cache: bool,
    pool_samples: int,
    pool_releases: int,
    as_json: bool,
) -> None:
    """Simulate this gate for the project's cases, k and baseline: false alarms, detection."""
    from harness.gate.opchar import check_project
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
    pooled = _pool_check(project, baseline, k, seed, pool_samples, pool_releases)
    if as_json:
        data = result.model_dump(mode="json")
        data["pool"] = pooled.model_dump(mode="json") if pooled is not None else None
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        for line in result.render():
            out.print(line, highlight=False, soft_wrap=True)
        if pooled is not None:
            from harness.pool_check import pool_check_lines

            out.print("")
            for line in pool_check_lines(pooled):
                out.print(line, highlight=False, soft_wrap=True)
    source = "cached result" if cached else f"simulated in {result.seconds:.1f}s"
    err.print(f"{source} · {project.store_dir.name}/cache", highlight=False)


def _pool_check(
    project: Project, baseline: str | None, k: int | None, seed: int, pools: int, releases: int
) -> PoolCheck | None:
    """Return the baseline pool's sizes, sources and conditional rates (if the policy keeps one)."""
    from harness.gate.opchar import choose_baseline
    from harness.gate.policy import load_policy
    from harness.pool_check import pool_check
    from harness.store.baseline import load_baseline

    if project.policy_path is None:
        return None
    policy = load_policy(project.policy_path).policy
    if policy.baseline.pool is None:
        return None
    name = choose_baseline(project.baselines_dir, baseline)
    kk = k or load_baseline(project.baselines_dir, name).file.release.k
    return pool_check(project, policy, name, kk, pools=pools, releases=releases, seed=seed)
