"""The README's first command on a fresh machine (ci/fresh-machine.sh): PASS, exit 0.

Copies the project to /tmp, runs the command verbatim with Debian's python3, empty harness
caches and the system Python's packages hidden by bubblewrap, so a host pytest or six cannot
make the bundled example pass. Installs the harness into a new venv: minutes, network.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.integration]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_readme_first_command_passes_on_a_fresh_machine() -> None:
    done = subprocess.run(
        ["bash", str(ROOT / "ci" / "fresh-machine.sh")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "ok: PASS, exit 0" in done.stderr
