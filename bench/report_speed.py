"""Time to produce the release report folder for 1,000 cases x 10 trials x 2 arms of
synthetic records, side by side with just loading those records into a pandas DataFrame,
and the size of that folder.

    python bench/report_speed.py [--cases 1000] [--k 10] [--repeat 3]

Both sides start from the same record files on disk (plus a promoted baseline of the same
size for the drift check). "report + gate" is ``write_report_folder`` with every format:
reading and validating every record, the gate decision (paired tests, bootstrap, drift
check), the report model, copying the evidence (records, diffs, logs, capped per trial),
the pages, JUnit, Markdown, JSON, the run summary and the history page. "pandas" is
reading every record file and ``pd.json_normalize``-ing them. Targets: ratio <= 3, folder
<= 50 MB. pandas is only the yardstick here (a test extra), not a harness dependency.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_report import make_run

from harness.report import write_report_folder

EXCERPT = "\n".join(
    [f"tests/test_mod.py::test_case_{i} PASSED" for i in range(20)]
    + ["FAILED tests/test_mod.py::test_edge - AssertionError: assert 'a,b' == 'a,b,'",
       "E   AssertionError: assert 'a,b' == 'a,b,'", "1 failed, 20 passed in 0.84s"]
)  # fmt: skip


def synthetic(n_cases: int, k: int, seed: int = 0) -> tuple[dict[str, str], dict[str, str]]:
    rng = random.Random(seed)
    cand: dict[str, str] = {}
    base: dict[str, str] = {}
    for i in range(n_cases):
        p = rng.choice([1.0, 1.0, 1.0, 0.9, 0.7, 0.5, 0.2, 0.0])
        q = min(1.0, max(0.0, p + rng.choice([0.0, 0.0, -0.1, 0.1])))

        def trials(rate: float) -> str:
            return "".join(
                "I" if rng.random() < 0.005 else "P" if rng.random() < rate else "F"
                for _ in range(k)
            )

        cand[f"case-{i:04d}"] = trials(p)
        base[f"case-{i:04d}"] = trials(q)
    return cand, base


def load_with_pandas(trials_dir: Path) -> pd.DataFrame:
    rows = [json.loads(p.read_bytes()) for p in sorted(trials_dir.glob("*.json"))]
    return pd.json_normalize(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    cand, base = synthetic(args.cases, args.k)
    with tempfile.TemporaryDirectory(prefix="report-bench-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        excerpts = {cid: EXCERPT.replace("test_edge", f"test_edge_{cid}") for cid in cand}
        project, store, run_id = make_run(root / "proj", cand, base, excerpts=excerpts)
        setup = time.perf_counter() - t0
        trials_dir = store.run_dir(run_id) / "trials"
        n_records = len(list(trials_dir.glob("*.json")))
        rep: list[float] = []
        pdt: list[float] = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            df = load_with_pandas(trials_dir)
            pdt.append(time.perf_counter() - t)
            t = time.perf_counter()
            folder = write_report_folder(project, store, run_id)
            rep.append(time.perf_counter() - t)
        assert len(df) == n_records
        r, p = statistics.median(rep), statistics.median(pdt)
        print(
            f"records: {n_records} run records ({args.cases} cases x k={args.k} x 2 arms) "
            f"+ {args.cases * args.k} stored baseline records; setup {setup:.1f} s"
        )
        print(f"{'pandas load (json + json_normalize)':<40} {p:8.2f} s  (median of {args.repeat})")
        print(f"{'report + gate (the whole folder)':<40} {r:8.2f} s  (median of {args.repeat})")
        print(f"{'ratio report / pandas':<40} {r / p:8.2f} x   (target <= 3)")
        print(
            f"{'report folder':<40} {folder.bytes / 1e6:8.2f} MB  (target <= 50), "
            f"{folder.evidence_files} evidence files"
        )
        for path in [*folder.paths, *sorted((folder.root / "evidence").glob("*.html"))[:1]]:
            print(f"  {path.relative_to(folder.root)!s:<18} {path.stat().st_size / 1e6:7.2f} MB")
        pages = list((folder.root / "evidence").glob("*.html"))
        print(
            f"  evidence pages     {len(pages)}, "
            f"largest {max(p.stat().st_size for p in pages) / 1e6:.2f} MB"
        )


if __name__ == "__main__":
    main()
