"""Read whole documents: logical records (quoted fields may span lines), header, comments."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, List, Optional, Tuple

from fieldkit.records import DEFAULT, Dialect, ParseError, split_record


def _open_quote_after(line: str, dialect: Dialect, in_quotes: bool) -> bool:
    """Whether a quoted field is still open at the end of ``line``.

    ``in_quotes`` says whether the line starts inside a quoted field (a continuation).
    Escaped characters never open or close a quoted field.
    """
    i = 0
    n = len(line)
    while i < n:
        ch = line[i]
        if dialect.escape is not None and ch == dialect.escape:
            i += 2
            continue
        if ch == dialect.quote:
            in_quotes = not in_quotes
        i += 1
    return in_quotes


def logical_records(text: str, dialect: Dialect = DEFAULT) -> Iterator[Tuple[int, str]]:
    """Yield ``(first_line_number, record_text)``; a quoted field may hold line breaks.

    Raises:
        ParseError: the document ends inside a quoted field.
    """
    pending: List[str] = []
    start = 0
    in_quotes = False
    for number, line in enumerate(text.splitlines(), start=1):
        if not pending:
            start = number
        pending.append(line)
        in_quotes = _open_quote_after(line, dialect, in_quotes)
        if not in_quotes:
            yield start, "\n".join(pending)
            pending = []
    if pending:
        raise ParseError("document ends inside a quoted field", line=start)


def parse_text(
    text: str,
    dialect: Dialect = DEFAULT,
    *,
    comment: Optional[str] = "#",
    skip_blank: bool = True,
) -> List[List[str]]:
    """Parse a document into rows of fields.

    Lines starting with ``comment`` and (by default) blank lines are skipped.

    Raises:
        ParseError: a malformed record, naming its line.
    """
    rows: List[List[str]] = []
    for number, record in logical_records(text, dialect):
        if skip_blank and not record.strip():
            continue
        if comment and record.lstrip().startswith(comment):
            continue
        rows.append(split_record(record, dialect, lineno=number))
    return rows


def read_file(path: Path, dialect: Dialect = DEFAULT, **options: object) -> List[List[str]]:
    """Read and parse the file at ``path`` (UTF-8)."""
    text = Path(path).read_text(encoding="utf-8")
    return parse_text(text, dialect, **options)  # type: ignore[arg-type]


def with_header(rows: List[List[str]]) -> Tuple[List[str], List[List[str]]]:
    """Split ``rows`` into the header (first row) and the data rows.

    Raises:
        ParseError: there is no header row, or a data row's width differs from the header's.
    """
    if not rows:
        raise ParseError("no header row")
    header, data = rows[0], rows[1:]
    for index, row in enumerate(data, start=2):
        if len(row) != len(header):
            raise ParseError(
                f"row {index} has {len(row)} fields, the header has {len(header)}"
            )
    return header, data
