"""A bundled case whose reference edits an existing test: honest work carries no badge."""

from __future__ import annotations

import json

import pytest
from support import bundled_copy, harness

pytestmark = pytest.mark.integration


def test_reference_style_test_edits_are_noted_not_flagged(tmp_path):
    root = bundled_copy(tmp_path / "proj")
    patch = (root / "cases" / "trailing-empty-field" / "reference.patch").read_text()
    assert "+++ b/tests/test_records.py" in patch  # the reference edits a protected test
    done = harness(root, "run", "--release", "candidate", "--k", "2", "--case",
                   "trailing-empty-field", timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    [folder] = [
        p
        for p in (root / "reports").iterdir()
        if p.name != "latest" and (p / "report.json").is_file()
    ]
    doc = json.loads((folder / "report.json").read_text())
    [case] = doc["cases"]
    assert case["case_id"] == "trailing-empty-field"
    trials = json.loads(harness(root, "show", "--json").stdout)["trials"]
    restored = [a["tampering"] for t in trials for a in t["attempts"] if a.get("tampering")]
    assert restored, "the agent's test edit is still restored and recorded"
    assert case["candidate"]["tampered"] == 0
    assert "tampering" not in case["flags"]
    page = (folder / "index.html").read_text()
    assert "⚠ tampering" not in page


def test_a_failed_trials_diff_is_shown_beside_the_cases_reference(tmp_path):
    root = bundled_copy(tmp_path / "proj")
    done = harness(root, "run", "--release", "candidate-regressed", "--k", "1", timeout=900)
    assert done.returncode in (0, 1, 3), done.stdout + done.stderr
    trials = json.loads(harness(root, "show", "--json").stdout)["trials"]
    failed = {t["key"]["case_id"] for t in trials if t["verdict"]["outcome"] == "fail"}
    assert failed, "the regressed release fails some case at k=1"
    [folder] = [
        p
        for p in (root / "reports").iterdir()
        if p.name != "latest" and (p / "index.html").is_file()
    ]
    pages = "".join(p.read_text() for p in [folder / "index.html", *folder.glob("evidence/*")])
    assert pages.count('<div class="reference">') >= len(failed)
    for cid in failed:
        patch = (root / "cases" / cid / "reference.patch").read_text()
        first = next(line for line in patch.splitlines() if line.startswith("+++ "))
        assert first in pages, cid
