"""The report's pass-rate axes: round limits, a countable step, readable labels."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from harness.report.html import rate_ticks, spread_plot

STEPS = (0.05, 0.1, 0.2, 0.25, 0.5)


@given(st.floats(-0.2, 1.2), st.floats(-0.2, 1.2))
def test_ticks_cover_the_values_on_a_countable_step(a: float, b: float) -> None:
    lo, hi = min(a, b), max(a, b)
    top, bottom, ticks = rate_ticks(lo, hi)
    assert 0.0 <= top < bottom <= 1.0
    assert top <= max(0.0, min(lo, 1.0)) + 1e-9 and bottom >= min(1.0, max(hi, 0.0)) - 1e-9
    assert 2 <= len(ticks) <= 6 and (ticks[0], ticks[-1]) == (top, bottom)
    gaps = {round(y - x, 9) for x, y in itertools.pairwise(ticks)}
    assert len(gaps) == 1 and gaps.pop() in STEPS


def test_the_round_to_round_plot_reads_in_percent_and_rounds() -> None:
    arm = SimpleNamespace(key="candidate", title="candidate", runs=(0.55, 0.8, 1.0))
    plot = spread_plot([arm])  # type: ignore[list-item]
    assert plot is not None
    texts = [s.text for s in plot.shapes if s.kind == "text"]
    assert [t for t in texts if t.endswith("%")] == ["50%", "60%", "70%", "80%", "90%", "100%"]
    assert [t for t in texts if t.isdigit()] == ["1", "2", "3"]
    assert any(t.startswith("round of trials") for t in texts)
