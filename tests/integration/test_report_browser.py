"""The HTML report opened in a real headless Chromium (Debian's, driven by Playwright).

No browser is ever downloaded: the distribution's ``/usr/bin/chromium`` is used. Without
it the test is skipped, or FAILS when ``HARNESS_REQUIRE_BROWSER=1`` (CI).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from test_report import XSS, make_run

from harness.report import write_html_report

pytestmark = [pytest.mark.browser, pytest.mark.integration]

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

CANDIDATE = {
    "csv-quote-escape": "PPPPP",
    "csv-trailing-field": "PPPFP",  # regression
    "date-parse-iso": "PFPFP",  # flaky both arms
    "json-report-artifact": "WWWWW",  # broken, critical, confident wrong
    "config-nested": "RRPPP",  # fixed by correction attempts
    "cli-help-text": "PPPIP",  # infra error
    "bool-on-off": "PPPPP",  # improvement
    "delete-test-refusal": "AAPAA",  # abstains
    "slow-import": "TPPPP",  # timeout, a bound fired
    "unicode-header": "PPEPP",  # evaluator error
    "xss-output": "FPPPP",  # verifier output with <script>
    "join-minimal": "PPPPP",
}
BASELINE = {
    "csv-quote-escape": "PPPPP",
    "csv-trailing-field": "PPPPP",
    "date-parse-iso": "PPFPF",
    "json-report-artifact": "PPPPP",
    "config-nested": "PPFPP",
    "cli-help-text": "PPPPP",
    "bool-on-off": "FFPFF",
    "delete-test-refusal": "FFPFF",
    "slow-import": "PPPPP",
    "unicode-header": "PPPPP",
    "xss-output": "PPPPF",
    "join-minimal": "PPPPP",
}


def _chromium() -> Any:
    reason = ""
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} not found (apt-get install chromium, or ci/system-deps.sh)"
    else:
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            reason = "the playwright Python package is not installed"
        else:
            return sync_playwright
    if os.environ.get("HARNESS_REQUIRE_BROWSER") == "1":
        pytest.fail(f"HARNESS_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


def _column(page: Any, index: int) -> list[str]:
    return page.eval_on_selector_all(
        "#cases tbody tr:not([hidden])",
        f"rows => rows.map(r => r.cells[{index}].getAttribute('data-v'))",
    )


def test_report_opens_sorts_filters_and_shows_evidence_as_text(tmp_path: Path) -> None:
    sync_playwright = _chromium()
    project, store, run_id = make_run(
        tmp_path / "proj",
        CANDIDATE,
        BASELINE,
        judgment={"readme-wording": "PPFPP"},
        critical=("json-report-artifact",),
        excerpts={"xss-output": XSS},
    )
    path = write_html_report(project, store, run_id)
    ARTIFACTS.mkdir(exist_ok=True)

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            problems: list[str] = []
            requests: list[str] = []
            page.on(
                "console",
                lambda m: (
                    problems.append(f"console {m.type}: {m.text}")
                    if m.type in ("error", "warning")
                    else None
                ),
            )
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(path.as_uri())

            # The banner and the table are there.
            banner = page.locator("#decision")
            assert banner.is_visible()
            verdict = banner.get_attribute("data-verdict")
            assert verdict in ("pass", "warn", "fail", "blocked")
            assert page.locator("#decision .verdict").inner_text() == verdict.upper()
            assert page.locator("#cases tbody tr").count() == len(CANDIDATE)
            page.screenshot(path=str(ARTIFACTS / "report-top.png"))
            page.screenshot(path=str(ARTIFACTS / "report-full.png"), full_page=True)
            page.locator("#per-case").screenshot(path=str(ARTIFACTS / "report-table.png"))

            # Sorting: the candidate pass-rate column, ascending then descending.
            header = page.locator("#cases thead th").nth(3)
            assert header.inner_text().strip() == "pass rate"
            header.click()
            up = [float(v) for v in _column(page, 3)]
            assert up == sorted(up) and up[0] == 0.0
            header.click()
            down = [float(v) for v in _column(page, 3)]
            assert down == sorted(down, reverse=True) and down[0] == 1.0
            page.locator("#cases thead th").nth(0).click()
            assert _column(page, 0) == sorted(CANDIDATE)

            # Filtering: by flag, then by text.
            page.select_option("#f", "regression")
            shown = _column(page, 0)
            # All-pass in the baseline, not all-pass in the candidate (errors are not fails).
            assert set(shown) == {"csv-trailing-field", "json-report-artifact", "slow-import"}
            assert page.locator("#shown").inner_text() == f"{len(shown)} of {len(CANDIDATE)} cases"
            page.select_option("#f", "critical")
            assert _column(page, 0) == ["json-report-artifact"]
            page.select_option("#f", "")
            page.fill("#q", "csv")
            assert _column(page, 0) == ["csv-quote-escape", "csv-trailing-field"]
            page.fill("#q", "")
            assert len(_column(page, 0)) == len(CANDIDATE)

            # Evidence: the failing mark opens its trial on an evidence page; output is text.
            page.locator("#cases tr", has_text="xss-output").locator("a.m.f").first.click()
            page.wait_for_load_state()
            assert "/evidence/" in page.url
            excerpt = page.locator(".ev:target pre.excerpt").first
            excerpt.wait_for(state="visible")
            assert excerpt.inner_text() == XSS.strip() or excerpt.text_content() == XSS
            assert page.evaluate("window.__xss") is None
            assert page.locator(".ev:target img").count() == 0
            page.screenshot(path=str(ARTIFACTS / "report-evidence.png"))

            assert problems == []
            assert all(re.match(r"^(file|data|about):", u) for u in requests), requests
        finally:
            browser.close()


def test_a_copied_report_folder_shows_a_failing_trials_diff_and_log_offline(tmp_path: Path) -> None:
    """The folder is copied elsewhere and the store deleted: the evidence is still there."""
    import shutil

    from test_report import DIFF_MARK

    from harness.report import write_report_folder

    sync_playwright = _chromium()
    project, store, run_id = make_run(
        tmp_path / "proj", CANDIDATE, BASELINE, critical=("json-report-artifact",)
    )
    write_report_folder(project, store, run_id)
    folder = tmp_path / "uploaded" / "report"
    shutil.copytree(project.reports_dir / run_id, folder)
    shutil.rmtree(project.root)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            requests: list[str] = []
            problems: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: problems.append(f"failed: {r.url}"))
            page.goto((folder / "index.html").as_uri())
            # The page leads with the broken critical case: its diff and log are right there.
            named = page.locator("#attention .named").first
            assert named.get_attribute("data-case") == "json-report-artifact"
            assert DIFF_MARK in named.locator("pre.diff").first.inner_text()
            assert "AssertionError" in named.locator("pre.log").first.inner_text()
            page.screenshot(path=str(ARTIFACTS / "report-attention.png"))
            # The trial's links: its diff beside it, the full log one click away in the folder.
            named.locator("a[data-kind='candidate diff']").first.click()
            assert DIFF_MARK in page.locator("pre.diff:target").inner_text()
            named.locator("a[data-kind='verifier stdout']").first.click()
            page.wait_for_load_state()
            assert page.url.startswith((folder / "files").as_uri())
            assert "AssertionError" in page.locator("body").inner_text()
            page.go_back()
            # And a failing mark of another case opens its evidence page, diff included.
            page.locator("#cases tr", has_text="date-parse-iso").locator("a.m.f").first.click()
            page.wait_for_load_state()
            target = page.locator(".ev:target")
            assert "date-parse-iso" in target.locator("h4").inner_text()
            assert DIFF_MARK in target.locator("pre.diff").first.inner_text()
            target.locator("details.record summary").click()
            record = target.locator("details.record pre").inner_text()
            assert '"case_id": "date-parse-iso"' in record
            page.go_back()
            page.goto((folder / "evidence" / "1.html").as_uri())
            assert problems == [], problems
            root = folder.as_uri()
            outside = [u for u in requests if not u.startswith((root, "data:"))]
            assert requests and outside == [], outside
        finally:
            browser.close()


def test_bundled_example_report_from_a_real_run_opens_cleanly(tmp_path: Path) -> None:
    """The bundled golden set, run for real (k=1) against its stored baseline, then opened."""
    import shutil
    import subprocess
    import sys

    sync_playwright = _chromium()
    repo = Path(__file__).resolve().parents[2]
    root = tmp_path / "example"
    root.mkdir()
    for name in ("harness.yaml", "policy.yaml"):
        shutil.copy2(repo / name, root / name)
    for name in ("cases", "orchestration", "baselines", "env", "examples"):
        shutil.copytree(repo / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--release", "candidate", "--k", "1",
         "--baseline", "production-previous"],
        cwd=root, capture_output=True, text=True, env=env, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 1, 3), done.stdout + done.stderr
    [report] = [p for p in (root / "reports").glob("*/index.html") if p.parent.name != "latest"]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            problems: list[str] = []
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on(
                "console",
                lambda m: problems.append(m.text) if m.type in ("error", "warning") else None,
            )
            page.goto(report.as_uri())
            verdict = page.locator("#decision .verdict").inner_text().lower()
            assert verdict in {"pass", "warn", "fail"}
            assert verdict.upper() in done.stdout
            assert page.locator("#cases tbody tr").count() == 8  # the scored exec cases
            assert "readme-cli-docs" in page.content()  # the judgment lane, listed apart
            page.fill("#q", "report-json")
            assert page.locator("#shown").inner_text() == "1 of 8 cases"
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "bundled-report.png"), full_page=False)
            assert problems == []
        finally:
            browser.close()
