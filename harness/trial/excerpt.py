"""Mechanical excerpt of a command's output for run records and reports.

No model is involved: lines are picked by fixed rules, in priority order, until the
character budget is spent —

1. the last few lines (the runner's final word: ``==== 2 failed in 0.3s ====``);
2. pytest's ``short test summary info`` section;
3. the last frame of every traceback, with its exception line;
4. lines naming a failure (``FAILED``, ``ERROR``, ``Error``, ``Traceback``, ``assert``);
5. more of the tail.

The kept lines are shown in their original order; every gap becomes one
``[… N lines omitted …]`` marker. Over-long lines are shortened. The result never
exceeds ``limit`` characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

__all__ = ["select_excerpt"]

_SECTION = re.compile(r"^=+ .* =+$")
_SUMMARY = re.compile(r"^=+ short test summary info =+$")
_INTERESTING = re.compile(r"FAILED|ERROR|Error|Traceback|assert")
_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s+File "')
_TAIL_FIRST = 8
"""Lines of the tail that are kept before anything else."""
_TAIL_SHARE = 4
"""The first tail pass may use at most 1/_TAIL_SHARE of the budget."""
_LINE_MAX = 400
"""Longest line kept as is; longer lines are shortened around their middle."""


def _marker(n: int) -> str:
    return f"[… {n} lines omitted …]"


def _shorten(line: str, width: int) -> str:
    if len(line) <= width:
        return line
    keep = max(width - 3, 0)
    head = keep - keep // 3
    return line[:head] + " … " + line[len(line) - (keep - head) :] if keep else line[:width]


def _summary_lines(lines: Sequence[str]) -> list[int]:
    """Return the indices of pytest's short test summary section, header to final line."""
    picked: list[int] = []
    inside = False
    for i, line in enumerate(lines):
        if _SUMMARY.match(line):
            inside = True
            picked.append(i)
        elif inside:
            picked.append(i)
            if _SECTION.match(line):
                inside = False
    return picked


def _last_frames(lines: Sequence[str]) -> list[int]:
    """For each traceback: its header, its last frame and the exception line(s)."""
    picked: list[int] = []
    i = 0
    while i < len(lines):
        if not lines[i].lstrip().startswith(_TRACEBACK):
            i += 1
            continue
        header = i
        indent = len(lines[i]) - len(lines[i].lstrip())
        last_frame: int | None = None
        j = i + 1
        while j < len(lines):
            line = lines[j]
            if _FRAME.match(line):
                last_frame = j
            elif line.strip() and len(line) - len(line.lstrip()) <= indent:
                break  # the exception line closes the traceback
            j += 1
        picked.append(header)
        if last_frame is not None:
            picked.extend(range(last_frame, min(j, len(lines))))
        if j < len(lines):
            picked.append(j)
        i = j + 1
    return picked


class _Budget:
    """Lines chosen so far, with a conservative bound on the rendered length."""

    def __init__(self, lines: Sequence[str], limit: int) -> None:
        self.lines = lines
        self.limit = limit
        # Upper bound of one marker (and its newline): markers count at most len(lines).
        self.marker_cost = len(_marker(len(lines))) + 1
        self.chosen: set[int] = set()
        # There is at most one more marker than chosen lines (the trailing gap).
        self.used = self.marker_cost

    @property
    def full(self) -> bool:
        """True when not even an empty line would fit any more."""
        return self.used + 1 + self.marker_cost > self.limit

    def add(self, indices: Iterable[int], cap: int | None = None) -> bool:
        """Keep lines in order while they fit (and ``used`` stays <= cap); False when full."""
        ceiling = self.limit if cap is None else min(cap, self.limit)
        for i in indices:
            if i in self.chosen:
                continue
            cost = len(self.lines[i]) + 1 + self.marker_cost
            if self.used + cost > ceiling:
                return False
            self.chosen.add(i)
            self.used += cost
        return True

    def render(self) -> str:
        out: list[str] = []
        previous = -1
        for i in sorted(self.chosen):
            if i > previous + 1:
                out.append(_marker(i - previous - 1))
            out.append(self.lines[i])
            previous = i
        if previous < len(self.lines) - 1:
            out.append(_marker(len(self.lines) - 1 - previous))
        return "\n".join(out)


def _labelled(stdout: str, stderr: str) -> tuple[list[str], list[int]]:
    """Return the lines of both streams and the positions of the stream labels."""
    out_lines = stdout.splitlines()
    err_lines = stderr.splitlines()
    if out_lines and err_lines:
        lines = ["── stdout ──", *out_lines, "── stderr ──", *err_lines]
        return lines, [0, len(out_lines) + 1]
    return out_lines or err_lines, []


def select_excerpt(stdout: bytes, stderr: bytes, *, limit: int = 4000) -> str:
    """Pick the lines of ``stdout``/``stderr`` a reviewer needs, within ``limit`` characters.

    Bytes are decoded as UTF-8 with replacement. When both streams have output each is
    introduced by a ``── stdout ──`` / ``── stderr ──`` line. Output that fits is
    returned whole.

    Raises:
        ValueError: ``limit`` is negative.

    """
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    raw, labels = _labelled(
        stdout.decode("utf-8", errors="replace"), stderr.decode("utf-8", errors="replace")
    )
    whole = "\n".join(raw)
    if len(whole) <= limit:
        return whole
    width = min(_LINE_MAX, max(limit // 4, 16))
    lines = [line if len(line) <= width else _shorten(line, width) for line in raw]
    budget = _Budget(lines, limit)
    n = len(lines)
    budget.add(labels)
    budget.add(range(n - 1, max(n - 1 - _TAIL_FIRST, -1), -1), cap=limit // _TAIL_SHARE)
    budget.add(_summary_lines(lines))
    budget.add(_last_frames(lines))
    for i, line in enumerate(lines):
        if budget.full:
            break
        if _INTERESTING.search(line):
            budget.add([i])
    budget.add(range(n - 1, -1, -1))
    text = budget.render()
    # The estimate is an upper bound, so this only bites for absurdly small limits.
    return text if len(text) <= limit else text[len(text) - limit :]
