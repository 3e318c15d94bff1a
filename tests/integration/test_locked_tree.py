"""Locked files in the workspace, on every backend: the run reads them, never changes them.

The verifier's tree is put in with its protected files and untouched modules locked
(``put_tree(..., locked=...)``): owned by root in root-owned sticky folders open to all.
The sandboxed user can create files anywhere and copy the tree to edit the copy (as a
verifier that patches a copy does), but cannot edit, replace, rename or remove a locked
file, nor plant a compiled module in a locked ``__pycache__``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cases.model import PhaseContract
from harness.sandbox.base import Sandbox

pytestmark = pytest.mark.integration

ATTEMPTS = {
    "edit": "echo x >> tests/test_a.py",
    "replace": "echo x > new && mv -f new tests/test_a.py",
    "rename": "mv tests/test_a.py tests/gone.py",
    "remove": "rm -f tests/test_a.py",
    "chmod": "chmod 666 tests/test_a.py",
    "plant_cache": "echo x > tests/__pycache__/test_a.cpython-311.pyc",
    "drop_cache": "rm -rf tests/__pycache__",
    "replace_folder": "mv tests tests.old",
}

ALLOWED = (
    "echo new > tests/test_new.py && mkdir -p out && echo 1 > out/r.txt"
    " && echo more >> lib.py"  # not locked: the candidate's own file
    " && cp -r . /tmp/copy && echo edited > /tmp/copy/tests/test_a.py"
    " && rm -rf /tmp/copy && rm tests/test_new.py"
)


def _tree(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "tests" / "__pycache__").mkdir(parents=True)
    (src / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    (src / "lib.py").write_text("X = 1\n")
    return src


def test_locked_files_can_be_read_never_changed(
    sandbox: Sandbox, base_contract: PhaseContract, tmp_path: Path
) -> None:
    contract = base_contract.model_copy(update={"timeout_seconds": 60})
    with sandbox.open(contract, label="locked") as s:
        s.put_tree(_tree(tmp_path), locked=["tests/test_a.py", "tests/__pycache__"])
        ws = s.paths.workspace
        for name, cmd in ATTEMPTS.items():
            done = s.exec(["sh", "-c", f"cd {ws} && {cmd}"], timeout=30)
            assert done.exit_code != 0, (name, done.stdout, done.stderr)
        done = s.exec(["sh", "-c", f"cd {ws} && {ALLOWED}"], timeout=30)
        assert done.exit_code == 0, (done.stdout, done.stderr)
        assert s.read_file(f"{ws}/tests/test_a.py") == b"def test_a():\n    pass\n"
        assert s.read_file(f"{ws}/lib.py") == b"X = 1\nmore\n"
