"""Commands that write documents: ``harness report``, ``harness export``, ``harness schema``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from harness.cli.common import err, handle_errors, open_run, out, stored_run

_FORMAT_FLAGS = ("html", "junit", "markdown", "json")


@click.command()
@stored_run
@click.option(
    "--format",
    "formats",
    multiple=True,
    type=click.Choice(_FORMAT_FLAGS),
    help="Write only these files into the report folder (repeatable; default: all).",
)
@click.option("--junit-baseline", is_flag=True, help="Add the re-executed baseline to junit.xml.")
@click.option(
    "--junit",
    "junit_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also copy the JUnit XML here.",
)
@click.option(
    "--summary",
    "summary_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also copy the Markdown summary here (CI job summary).",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also copy report.json here (`harness schema report`).",
)
@handle_errors
def report(
    project_dir: Path,
    run_ref: str,
    formats: tuple[str, ...],
    junit_baseline: bool,
    junit_path: Path | None,
    summary_path: Path | None,
    json_path: Path | None,
) -> None:
    """Write the report folder reports/RUN/ (HTML + evidence, JUnit, Markdown, JSON)."""
    from harness.errors import ConfigError
    from harness.report import write_report_folder
    from harness.report.folder import write_file

    project, store, run_id = open_run(project_dir, run_ref)
    extras = {
        "junit": (junit_path, "--junit"),
        "markdown": (summary_path, "--summary"),
        "json": (json_path, "--json"),
    }
    for path, option in extras.values():
        if path is not None and path.is_dir():
            raise ConfigError(
                "is a directory; expected a file path to write", file=path, field=option
            )
    wanted = set(formats or _FORMAT_FLAGS) | {k for k, (p, _) in extras.items() if p}
    folder = write_report_folder(
        project,
        store,
        run_id,
        formats=[f for f in _FORMAT_FLAGS if f in wanted],  # type: ignore[misc]
        junit_baseline=junit_baseline,
    )
    for p in folder.paths:
        out.print(str(p), highlight=False)
    made = {"junit": folder.junit, "markdown": folder.summary, "json": folder.json_path}
    for key, (path, option) in extras.items():
        src = made[key]
        if path is not None and src is not None:
            out.print(str(write_file(path, src.read_bytes(), option)), highlight=False)
    if folder.history is not None:
        out.print(f"history: {folder.history}", highlight=False)
    if folder.latest is not None:
        out.print(f"latest: {folder.latest}", highlight=False)


@click.command("export")
@stored_run
@click.option(
    "--table",
    "table_name",
    type=click.Choice(["trials", "cases"]),
    default="trials",
    show_default=True,
    help="A row per trial, or per case and arm.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "parquet"]),
    default="csv",
    show_default=True,
    help="parquet needs pyarrow (harness[parquet]).",
)
@click.option(
    "--output",
    "-o",
    "output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="File to write (default: RUN-TABLE.FORMAT here); - writes to standard output.",
)
@handle_errors
def export_cmd(
    project_dir: Path, run_ref: str, table_name: str, fmt: str, output: Path | None
) -> None:
    """Export a run's trials or cases as CSV or Parquet."""
    from harness.report.export import (
        CASE_COLUMNS,
        TRIAL_COLUMNS,
        case_rows,
        table_bytes,
        trial_rows,
        write_table,
    )

    project, store, run_id = open_run(project_dir, run_ref)
    path = output or Path(f"{run_id}-{table_name}.{fmt}")
    if table_name == "trials":
        rows, columns = trial_rows(run_id, store.trials(run_id)), TRIAL_COLUMNS
    else:
        from harness.report import build_report

        rows, columns = case_rows(build_report(project, store, run_id)), CASE_COLUMNS
    if str(output) == "-":
        body = table_bytes(rows, columns, fmt)  # type: ignore[arg-type]
        sys.stdout.buffer.write(body)
        sys.stdout.buffer.flush()
        err.print(f"standard output ({len(rows)} rows)", highlight=False)
        return
    write_table(rows, columns, fmt, path)  # type: ignore[arg-type]
    out.print(f"{path} ({len(rows)} rows)", highlight=False)


@click.command()
@click.argument(
    "name", required=False, type=click.Choice(["gate", "report", "runs", "show", "summary"])
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write every schema as NAME.schema.json into this folder.",
)
@handle_errors
def schema(name: str | None, out_dir: Path | None) -> None:
    """Print the JSON schema of a --json output (gate, report, runs, show, summary)."""
    from harness.errors import ConfigError
    from harness.report.folder import write_file
    from harness.report.schema import SCHEMAS, json_schema

    if out_dir is not None:
        for key in sorted(SCHEMAS) if name is None else [name]:
            body = json.dumps(json_schema(key), indent=2, sort_keys=True) + "\n"
            out.print(
                str(write_file(out_dir / f"{key}.schema.json", body.encode(), "--out")),
                highlight=False,
            )
        return
    if name is None:
        raise ConfigError(
            "name a schema (gate, report, runs, show, summary) or give --out", field="NAME"
        )
    click.echo(json.dumps(json_schema(name), indent=2, sort_keys=True))
