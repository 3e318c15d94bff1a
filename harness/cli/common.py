"""What every command module shares: the consoles, error handling and common options.

:func:`handle_errors` is the one place where an exception becomes a one-line message on
stderr and its exit code (see :mod:`harness.exitcodes`); every command is wrapped in it.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape

from harness.exitcodes import ExitCode, exit_for_exception
from harness.version import __version__

if TYPE_CHECKING:
    from harness.project import Project
    from harness.store.store import Store

F = TypeVar("F", bound=Callable[..., Any])
err = Console(stderr=True, width=None if sys.stderr.isatty() else 140)
out = Console(width=None if sys.stdout.isatty() else 140)


def handle_errors(fn: F) -> F:
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


EXIT_CODES = """\b
Exit codes (the contract CI reads):
  0  PASS     the gate passed
  1  FAIL     the gate failed: a significant, material regression
  2  USAGE    usage or configuration error (bad option, case, policy, lock)
  3  WARN     the gate warned (--warn-ok maps it to 0)
  4  BLOCKED  nothing could be judged: infra/evaluator errors, drift, invalid run
  5  INTERNAL a bug in harness itself (please report it)
"""
"""The ``--help`` epilog of the commands whose exit code is a gate verdict."""


def stored_run(fn: F) -> F:
    """Add the options of a command that reads one stored run: ``--project`` and ``RUN``."""
    return project_option(click.argument("run_ref", default="latest")(fn))


def json_option(schema_name: str) -> Callable[[F], F]:
    """``--json``: print the document ``harness schema <schema_name>`` describes."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help=f"Machine-readable output (`harness schema {schema_name}`).",
    )


def open_store(project_dir: Path) -> tuple[Project, Store]:
    """Load the project in ``project_dir`` and open its store."""
    from harness.project import load_project
    from harness.store.store import Store

    project = load_project(project_dir)
    return project, Store(project.store_dir)


def open_run(project_dir: Path, run_ref: str) -> tuple[Project, Store, str]:
    """Open the project's store and resolve ``run_ref`` (``latest``, an id) to a run id."""
    project, store = open_store(project_dir)
    return project, store, store.resolve_run(run_ref)


def print_decision(decision: Any) -> None:
    """Print a gate decision: the coloured verdict and headline, then one line per reason."""
    color = {"pass": "green", "warn": "yellow", "fail": "red", "blocked": "magenta"}[
        decision.verdict
    ]
    out.print(f"[bold {color}]{decision.verdict.upper()}[/]  {decision.headline}", highlight=False)
    for reason in decision.reasons:
        out.print(f"  - {reason}", highlight=False, soft_wrap=True, markup=False)
