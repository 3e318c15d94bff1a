"""PASS and FAIL reports and the release history in headless Chromium at 1400 and 800 px.

Screenshots go to ``$HARNESS_SCREENS`` (default: a ``screens`` folder in pytest's temporary
directory), never into the repository. The checks: nothing is wider than the viewport,
the plots carry their case and release labels, the legends name every colour.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import pytest
from test_report import MIXED, MIXED_BASE, make_run
from test_report_browser import ARGS, CHROMIUM, _chromium

from harness.decision import decide_run
from harness.report import write_html_report
from harness.report.history import RunListing, mark_partial, render_history, summary_from_decision

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def _pass_run(root: Path) -> tuple[Any, Any, str]:
    cand = {f"case-{i:02d}": "PPPPP" for i in range(12)}
    base = dict(cand)
    cand["case-03"] = "PFFFF"
    cand["case-05"], base["case-05"] = "FPPPP", "FFFFF"
    return make_run(root, cand, base)


def _screens(tmp_path: Path) -> Path:
    out = Path(os.environ.get("HARNESS_SCREENS") or tmp_path / "screens")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _history(tmp_path: Path) -> Path:
    """Three releases (and one partial run) through the real summary and history code."""
    listings, summaries = [], {}
    start = dt.datetime(2026, 11, 1, 9, 0, tzinfo=dt.UTC)
    specs = [("2026.11.1", "pass"), ("2026.11.2", "fail"), ("2026.11.3", "pass"),
             ("2026.11.3-hotfix", "partial")]  # fmt: skip
    for i, (release, kind) in enumerate(specs):
        if kind == "fail":
            cand = {f"case-{i:02d}": "PPPPP" for i in range(12)}
            base = dict(cand)
            cand.update({"case-01": "FFFFF", "case-02": "PFFFF", "case-07": "FFFPF"})
            project, store, run_id = make_run(tmp_path / f"h{i}", cand, base)
        else:
            project, store, run_id = _pass_run(tmp_path / f"h{i}")
        s = summary_from_decision(decide_run(project, store, run_id))
        when = start + dt.timedelta(days=7 * i)
        s = s.model_copy(update={"run_id": f"run-{i}", "release": release, "created_at": when})
        if kind == "partial":
            s = s.model_copy(update={"cases": dict(list(s.cases.items())[:1])})
        summaries[s.run_id] = s
        listings.append(RunListing(
            run_id=s.run_id, release=release, system_digest=s.system_digest,
            task_set=s.task_set, k=s.k, baseline=s.baseline, created_at=when,
            verdict=s.verdict, decided_at=s.decided_at, candidate=s.candidate,
            named_cases=s.named_cases, report=None, cases=len(s.cases)))  # fmt: skip
    page = tmp_path / "history" / "index.html"
    page.parent.mkdir()
    page.write_text(render_history(mark_partial(listings), summaries))
    return page


def _texts(page: Any, selector: str) -> list[str]:
    texts: list[str] = page.eval_on_selector_all(
        selector, "els => els.map(e => (e.textContent || '').trim())"
    )
    return texts


def _fits(page: Any, width: int) -> None:
    wide = page.evaluate("() => document.documentElement.scrollWidth")
    assert wide <= width, f"page is {wide} px wide in a {width} px viewport"


def test_pass_fail_and_history_pages_fit_and_carry_labels(tmp_path: Path) -> None:
    sync_playwright = _chromium()
    screens = _screens(tmp_path)
    pages = {
        "pass": write_html_report(*_pass_run(tmp_path / "pass")),
        "fail": write_html_report(
            *make_run(tmp_path / "fail", MIXED, MIXED_BASE, critical=("charlie",))
        ),
        "history": _history(tmp_path),
    }
    taken: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            for width in (1400, 800):
                page = browser.new_page(viewport={"width": width, "height": 1000})
                for name, path in pages.items():
                    page.goto(path.as_uri())
                    shot = screens / f"{name}-{width}.png"
                    page.screenshot(path=str(shot), full_page=True)
                    taken.append(shot.name)
                    _fits(page, width)
                    if name != "history":
                        verdict = page.locator("#decision").get_attribute("data-verdict")
                        assert verdict == name
                        # the per-case change plot names its cases in text, not hover only
                        texts = " ".join(_texts(page, "main svg text"))
                        assert ("case-03" if name == "pass" else "charlie") in texts
                    else:
                        ticks = _texts(page, "#trend text.xrel")
                        assert ticks[:3] == ["2026.11.1", "2026.11.2", "2026.11.3"]
                        assert "2026.11.3-hotfix" not in ticks  # partial: off the trend
                        legend = _texts(page, "#trend .legend span")
                        assert len([t for t in legend if t]) == 2 + 6
                        assert page.locator("text=partial: 1 of 12 cases").count() == 1
                page.close()
        finally:
            browser.close()
    assert sorted(taken) == sorted(f"{n}-{w}.png" for n in pages for w in (1400, 800))
