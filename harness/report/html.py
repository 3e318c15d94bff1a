"""The HTML pages of a report folder: ``index.html`` and the ``evidence/<n>.html`` pages.

Each page is self-contained (inline CSS, inline SVG, a little vanilla JS on the index)
and links only inside the folder. Rendered with jinja2, autoescaping on for every
template: nothing from a record (case ids, verifier output, diffs, failing test names,
reasons) reaches a page as markup. A Content Security Policy allows only the report's own
script (by hash) and no network at all.

The index leads with the decision and the cases the gate names, each with its failing
trials' reason, diff and log excerpt inline; every other trial that did not pass is on an
evidence page (about 200 trials a page) one click from its mark in the per-case table.

Plots are computed here as lists of shapes (:class:`Shape`) and drawn by the template as
inline SVG; no per-trial SVG is ever emitted.
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jinja2
import markupsafe

from harness.report.data import ArmCase, ArmView, CaseView, Evidence, EvidenceGroup, ReportData
from harness.report.folder import EvidenceFile

__all__ = [
    "Plot",
    "Shape",
    "attention_cases",
    "delta_plot",
    "distribution_plot",
    "forest_plot",
    "render_evidence_page",
    "render_html",
    "spread_plot",
]

ATTENTION_INLINE = 2
"""Evidence items shown inline per named case at the top of the page (the rest: a click)."""

_ARM_CLASS = {"candidate": "a-c", "baseline": "a-b", "stored": "a-s"}
_OUTCOME_LETTER = {"pass": "p", "fail": "f", "infra_error": "i", "evaluator_error": "e"}


@dataclass(frozen=True)
class Shape:
    """One SVG element: ``rect``, ``line``, ``circle`` or ``text``."""

    kind: str
    x: float = 0.0
    y: float = 0.0
    w: float = 0.0
    h: float = 0.0
    x2: float = 0.0
    y2: float = 0.0
    r: float = 0.0
    cls: str = ""
    text: str = ""
    title: str = ""
    anchor: str = "start"


@dataclass(frozen=True)
class Plot:
    """An inline SVG plot: a size, a caption and its shapes."""

    width: int
    height: int
    label: str
    shapes: tuple[Shape, ...] = ()
    legend: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    """(css class, text) pairs shown under the plot."""


def _f(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _axis_y(
    x0: float, x1: float, y_of: Any, ticks: Sequence[float], fmt: str = "{:g}"
) -> list[Shape]:
    out: list[Shape] = []
    for t in ticks:
        y = y_of(t)
        out.append(Shape("line", x=x0, y=y, x2=x1, y2=y, cls="grid"))
        out.append(Shape("text", x=x0 - 6, y=y + 4, text=fmt.format(t), cls="tick", anchor="end"))
    return out


def rate_ticks(lo: float, hi: float) -> tuple[float, float, tuple[float, ...]]:
    """Round pass-rate axis limits and 2 to 6 ticks on a step a reader can count in.

    The step is 5, 10, 20, 25 or 50 percentage points; the limits are multiples of it that
    cover ``[lo, hi]`` (within 0 and 1), never a range narrower than one step.
    """
    lo, hi = max(0.0, min(lo, 1.0)), min(1.0, max(hi, 0.0))
    for step in (0.05, 0.1, 0.2, 0.25, 0.5):
        a = math.floor(lo / step + 1e-9) * step
        b = math.ceil(hi / step - 1e-9) * step
        if b - a < step:
            b = min(1.0, a + step) if a + step <= 1.0 + 1e-9 else b
            a = b - step
        a, b = round(a, 10), round(b, 10)
        count = round((b - a) / step) + 1
        if count <= 6:
            return a, b, tuple(round(a + i * step, 10) for i in range(count))
    return 0.0, 1.0, (0.0, 0.5, 1.0)


def forest_plot(arms: Sequence[ArmView]) -> Plot:
    """Mean pass rate, pass^k and pass@k per arm with their confidence intervals."""
    metrics = (("pass rate", "pass_rate"), ("pass^k", "pass_hat_k"), ("pass@k", "pass_at_k"))
    left, right, row_h, top = 90, 20, 18, 10
    width = 560
    span = width - left - right
    n_arms = max(1, len(arms))
    height = top + len(metrics) * (n_arms * row_h + 12) + 24

    def x_of(v: float) -> float:
        return left + span * min(1.0, max(0.0, v))

    shapes: list[Shape] = []
    for t in (0, 0.25, 0.5, 0.75, 1.0):
        shapes.append(Shape("line", x=x_of(t), y=top, x2=x_of(t), y2=height - 22, cls="grid"))
        shapes.append(
            Shape("text", x=x_of(t), y=height - 8, text=f"{t:g}", cls="tick", anchor="middle")
        )
    y = top
    for label, attr in metrics:
        shapes.append(
            Shape(
                "text",
                x=left - 8,
                y=y + row_h * n_arms / 2 + 4,
                text=label,
                cls="lab",
                anchor="end",
            )
        )
        for arm in arms:
            m = getattr(arm.summary, attr)
            cy = y + row_h / 2
            cls = _ARM_CLASS[arm.key]
            if m.mean is not None:
                tip = (
                    f"{arm.title}: {label} {_f(m.mean)} "
                    f"[{_f(m.ci_low)}, {_f(m.ci_high)}] over {m.n_cases} cases"
                )
                if m.ci_low is not None and m.ci_high is not None:
                    shapes.append(
                        Shape(
                            "line",
                            x=x_of(m.ci_low),
                            y=cy,
                            x2=x_of(m.ci_high),
                            y2=cy,
                            cls=f"ci {cls}",
                            title=tip,
                        )
                    )
                shapes.append(
                    Shape("circle", x=x_of(m.mean), y=cy, r=4.5, cls=f"pt {cls}", title=tip)
                )
            y += row_h
        y += 12
    legend = tuple((_ARM_CLASS[a.key], a.title) for a in arms)
    return Plot(
        width,
        int(height),
        "Aggregate estimates with 95% confidence intervals over cases",
        tuple(shapes),
        legend,
    )


MAX_DELTA_LABELS = 12
"""Case names written beside the bars of the per-case change plot."""


def delta_plot(cases: Sequence[CaseView]) -> Plot | None:
    """Per-case paired difference in pass rate (candidate - baseline), sorted."""
    rows = sorted(
        ((c.delta_pass_rate, c.case_id, c) for c in cases if c.delta_pass_rate is not None),
        key=lambda t: (t[0], t[1]),
    )
    if not rows:
        return None
    width, height, left, right, top, bottom = 760, 200, 44, 10, 10, 22
    span_x = width - left - right
    mid = top + (height - top - bottom) / 2
    half = (height - top - bottom) / 2

    def y_of(v: float) -> float:
        return mid - half * v

    shapes = _axis_y(left, width - right, y_of, (-1, -0.5, 0, 0.5, 1))
    step = span_x / len(rows)
    bar = max(step * 0.8, 0.6) if step >= 1 else step
    for i, (d, cid, c) in enumerate(rows):
        cls = "neg" if d < 0 else "pos" if d > 0 else "zero"
        if c.regression:
            cls += " reg"
        h = abs(d) * half or 1.0
        y = y_of(max(d, 0.0)) if d != 0 else mid - 0.5
        shapes.append(
            Shape(
                "rect",
                x=left + i * step,
                y=y,
                w=bar,
                h=h,
                cls=cls,
                title=f"{cid}: Δ pass rate {d:+.3f}" + (" (regression)" if c.regression else ""),
            )
        )
    # Name the cases that changed beside their bars (a screenshot shows no hover text);
    # past MAX_DELTA_LABELS the largest changes are named.
    changed = sorted(
        (i for i, row in enumerate(rows) if row[0] != 0), key=lambda i: -abs(rows[i][0])
    )[:MAX_DELTA_LABELS]
    for i in changed:
        d, cid, _ = rows[i]
        end = y_of(d)
        shapes.append(
            Shape(
                "text",
                x=left + i * step + bar / 2,
                y=end + (12 if d < 0 else -4),
                text=cid[:24],
                cls="tick caselabel",
                anchor="middle",
            )
        )
    shapes.append(Shape("line", x=left, y=mid, x2=width - right, y2=mid, cls="axis"))
    named = (
        "changed cases named"
        if len(changed) == sum(1 for r in rows if r[0] != 0)
        else (f"the {len(changed)} largest changes named")
    )
    shapes.append(
        Shape(
            "text",
            x=left,
            y=height - 6,
            text=f"{len(rows)} compared cases, sorted by Δ; {named}",
            cls="tick",
        )
    )
    return Plot(
        width,
        height,
        "Per-case Δ pass rate (candidate - baseline)",
        tuple(shapes),
        (
            ("neg", "candidate worse"),
            ("pos", "candidate better"),
            ("reg", "regression (was all-pass)"),
        ),
    )


def _bin(rate: float) -> int:
    if rate <= 0.0:
        return 0
    if rate >= 1.0:
        return 11
    return 1 + min(9, int(rate * 10))


_BIN_LABELS = ("0", "<.1", "<.2", "<.3", "<.4", "<.5", "<.6", "<.7", "<.8", "<.9", "<1", "1")


def distribution_plot(arms: Sequence[ArmView]) -> Plot:
    """How many cases fall in each pass-rate bin, per arm (0 and 1 have their own bins)."""
    width, height, left, right, top, bottom = 560, 200, 40, 10, 10, 34
    counts = []
    for arm in arms:
        c = [0] * 12
        for s in arm.summary.cases:
            if s.pass_rate is not None:
                c[_bin(s.pass_rate)] += 1
        counts.append(c)
    peak = max([1] + [max(c) for c in counts])
    span_y = height - top - bottom

    def y_of(v: float) -> float:
        return top + span_y * (1 - v / peak)

    ticks = sorted({0, peak, *(round(peak * f) for f in (0.5,))})
    shapes = _axis_y(left, width - right, y_of, ticks)
    group = (width - left - right) / 12
    bar = group * 0.8 / max(1, len(arms))
    for b in range(12):
        x0 = left + b * group + group * 0.1
        for j, arm in enumerate(arms):
            n = counts[j][b]
            if n:
                shapes.append(
                    Shape(
                        "rect",
                        x=x0 + j * bar,
                        y=y_of(n),
                        w=bar,
                        h=top + span_y - y_of(n),
                        cls=f"bar {_ARM_CLASS[arm.key]}",
                        title=f"{arm.title}: {n} cases with pass rate {_BIN_LABELS[b]}",
                    )
                )
        shapes.append(
            Shape(
                "text",
                x=left + (b + 0.5) * group,
                y=height - bottom + 14,
                text=_BIN_LABELS[b],
                cls="tick",
                anchor="middle",
            )
        )
    shapes.append(
        Shape(
            "text",
            x=left + (width - left - right) / 2,
            y=height - 4,
            text="per-case pass rate",
            cls="tick",
            anchor="middle",
        )
    )
    return Plot(
        width,
        height,
        "Distribution of per-case pass rates",
        tuple(shapes),
        tuple((_ARM_CLASS[a.key], a.title) for a in arms),
    )


def spread_plot(arms: Sequence[ArmView]) -> Plot | None:
    """Aggregate pass rate of each run (trial index) per arm: the run-to-run spread."""
    series = [(a, a.runs) for a in arms if a.runs]
    if not series:
        return None
    width, height, left, right, top, bottom = 560, 180, 44, 14, 10, 30
    lo, hi, ticks = rate_ticks(
        min(min(r) for _, r in series) - 0.02, max(max(r) for _, r in series) + 0.02
    )
    n = max(len(r) for _, r in series)
    span_x, span_y = width - left - right, height - top - bottom

    def x_of(j: int) -> float:
        return left + (span_x * (j + 0.5) / n)

    def y_of(v: float) -> float:
        return top + span_y * (1 - (v - lo) / (hi - lo))

    shapes = _axis_y(left, width - right, y_of, ticks, "{:.0%}")
    for arm, runs in series:
        cls = _ARM_CLASS[arm.key]
        for j in range(1, len(runs)):
            shapes.append(
                Shape(
                    "line",
                    x=x_of(j - 1),
                    y=y_of(runs[j - 1]),
                    x2=x_of(j),
                    y2=y_of(runs[j]),
                    cls=f"conn {cls}",
                )
            )
        for j, v in enumerate(runs):
            shapes.append(
                Shape(
                    "circle",
                    x=x_of(j),
                    y=y_of(v),
                    r=3.5,
                    cls=f"pt {cls}",
                    title=f"{arm.title}: round {j + 1} pass rate {v:.1%}",
                )
            )
    for j in range(n):
        if n <= 20 or j % max(1, n // 10) == 0:
            shapes.append(
                Shape(
                    "text",
                    x=x_of(j),
                    y=height - bottom + 14,
                    text=str(j + 1),
                    cls="tick",
                    anchor="middle",
                )
            )
    label = "round of trials (round j runs every case once: its j-th trial)"
    shapes.append(
        Shape("text", x=left + span_x / 2, y=height - 3, text=label, cls="tick", anchor="middle")
    )
    return Plot(
        width,
        height,
        "Round-to-round spread: pass rate of each round",
        tuple(shapes),
        tuple((_ARM_CLASS[a.key], a.title) for a, _ in series),
    )


# ----------------------------------------------------------------------------- filters


def _num(x: float | None, digits: int = 3) -> str:
    return _f(x, digits)


def _signed(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:+.{digits}f}"


def _pct(x: float | None, digits: int = 1) -> str:
    return "—" if x is None else f"{100 * x:.{digits}f}%"


def _short(digest: str | None, n: int = 12) -> str:
    if not digest:
        return "—"
    algo, _, hexd = digest.partition(":")
    return f"{algo}:{hexd[:n]}" if hexd else digest[:n]


def _dur(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {sec:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _sortval(x: float | None) -> str:
    return "" if x is None else f"{x:.6f}"


def _quantity(x: float) -> str:
    return f"{x:,.0f}" if float(x).is_integer() or abs(x) >= 100 else f"{x:,.4g}"


def _show(value: Any) -> str:
    """Show a component value on one line: lists joined, mappings as ``key=value``."""
    if value is None or value == "" or value == [] or value == {}:
        return "—"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_show(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(_show(v) for v in value)
    return str(value)


def _pre(text: str) -> markupsafe.Markup:
    """Escape text for a ``<pre>`` body: only ``&``, ``<`` and ``>`` need it there.

    Leaves quotes alone, which keeps a run record's JSON a third smaller than autoescaping
    would; never use this filter in an attribute.
    """
    out = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return markupsafe.Markup(out)


def _marks_html(ac: ArmCase | None, ev_href: Any) -> markupsafe.Markup:
    """One mark per trial (a link to its evidence when it did not pass).

    Built here rather than in a template loop: a 1,000-case run has 20,000 marks, and this
    is the page's hottest spot.
    """
    if ac is None:
        return markupsafe.Markup('<span class="muted">—</span>')
    if not ac.marks:
        return markupsafe.Markup('<span class="muted">stored</span>')
    parts = ['<span class="marks">']
    for m in ac.marks:
        outcome = m.outcome.value
        tip = f"trial {m.trial}: {outcome}"
        if m.failure_type is not None:
            tip += f" ({m.failure_type.value})"
        cls = f"m {_OUTCOME_LETTER[outcome]}"
        if m.attempts > 1:
            tip += f", {m.attempts} attempts"
            cls += " a2"
        if m.anchor:
            href = markupsafe.escape(ev_href(m.anchor))
            parts.append(f'<a class="{cls}" href="{href}" title="{tip}"></a>')
        else:
            parts.append(f'<i class="{cls}" title="{tip}"></i>')
    parts.append("</span>")
    return markupsafe.Markup("".join(parts))


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("harness.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        num=_num,
        signed=_signed,
        pct=_pct,
        short=_short,
        dur=_dur,
        sortval=_sortval,
        quantity=_quantity,
        show=_show,
        pre=_pre,
    )
    env.globals.update(letter=_OUTCOME_LETTER, arm_class=_ARM_CLASS, marks_html=_marks_html)
    return env


_ENV: jinja2.Environment | None = None


def template_env() -> jinja2.Environment:
    global _ENV
    if _ENV is None:
        _ENV = _environment()
    return _ENV


def _script_hash(source: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()


def _context(
    data: ReportData, files: Mapping[str, EvidenceFile], ev_pages: Mapping[str, int]
) -> dict[str, Any]:
    def ev_href(anchor: str | None, prefix: str = "") -> str:
        """Link to an evidence item (or group) on its evidence page."""
        if anchor is None:
            return ""
        return f"{prefix}evidence/{ev_pages.get(anchor, 1)}.html#{anchor}"

    def diff_preview(ev: Any) -> EvidenceFile | None:
        for p in ev.paths:
            if p.label == "candidate diff":
                return files.get(p.ref)
        return None

    return {
        "d": data,
        "dec": data.decision,
        "rel": data.release,
        "files": files,
        "ev_href": ev_href,
        "diff_of": diff_preview,
        "letter": _OUTCOME_LETTER,
    }


def attention_cases(data: ReportData) -> list[tuple[CaseView, list[Evidence]]]:
    """Return the cases the gate names, most serious first, with the candidate's evidence."""
    by_case: dict[str, list[Evidence]] = {}
    for groups in (data.failures, data.infra_errors, data.evaluator_errors):
        for g in groups:
            if g.arm == "candidate":
                by_case.setdefault(g.case_id, []).extend(g.items)
    named = [c for c in data.cases if c.named_by]
    named.sort(key=lambda c: (not c.broken, not c.critical, not c.regression, c.case_id))
    return [(c, sorted(by_case.get(c.case_id, []), key=lambda e: e.trial)) for c in named]


