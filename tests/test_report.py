"""Release reports on hand-built stored runs (no sandbox): HTML, JUnit, Markdown, JSON.

``make_run`` writes a project, a promoted baseline and a gated run straight into a
store; the browser test and ``bench/report_speed.py`` reuse it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from junitparser import Failure, JUnitXml, Skipped

from harness.decision import decide_run
from harness.errors import ConfigError, StoreError
from harness.gate.policy import load_policy
from harness.project import Project, load_project
from harness.report import (
    build_report,
    render_html,
    render_junit,
    write_html_report,
    write_report_folder,
    write_reports,
)
from harness.report.html import delta_plot, distribution_plot
from harness.report.markdown import _esc
from harness.sandbox.base import Bound, Termination
from harness.store.baseline import BaselineFile
from harness.store.records import (
    AgentClaim,
    Arm,
    AttemptRecord,
    CheckResult,
    FailureType,
    Outcome,
    PhaseRecord,
    ReleaseRecord,
    RunRecord,
    TrialKey,
    Verdict,
)
from harness.store.store import Store

NOW = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
PROJECT_YAML = """\
task_set: golden
policy: policy.yaml
releases:
  cand:
    agent: {adapter: simulated}
    components: {model: demo-model@2, prompt_version: p2, tools: [read_file]}
  prod:
    agent: {adapter: simulated}
    components: {model: demo-model@1, prompt_version: p1}
