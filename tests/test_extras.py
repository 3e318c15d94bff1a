"""The base install stays lean: Docker and Dask are extras, and their absence is a clear error."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_docker_dask_and_test_tools_are_not_base_dependencies():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = " ".join(meta["dependencies"])
    for name in ("docker", "dask", "distributed", "pytest"):
        assert name not in base, name
    assert meta["optional-dependencies"]["docker"]
    assert meta["optional-dependencies"]["dask"]


def _without(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # Make `import <module>` fail as it would where the extra is not installed.
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules[{module!r}] = None
        from harness.cli import main
        sys.argv = ["harness", *{list(args)!r}]
        main()
        """
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_docker_backend_without_the_sdk_names_the_extra(tmp_path):
    done = _without("docker", "sandbox", "prune", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "harness[docker]" in done.stdout
    done = _without("docker", "images", "build", "--project", str(ROOT), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "harness[docker]" in done.stderr and "Traceback" not in done.stderr


def test_dask_executor_without_distributed_names_the_extra(tmp_path):
    done = _without(
        "dask",
        "run",
        "--project",
        str(ROOT),
        "--release",
        "candidate",
        "--k",
        "1",
        "--executor",
        "dask",
        "--no-report",
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert "dask" in done.stderr and "Traceback" not in done.stderr


def _third_party_imports() -> set[str]:
    import ast

    stdlib = set(sys.stdlib_module_names)
    names: set[str] = set()
    for path in (ROOT / "harness").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - stdlib - {"harness"}


def test_every_third_party_import_is_declared():
    """A module pulled in only transitively (urllib3 via docker) breaks a lean install."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = " ".join(meta["dependencies"]).lower()
    extras = " ".join(" ".join(v) for v in meta["optional-dependencies"].values()).lower()
    # Imported only behind an extra's guard, or brought by a declared package.
    provided_by = {
        "docker": "docker",
        "requests": "docker",
        "dask": "dask",
        "distributed": "dask",
        "pyarrow": "pyarrow",
        "markupsafe": "jinja2",
    }
    for name in sorted(_third_party_imports()):
        if name in provided_by:
            assert provided_by[name] in extras + declared, name
        else:
            assert name in declared, f"{name} is imported by harness but not a dependency"
