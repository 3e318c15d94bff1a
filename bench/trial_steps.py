"""Where the trials of a stored run spent their time: the per-step breakdown (medians).

Reads the run records of one run (``latest`` by default) and prints, per step the harness
records (workspace, agent, candidate, verifier tree, cross-check, verifier, feedback,
store), the median seconds per trial, the total and its share of the trials' wall time;
then the agent's and verifier's own commands and the harness's overhead beside them.

    harness run --release candidate --k 2 --fresh
    python bench/trial_steps.py                       # the project in this folder, latest run
    python bench/trial_steps.py --project DIR RUN --arm candidate --markdown

Records written before the harness measured its steps carry none: they are counted and
left out. Nothing is run or written: it only reads the store.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from harness.project import load_project
from harness.store.records import STEP_NAMES, RunRecord
from harness.store.store import Store


def breakdown(records: list[RunRecord]) -> list[tuple[str, float, float]]:
    """(label, median seconds per trial, total seconds) per step, then the wall and commands."""
    measured = [r for r in records if r.steps is not None]
    rows: list[tuple[str, float, float]] = []

    def row(label: str, values: list[float]) -> None:
        rows.append((label, statistics.median(values), sum(values)))

    for name in STEP_NAMES:
        row(name, [float(getattr(r.steps, name) or 0.0) for r in measured])
    row("trial wall (before store)", [r.steps.wall_s for r in measured if r.steps])
    row(
        "agent command",
        [sum(a.agent.duration_s for a in r.attempts if a.agent) for r in measured],
    )
    row(
        "verifier command",
        [sum(a.verifier.duration_s for a in r.attempts if a.verifier) for r in measured],
    )
    row("harness overhead", [r.overhead_s() or 0.0 for r in measured])
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", nargs="?", default="latest", help="run id, prefix or latest")
    ap.add_argument("--project", type=Path, default=Path("."), help="folder of harness.yaml")
    ap.add_argument("--arm", choices=["candidate", "baseline"], default=None)
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = ap.parse_args()
    project = load_project(args.project)
    store = Store(project.store_dir)
    run_id = store.resolve_run(args.run)
    records = [t for t in store.trials(run_id) if args.arm is None or t.key.arm.value == args.arm]
    measured = [r for r in records if r.steps is not None]
    print(
        f"run {run_id}: {len(records)} trials, {len(measured)} with steps "
        f"({len(records) - len(measured)} written before steps were recorded)"
    )
    if not measured:
        return 1
    wall = sum(r.steps.wall_s + (r.steps.store or 0.0) for r in measured if r.steps)
    if args.markdown:
        print("\n| step | median s / trial | total s | share of wall |")
        print("| --- | ---: | ---: | ---: |")
        for label, med, total in breakdown(measured):
            print(f"| {label} | {med:.3f} | {total:.2f} | {total / wall:.1%} |")
    else:
        print(f"\n{'step':<28}{'median s/trial':>16}{'total s':>10}{'share':>8}")
        for label, med, total in breakdown(measured):
            print(f"{label:<28}{med:>16.3f}{total:>10.2f}{total / wall:>8.1%}")
    print(f"\nshare: of the trials' wall time and store ({wall:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