def render_html(
    data: ReportData,
    files: Mapping[str, EvidenceFile] | None = None,
    ev_pages: Mapping[str, int] | None = None,
) -> str:
    """Render the report page for ``data``.

    ``files`` maps a :class:`PathRef`'s ``ref`` to its copy in the folder; ``ev_pages`` maps
    an evidence anchor to its evidence page number (both from the folder writer).
    """
    env = template_env()
    loader = env.loader
    assert loader is not None
    script, _, _ = loader.get_source(env, "report.js")
    style, _, _ = loader.get_source(env, "report.css")
    cand = data.arm("candidate")
    base_arm = data.arm("baseline")
    plot_arms = [a for a in data.arms if a.summary.cases_with_data]
    ctx = _context(data, files or {}, ev_pages or {})
    ctx.update(
        {
            "cand": cand,
            "base": base_arm,
            "stored": data.arm("stored"),
            "scored_arms": [a for a in data.arms if a.key != "stored"],
            "has_model": any(a.cost is not None and a.cost.model for a in data.arms),
            "fig_forest": forest_plot(data.arms),
            "fig_delta": delta_plot(data.cases),
            "fig_dist": distribution_plot(plot_arms) if plot_arms else None,
            "fig_spread": spread_plot(data.arms),
            "style": style,
            "script": script,
            "script_hash": _script_hash(script),
            "attention": attention_cases(data),
            "attention_inline": ATTENTION_INLINE,
            "n_pages": len(set((ev_pages or {}).values())),
            "evidence_count": sum(
                len(g.items) for g in data.failures + data.infra_errors + data.evaluator_errors
            ),
        }
    )
    return env.get_template("report.html.j2").render(**ctx)


def render_evidence_page(
    data: ReportData,
    groups: Sequence[EvidenceGroup],
    page: int,
    pages: int,
    files: Mapping[str, EvidenceFile],
    ev_pages: Mapping[str, int],
) -> str:
    """Render evidence page ``page`` (1-based) of ``pages``: full evidence of its groups."""
    env = template_env()
    loader = env.loader
    assert loader is not None
    style, _, _ = loader.get_source(env, "report.css")
    ctx = _context(data, files, ev_pages)
    ctx.update({"groups": groups, "page": page, "pages": pages, "style": style})
    return env.get_template("evidence.html.j2").render(**ctx)
