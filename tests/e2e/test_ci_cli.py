"""The CLI as CI uses it: exit codes in --help, `export -o -`, `show` filters, subset runs.

Real runs of a three-case project (local sandboxes), a promoted baseline, then a
``--case`` subset run against it.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from pathlib import Path

import pytest
from support import harness

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def subset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    from support import make_project

    root = make_project(tmp_path_factory.mktemp("ci") / "proj")
    assert harness(root, "cases", "lock").returncode == 0
    full = harness(root, "run", "--release", "good", "--k", "2", "--no-report")
    assert full.returncode == 0, full.stdout + full.stderr
    done = harness(root, "baseline", "promote", "latest", "--name", "prod")
    assert done.returncode == 0, done.stderr
    part = harness(root, "run", "--release", "good", "--k", "2", "--baseline", "prod",
                   "--case", "add-1", "--no-report")  # fmt: skip
    assert part.returncode == 0, part.stdout + part.stderr
    runs = json.loads(harness(root, "runs", "--json").stdout)["runs"]
    return root, runs[0]["run_id"], runs[1]["run_id"]


def test_run_and_gate_help_state_the_exit_codes(subset):
    root, _, _ = subset
    for cmd in ("run", "gate"):
        text = harness(root, cmd, "--help").stdout
        for line in ("0  PASS", "1  FAIL", "2  USAGE", "3  WARN", "4  BLOCKED", "5  INTERNAL"):
            assert line in text, (cmd, line)


def test_a_case_subset_says_not_run_for_the_other_cases(subset):
    root, _, part = subset
    gate = harness(root, "gate", part)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    doc = json.loads(harness(root, "gate", part, "--json").stdout)
    notes = " ".join(doc.get("notes", [])) + gate.stdout
    assert "not run in this run" in notes and "add-0, add-2" in notes
    assert "case version changed" not in notes


def test_runs_lists_baseline_cases_trials_and_marks_the_subset_partial(subset):
    root, full, part = subset
    runs = {r["run_id"]: r for r in json.loads(harness(root, "runs", "--json").stdout)["runs"]}
    assert (runs[full]["cases"], runs[full]["partial"], runs[full]["baseline"]) == (3, None, None)
    assert (runs[part]["cases"], runs[part]["baseline"]) == (1, "prod")
    assert runs[part]["partial"] == "1 of 3 cases"
    table = harness(root, "runs").stdout
    for col in ("baseline", "cases", "trials"):
        assert col in table
    line = next(x for x in table.splitlines() if x.startswith(part))
    assert "prod" in line and "1*" in line
    assert f"* {part} is partial (1 of 3 cases): kept off the release trend" in table


def test_export_streams_to_stdout_with_dash(subset):
    root, full, _ = subset
    done = harness(root, "export", full, "-o", "-")
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    assert len(rows) == 6 and {r["case_id"] for r in rows} == {"add-0", "add-1", "add-2"}
    assert not (root / "-").exists()
    assert "6 rows" in done.stderr


def test_export_writes_through_a_link_to_stdout_and_keeps_the_link(subset, tmp_path):
    # /dev/stdout is a symlink to /proc/self/fd/1; the same link in a scratch folder shows
    # the behaviour without risking the machine's /dev when the check goes red.
    root, full, _ = subset
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    done = harness(root, "export", full, "-o", str(link))
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and os.readlink(link) == "/proc/self/fd/1"
    assert done.stdout.startswith("run_id,arm,release,case_id")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        done = harness(root, "export", full, "--table", "cases", "-o", str(fifo))
        assert done.returncode == 0, done.stderr
        assert os.read(reader, 1 << 16).startswith(b"run_id,arm,case_id")
    finally:
        os.close(reader)
    assert fifo.is_fifo()


def test_show_puts_the_decision_first_and_filters(subset):
    root, _, part = subset
    text = harness(root, "show", part).stdout
    assert text.splitlines()[0].startswith("PASS")
    assert "4 of 4 trials shown" in text
    only = harness(root, "show", part, "--arm", "baseline").stdout
    assert "2 of 4 trials shown (filtered by --arm)" in only
    assert "candidate--add-1" not in only and "baseline--add-1" in only
    failed = harness(root, "show", part, "--failed").stdout
    assert "0 of 4 trials shown (filtered by --failed)" in failed
    shown = json.loads(harness(root, "show", part, "--case", "add-1", "--arm", "candidate",
                               "--json").stdout)  # fmt: skip
    assert [t["key"]["case_id"] for t in shown["trials"]] == ["add-1", "add-1"]
    bad = harness(root, "show", part, "--case", "nope")
    assert bad.returncode == 2 and "--case" in bad.stderr and "Traceback" not in bad.stderr
    assert re.search(r"no such case in run \S+: nope", bad.stderr)
