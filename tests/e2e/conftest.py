"""Fixtures for the CLI end-to-end tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import harness, make_project


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "proj")
    done = harness(root, "cases", "lock")
    assert done.returncode == 0, done.stderr
    return root