"""
POLICY_YAML = """\
version: "t1"
infra_errors: {warn_above: 0.0, block_above: 0.5}
"""
DEFAULT_EXCERPT = (
    "FAILED tests/test_x.py::test_y - AssertionError: assert 41 == 42\n1 failed in 0.1s"
)

DIFF_MARK = "diff-of-the-candidate"

# One letter per trial: P pass, F test failure, T timeout (a bound fired), A abstained,
# W claimed success but failed (confident wrong), R fixed on the second attempt,
# I infra error, E evaluator error.
CODES = "PFTAWRIE"


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _record(
    store: Store,
    arm: Arm,
    release: str,
    case_id: str,
    trial: int,
    code: str,
    excerpt: str,
    blobs: dict[str, str],
    agent_argv: tuple[str, ...] = ("agent",),
) -> RunRecord:
    outcome = {
        "P": Outcome.PASS,
        "R": Outcome.PASS,
        "I": Outcome.INFRA_ERROR,
        "E": Outcome.EVALUATOR_ERROR,
    }.get(code, Outcome.FAIL)
    ftype = {
        "F": FailureType.TEST_FAILURE,
        "W": FailureType.TEST_FAILURE,
        "T": FailureType.TIMEOUT,
        "A": FailureType.ABSTAINED,
    }.get(code)
    if excerpt not in blobs:
        blobs[excerpt] = store.put_blob(excerpt.encode())
    bound = Bound(kind=Termination.WALL_CLOCK, limit=30, observed=30.4) if code == "T" else None
    verifier = PhaseRecord(
        phase="verifier",
        argv=("pytest", "-q"),
        exit_code=None if bound else (0 if outcome is Outcome.PASS else 1),
        termination=Termination.WALL_CLOCK if bound else Termination.EXIT,
        bound=bound,
        duration_s=2.0,
        stdout_blob=None if outcome is Outcome.PASS else blobs[excerpt],
        excerpt="" if outcome is Outcome.PASS else excerpt,
    )
    agent = PhaseRecord(
        phase="agent", argv=agent_argv, exit_code=0, termination=Termination.EXIT, duration_s=5.0
    )
    status = "abstained" if code == "A" else "submitted"
    claim = AgentClaim(
        status=status,
        claimed_success=code in "PRW",
        usage={"input_tokens": 1000, "output_tokens": 250, "cost_usd": 0.02},
    )
    failing = ("tests/test_x.py::test_y",) if code in "FW" else ()
    verdict = Verdict(
        outcome=outcome,
        failure_type=ftype,
        reason={
            "P": "verifier passed",
            "R": "verifier passed",
            "I": "sandbox vanished",
            "E": "verifier command not found",
        }.get(code, "1 required test failed"),
        checks=(CheckResult(name="exit_status", ok=outcome is Outcome.PASS, detail="expected 0"),),
        failing_tests=failing,
    )
    diff = None
    if code not in "IA":
        diff = store.put_blob(
            f"--- a/src/{case_id}.py\n+++ b/src/{case_id}.py\n@@ -1 +1 @@\n-old = 1\n"
            f"+new = {trial}  # {code} {DIFF_MARK}\n".encode()
        )
    attempts = [
        AttemptRecord(
            attempt=1,
            diff_blob=diff,
            candidate_digest=_digest(f"{case_id}{trial}{code}"),
            agent=agent,
            verifier=verifier,
            claim=claim,
            verdict=verdict,
        )
    ]
    stop = (
        "passed"
        if outcome is Outcome.PASS
        else {"I": "infra_error", "E": "evaluator_error", "A": "abstained"}.get(
            code, "single_attempt"
        )
    )
    if code == "R":
        first = Verdict(
            outcome=Outcome.FAIL,
            failure_type=FailureType.TEST_FAILURE,
            reason="1 required test failed",
            failing_tests=("tests/test_x.py::test_y",),
        )
        attempts = [
            AttemptRecord(
                attempt=1,
                agent=agent,
                verifier=verifier,
                claim=claim,
                verdict=first,
                candidate_digest=_digest(f"{case_id}{trial}first"),
            ),
            attempts[0].model_copy(update={"attempt": 2, "feedback_blob": blobs[excerpt]}),
        ]
    return RunRecord(
        key=TrialKey(arm=arm, release=release, case_id=case_id, case_version=1, trial=trial),
        case_digest=_digest(case_id),
        system_digest=_digest(release),
        backend="local",
        attempts=tuple(attempts),
        verdict=verdict,
        stop_reason=stop,
        started_at=NOW,
        finished_at=NOW,
        harness_version="0.1.0",
    )


def make_run(
    root: Path,
    candidate: Mapping[str, str],
    baseline: Mapping[str, str] | None = None,
    *,
    stored: Mapping[str, str] | None = None,
    judgment: Mapping[str, str] | None = None,
    critical: Sequence[str] = (),
    excerpts: Mapping[str, str] | None = None,
    reexecute: bool = True,
    agent_argv: Sequence[str] = ("agent",),
    tweak: Callable[[Store, RunRecord], RunRecord] | None = None,
    policy: str | None = POLICY_YAML,
) -> tuple[Project, Store, str]:
    """Write a project with a gated run: per case, one letter per trial (see CODES).

    ``tweak`` rewrites each record of the run before it is stored (tampering, usage…);
    ``policy=None`` writes no policy file (the run records none: the built-in default).
    """
    root.mkdir(parents=True, exist_ok=True)
    if policy is None:
        (root / "harness.yaml").write_text(PROJECT_YAML.replace("policy: policy.yaml\n", ""))
    else:
        (root / "harness.yaml").write_text(PROJECT_YAML)
        (root / "policy.yaml").write_text(policy)
    project = load_project(root)
    store = Store(project.store_dir)
    pol = load_policy(root / "policy.yaml") if policy is not None else None
    judgment = dict(judgment or {})
    excerpts = dict(excerpts or {})
    k = max(len(v) for v in [*candidate.values(), *(baseline or {}).values()])
    all_cases = sorted({*candidate, *(baseline or {}), *judgment})
    blobs: dict[str, str] = {}

    def release_record(run_id: str, release: str, base: str | None) -> ReleaseRecord:
        return ReleaseRecord(
            run_id=run_id,
            release=release,
            system_digest=_digest(release),
            system=project.system_definition(release, _digest("tasks"), "0.1.0"),
            task_set="golden",
            task_set_digest=_digest("tasks"),
            cases={c: _digest(c) for c in all_cases},
            judgment_cases=tuple(sorted(judgment)),
            critical_cases=tuple(critical),
            k=k,
            backend="local",
            baseline=base,
            baseline_system_digest=_digest(base) if base else None,
            policy_digest=pol.digest if pol else None,
            policy=pol.policy.model_dump(mode="json") if pol else None,
            policy_file_digest=pol.file_digest if pol else None,
            created_at=NOW,
            harness_version="0.1.0",
        )

    # `{project}` in an agent command expands to the project folder, as in a real run.
    argv = tuple(a.replace("{project}", str(root)) for a in agent_argv)

    def write(path: Path, rec: RunRecord) -> None:
        path.mkdir(parents=True, exist_ok=True)
        (path / f"{rec.key.slug()}.json").write_text(rec.model_dump_json())

    def trials(arm: Arm, release: str, spec: Mapping[str, str]) -> list[RunRecord]:
        return [
            _record(
                store, arm, release, cid, t, code, excerpts.get(cid, DEFAULT_EXCERPT), blobs, argv
            )
            for cid, codes in spec.items()
            for t, code in enumerate(codes)
        ]

    if baseline is not None:
        bl_dir = project.baselines_dir / "prod"
        bl_dir.mkdir(parents=True, exist_ok=True)
        bf = BaselineFile(
            name="prod", promoted_at=NOW, release=release_record("prod-run", "prod", None)
        )
        (bl_dir / "baseline.json").write_text(bf.model_dump_json())
        for rec in trials(Arm.CANDIDATE, "prod", stored if stored is not None else baseline):
            write(bl_dir / "records", rec)
    run_id = "cand-run"
    recs = trials(Arm.CANDIDATE, "cand", {**candidate, **judgment})
    if baseline is not None and reexecute:
        recs += trials(Arm.BASELINE, "prod", baseline)
    opened = release_record(run_id, "cand", "prod" if baseline is not None else None)
    with Store(project.store_dir, sync=False).open_run(opened) as handle:
        for rec in recs:
            handle.add_trial(tweak(store, rec) if tweak else rec, {})
        handle.seal(True, [])
    return project, store, run_id


XSS = '<script>window.__xss = 1</script><img src=x onerror="window.__xss=2"> & </pre>'
MIXED = {
    "alpha": "PPPP",  # stable pass both arms
    "bravo": "PFPP",  # regression (baseline all-pass)
    "charlie": "WWWW",  # broken, critical, confident wrong
    "delta": "PPPI",  # infra error, otherwise passes
    "echo": "PPEP",  # evaluator error
    "foxtrot": "RRPP",  # fixed on the second attempt twice
    "golf": "ATFF",  # abstained, timeout with a bound, failures
}
MIXED_BASE = {
    "alpha": "PPPP",
    "bravo": "PPPP",
    "charlie": "PPPP",
    "delta": "PPPP",
    "echo": "PPPP",
    "foxtrot": "PPPF",
    "golf": "FFFF",
}


@pytest.fixture
def mixed(tmp_path: Path) -> tuple[Project, Store, str]:
    return make_run(
        tmp_path / "proj",
        MIXED,
        MIXED_BASE,
        judgment={"hotel": "PPFP"},
        critical=("charlie",),
        excerpts={"golf": XSS},
    )


# ------------------------------------------------------------------------------ HTML


def test_html_report_is_one_self_contained_file_with_the_decision(mixed):
    project, store, run_id = mixed
    path = write_html_report(project, store, run_id)
    assert path == project.reports_dir / run_id / "index.html"
    html = path.read_text()
    decision = decide_run(project, store, run_id)
    assert f'data-verdict="{decision.verdict}"' in html
    rel = store.release(run_id)
    for fact in (
        rel.system_digest,
        rel.task_set_digest,
        decision.decision.policy_digest,
        "2026-03-01 12:00:00 UTC",
        "demo-model@2",
    ):
        assert fact in html
    for reason in decision.decision.reasons:
        assert reason.code in html
    # No network: nothing is loaded from anywhere, only inline CSS/JS, data: icon.
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', html)
    assert '<link rel="stylesheet"' not in html and "<script src" not in html
    assert "default-src 'none'" in html


def test_script_in_verifier_output_and_reasons_is_text_never_markup(tmp_path):
    nasty_reason = "<script>alert('reason')</script>"
    project, store, run_id = make_run(tmp_path / "p", {"a": "FP"}, {"a": "PP"}, excerpts={"a": XSS})
    data = build_report(project, store, run_id)
    data = data.model_copy(update={"notes": (nasty_reason,)})
    html = render_html(data)
    assert "<script>window.__xss" not in html
    assert "<img src=x" not in html
    assert "&lt;script&gt;alert(&#39;reason&#39;)&lt;/script&gt;" in html
    # The regressed case's excerpt is in the page, as escaped text.
    assert "&lt;script&gt;window.__xss = 1&lt;/script&gt;" in html
    # Only the report's own script runs: its hash is the only script source allowed.
    assert html.count("<script") == 1
    folder = write_report_folder(project, store, run_id)
    page = (folder.root / "evidence" / "1.html").read_text()
    assert "<script" not in page and "&lt;script&gt;window.__xss" in page


def test_per_case_table_marks_every_trial_and_links_failures_to_evidence(mixed):
    project, store, run_id = mixed
    folder = write_report_folder(project, store, run_id)
    html = folder.root.joinpath("index.html").read_text()
    rows = re.findall(r'<tr id="case-\d+" class="([^"]*)" data-flags="([^"]*)"', html)
    assert len(rows) == len(MIXED)
    by_case = dict(zip(sorted(MIXED), rows, strict=True))
    assert "regression" in by_case["bravo"][0]
    assert "regression" not in by_case["alpha"][0]
    assert "critical" in by_case["charlie"][1] and "broken" in by_case["charlie"][1]
    assert "errors" in by_case["delta"][1]
    # One mark per trial per arm; judgment lane marks are listed apart.
    table = html.split('<table id="cases">', 1)[1].split("</table>", 1)[0]
    trials = sum(len(v) for v in MIXED.values()) + sum(len(v) for v in MIXED_BASE.values())
    assert len(re.findall(r'class="m [pfie]', table)) == trials
    # Every non-pass mark links to an evidence item that exists on its evidence page.
    links = re.findall(r'<a class="m [fie][^"]*" href="(evidence/\d+\.html)#([^"]+)"', table)
    assert len(links) == sum(
        c not in "PR" for v in [*MIXED.values(), *MIXED_BASE.values()] for c in v
    )
    for page, anchor in links:
        assert f' id="{anchor}"' in (folder.root / page).read_text()
    assert "hotel" not in table and "hotel" in html.split('id="judgment"', 1)[1]


def test_evidence_keeps_failures_infra_and_evaluator_errors_apart(mixed):
    project, store, run_id = mixed
    data = build_report(project, store, run_id)
    fails = [e for g in data.failures for e in g.items]
    infra = [e for g in data.infra_errors for e in g.items]
    evaluator = [e for g in data.evaluator_errors for e in g.items]
    assert {e.outcome for e in fails} == {Outcome.FAIL}
    assert [(e.case_id, e.trial) for e in infra] == [("delta", 3)]
    assert [(e.case_id, e.trial) for e in evaluator] == [("echo", 2)]
    timeout = next(e for e in fails if e.case_id == "golf" and e.trial == 1)
    assert timeout.bound is not None and timeout.bound.kind is Termination.WALL_CLOCK
    assert timeout.bound_phase == "verifier"
    wrong = next(e for e in fails if e.case_id == "charlie")
    assert wrong.failing_tests == ("tests/test_x.py::test_y",) and wrong.claimed_success
    assert wrong.candidate_digest and wrong.paths[0].label == "run record" and wrong.paths[0].exists
    assert wrong.paths[0].kind == "record" and wrong.paths[0].ref == "candidate--charlie--v1--t000"
    assert any(p.label == "verifier stdout" and p.exists for p in wrong.paths)
    assert "hotel" not in {c.case_id for c in data.cases}
    assert [j.case_id for j in data.judgment] == ["hotel"]


def test_a_trial_failed_by_a_mutant_shows_the_mutant_runs_output(tmp_path):
    """The verifier's own run passed; the reviewer must read the run that decided."""

    def by_mutant(store: Store, rec: RunRecord) -> RunRecord:
        last = rec.attempts[-1]
        if rec.outcome is Outcome.PASS or last.verifier is None:
            return rec
        passed = last.verifier.model_copy(update={"exit_code": 0, "excerpt": "64 passed"})
        caught = passed.model_copy(update={"exit_code": 1, "excerpt": "FIRST MUTANT CAUGHT"})
        checks = (
            CheckResult(name="mutant.first", ok=True),
            CheckResult(name="mutant.second", ok=False, detail="not caught"),
        )
        verdict = rec.verdict.model_copy(update={"checks": checks})
        update = {"verifier": passed, "mutants": (caught, last.verifier), "verdict": verdict}
        attempt = last.model_copy(update=update)
        return rec.model_copy(update={"attempts": (attempt,), "verdict": verdict})

    project, store, run_id = make_run(
        tmp_path / "p", {"a": "FP"}, excerpts={"a": "MUTANT RUN OUTPUT"}, tweak=by_mutant
    )
    data = build_report(project, store, run_id)
    [evidence] = [e for g in data.failures for e in g.items]
    assert evidence.excerpt is not None
    assert data.excerpts[evidence.excerpt] == "MUTANT RUN OUTPUT"
    assert any(p.label == "mutant run stdout" and p.exists for p in evidence.paths)


