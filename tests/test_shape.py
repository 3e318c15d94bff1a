"""The shape of the code in ``harness/``: no function over 100 lines, the formatter formats.

A function is measured as ``ast`` sees it (its ``def`` line to its last line, decorators
aside), nested functions and methods alike. ``# fmt: skip`` / ``# fmt: off`` is kept only
where an aligned table reads better than the formatter's layout.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "harness"
MAX_LINES = 100

# Where a formatter pragma may stay: a file or a folder relative to the repo.
FMT_ALLOWED = (
    "harness/sandbox/classify.py",  # RULES: one aligned row per termination rule
    "harness/report/",  # not reformatted yet
)
_FMT = re.compile(r"#\s*fmt:\s*(skip|off)\b")


def _sources() -> list[Path]:
    return sorted(HARNESS.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def long_functions(path: Path) -> list[tuple[str, int]]:
    """Return (name, lines) of every function in ``path`` over :data:`MAX_LINES`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_LINES:
                out.append((node.name, lines))
    return out


def test_the_walk_sees_the_package() -> None:
    files = _sources()
    assert len(files) > 50 and HARNESS / "gate" / "decide.py" in files


def test_measure_counts_def_to_last_line(tmp_path: Path) -> None:
    body = [f"x{i} = {i}" for i in range(MAX_LINES - 1)]
    at_limit = tmp_path / "at_limit.py"
    at_limit.write_text("def f():\n" + "".join(f"    {line}\n" for line in body))
    assert long_functions(at_limit) == []
    over = tmp_path / "over.py"  # a method one line longer than the limit
    over.write_text(
        "class C:\n    def g(self):\n" + "".join(f"        {x}\n" for x in [*body, "y"])
    )
    assert long_functions(over) == [("g", MAX_LINES + 1)]


def test_no_function_over_100_lines() -> None:
    found = [
        f"{_rel(path)}:{name} is {lines} lines"
        for path in _sources()
        for name, lines in long_functions(path)
    ]
    assert not found, (
        f"functions over {MAX_LINES} lines (split them into named helpers): " + "; ".join(found)
    )


def test_formatter_pragmas_only_where_allowed() -> None:
    found = [
        f"{_rel(path)}:{n}"
        for path in _sources()
        if not _rel(path).startswith(FMT_ALLOWED)
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _FMT.search(line)
    ]
    assert not found, "# fmt: skip/off outside an allowed table: " + ", ".join(found)
