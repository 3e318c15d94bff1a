"""The portable report folder: self-contained, no host paths, evidence capped per trial."""

from __future__ import annotations

import json
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


# ------------------------------------------------------------ tampering, model usage, cost

KEY = "sk-real-upstream-key-never-in-the-folder"
USAGE_RUN = {"alpha": "PPFP", "bravo": "PPPP", "charlie": "FFPP"}
USAGE_BASE = {"alpha": "PPPP", "bravo": "PPPP", "charlie": "PPPP"}


def _usage(store, rec):
    """Give every attempt measured usage and a transcript; tamper in charlie's trial 0."""
    from harness.store.records import ModelCall, ModelUsage

    i = rec.key.trial + (100 if rec.key.arm.value == "baseline" else 0)
    attempts = []
    for a in rec.attempts:
        req = store.put_blob(f'{{"messages": "fix {rec.key.case_id} {i}"}}'.encode())
        resp = store.put_blob(f'{{"choices": "TRANSCRIPT-{rec.key.case_id}-{i}"}}'.encode())
        calls = (ModelCall(turn=1, request_blob=req, response_blob=resp, status=200,
                           input_tokens=100 + i, output_tokens=10 + i),)  # fmt: skip
        model = ModelUsage(upstream="http://upstream.invalid/v1", model="m-1",
                           answered_model="m-1", turns=1, input_tokens=100 + i,
                           output_tokens=10 + i, cost=0.001 * (i + 1), calls=calls)  # fmt: skip
        upd: dict = {"model": model,
                     "verifier": a.verifier.model_copy(update={"cpu_s": 1.5})}  # fmt: skip
        if rec.key.case_id == "charlie" and rec.key.trial == 0 and rec.key.arm.value == "candidate":
            upd["tampering"] = ("tests/test_charlie.py", "conftest.py")
            upd["left_out"] = ("tests/test_mine.py",)
        attempts.append(a.model_copy(update=upd))
    return rec.model_copy(update={"attempts": tuple(attempts)})


@pytest.fixture
def usage_run(tmp_path: Path):
    return make_run(tmp_path / "proj", USAGE_RUN, USAGE_BASE, tweak=_usage)


def _records(store, run_id, arm, case_id=None):
    return [r for r in store.trials(run_id) if r.key.arm.value == arm
            and (case_id is None or r.key.case_id == case_id)]  # fmt: skip


def test_tampering_paths_are_shown_as_a_warning_and_left_out_as_a_note(usage_run):
    project, store, run_id = usage_run
    write_report_folder(project, store, run_id)
    root = project.reports_dir / run_id
    page = (root / "evidence" / "1.html").read_text()
    ev = page.split('id="ev-c', 1)[1]
    charlie = page[page.index("charlie · candidate · trial 0") :]
    charlie = charlie[: charlie.index('<div class="ev"') if '<div class="ev"' in charlie else None]
    assert 'class="tamper"' in charlie and "tests/test_charlie.py, conftest.py" in charlie
    assert "left out" in charlie and "tests/test_mine.py" in charlie
    assert "tests/test_charlie.py" not in ev.split("charlie", 1)[0]  # only on its trial
    index = (root / "index.html").read_text()
    row = re.search(r'<tr id="case-\d+"[^>]*data-flags="([^"]*)"[^>]*>\s*<td class="cid" '
                    r'data-v="charlie">(.*?)</td>', index, re.S)  # fmt: skip
    assert row and "tampering" in row.group(1).split()
    assert "⚠ tampering 1" in row.group(2) and "left out 1" in row.group(2)
    doc = json.loads((root / "report.json").read_text())
    cases = {c["case_id"]: c for c in doc["cases"]}
    assert cases["charlie"]["candidate"]["tampered"] == 1
    assert cases["charlie"]["candidate"]["left_out"] == 1
    assert cases["alpha"]["candidate"]["tampered"] == 0
    assert "tampering" not in cases["alpha"]["flags"]