def test_attempts_lineage_and_claim_metrics_per_arm_and_case(mixed):
    project, store, run_id = mixed
    data = build_report(project, store, run_id)
    cand = data.arm("candidate")
    assert cand is not None and cand.claims is not None
    n = sum(len(v) for v in MIXED.values())
    assert cand.attempts_used == {1: n - 2, 2: 2}
    assert cand.stop_reasons["abstained"] == 1 and cand.stop_reasons["infra_error"] == 1
    # Claimed success: P, R and W trials. Verified: P/R pass, W fail; infra/eval stay out.
    claimed_pass = sum(c in "PR" for v in MIXED.values() for c in v)
    assert cand.claims.claim_verified_fail == 4
    assert cand.claims.claim_match_rate == pytest.approx(claimed_pass / (claimed_pass + 4))
    assert cand.claims.confident_wrong == 4
    assert cand.claims.abstained == 1
    foxtrot = next(c for c in data.cases if c.case_id == "foxtrot")
    assert foxtrot.candidate is not None and foxtrot.candidate.claims is not None
    assert foxtrot.candidate.claims.attempts_used == pytest.approx(1.5)
    assert [m.attempts for m in foxtrot.candidate.marks] == [2, 2, 1, 1]


def test_cost_sums_agent_and_verifier_time_and_reported_usage(mixed):
    project, store, run_id = mixed
    data = build_report(project, store, run_id)
    cand = data.arm("candidate")
    assert cand is not None and cand.cost is not None
    trials = sum(len(v) for v in MIXED.values()) + len("PPFP")  # judgment lane costs too
    attempts = trials + 2
    assert cand.cost.trials == trials and cand.cost.attempts == attempts
    assert cand.cost.agent_seconds == pytest.approx(5.0 * attempts)
    assert cand.cost.verifier_seconds == pytest.approx(2.0 * attempts)
    assert cand.cost.usage == pytest.approx(
        {
            "cost_usd": 0.02 * attempts,
            "input_tokens": 1000 * attempts,
            "output_tokens": 250 * attempts,
        }
    )


