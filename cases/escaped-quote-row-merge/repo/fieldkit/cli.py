"""Command line: ``python3 -m fieldkit {parse,report,schema,config} ...``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import List, Optional

from fieldkit.coerce import CoercionError
from fieldkit.config import ConfigError, parse_config
from fieldkit.reader import read_file, with_header
from fieldkit.records import Dialect, ParseError
from fieldkit.report import build_report, render_json, render_text
from fieldkit.schema import Schema, SchemaError


def _dialect(args: argparse.Namespace) -> Dialect:
    delimiter = "\t" if args.delimiter == "tab" else args.delimiter
    return Dialect(delimiter=delimiter, strip=args.strip)


def _add_dialect_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--delimiter", default=",", help="field delimiter ('tab' for a tab)")
    p.add_argument("--strip", action="store_true", help="strip spaces around unquoted fields")


def _cmd_parse(args: argparse.Namespace) -> int:
    rows = read_file(Path(args.file), _dialect(args))
    if args.schema:
        header, data = with_header(rows)
        schema = Schema.parse(args.schema)
        if header != schema.names:
            raise SchemaError(f"header {header} does not match schema fields {schema.names}")
        for record in schema.apply(data, first_line=2):
            print(json.dumps(record, default=str))
    else:
        for row in rows:
            print(json.dumps(row))
    print(f"{len(rows)} rows", file=sys.stderr)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    header, data = with_header(read_file(Path(args.file), _dialect(args)))
    report = build_report(header, data)
    text = render_json(report) if args.format == "json" else render_text(report)
    if args.output:
        out = Path(args.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def _cmd_schema(args: argparse.Namespace) -> int:
    schema = Schema.parse(args.spec)
    print(json.dumps(schema.to_json_schema(args.title), indent=2))
    return 0


def _cmd_config(args: argparse.Namespace) -> int:
    config = parse_config(Path(args.file).read_text(encoding="utf-8"))
    if args.get:
        section, _, key = args.get.rpartition(".")
        try:
            print(config[section][key])
        except KeyError:
            print(f"fieldkit: no key {args.get!r}", file=sys.stderr)
            return 1
    else:
        print(json.dumps(config, indent=2, sort_keys=True))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``fieldkit`` command."""
    parser = argparse.ArgumentParser(prog="fieldkit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("parse", help="print each record as a JSON list (or typed object)")
    p.add_argument("file")
    p.add_argument("--schema", help="typed fields, e.g. 'id:int,name,score:float?'")
    _add_dialect_options(p)
    p.set_defaults(func=_cmd_parse)

    p = sub.add_parser("report", help="summarize each column of a table with a header")
    p.add_argument("file")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--output", help="write the report to this file instead of standard output")
    _add_dialect_options(p)
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("schema", help="print the JSON Schema of a field spec")
    p.add_argument("spec")
    p.add_argument("--title", default="record")
    p.set_defaults(func=_cmd_schema)

    p = sub.add_parser("config", help="print a config file with references resolved")
    p.add_argument("file")
    p.add_argument("--get", help="print one value, e.g. 'paths.root'")
    p.set_defaults(func=_cmd_config)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line; returns the exit status (2 for bad input)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (ParseError, SchemaError, CoercionError, ConfigError, OSError, ValueError) as exc:
        print(f"fieldkit: error: {exc}", file=sys.stderr)
        return 2
