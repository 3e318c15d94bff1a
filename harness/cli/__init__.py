"""The ``harness`` command line: parse, call the library, print, exit with a code.

Every command is a short pipeline of library calls; a :class:`~harness.errors.HarnessError`
becomes a one-line message on stderr and its exit code (see :mod:`harness.exitcodes`).

One module per command group: :mod:`~harness.cli.run` (``run`` and its progress view),
:mod:`~harness.cli.runs` (``gate``, ``show``, ``runs``), :mod:`~harness.cli.reports`
(``report``, ``export``, ``schema``), :mod:`~harness.cli.cases`, :mod:`~harness.cli.baseline`,
:mod:`~harness.cli.env` (``images``, ``env``), :mod:`~harness.cli.sandbox` and
:mod:`~harness.cli.policy`; what they share (consoles, error handling, common options) is
in :mod:`~harness.cli.common`. This module only assembles the root group :func:`main`.
"""

from __future__ import annotations

import click

from harness.cli import baseline, cases, env, policy, reports, run, runs, sandbox
from harness.version import __version__

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="harness")
def main() -> None:
    """Golden-set release testing for coding agents: execution decides whether work moves."""


for _command in (
    run.run,
    runs.gate,
    runs.show,
    runs.runs,
    reports.report,
    reports.export_cmd,
    reports.schema,
    cases.cases,
    baseline.baseline,
    env.images,
    env.env_group,
    sandbox.sandbox,
    policy.policy,
):
    main.add_command(_command)