def test_plots_have_one_bar_per_compared_case_and_count_every_case(mixed):
    project, store, run_id = mixed
    data = build_report(project, store, run_id)
    delta = delta_plot(data.cases)
    assert delta is not None
    bars = [s for s in delta.shapes if s.kind == "rect"]
    assert len(bars) == sum(c.delta_pass_rate is not None for c in data.cases)
    assert sum("reg" in b.cls.split() for b in bars) == sum(c.regression for c in data.cases)
    dist = distribution_plot(data.arms)
    for arm in data.arms:
        n = sum(
            int(s.title.split(": ")[1].split()[0])
            for s in dist.shapes
            if s.kind == "rect" and s.title.startswith(arm.title + ":")
        )
        assert n == arm.summary.cases_with_data


def test_large_runs_render_marks_compactly_without_per_trial_svg(tmp_path):
    spec = {f"case-{i:03d}": "PPFPPPIPPP" for i in range(60)}
    project, store, run_id = make_run(tmp_path / "p", spec, spec)
    html = render_html(build_report(project, store, run_id))
    assert html.count("<svg") == 4
    table = html.split('<table id="cases">', 1)[1].split("</table>", 1)[0]
    marks = re.findall(r'<(?:i|a) class="m [pfie][^>]*></(?:i|a)>', table)
    assert len(marks) == 60 * 10 * 2
    assert max(len(m) for m in marks) < 120


