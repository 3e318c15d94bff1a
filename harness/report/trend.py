"""The release trend: full runs, oldest first, across release names, as two plots.

``harness run`` writes one run per release candidate, and a team names its candidates as it
likes (``candidate``, ``candidate-regressed``, ``2026.12.1``…). The trend therefore orders
runs by their start, whatever their release name, and labels every point with its release
and start. Partial runs (a ``--case`` subset, a smaller k: see
:func:`harness.report.history.mark_partial`) are listed in the history table, marked, and
kept off both plots: they do not measure the same thing.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.gate.stats import MeanCI
from harness.report.html import Plot, Shape
from harness.report.summary import RunSummary

__all__ = ["HEAT_LEGEND", "release_heat_map", "release_trend"]

HEAT_LEGEND = (
    ("heat h0", "pass rate < 0.25"),
    ("heat h1", "0.25 – 0.5"),
    ("heat h2", "0.5 – 0.75"),
    ("heat h3", "0.75 – < 1"),
    ("heat h4", "1 (every trial passed)"),
    ("heat hnone", "not run / no judged trial"),
)
"""Every colour of the heat map, each named."""

MAX_CASES = 80
"""Cases drawn in the heat map: the least passing first."""


def _band(rate: float | None) -> str:
    if rate is None:
        return "none"
    if rate >= 1.0:
        return "4"
    return str(min(3, int(rate * 4)))


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def release_trend(runs: Sequence[RunSummary]) -> Plot:
    """Candidate pass rate and pass^k (95% intervals) per full run, by start time."""
    n = len(runs)
    col = max(70, min(120, 900 // max(1, n)))
    left, right, top, bottom = 48, 16, 12, 58
    width, height = left + right + col * max(1, n), 250
    span_y = height - top - bottom

    def x_of(j: int, off: float = 0.0) -> float:
        return left + col * (j + 0.5) + off

    def y_of(v: float) -> float:
        return top + span_y * (1 - min(1.0, max(0.0, v)))

    shapes: list[Shape] = []
    for t in (0.0, 0.25, 0.5, 0.75, 1.0):
        shapes.append(Shape("line", x=left, y=y_of(t), x2=width - right, y2=y_of(t), cls="grid"))
        shapes.append(
            Shape("text", x=left - 6, y=y_of(t) + 4, text=f"{t:.2f}", cls="tick", anchor="end")
        )
    shapes.append(Shape("text", x=4, y=top + 4, text="rate", cls="tick"))
    for metric, cls, off in (("pass_rate", "a-c", -4.0), ("pass_hat_k", "a-b", 4.0)):
        prev: tuple[float, float] | None = None
        for j, s in enumerate(runs):
            m: MeanCI = getattr(s.candidate, metric)
            if m.mean is None:
                prev = None
                continue
            x, y = x_of(j, off), y_of(m.mean)
            ci = (
                f" [{m.ci_low:.3f}, {m.ci_high:.3f}]"
                if m.ci_low is not None and m.ci_high is not None
                else ""
            )
            tip = (
                f"{s.release} · {s.run_id} ({s.created_at:%Y-%m-%d %H:%M}): "
                f"{metric.replace('_', ' ')} {m.mean:.3f}{ci} · {s.verdict}"
            )
            if ci:
                lo, hi = y_of(m.ci_low or 0.0), y_of(m.ci_high or 0.0)
                bar = Shape("line", x=x, y=lo, x2=x, y2=hi, cls=f"ci {cls}", title=tip)
                shapes.append(bar)
            if prev is not None:
                shapes.append(Shape("line", x=prev[0], y=prev[1], x2=x, y2=y, cls=f"conn {cls}"))
            shapes.append(Shape("circle", x=x, y=y, r=3.5, cls=f"pt {cls}", title=tip))
            prev = (x, y)
    for j, s in enumerate(runs):
        shapes.append(
            Shape(
                "text",
                x=x_of(j),
                y=height - bottom + 15,
                text=_short(s.release, col // 7),
                cls="tick xrel",
                anchor="middle",
            )
        )
        shapes.append(
            Shape(
                "text",
                x=x_of(j),
                y=height - bottom + 29,
                text=f"{s.created_at:%m-%d %H:%M}",
                cls="tick",
                anchor="middle",
            )
        )
    shapes.append(
        Shape(
            "text",
            x=left + (width - left - right) / 2,
            y=height - 6,
            text="release (run start, UTC), oldest first",
            cls="tick",
            anchor="middle",
        )
    )
    return Plot(
        width,
        height,
        "Release trend: candidate pass rate and pass^k per full run (95% intervals)",
        tuple(shapes),
        (("a-c", "pass rate"), ("a-b", "pass^k")),
    )


def release_heat_map(runs: Sequence[RunSummary]) -> Plot | None:
    """Cases × releases: each cell one case's pass rate in one full run (least passing first)."""
    ids = sorted({cid for s in runs for cid in s.cases})
    if not ids:
        return None

    def worst(cid: str) -> float:
        rates = [s.cases[cid].pass_rate for s in runs if cid in s.cases]
        return min((r for r in rates if r is not None), default=1.0)

    ids.sort(key=lambda cid: (worst(cid), cid))
    shown = ids[:MAX_CASES]
    cell_w, cell_h, left, top = 72, 16, 210, 36
    width = left + cell_w * len(runs) + 10
    height = top + cell_h * len(shown) + 24
    shapes: list[Shape] = []
    for j, s in enumerate(runs):
        x = left + j * cell_w + (cell_w - 2) / 2
        shapes.append(
            Shape("text", x=x, y=14, text=_short(s.release, 11), cls="tick xrel", anchor="middle")
        )
        shapes.append(
            Shape(
                "text", x=x, y=28, text=f"{s.created_at:%m-%d %H:%M}", cls="tick", anchor="middle"
            )
        )
    for i, cid in enumerate(shown):
        y = top + i * cell_h
        shapes.append(
            Shape(
                "text", x=left - 6, y=y + cell_h - 4, text=_short(cid, 30), cls="tick", anchor="end"
            )
        )
        for j, s in enumerate(runs):
            c = s.cases.get(cid)
            rate = c.pass_rate if c is not None else None
            tip = f"{cid} · {s.release} ({s.run_id}): " + (
                "not run"
                if c is None
                else f"pass rate {'—' if rate is None else f'{rate:.3f}'}, {c.n} judged, {c.label}"
            )
            shapes.append(
                Shape(
                    "rect",
                    x=left + j * cell_w,
                    y=y,
                    w=cell_w - 2,
                    h=cell_h - 2,
                    cls=f"heat h{_band(rate)}",
                    title=tip,
                )
            )
    more = f" · {len(ids) - len(shown)} steady cases not drawn" if len(ids) > len(shown) else ""
    shapes.append(
        Shape(
            "text",
            x=left,
            y=height - 6,
            text=f"{len(shown)} cases, least passing first{more}",
            cls="tick",
        )
    )
    return Plot(
        width,
        height,
        "Cases × releases: pass rate per case in each full run",
        tuple(shapes),
        HEAT_LEGEND,
    )
