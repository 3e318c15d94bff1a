"""Column summaries of a parsed table, as an aligned text table or JSON."""

from __future__ import annotations

import json
from typing import Dict, List, Optional, Sequence


def _number(text: str) -> Optional[float]:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value else None


def summarize(name: str, values: Sequence[str]) -> Dict[str, object]:
    """Summary of one column: counts, and min/max/mean when every value is numeric."""
    filled = [v for v in values if v.strip() != ""]
    column: Dict[str, object] = {
        "name": name,
        "filled": len(filled),
        "empty": len(values) - len(filled),
        "distinct": len(set(filled)),
    }
    numbers = [_number(v) for v in filled]
    if filled and all(n is not None for n in numbers):
        nums = [n for n in numbers if n is not None]
        column["kind"] = "number"
        column["min"] = min(nums)
        column["max"] = max(nums)
        column["mean"] = round(sum(nums) / len(nums), 6)
    else:
        column["kind"] = "text"
    return column


def build_report(header: Sequence[str], rows: Sequence[Sequence[str]]) -> Dict[str, object]:
    """Report on a table: the row count and one summary per column."""
    columns = [summarize(name, [row[i] for row in rows]) for i, name in enumerate(header)]
    return {"rows": len(rows), "columns": columns}


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def render_text(report: Dict[str, object]) -> str:
    """An aligned plain-text table, one line per column."""
    keys = ["name", "kind", "filled", "empty", "distinct", "min", "max", "mean"]
    columns = report["columns"]
    assert isinstance(columns, list)
    table: List[List[str]] = [keys]
    for col in columns:
        table.append([_cell(col.get(k)) for k in keys])
    widths = [max(len(r[i]) for r in table) for i in range(len(keys))]
    lines = [f"{report['rows']} rows"]
    for r in table:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
    return "\n".join(lines) + "\n"


def render_json(report: Dict[str, object]) -> str:
    """The report as stable JSON (sorted keys, two-space indent, trailing newline)."""
    return json.dumps(report, indent=2, sort_keys=True) + "\n"