def test_report_without_baseline_says_no_comparison_was_made(tmp_path):
    project, store, run_id = make_run(tmp_path / "p", {"a": "PPF", "b": "PPP"})
    paths = write_reports(
        project, store, run_id, junit=tmp_path / "j.xml", summary=None, json_path=None
    )
    html = paths[0].read_text()
    assert "No comparison was made" in html
    assert "baseline trials" not in html
    suites = list(JUnitXml.fromfile(str(paths[1])))
    assert [s.name for s in suites] == ["candidate: cand"]


@pytest.mark.parametrize(
    ("policy", "alpha"),
    [(POLICY_YAML + "alpha: 0.1\ncritical_cases: [b]\n", "0.1"), (None, "0.05")],
    ids=["recorded", "none-recorded"],
)
def test_the_report_states_the_alpha_and_critical_cases_of_the_policy_applied(
    tmp_path, policy, alpha
):
    project, store, run_id = make_run(
        tmp_path / "p", {"a": "PFFF", "b": "PPFP"}, {"a": "PPPP", "b": "PPPP"}, policy=policy
    )
    html = write_html_report(project, store, run_id).read_text()
    assert f"family-wise α = {alpha} (weighted Holm" in html
    data = build_report(project, store, run_id)
    critical = {c.case_id for c in data.cases if c.critical}
    assert critical == ({"b"} if policy else set())


