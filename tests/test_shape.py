"""The shape of the code in ``harness/``: no function over 100 lines, the formatter formats.

A function is measured as ``ast`` sees it (its ``def`` line to its last line, decorators
aside), nested functions and methods alike. ``# fmt: skip`` / ``# fmt: off`` is kept only
where an aligned table reads better than the formatter's layout.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "harness"
MAX_LINES = 100

# Every formatter pragma kept: (file relative to the repo, the top-level name whose statement
# it lays out) → how many. Only an aligned table that reads better than the formatter's layout.
FMT_ALLOWED = {
    ("harness/sandbox/classify.py", "RULES"): 1,  # one aligned row per termination rule
}
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


def formatter_pragmas(path: Path) -> list[str]:
    """Return, for each ``# fmt: skip``/``off`` comment in ``path``, the top-level name it is in.

    The name is the function's or class's, or the assigned name of a module-level statement;
    ``<module>`` for a comment outside any of them. Strings that look like a pragma do not count.
    """
    text = path.read_text(encoding="utf-8")
    spans = []
    for node in ast.parse(text, filename=str(path)).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = node.name
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            name = node.target.id
        else:
            name = type(node).__name__
        spans.append((node.lineno, node.end_lineno, name))
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT and _FMT.search(tok.string):
            line = tok.start[0]
            out.append(next((n for a, b, n in spans if a <= line <= (b or a)), "<module>"))
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


def test_pragmas_are_found_in_comments_and_named(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "TABLE = (\n    (1, 2),\n)  # fmt: skip\n"
        'NOT_ONE = "# fmt: skip"\n'
        "def f(x):\n    return (x,\n            x)  # fmt: skip\n"
        "# fmt: off\n"
    )
    assert formatter_pragmas(src) == ["TABLE", "f", "<module>"]


def test_formatter_pragmas_only_where_allowed() -> None:
    found = Counter((_rel(path), name) for path in _sources() for name in formatter_pragmas(path))
    extra = {k: n for k, n in found.items() if n > FMT_ALLOWED.get(k, 0)}
    where = ", ".join(f"{f}:{name} ×{n}" for (f, name), n in sorted(extra.items()))
    assert not extra, f"# fmt: skip/off outside an allowed table (let ruff lay it out): {where}"
    gone = {k: n for k, n in FMT_ALLOWED.items() if found.get(k, 0) < n}
    assert not gone, f"allowed pragmas no longer there (shrink FMT_ALLOWED): {gone}"