def test_model_usage_and_verification_cost_per_arm_and_case_equal_the_records(usage_run):
    from harness.report.schema import ReportDocument

    project, store, run_id = usage_run
    write_report_folder(project, store, run_id)
    root = project.reports_dir / run_id
    doc = json.loads((root / "report.json").read_text())
    ReportDocument.model_validate(doc)
    arms = {a["key"]: a for a in doc["arms"]}
    for arm in ("candidate", "baseline"):
        recs = _records(store, run_id, arm)
        atts = [a for r in recs for a in r.attempts]
        model = arms[arm]["cost"]["model"]
        assert model["tokens"] == sum(a.model.total_tokens for a in atts)
        assert model["input_tokens"] == sum(a.model.input_tokens for a in atts)
        assert model["cost"] == pytest.approx(sum(a.model.cost for a in atts))
        assert model["models"] == ["m-1"]
        verify = arms[arm]["cost"]["verify"]
        assert verify["candidates"] == len(atts)
        assert verify["cpu_s"] == pytest.approx(1.5 * len(atts))
        assert verify["wall_s"] == pytest.approx(sum(a.verifier.duration_s for a in atts))
    for c in doc["cases"]:
        for arm in ("candidate", "baseline"):
            atts = [a for r in _records(store, run_id, arm, c["case_id"]) for a in r.attempts]
            assert c[arm]["model"]["tokens"] == sum(a.model.total_tokens for a in atts)
            assert c[arm]["model"]["cost"] == pytest.approx(sum(a.model.cost for a in atts))
            assert c[arm]["verify"]["cpu_s"] == pytest.approx(1.5 * len(atts))
    index = (root / "index.html").read_text()
    cand = arms["candidate"]["cost"]["model"]
    assert f'<td class="n tokens">{cand["tokens"]:,} ' in index
    assert f'<td class="n mcost">{cand["cost"]:.4f}</td>' in index
    for c in doc["cases"]:
        row = re.search(rf'<tr data-case="{c["case_id"]}" data-arm="candidate">(.*?)</tr>', index)
        assert row, c["case_id"]
        assert f'<td class="n tokens">{c["candidate"]["model"]["tokens"]:,}</td>' in row.group(1)
    md = (root / "summary.md").read_text()
    line = next(ln for ln in md.splitlines() if ln.startswith("- cost of candidate"))
    assert f"model {cand['tokens']:,} tokens" in line and f"cost {cand['cost']:.4f}" in line
    v = arms["candidate"]["cost"]["verify"]
    assert f"verification {v['cpu_s']:.1f} s CPU / {v['wall_s']:.1f} s wall" in line
    assert any(ln.startswith("- cost of baseline") for ln in md.splitlines())


def test_no_usage_no_model_columns(mixed):
    project, store, run_id = mixed
    write_report_folder(project, store, run_id)
    root = project.reports_dir / run_id
    index = (root / "index.html").read_text()
    assert "model tokens" not in index and 'id="cost-cases"' not in index
    assert "model " not in next(ln for ln in (root / "summary.md").read_text().splitlines()
                                if ln.startswith("- cost of candidate"))  # fmt: skip


def test_a_failed_trials_transcript_is_in_the_folder_and_linked(usage_run, tmp_path):
    project, store, run_id = usage_run
    write_report_folder(project, store, run_id)
    root = project.reports_dir / run_id
    page = (root / "evidence" / "1.html").read_text()
    failed = [r for r in _records(store, run_id, "candidate") if r.outcome.value == "fail"]
    assert failed
    for rec in failed:
        call = rec.attempts[-1].model.calls[0]
        for label, digest, mark in (
            ("model request 1", call.request_blob, "fix"),
            ("model response 1", call.response_blob, "TRANSCRIPT"),
        ):
            rel = f"files/{digest.split(':', 1)[-1][:24]}.txt"
            assert (root / rel).is_file()
            assert mark in (root / rel).read_text()
            assert f'href="../{rel}" data-kind="{label}"' in page
    # A passing trial's transcript is not copied.
    passed = next(r for r in _records(store, run_id, "candidate") if r.outcome.value == "pass")
    blob = passed.attempts[-1].model.calls[0].response_blob
    assert not (root / f"files/{blob.split(':', 1)[-1][:24]}.txt").exists()
    for path in _files(root):
        text = path.read_text(errors="replace")
        assert KEY not in text and str(tmp_path) not in text
        if path.suffix == ".html":
            for link in LINK.findall(text):
                if link.startswith(("#", "data:")):
                    continue
                assert not re.match(r"^[a-z]+:|^/", link), (path, link)
                target = (path.parent / link.split("#", 1)[0]).resolve()
                assert target.is_relative_to(root.resolve()) and target.exists(), (path, link)
