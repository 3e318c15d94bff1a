"""Reports through the CLI on real runs: the history, `runs`, `show`, `export`, `schema`."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq  # the test extra installs it: a real reader, never skipped
import pytest
from support import harness

from harness.report.history import RunsDocument
from harness.report.schema import GateDocument, ReportDocument, ShowDocument

pytestmark = pytest.mark.integration


def _run(project: Path, release: str, *extra: str) -> str:
    done = harness(project, "run", "--release", release, "--k", "2", "--fresh", *extra)
    assert done.returncode in (0, 1, 2, 3), done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return re.search(r"run (\S+) ·", done.stderr).group(1)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    from support import make_project

    root = make_project(tmp_path_factory.mktemp("hist") / "proj")
    assert harness(root, "cases", "lock").returncode == 0
    ids = [_run(root, "good"), _run(root, "bad"), _run(root, "good")]
    for run_id in ids:  # every format, as `harness run` will write them
        done = harness(root, "report", run_id)
        assert done.returncode == 0, done.stderr
    return root, ids


def test_history_page_after_three_runs_of_two_releases(three_runs):
    root, ids = three_runs
    page = (root / "reports" / "index.html").read_text()
    rows = re.findall(r'<tr data-run="([^"]+)" data-release="([^"]+)" data-verdict="([^"]*)"', page)
    assert [r[0] for r in rows] == list(reversed(ids))  # newest first
    assert [r[1] for r in rows] == ["good", "bad", "good"]
    assert all(r[2] in ("pass", "warn", "fail", "blocked") for r in rows)
    # One trend across release names, by start time: a point per full run, labelled.
    trend = page.split('id="trend"', 1)[1].split("</section>", 1)[0]
    assert trend.count('class="pt a-c') == 3
    assert re.findall(r'class="tick xrel"[^>]*>([^<]+)<', trend)[:3] == ["good", "bad", "good"]
    assert "Cases × releases" in trend
    assert len(re.findall(r'<i class="heat h', trend)) == 6  # every colour named
    for run_id in ids:
        assert f'href="{run_id}/index.html"' in page
    assert str(root) not in page
    # The history is built from stored summaries, not from the trials: it survives them.
    for run_id in ids:
        shutil.copytree(root / ".harness" / "runs" / run_id / "trials", root / f"bak-{run_id}")
        shutil.rmtree(root / ".harness" / "runs" / run_id / "trials")
    try:
        from harness.report.history import write_history
        from harness.store.store import Store

        again = write_history(Store(root / ".harness"), root / "reports").read_text()
        assert len(re.findall(r"<tr data-run=", again)) == 3
    finally:
        for run_id in ids:
            shutil.copytree(root / f"bak-{run_id}", root / ".harness" / "runs" / run_id / "trials")


def test_runs_lists_filters_and_prints_json(three_runs):
    root, ids = three_runs
    done = harness(root, "runs", "--json")
    assert done.returncode == 0, done.stderr
    doc = RunsDocument.model_validate_json(done.stdout)
    assert [r.run_id for r in doc.runs] == ids
    assert all(r.verdict is not None and r.decided_at is not None for r in doc.runs)
    bad = doc.runs[1]
    assert bad.candidate is not None and bad.candidate.pass_rate.mean == 0.0
    good = doc.runs[0]
    assert good.candidate is not None and good.candidate.pass_rate.mean == 1.0
    assert good.candidate.pass_rate.ci_low is not None
    assert good.report == f"{ids[0]}/index.html"
    only_bad = harness(root, "runs", "--release", "bad", "--json").stdout
    only = RunsDocument.model_validate_json(only_bad)
    assert [r.run_id for r in only.runs] == [ids[1]]
    text = harness(root, "runs").stdout
    assert all(i in text for i in ids)


def test_json_outputs_follow_their_published_schemas(three_runs, tmp_path):
    root, ids = three_runs
    gate = harness(root, "gate", ids[1], "--json")
    GateDocument.model_validate_json(gate.stdout)
    show = harness(root, "show", ids[1], "--json")
    ShowDocument.model_validate_json(show.stdout)
    ReportDocument.model_validate_json((root / "reports" / ids[1] / "report.json").read_text())
    done = harness(root, "schema", "--out", str(tmp_path / "schemas"))
    assert done.returncode == 0, done.stderr
    names = sorted(p.name for p in (tmp_path / "schemas").iterdir())
    assert names == [f"{n}.schema.json" for n in ("gate", "report", "runs", "show", "summary")]
    schema = json.loads(harness(root, "schema", "report").stdout)
    assert schema["title"] == "ReportDocument" and "cases" in schema["properties"]
    assert harness(root, "schema").returncode == 2


def test_show_never_truncates_trial_names(three_runs):
    root, ids = three_runs
    done = harness(root, "show", ids[0])
    for slug in ("candidate--add-0--v1--t000", "candidate--add-2--v1--t001"):
        assert slug in done.stdout


def test_export_trials_and_cases_as_csv_and_parquet(three_runs, tmp_path):
    root, ids = three_runs
    out = tmp_path / "t.csv"
    assert harness(root, "export", ids[1], "-o", str(out)).returncode == 0
    rows = list(csv.DictReader(out.read_text().splitlines()))
    assert len(rows) == 6 and {r["outcome"] for r in rows} == {"fail"}
    cases = tmp_path / "c.csv"
    done = harness(root, "export", ids[0], "--table", "cases", "-o", str(cases))
    assert done.returncode == 0, done.stderr
    assert [r["pass_rate"] for r in csv.DictReader(cases.read_text().splitlines())] == ["1.0"] * 3
    pout = tmp_path / "t.parquet"
    done = harness(root, "export", ids[1], "--format", "parquet", "-o", str(pout))
    assert done.returncode == 0, done.stderr
    assert pq.read_table(pout).num_rows == 6


def test_report_flags_choose_the_formats(three_runs):
    root, ids = three_runs
    done = harness(root, "report", ids[0], "--format", "junit", "--format", "markdown")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (root / "reports" / ids[0]).iterdir()) == [
        "junit.xml",
        "summary.md",
    ]
    assert harness(root, "report", ids[0]).returncode == 0


def test_real_report_folders_name_no_host_path(three_runs):
    root, _ = three_runs
    hosts = (str(root), str(root.resolve()), str(root / ".harness"))
    files = [p for p in (root / "reports").rglob("*") if p.is_file()]
    assert any(p.parent.name == "files" for p in files)  # logs of the failing run copied
    for path in files:
        text = path.read_text(errors="replace")
        assert not any(h in text for h in hosts), path


def test_reports_latest_follows_each_run_and_report(tmp_path: Path) -> None:
    from support import make_project

    root = make_project(tmp_path / "proj")
    assert harness(root, "cases", "lock").returncode == 0
    latest = root / "reports" / "latest"
    first = _run(root, "good")
    assert json.loads((latest / "report.json").read_text())["run_id"] == first
    first_page = (root / "reports" / first / "index.html").read_bytes()
    second = _run(root, "bad")
    assert second != first
    assert json.loads((latest / "report.json").read_text())["run_id"] == second
    assert (latest / "index.html").read_bytes() == (
        root / "reports" / second / "index.html"
    ).read_bytes()
    assert (root / "reports" / first / "index.html").read_bytes() == first_page  # untouched
    # `harness report` of an older run makes it the latest written, and says where it is.
    done = harness(root, "report", first)
    assert done.returncode == 0, done.stderr
    assert f"latest: {latest}" in done.stdout
    assert json.loads((latest / "report.json").read_text())["run_id"] == first
    assert latest.is_dir() and not latest.is_symlink()
    # The pointer is not a run: the history lists the two runs and nothing called latest.
    page = (root / "reports" / "index.html").read_text()
    assert 'href="latest/' not in page and page.count('<tr data-run="') == 2
