"""Markdown summary for a CI job summary (GitHub ``$GITHUB_STEP_SUMMARY`` and the like).

Same decision, same numbers as the HTML report, short enough for a job page: the verdict
and its reasons, the aggregate table, then only the cases that need a look (regressions,
broken, failing, flaky, errors), at most :data:`MAX_CASE_ROWS` of them.
Record text is escaped: ``<``/``>``/``&`` become entities and ``|`` cannot break a table.
"""

from __future__ import annotations

from harness.report.data import ArmCase, CaseView, ReportData

__all__ = ["MAX_CASE_ROWS", "render_markdown"]

MAX_CASE_ROWS = 50
_ICON = {"pass": "✅", "warn": "⚠️", "fail": "❌", "blocked": "⛔"}
_MARK = {"pass": "✓", "fail": "✗", "infra_error": "I", "evaluator_error": "E"}


def _esc(text: str) -> str:
    """Escape record text for Markdown (inline and in table cells)."""
    out = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    out = out.replace("|", "\\|").replace("\r", " ").replace("\n", " ")
    for ch in "`*_[]":
        out = out.replace(ch, "\\" + ch)
    return out


def _code(text: str) -> str:
    """Record text as an inline code span (outside tables): no escapes apply inside one."""
    return "`" + text.replace("`", "'").replace("\r", " ").replace("\n", " ") + "`"


def _n(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _marks(ac: ArmCase | None) -> str:
    if ac is None:
        return "—"
    if not ac.marks:
        return "stored"
    return "".join(_MARK[m.outcome.value] for m in ac.marks)


def _interesting(c: CaseView) -> bool:
    return bool(c.regression or c.broken or {"failing", "flaky", "errors"} & set(c.flags))


def render_markdown(data: ReportData, *, html_path: str | None = None) -> str:
    """Render the Markdown summary for ``data``; ``html_path`` is linked when given."""
    rel = data.release
    lines = [
        f"## {_ICON.get(data.verdict, '')} harness: **{data.verdict.upper()}** — "
        f"release {_code(rel.release)}"
        + (f" vs baseline {_code(rel.baseline)}" if rel.baseline else ""),
        "",
        _esc(data.headline),
        "",
    ]
    for r in data.reasons:
        lines.append(f"- **{r.severity}** {_esc(r.message)}")
    for note in data.notes:
        lines.append(f"- *note* {_esc(note)}")
    lines += [
        "",
        f"run {_code(data.run_id)} · system `{rel.system_digest}` · task set {_code(rel.task_set)} "
        f"`{rel.task_set_digest}` · k = {rel.k} · policy {_esc(data.decision.policy_version)} "
        f"`{data.decision.policy_digest}` recorded {rel.created_at:%Y-%m-%d %H:%M:%S} UTC",
        "",
        f"| arm | trials | pass | fail | infra | evaluator | pass rate [95% CI] | "
        f"pass^{rel.k} | pass@{rel.k} | attempts | claim match |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for a in data.arms:
        s = a.summary
        ci = (
            f" [{_n(s.pass_rate.ci_low)}, {_n(s.pass_rate.ci_high)}]"
            if s.pass_rate.ci_low is not None
            else ""
        )
        cl = a.claims
        lines.append(
            f"| {_esc(a.title)} | {s.trials} | {s.passes} | {s.fails} | {s.infra_errors} | "
            f"{s.evaluator_errors} | {_n(s.pass_rate.mean)}{ci} | {_n(s.pass_hat_k.mean)} | "
            f"{_n(s.pass_at_k.mean)} | {_n(cl.attempts_used, 2) if cl else '—'} | "
            f"{_n(cl.claim_match_rate, 2) if cl else '—'} |"
        )
    lines += _cost_lines(data)
    drift = data.decision.drift
    if drift is not None:
        state = "**DRIFT DETECTED**" if drift.detected else "reproduced within noise"
        lines += [
            "",
            f"Baseline drift check: {state} (mean difference "
            f"{_n(drift.aggregate.mean_diff)}, Holm p {_n(drift.aggregate_p_holm, 4)}).",
        ]
    picked = [c for c in data.cases if _interesting(c)]
    picked.sort(key=lambda c: (not c.broken, not c.regression, not c.critical, c.case_id))
    lines += ["", f"### Cases that need a look ({len(picked)} of {len(data.cases)})", ""]
    if picked:
        lines += [
            "| case | candidate | baseline | pass rate | Δ rate | label |",
            "| --- | --- | --- | ---: | ---: | --- |",
        ]
        for c in picked[:MAX_CASE_ROWS]:
            tags = [t for t in ("broken", "regression", "critical") if t in c.flags]
            name = _esc(c.case_id) + (" **" + ", ".join(tags) + "**" if tags else "")
            cs = c.candidate.summary if c.candidate else None
            delta = "—" if c.delta_pass_rate is None else f"{c.delta_pass_rate:+.2f}"
            lines.append(
                f"| {name} | `{_marks(c.candidate)}` | `{_marks(c.baseline)}` | "
                f"{_n(cs.pass_rate if cs else None, 2)} | {delta} | "
                f"{cs.label.replace('_', ' ') if cs else '—'} |"
            )
        if len(picked) > MAX_CASE_ROWS:
            lines.append(f"\n… and {len(picked) - MAX_CASE_ROWS} more: see the HTML report.")
    else:
        lines.append("Every case passed every judged trial in every arm.")
    n_infra = sum(len(g.items) for g in data.infra_errors)
    n_eval = sum(len(g.items) for g in data.evaluator_errors)
    if n_infra or n_eval:
        lines += [
            "",
            f"Unverifiable trials (counted apart, neither credited nor blamed): "
            f"{n_infra} infra errors, {n_eval} evaluator errors.",
        ]
    if data.judgment:
        lines += [
            "",
            "Judgment lane (unscored): " + ", ".join(_esc(j.case_id) for j in data.judgment) + ".",
        ]
    if html_path:
        lines += ["", f"Full report: {_code(html_path)}"]
    return "\n".join(lines) + "\n"


def _cost_lines(data: ReportData) -> list[str]:
    """One line per executed arm: measured model tokens and cost, verification CPU/wall."""
    out: list[str] = []
    for a in data.arms:
        co = a.cost
        if co is None or co.verify is None:
            continue
        model = ""
        if co.model is not None:
            model = (
                f"model {co.model.tokens:,} tokens ({co.model.input_tokens:,} in, "
                f"{co.model.output_tokens:,} out), cost {co.model.cost:.4f} · "
            )
        v = co.verify
        out.append(
            f"- cost of {_esc(a.title)}: {model}verification {v.cpu_s:.1f} s CPU / "
            f"{v.wall_s:.1f} s wall over {v.candidates} candidates"
        )
        h = co.harness
        if h is not None:
            out.append(
                f"- harness overhead of {_esc(a.title)}: {h.overhead_s:.1f} s over "
                f"{h.trials} trials, median {h.overhead_median_s:.2f} s a trial beside "
                f"the verifier's {h.verifier_median_s:.2f} s"
            )
    return ["", *out] if out else []
