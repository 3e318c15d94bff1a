"""``harness sandbox``: remove what killed runs left behind."""

from __future__ import annotations

from typing import Any

import click

from harness.cli.common import handle_errors, out


@click.group()
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
@handle_errors
def sandbox_prune(everything: bool, labels: dict[str, str]) -> None:
    """Remove what killed runs left behind: containers, volumes, local sessions.

    Only leftovers whose owning harness process is gone are removed (each carries its
    owner's host, pid and boot id), so this is safe while other runs are in progress.
    """
    from harness.env.build import cache_root
    from harness.sandbox.prune import prune_all

    for line in prune_all(cache=cache_root(), everything=everything, labels=labels):
        out.print(line, highlight=False, markup=False)
