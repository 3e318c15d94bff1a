"""How a large report behaves in a real browser (prints timings and ratios; no pass/fail).

Renders the report for ``--cases`` cases x ``--k`` trials x 2 arms of synthetic records,
opens it in Debian's headless Chromium through Playwright, and times: load to ready,
a text filter, a flag filter, and a column sort. Each is reported next to the same
operation's baseline: loading a plain static page of the same size (the HTML with its
script removed), so the ratio shows what the report's script costs.

    python bench/report_browser.py [--cases 1000] [--k 10]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from report_speed import synthetic
from test_report import make_run

from harness.report import write_html_report

ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def timed(fn) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args()
    cand, base = synthetic(args.cases, args.k)
    with tempfile.TemporaryDirectory(prefix="report-browser-") as tmp:
        root = Path(tmp)
        project, store, run_id = make_run(root / "proj", cand, base)
        html = write_html_report(project, store, run_id)
        static = root / "static.html"
        static.write_text(re.sub(r"<script\b.*?</script>", "", html.read_text(), flags=re.S))
        size = html.stat().st_size / 1e6
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            t_static = timed(lambda: page.goto(static.as_uri(), wait_until="load"))
            t_load = timed(lambda: page.goto(html.as_uri(), wait_until="load"))
            rows = page.locator("#cases tbody tr").count()
            t_text = timed(
                lambda: (
                    page.fill("#q", "case-09"),
                    page.wait_for_function(
                        "document.querySelector('#shown').innerText.startsWith('1')"
                    ),
                )
            )
            page.fill("#q", "")
            t_flag = timed(lambda: page.select_option("#f", "regression"))
            page.select_option("#f", "")
            # In-page timing (script + the layout it forces), without Playwright's own
            # actionability waits around a click.
            t_sort = page.evaluate(
                "() => { const t = performance.now();"
                " document.querySelectorAll('#cases thead th')[3].click();"
                " document.body.offsetHeight; return (performance.now() - t) / 1000; }"
            )
            browser.close()
    print(f"report: {rows} case rows, {size:.1f} MB HTML")
    print(f"load (static page of same size) : {t_static * 1000:8.0f} ms")
    print(
        f"load (report, scripts on)       : {t_load * 1000:8.0f} ms  ratio {t_load / t_static:.2f}"
    )
    print(f"text filter                     : {t_text * 1000:8.0f} ms")
    print(f"flag filter                     : {t_flag * 1000:8.0f} ms")
    print(f"sort by a numeric column (in page): {t_sort * 1000:7.0f} ms")


if __name__ == "__main__":
    main()
