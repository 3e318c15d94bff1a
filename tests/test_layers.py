"""The import layers of pyproject.toml's ``[tool.importlinter]`` contracts, checked as CI runs them.

``lint-imports`` reads every import in ``harness/`` (module level, inside functions and under
``TYPE_CHECKING`` alike) and fails when one runs back up a layer or joins two modules a
``|`` keeps apart. Beside it: every module sits in some layer (a new module cannot slip past
the contract), and the only import circle left is the gateway's type-only one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]

# The gateway and its link for workers name each other's types; at run time only the
# gateway imports the link, inside a function.
ALLOWED_CIRCLE = {"harness.gateway._gateway", "harness.gateway._link"}


def _env() -> dict[str, str]:
    # Analyse this checkout, not whichever copy of the package is installed.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    # The folder contract; the others order the modules inside one folder.
    (contract,) = [c for c in config["contracts"] if "containers" not in c]
    return [[m.strip() for m in layer.split("|")] for layer in contract["layers"]]


def _modules() -> list[str]:
    found = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found.append(".".join(parts))
    return found


def test_the_layer_contract_is_kept():
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command;"
         " sys.exit(lint_imports_command())", "--no-cache"],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 kept, 0 broken" in proc.stdout


def test_every_module_sits_in_a_layer():
    named = [m for layer in _layers() for m in layer]
    # The package's own __init__ is the public API above every layer.
    containers = {"harness"}
    unplaced = [
        mod
        for mod in _modules()
        if mod not in containers and not any(mod == n or mod.startswith(n + ".") for n in named)
    ]
    assert unplaced == []


def _circles(graph: grimp.ImportGraph) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[set[str]] = []
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(component)
    return circles


def test_no_import_circle_but_the_gateways_type_only_one():
    graph = grimp.build_graph("harness", cache_dir=None)
    assert _circles(graph) == [ALLOWED_CIRCLE]
    runtime = grimp.build_graph("harness", cache_dir=None, exclude_type_checking_imports=True)
    assert _circles(runtime) == []


def test_the_cli_starts_without_scipy() -> None:
    """scipy is imported where the gate computes, not at start-up: every command (and every
    CLI call a test or a CI job makes) paid about half a second of CPU for it."""
    code = (
        "import sys, harness.cli, harness.report.schema, harness.decision\n"
        "sys.exit(1 if [m for m in sys.modules if m.split('.')[0] == 'scipy'] else 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
