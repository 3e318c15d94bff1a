"""fieldkit: delimited records and small config files, stdlib only."""

from fieldkit.coerce import CoercionError, coerce
from fieldkit.config import ConfigError, parse_config
from fieldkit.reader import parse_text, read_file
from fieldkit.records import DEFAULT, Dialect, ParseError, join_record, split_record
from fieldkit.report import build_report, render_text
from fieldkit.schema import Field, Schema, SchemaError

__all__ = [
    "DEFAULT",
    "CoercionError",
    "ConfigError",
    "Dialect",
    "Field",
    "ParseError",
    "Schema",
    "SchemaError",
    "build_report",
    "coerce",
    "join_record",
    "parse_config",
    "parse_text",
    "read_file",
    "render_text",
    "split_record",
]

__version__ = "0.4.0"
