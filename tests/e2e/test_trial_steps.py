"""Where a trial's time goes: the steps on real runs, and the overhead in `show` and the report."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import harness, make_project

from harness.report.schema import ReportDocument, ShowDocument
from harness.store.records import STEP_NAMES

pytestmark = pytest.mark.integration

# Bookkeeping between steps (a few calls, a list append) is all the steps leave out; the
# margin is wide for a loaded machine (each step is also checked to be there, below).
_MARGIN_S = 1.0


def _run(project: Path, release: str) -> str:
    done = harness(project, "run", "--release", release, "--k", "2", "--fresh", "--jobs", "1")
    assert done.returncode in (0, 1, 3), done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return re.search(r"run (\S+) ·", done.stderr).group(1)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    root = make_project(tmp_path_factory.mktemp("steps") / "proj", n_cases=2)
    assert harness(root, "cases", "lock").returncode == 0
    # learner: attempts that fail, get feedback and are retried; bad: trials that fail.
    return root, _run(root, "learner"), _run(root, "bad")


def _show(root: Path, run_id: str) -> ShowDocument:
    done = harness(root, "show", run_id, "--json")
    assert done.returncode == 0, done.stderr
    return ShowDocument.model_validate_json(done.stdout)


def test_every_trial_carries_its_steps_within_its_wall_time(runs):
    root, learner, bad = runs
    trials = [*_show(root, learner).trials, *_show(root, bad).trials]
    assert len(trials) == 8
    for t in trials:
        s = t.steps
        assert s is not None, t.key.slug()
        recorded = (t.finished_at - t.started_at).total_seconds()
        # The steps never overlap: inside the trial they add up to no more than its wall time.
        assert s.steps_s() <= s.wall_s + 1e-6
        assert s.wall_s <= recorded + _MARGIN_S
        # ... and they account for it: only bookkeeping between steps is left out.
        assert s.wall_s - s.steps_s() <= _MARGIN_S, s
        for name in ("workspace", "agent", "candidate", "verifier_tree", "verifier"):
            assert getattr(s, name) > 0, (name, s)
        assert s.store is not None and s.store > 0
        # The commands ran inside their steps: each step is at least its command's time.
        agent_cmd = sum(a.agent.duration_s for a in t.attempts if a.agent)
        verifier_cmd = sum(a.verifier.duration_s for a in t.attempts if a.verifier)
        assert agent_cmd <= s.agent + 0.01
        assert verifier_cmd <= s.verifier + 0.01
        own = t.overhead_s()
        assert own is not None and 0 < own <= s.wall_s + s.store
    retried = [t for t in trials if len(t.attempts) > 1]
    assert retried, "the learner should have needed a second attempt somewhere"
    assert all(t.steps is not None and t.steps.feedback > 0 for t in retried)
    assert set(trials[0].steps.model_dump()) == {"wall_s", *STEP_NAMES}  # type: ignore[union-attr]


def test_show_and_the_report_put_the_overhead_beside_the_verifier(runs):
    root, _, bad = runs
    trials = _show(root, bad).trials
    done = harness(root, "show", bad, env={"COLUMNS": "250"})
    assert done.returncode == 0, done.stderr
    assert re.search(r"verifier s\s+harness s", done.stdout)
    for t in trials:
        row = next(line for line in done.stdout.splitlines() if t.key.slug() in line)
        assert f"{t.overhead_s():.2f}" in row.split(), row

    report = root / "reports" / bad
    doc = ReportDocument.model_validate_json((report / "report.json").read_text())
    [arm] = [a for a in doc.arms if a.cost is not None]
    hc = arm.cost.harness  # type: ignore[union-attr]
    assert hc is not None and hc.trials == 4
    assert hc.overhead_s == pytest.approx(sum(t.overhead_s() or 0 for t in trials))
    html = (report / "index.html").read_text()
    assert "harness overhead" in html
    assert re.search(r'class="n overhead"[^>]*>[^<]*\d', html)
    summary = (report / "summary.md").read_text()
    assert re.search(r"harness overhead of .+: [\d.]+ s over 4 trials, median [\d.]+ s", summary)
    # The trial view (evidence of the failed trials) shows each trial's overhead.
    pages = list((report / "evidence").glob("*.html"))
    assert pages
    evidence = "".join(p.read_text() for p in pages)
    assert evidence.count("harness overhead") == 4
