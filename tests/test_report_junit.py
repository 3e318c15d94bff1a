"""JUnit as CI widgets read it: schema-valid, red only for what the gate blames.

The schema (``tests/data/junit.xsd``) is the format GitLab's merge-request widget, GitHub
JUnit reporters and Jenkins read, with a suite ``timestamp`` and a per-case ``time``
required; junitparser (what many CI actions use) reads the same bytes.
"""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from junitparser import Failure, JUnitXml, Skipped
from test_report import MIXED, MIXED_BASE, make_run

from harness.report import build_report, render_junit, write_reports

SCHEMA = xmlschema.XMLSchema(str(Path(__file__).parent / "data" / "junit.xsd"))


def _pass_with_a_drop(root: Path) -> tuple[object, object, str]:
    """Twelve cases; c03 goes 5/5 → 1/5, which the gate calls within noise (PASS)."""
    cand = {f"c{i:02d}": "PPPPP" for i in range(12)}
    base = dict(cand)
    cand["c03"] = "PFFFF"
    cand["c05"], base["c05"] = "FPPPP", "FFFFF"  # an improvement, never a failure
    return make_run(root, cand, base)


def test_a_pass_gate_is_green_and_its_info_regression_goes_to_system_out(tmp_path):
    project, store, run_id = _pass_with_a_drop(tmp_path / "p")
    data = build_report(project, store, run_id)
    assert data.verdict == "pass"
    named = {c.case_id: c.named_by for c in data.cases if c.named_by}
    assert "c03" in named  # the gate mentions it (info), so the HTML still points at it
    junit = tmp_path / "junit.xml"
    out = write_reports(project, store, run_id, junit=junit, summary=None, json_path=None)
    SCHEMA.validate(str(out[1]))
    xml = JUnitXml.fromfile(str(out[1]))
    suite = next(iter(xml))
    assert (suite.tests, suite.failures, suite.errors) == (12, 0, 0)
    assert all(case.is_passed for case in suite)
    c03 = next(c for c in suite if c.name == "c03")
    assert "gate (info, not a failure)" in (c03.system_out or "")
    assert "within noise" in (c03.system_out or "")
    root = ET.parse(out[1]).getroot()
    case = root.find(".//testcase[@name='c03']")
    assert case is not None
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["gate.info"].startswith("no_significant_regression")
    assert props["trial.1"] == "fail (test_failure)"


def test_times_and_timestamps_are_filled_in(tmp_path):
    project, store, run_id = _pass_with_a_drop(tmp_path / "p")
    data = build_report(project, store, run_id)
    xml = JUnitXml.fromstring(render_junit(data).decode())
    suite = next(iter(xml))
    stamp = dt.datetime.fromisoformat(suite.timestamp)
    assert stamp == data.release.created_at
    # make_run's trials take 5 s (agent) + 2 s (verifier): 5 trials → 35 s per case
    assert {case.time for case in suite} == {35.0}
    assert suite.time == pytest.approx(12 * 35.0)


def test_fail_gate_fails_only_the_blamed_cases_and_validates(tmp_path):
    project, store, run_id = make_run(
        tmp_path / "p", MIXED, MIXED_BASE, judgment={"hotel": "PPFP"}, critical=("charlie",)
    )
    data = build_report(project, store, run_id)
    assert data.verdict == "fail"
    body = render_junit(data, baseline=True)
    SCHEMA.validate(body.decode())
    xml = JUnitXml.fromstring(body.decode())
    suites = {s.name: s for s in xml}
    cand = suites["candidate: cand"]
    failed = {c.name: c.result[0] for c in cand if c.result and isinstance(c.result[0], Failure)}
    assert sorted(failed) == ["bravo", "charlie"]
    assert failed["bravo"].type == "regression"
    assert failed["charlie"].type == "critical_case_broken"
    assert "FAIL regression" in failed["charlie"].message
    hotel = next(c for c in cand if c.name == "hotel")
    assert isinstance(hotel.result[0], Skipped)
    assert suites["baseline: prod"].failures == 0


def test_the_schema_check_goes_red_on_what_readers_need(tmp_path):
    project, store, run_id = _pass_with_a_drop(tmp_path / "p")
    root = ET.fromstring(render_junit(build_report(project, store, run_id)))
    suite = root.find("testsuite")
    assert suite is not None
    del suite.attrib["timestamp"]
    with pytest.raises(xmlschema.XMLSchemaValidationError, match="timestamp"):
        SCHEMA.validate(ET.tostring(root, encoding="unicode"))
