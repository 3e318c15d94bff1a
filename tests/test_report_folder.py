"""The portable report folder: self-contained, no host paths, evidence capped per trial."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from test_report import DIFF_MARK, MIXED, MIXED_BASE, XSS, make_run

from harness.report import write_report_folder
from harness.report.folder import FILE_CAP, Scrubber
from harness.report.history import read_summary

LINK = re.compile(r'(?:href|src)="([^"]*)"')


@pytest.fixture
def mixed(tmp_path: Path):
    return make_run(
        tmp_path / "proj",
        MIXED,
        MIXED_BASE,
        judgment={"hotel": "PPFP"},
        critical=("charlie",),
        excerpts={"golf": XSS},
        agent_argv=("{project}/agent.sh", "--store", "{project}/.harness"),
    )


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_folder_holds_every_format_and_the_evidence(mixed):
    project, store, run_id = mixed
    folder = write_report_folder(project, store, run_id)
    root = project.reports_dir / run_id
    assert folder.root == root
    for name in ("index.html", "junit.xml", "summary.md", "report.json"):
        assert (root / name).is_file()
    assert folder.paths[0] == root / "index.html"
    # Every non-pass trial's record and diff sit beside it on its evidence page; logs are
    # files; the judgment lane's records are files.
    non_pass = sum(c not in "PR" for v in [*MIXED.values(), *MIXED_BASE.values()] for c in v)
    page = (root / "evidence" / "1.html").read_text()
    assert page.count('<details class="record"') == non_pass
    assert page.count('<pre class="diff" id="') >= non_pass - 2  # abstained/infra: no diff
    assert '"case_id": "charlie"' in page  # the record's JSON, quotes left as they are
    assert len(list((root / "records").glob("*.json"))) == len("PPFP")
    texts = [p.read_text() for p in (root / "files").glob("*.txt")]
    assert any("AssertionError" in t for t in texts)
    assert DIFF_MARK in page
    assert folder.evidence_files == len(_files(root)) - 4
    assert read_summary(store, run_id) is not None
    assert folder.history == project.reports_dir / "index.html"


def test_nothing_links_outside_the_folder_and_no_host_path_appears(mixed, tmp_path):
    project, store, run_id = mixed
    # The records' agent argv names the project folder and the store, as `{project}` would.
    rec_path = next((store.run_dir(run_id) / "trials").glob("candidate--charlie--*t000.json"))
    assert f"{project.root}/agent.sh" in rec_path.read_text()
    write_report_folder(project, store, run_id)
    root = project.reports_dir / run_id
    hosts = {str(project.root), str(project.root.resolve()), str(store.root),
             str(store.root.resolve()), str(tmp_path)}  # fmt: skip
    for path in _files(root):
        text = path.read_text(errors="replace")
        for host in hosts:
            assert host not in text, (path, host)
        if path.suffix == ".html":
            for link in LINK.findall(text):
                if link.startswith(("#", "data:")):
                    continue
                assert not re.match(r"^[a-z]+:|^/", link), (path, link)
                target = (path.parent / link.split("#", 1)[0]).resolve()
                assert target.is_relative_to(root.resolve()), (path, link)
                assert target.exists(), (path, link)
    page = (root / "evidence" / "1.html").read_text()
    assert "&lt;project&gt;/agent.sh" in page and "&lt;store&gt;" in page


def test_the_folder_survives_the_store_being_deleted(mixed, tmp_path):
    project, store, run_id = mixed
    write_report_folder(project, store, run_id)
    moved = tmp_path / "elsewhere" / "report"
    shutil.copytree(project.reports_dir / run_id, moved)
    shutil.rmtree(store.root)
    index = (moved / "index.html").read_text()
    # The broken critical case leads the page with its diff and its log excerpt inline.
    attention = index.split('id="attention"', 1)[1].split("</section>", 1)[0]
    assert "charlie" in attention and DIFF_MARK in attention and "AssertionError" in attention
    assert index.index('id="attention"') < index.index('id="release"')


def test_large_logs_are_capped_per_file_and_per_trial(tmp_path):
    huge = "x" * (FILE_CAP * 4) + "\nTHE-END\n"
    project, store, run_id = make_run(tmp_path / "p", {"a": "FP"}, excerpts={"a": huge})
    write_report_folder(project, store, run_id)
    files = list((project.reports_dir / run_id / "files").glob("*.txt"))
    log = next(p for p in files if "THE-END" in p.read_text())
    assert log.stat().st_size < FILE_CAP + 200
    assert "bytes cut by harness" in log.read_text()
    assert "(capped" in (project.reports_dir / run_id / "evidence" / "1.html").read_text()


def test_a_rewrite_replaces_the_folder_and_drops_stale_files(mixed):
    project, store, run_id = mixed
    write_report_folder(project, store, run_id)
    stale = project.reports_dir / run_id / "files" / "stale.txt"
    stale.write_text("old")
    folder = write_report_folder(project, store, run_id, formats=("junit",))
    assert not stale.exists()
    assert folder.index is None and folder.junit is not None
    assert sorted(p.name for p in folder.root.iterdir()) == ["junit.xml"]
    assert not [p for p in project.reports_dir.iterdir() if p.name.startswith(".")]


def test_scrubber_replaces_the_longest_root_first(tmp_path):
    project = tmp_path / "proj"
    scrub = Scrubber({"store": project / ".harness", "project": project})
    assert scrub(f"{project}/.harness/blobs and {project}/x") == "<store>/blobs and <project>/x"
