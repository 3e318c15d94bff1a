"""Split one record into fields and join fields back into one record.

A record is one logical line. A field may be quoted (``"a,b"``); inside quotes a doubled
quote (``""``) or an escaped quote (``\\"``) stands for one quote character. The escape
character also works outside quotes (``a\\,b`` is the single field ``a,b``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence


class ParseError(ValueError):
    """A record cannot be split; carries the 1-based line and column when known."""

    def __init__(self, message: str, *, line: Optional[int] = None, column: Optional[int] = None):
        self.line = line
        self.column = column
        where = ""
        if line is not None:
            where = f"line {line}"
            if column is not None:
                where += f", column {column}"
            where += ": "
        super().__init__(where + message)


@dataclass(frozen=True)
class Dialect:
    """How records are written: delimiter, quote and escape characters, whitespace."""

    delimiter: str = ","
    quote: str = '"'
    escape: Optional[str] = "\\"
    strip: bool = False
    """Strip whitespace around unquoted fields."""

    def __post_init__(self) -> None:
        chars = [self.delimiter, self.quote] + ([self.escape] if self.escape else [])
        for ch in chars:
            if len(ch) != 1:
                raise ValueError(f"dialect characters must be single characters, got {ch!r}")
            if ch in "\r\n":
                raise ValueError("dialect characters cannot be line breaks")
        if len(set(chars)) != len(chars):
            raise ValueError(f"delimiter, quote and escape must differ, got {chars!r}")


DEFAULT = Dialect()
TAB = Dialect(delimiter="\t")


def _finish(buf: List[str], quoted: bool, dialect: Dialect) -> str:
    value = "".join(buf)
    if dialect.strip and not quoted:
        value = value.strip()
    return value


def split_record(line: str, dialect: Dialect = DEFAULT, *, lineno: Optional[int] = None) -> List[str]:
    """Split ``line`` into its fields.

    Raises:
        ParseError: an unterminated quoted field, or text after a closing quote.
    """
    fields: List[str] = []
    buf: List[str] = []
    in_quotes = False
    quoted = False
    closed = False
    i = 0
    n = len(line)
    while i < n:
        ch = line[i]
        if in_quotes:
            if dialect.escape is not None and ch == dialect.escape and i + 1 < n:
                buf.append(line[i + 1])
                i += 2
                continue
            if ch == dialect.quote:
                if i + 1 < n and line[i + 1] == dialect.quote:
                    buf.append(ch)
                    i += 2
                    continue
                in_quotes = False
                closed = True
                i += 1
                continue
            buf.append(ch)
            i += 1
            continue
        if ch == dialect.delimiter:
            fields.append(_finish(buf, quoted, dialect))
            buf, quoted, closed = [], False, False
            i += 1
            continue
        if closed:
            if ch.isspace():
                i += 1
                continue
            raise ParseError(f"unexpected {ch!r} after a closing quote", line=lineno, column=i + 1)
        if ch == dialect.quote and not "".join(buf).strip():
            buf = []
            in_quotes = True
            quoted = True
            i += 1
            continue
        if dialect.escape is not None and ch == dialect.escape and i + 1 < n:
            buf.append(line[i + 1])
            i += 2
            continue
        buf.append(ch)
        i += 1
    if in_quotes:
        raise ParseError("unterminated quoted field", line=lineno, column=n)
    fields.append(_finish(buf, quoted, dialect))
    return fields


def _needs_quotes(value: str, dialect: Dialect) -> bool:
    if value == "":
        return False
    specials = {dialect.delimiter, dialect.quote, "\n", "\r"}
    if dialect.escape is not None:
        specials.add(dialect.escape)
    if any(ch in specials for ch in value):
        return True
    return value != value.strip()


def _quote(value: str, dialect: Dialect) -> str:
    if dialect.escape is not None:
        value = value.replace(dialect.escape, dialect.escape * 2)
    value = value.replace(dialect.quote, dialect.quote * 2)
    return f"{dialect.quote}{value}{dialect.quote}"


def join_record(fields: Sequence[object], dialect: Dialect = DEFAULT) -> str:
    """Join ``fields`` into one record; ``split_record`` gives the same fields back.

    ``None`` is written as an empty field; other values with ``str()``. A field is quoted
    only when it needs to be (delimiter, quote, escape, line break, surrounding spaces).
    """
    out = []
    for field in fields:
        value = "" if field is None else str(field)
        out.append(_quote(value, dialect) if _needs_quotes(value, dialect) else value)
    return dialect.delimiter.join(out)
