"""``reports/latest/``: a real folder holding the report written last, swapped in atomically."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_report import MIXED, MIXED_BASE, make_run

from harness.errors import ConfigError
from harness.report import write_report_folder
from harness.report.latest import LATEST, point_latest


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_latest_holds_the_run_folder_as_hard_links(tmp_path: Path) -> None:
    project, store, run_id = make_run(tmp_path / "proj", MIXED, MIXED_BASE)
    folder = write_report_folder(project, store, run_id)
    latest = project.reports_dir / LATEST
    assert folder.latest == latest
    assert latest.is_dir() and not latest.is_symlink()
    run_dir = project.reports_dir / run_id
    assert _tree(latest) == _tree(run_dir)
    assert len(_tree(latest)) > 4  # the evidence and files came along, not just the 4 formats
    index = latest / "index.html"
    assert index.stat().st_ino == (run_dir / "index.html").stat().st_ino  # no second copy
    assert json.loads((latest / "report.json").read_text())["run_id"] == run_id
    # Only the run folder and the pointer: no staging or retired folder is left behind.
    assert sorted(p.name for p in project.reports_dir.iterdir()) == sorted(
        [run_id, LATEST, "index.html"]
    )


def test_a_second_write_replaces_latest_and_leaves_nothing_stale(tmp_path: Path) -> None:
    project, store, run_id = make_run(tmp_path / "proj", MIXED, MIXED_BASE)
    write_report_folder(project, store, run_id)
    latest = project.reports_dir / LATEST
    old_index = latest / "index.html"
    old_bytes = old_index.read_bytes()
    fd = os.open(old_index, os.O_RDONLY)  # a reader still holding the old page
    try:
        write_report_folder(project, store, run_id, formats=("junit",))
        assert sorted(p.name for p in latest.iterdir()) == ["junit.xml"]
        assert _tree(latest) == _tree(project.reports_dir / run_id)
        # The old file was replaced, never rewritten in place: the reader's bytes stand.
        assert os.read(fd, len(old_bytes) + 1) == old_bytes
    finally:
        os.close(fd)
    assert not [p for p in project.reports_dir.iterdir() if p.name.startswith(".")]


def test_no_report_leaves_latest_alone(tmp_path: Path) -> None:
    project, store, run_id = make_run(tmp_path / "proj", MIXED, MIXED_BASE)
    write_report_folder(project, store, run_id)
    before = _tree(project.reports_dir / LATEST)
    folder = write_report_folder(project, store, run_id, formats=("junit",), latest=False)
    assert folder.latest is None
    assert _tree(project.reports_dir / LATEST) == before


def test_a_symlink_at_latest_is_replaced_never_followed(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    (reports / "run-a").mkdir(parents=True)
    (reports / "run-a" / "index.html").write_text("A")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    (reports / LATEST).symlink_to(outside)
    point_latest(reports, reports / "run-a")
    assert not (reports / LATEST).is_symlink()
    assert (reports / LATEST / "index.html").read_text() == "A"
    assert (outside / "keep.txt").read_text() == "mine"
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]


def test_an_unwritable_reports_folder_is_a_config_error(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    (reports / "run-a").mkdir(parents=True)
    (reports / "run-a" / "index.html").write_text("A")
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(ConfigError) as info:
        point_latest(blocker, reports / "run-a")
    assert "latest" in str(info.value)


# A reader in its own process: opens `latest` as a folder, reads three files through that
# folder's descriptor (one tree, even if `latest` is swapped meanwhile) and checks they
# come from the same report. `latest` missing is a violation; a file missing from a tree
# that is no longer `latest` is that old tree being removed after its swap (allowed); a
# file missing from the tree that still is `latest` means it was half-written.
READER = textwrap.dedent(
    """\
    import json, os, sys, time
    latest, stop = sys.argv[1], sys.argv[2]
    reads = absent = half = mixed = retired = 0
    names = ("report.json", "junit.xml", "evidence/1.html")
    while not os.path.exists(stop):
        try:
            fd = os.open(latest, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            absent += 1
            continue
        try:
            tags = set()
            for name in names:
                try:
                    f = os.open(name, os.O_RDONLY, dir_fd=fd)
                except FileNotFoundError:
                    try:
                        same = os.stat(latest).st_ino == os.fstat(fd).st_ino
                    except FileNotFoundError:
                        same = False
                    if same:
                        half += 1
                    else:
                        retired += 1
                    break
                try:
                    tags.add(os.read(f, 100))
                finally:
                    os.close(f)
            else:
                reads += 1
                mixed += len(tags) != 1
        finally:
            os.close(fd)
    print(json.dumps({"reads": reads, "absent": absent, "half": half, "mixed": mixed,
                      "retired": retired}))
    """
)


def _report_like(root: Path, tag: str, extra: int) -> Path:
    (root / "evidence").mkdir(parents=True)
    for name in ("report.json", "junit.xml", "evidence/1.html"):
        (root / name).write_text(tag)
    # Some bulk so that building a copy takes a moment (a half-built tree would show).
    (root / "files").mkdir()
    for i in range(extra):
        (root / "files" / f"{i}.txt").write_text(tag * 10)
    return root


def test_readers_never_see_latest_missing_half_written_or_mixed(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    a = _report_like(reports / "run-a", "A", 40)
    b = _report_like(reports / "run-b", "B", 40)
    point_latest(reports, a)
    stop = tmp_path / "stop"
    script = tmp_path / "reader.py"
    script.write_text(READER)
    reader = subprocess.Popen(
        [sys.executable, str(script), str(reports / LATEST), str(stop)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        swaps = 0
        while swaps < 300 and time.monotonic() < deadline:
            point_latest(reports, b if swaps % 2 == 0 else a)
            swaps += 1
    finally:
        stop.write_text("")
        out, _ = reader.communicate(timeout=120)
    seen = json.loads(out)
    assert swaps >= 100, swaps
    assert seen["reads"] > 0, seen
    assert (seen["absent"], seen["half"], seen["mixed"]) == (0, 0, 0), seen
    assert (reports / LATEST / "report.json").read_text() in ("A", "B")
    assert not [p for p in reports.iterdir() if p.name.startswith(".")]