# ------------------------------------------------------------------------------ JUnit / MD / JSON


def test_junit_fails_only_the_cases_the_gate_names(mixed, tmp_path):
    project, store, run_id = mixed
    out = write_reports(
        project, store, run_id, junit=tmp_path / "ci" / "junit.xml", summary=None, json_path=None
    )
    xml = JUnitXml.fromfile(str(out[1]))
    suites = {s.name: s for s in xml}
    assert list(suites) == ["candidate: cand"]  # the baseline is context, not under test
    cand = suites["candidate: cand"]
    # bravo (regression) and charlie (broken, critical) are named by the gate; golf failed
    # every trial but was failing in the baseline too, delta/echo had errors: not failed.
    assert (cand.tests, cand.failures, cand.errors, cand.skipped) == (8, 2, 0, 1)
    results = {c.name: c.result for c in cand}
    assert results["golf"] == [] and results["delta"] == [] and results["echo"] == []
    assert isinstance(results["hotel"][0], Skipped)
    bravo = results["bravo"][0]
    assert isinstance(bravo, Failure) and "REGRESSION" in bravo.message
    assert bravo.type == "regression"
    charlie = results["charlie"][0]
    assert "BROKEN" in charlie.message and "critical case" in charlie.message
    assert "critical_case_broken" in charlie.message
    assert "tests/test_x.py::test_y" in (charlie.text or "")
    props = {p.name: p.value for p in cand.properties()}
    assert props["verdict"] == decide_run(project, store, run_id).verdict
    # Each case carries its trials' outcomes as properties.
    root = ET.parse(out[1]).getroot()
    golf = root.find(".//testcase[@name='golf']")
    assert golf is not None
    trial_props = {p.get("name"): p.get("value") for p in golf.iter("property")}
    assert trial_props["trial.0"] == "fail (abstained)"
    assert trial_props["trial.1"] == "fail (timeout)"
    assert trial_props["label"] == "stable_fail"
    delta = root.find(".//testcase[@name='delta']")
    assert delta is not None
    assert {p.get("value") for p in delta.iter("property")} >= {"infra_error"}


