"""The decision's words as a release engineer reads them: one p-value family, gains as
gains, a lone 5/5 → 1/5 explained once, no sentence said twice."""

from __future__ import annotations

import re
from collections import Counter

from test_report import MIXED, MIXED_BASE, make_run

from harness.report import build_report, render_html


def _sentences(messages: list[str]) -> Counter[str]:
    return Counter(s.strip() for m in messages for s in re.split(r";\s+", m) if s.strip())


def test_a_lone_drop_at_pass_is_explained_in_one_sentence(tmp_path):
    cand = {f"c{i:02d}": "PPPPP" for i in range(12)}
    base = dict(cand)
    cand["c03"] = "PFFFF"
    cand["c05"], base["c05"] = "FPPPP", "FFFFF"
    data = build_report(*make_run(tmp_path / "p", cand, base))
    assert data.verdict == "pass"
    [why] = [r.message for r in data.reasons if r.code == "no_significant_regression"]
    assert "c03 went 5/5 → 1/5, which this set cannot tell from noise" in why
    assert "it detects a drop spread over several cases" in why
    assert "not one non-critical case's partial drop" in why


def test_improvements_read_as_gains_never_negative_drops(tmp_path):
    cand = {f"c{i}": "PPPPP" for i in range(4)}
    base = {f"c{i}": "PFFPP" for i in range(4)}
    data = build_report(*make_run(tmp_path / "p", cand, base))
    text = " ".join(r.message for r in data.reasons)
    assert "mean pass-rate gain 0.400" in text and "mean pass^5 gain 1.000" in text
    assert not re.search(r"drop [+-]?-\d", text) and "drop -" not in text


def test_no_sentence_is_repeated_across_the_reasons(tmp_path):
    data = build_report(*make_run(tmp_path / "p", MIXED, MIXED_BASE, critical=("charlie",)))
    assert data.verdict == "fail"
    repeated = {s: n for s, n in _sentences([r.message for r in data.reasons]).items() if n > 1}
    assert not repeated, repeated
    assert sum("next: open these cases" in r.message for r in data.reasons) == 1


def test_the_report_shows_the_deciding_family_and_folds_the_diagnostics(tmp_path):
    data = build_report(*make_run(tmp_path / "p", MIXED, MIXED_BASE, critical=("charlie",)))
    page = render_html(data)
    table = page.split('id="deciding-tests"', 1)[1].split("</table>", 1)[0]
    rule = data.decision.rule
    assert rule is not None
    assert f"{rule.within.p_value:.4f}" in table and "critical case charlie" in table
    assert "paired_t" not in table and "mcnemar" not in table
    folded = page.split('<details class="diagnostics">', 1)[1].split("</details>", 1)[0]
    assert "not used by the verdict" in folded and "paired_t" in folded


def test_test_ids_are_not_repeated_per_trial_block(tmp_path):
    data = build_report(*make_run(tmp_path / "p", {"a": "FFFF"}, {"a": "PPPP"}))
    page = render_html(data)
    named = page.split('id="attention"', 1)[1].split("</section>", 1)[0]
    # two trials inline: the second names no test id again
    assert named.count("<dt>failing tests</dt>") == 2
    assert named.count("tests/test_x.py::test_y</dd>") == 1
    assert named.count("the same 1 as trial 0 above") == 1
