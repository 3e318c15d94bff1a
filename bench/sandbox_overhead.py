"""Overhead of LocalSandbox vs bare subprocesses (prints ratios; no pass/fail).

Per exec: N no-op commands (`true`, `python3 -c pass`) through one LocalSandbox session vs
bare subprocess.run. Per trial: 2 sessions, 2 execs, copying a small tree in and out, vs
the same work with temp dirs + bare subprocesses. Median over repeats.

    python bench/sandbox_overhead.py [--n 20] [--repeats 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from harness.cases.model import PhaseContract
from harness.sandbox.local import LocalSandbox, LocalSession

CONTRACT = PhaseContract(timeout_seconds=60, memory_mb=512, pids=128, disk_mb=64)


def median_time(fn: Callable[[], None], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def small_tree(root: Path) -> Path:
    src = root / "src"
    for i in range(20):
        (src / f"pkg{i % 4}").mkdir(parents=True, exist_ok=True)
        (src / f"pkg{i % 4}" / f"m{i}.py").write_text("x = 1\n" * 50)
    return src


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    sandbox = LocalSandbox()
    sandbox.describe()  # detection outside the timings
    py = "/usr/bin/python3"  # what the sandbox shows (the harness's own interpreter is not)
    print(f"{'workload':<28}{'bare ms':>10}{'sandbox ms':>12}{'ratio':>8}")
    for label, argv in (("true", ["true"]), ("python3 -c pass", [py, "-c", "pass"])):

        def bare(argv: list[str] = argv) -> None:
            for _ in range(args.n):
                subprocess.run(argv, capture_output=True, check=True)

        session = sandbox.open(CONTRACT, label="bench")

        def boxed(argv: list[str] = argv, session: LocalSession = session) -> None:
            for _ in range(args.n):
                assert session.exec(argv).ok

        b, s = median_time(bare, args.repeats), median_time(boxed, args.repeats)
        session.close()
        print(
            f"{'exec ' + label:<28}{b / args.n * 1e3:>10.2f}{s / args.n * 1e3:>12.2f}{s / b:>8.2f}"
        )

    with tempfile.TemporaryDirectory() as d:
        src = small_tree(Path(d))
        out = Path(d) / "out"

        def trial_bare() -> None:
            for argv in (["true"], [py, "-c", "pass"]):
                with tempfile.TemporaryDirectory() as w:
                    shutil.copytree(src, Path(w) / "ws")
                    subprocess.run(argv, cwd=Path(w) / "ws", capture_output=True, check=True)
                    shutil.rmtree(out, ignore_errors=True)
                    shutil.copytree(Path(w) / "ws", out, symlinks=True)

        def trial_boxed() -> None:
            for argv in (["true"], [py, "-c", "pass"]):
                with sandbox.open(CONTRACT, label="bench-trial") as s:
                    s.put_tree(src)
                    assert s.exec(argv).ok
                    shutil.rmtree(out, ignore_errors=True)
                    s.get_tree(out)

        b = median_time(trial_bare, args.repeats * 2)
        s = median_time(trial_boxed, args.repeats * 2)
        print(f"{'trial (2 sessions/2 execs)':<28}{b * 1e3:>10.2f}{s * 1e3:>12.2f}{s / b:>8.2f}")


if __name__ == "__main__":
    main()