def test_junit_baseline_suite_on_request_never_fails(mixed):
    project, store, run_id = mixed
    data = build_report(project, store, run_id)
    root = ET.fromstring(render_junit(data, baseline=True))
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["candidate: cand", "baseline: prod"]
    assert suites[1].get("failures") == "0" and suites[1].get("tests") == "7"
    assert root.get("failures") == "2"


def test_junit_a_flaky_case_the_gate_does_not_name_is_not_a_failed_test(tmp_path):
    # A flaky candidate case (one failed trial) the gate accepts is not a failed test.
    project, store, run_id = make_run(
        tmp_path / "p", {"a": "PPPP", "b": "PFPP"}, {"a": "PPPP", "b": "PFPF"}
    )
    data = build_report(project, store, run_id)
    assert not any(c.named_by for c in data.cases)
    root = ET.fromstring(render_junit(data))
    assert root.get("failures") == "0" and root.get("errors") == "0"
    b = root.find(".//testcase[@name='b']")
    assert b is not None and b.find("failure") is None
    assert "trial 1: fail" in (b.findtext("system-out") or "")


def test_markdown_summary_renders_the_same_decision(mixed, tmp_path):
    project, store, run_id = mixed
    out = write_reports(
        project, store, run_id, junit=None, summary=tmp_path / "summary.md", json_path=None
    )
    md = out[1].read_text()
    decision = decide_run(project, store, run_id)
    assert md.splitlines()[0].endswith(
        f"**{decision.verdict.upper()}** — release `cand` vs baseline `prod`"
    )
    for reason in decision.decision.reasons:
        assert _esc(reason.message) in md
    assert "charlie **broken, regression, critical**" in md
    assert "alpha" not in md.split("### Cases that need a look", 1)[1]
    assert "Full report: `index.html`" in md and str(tmp_path) not in md


def test_json_has_the_decision_and_the_per_case_table(mixed, tmp_path):
    from harness.report.schema import ReportDocument

    project, store, run_id = mixed
    out = write_reports(
        project, store, run_id, junit=None, summary=None, json_path=tmp_path / "r.json"
    )
    doc = json.loads(out[1].read_text())
    ReportDocument.model_validate(doc)
    decision = decide_run(project, store, run_id)
    assert doc["schema_version"] == 2
    assert doc["verdict"] == decision.verdict
    assert doc["decision"]["policy_digest"] == decision.decision.policy_digest
    assert [r["code"] for r in doc["reasons"]] == [r.code for r in decision.decision.reasons]
    rows = {c["case_id"]: c for c in doc["cases"]}
    assert set(rows) == set(MIXED)
    assert rows["bravo"]["regression"] and rows["bravo"]["named_by"][0] == "regression"
    assert [m["outcome"] for m in rows["bravo"]["candidate"]["marks"]] == [
        "pass",
        "fail",
        "pass",
        "pass",
    ]
    assert rows["alpha"]["named_by"] == []
    assert rows["delta"]["candidate"]["summary"]["infra_errors"] == 1
    assert [m["attempts"] for m in rows["foxtrot"]["candidate"]["marks"]] == [2, 2, 1, 1]
    assert doc["judgment"][0]["case_id"] == "hotel"


def test_bad_output_path_is_a_config_error_naming_the_option(mixed, tmp_path):
    project, store, run_id = mixed
    (tmp_path / "adir").mkdir()
    with pytest.raises(ConfigError) as err:
        write_reports(project, store, run_id, junit=None, summary=None, json_path=tmp_path / "adir")
    assert err.value.field == "--json" and "adir" in str(err.value)


def test_unknown_run_is_a_store_error(mixed):
    project, store, _ = mixed
    with pytest.raises(StoreError, match="nope"):
        write_html_report(project, store, "nope")


# ------------------------------------------------------------------------------ properties


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("small")
    project, store, run_id = make_run(root / "p", {"a": "PF", "b": "PI"}, {"a": "PP", "b": "PP"})
    return build_report(project, store, run_id)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=80))
def test_junit_is_valid_xml_for_any_reason_text(small, text):
    fails = small.failures[0]
    item = fails.items[0].model_copy(update={"reason": text, "failing_tests": (text,)})
    data = small.model_copy(
        update={"failures": (fails.model_copy(update={"items": (item,)}),), "notes": (text,)}
    )
    root = ET.fromstring(render_junit(data))
    # The gate warns for the infra error, not because of case a: its evidence is system-out.
    out = root.find(".//testcase[@name='a']/system-out")
    assert out is not None and out.text is not None
    legal = re.sub("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]", "\ufffd", text)
    # ElementTree normalises carriage returns in text to newlines, as any XML parser must.
    assert legal.replace("\r\n", "\n").replace("\r", "\n") in out.text


@settings(max_examples=200)
@given(text=st.text(max_size=60))
def test_markdown_escaping_keeps_record_text_inert(text):
    out = _esc(text)
    assert "<" not in out and ">" not in out and "\n" not in out
    assert re.search(r"(?<!\\)\|", out) is None
    assert re.search(r"(?<!\\)`", out) is None


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(alphabet=st.sampled_from("<>&\"'/ scriptabc=\n"), max_size=40))
def test_html_shows_any_note_text_escaped(small, tmp_path, text):
    html = render_html(small.model_copy(update={"notes": (text,)}))
    note = html.split('<span class="sev sev-info">note</span>', 1)[1].split("</li>", 1)[0]
    assert "<" not in note and ">" not in note
    unescaped = (
        note.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#34;", '"')
        .replace("&#39;", "'")
        .replace("&amp;", "&")
    )
    assert unescaped == text


def test_a_decision_already_computed_is_not_recomputed(tmp_path, monkeypatch):
    import harness.report.data as data_mod
    from harness.decision import decide_run
    from harness.report import write_html_report

    project, store, run_id = make_run(tmp_path / "proj", {"a": "PPPFP"}, {"a": "PPPPP"})
    decision = decide_run(project, store, run_id)
    fresh = write_html_report(project, store, run_id).read_text()

    def forbidden(*args, **kwargs):
        raise AssertionError("decide_run must not run again when a decision is given")

    monkeypatch.setattr(data_mod, "decide_run", forbidden)
    again = write_html_report(project, store, run_id, decision).read_text()
    # The only difference allowed is the clock: the two writes may straddle a second.
    stamp = re.compile(r"Generated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")
    assert stamp.search(fresh) is not None
    assert stamp.sub("Generated <t>", again) == stamp.sub("Generated <t>", fresh)
