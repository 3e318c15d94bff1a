"""A whole `harness run` on real repositories against the same work done bare (prints ratios).

Three pinned sdists of real projects with their own test suites (``six``, ``idna``,
``more-itertools``) become one case each: the starting state is the project with one bug
planted (a one-line mutation its own tests catch) and one of its test files moved to the
case's hidden files; the reference patch undoes the mutation. A scripted command agent
writes the fix (it copies the unmutated file from its own ``agent.files``). The verifier runs
the project's whole suite with pytest in the case's locked environment.

*Bare* is the same work without the harness: copy the starting tree, write the fix, stage
the hidden test, run the same verifier command with an interpreter of the same lock (built
here with uv), ``k`` times per case. *Cold* bare adds the red/green proof's two verifier runs
per case (a new project must prove its verifiers before trusting them).

* **cold**: ``harness run`` in a new project (no store, no preflight cache) on a machine
  that has built the environment once (the environment cache is kept);
* **warm**: the same command again with ``--fresh`` (store and preflight cache kept).

``--workers`` measures scale-out instead: the warm run with one job against two, on threads
(``--jobs``) and on a local Dask cluster (``--executor dask``, one worker process a job),
pair by pair; the ratio is one job's time over two jobs' (target >= 1.8). Use ``--k 4`` or
another k that makes the trial count even, or two workers cannot split it evenly.

Each figure is measured ``--pairs`` times, harness and bare alternating, and the ratio is
taken pair by pair; the median is printed with the range, then where the last warm run's
time above bare went: its verifier phases against bare pytest alone, its other trial steps
(from the trials' own step records) and the time outside trials.

    python bench/real_repos.py --k 3 --pairs 3
    python bench/real_repos.py --sdists DIR   # sdists already downloaded (no index needed)
    python bench/real_repos.py --workers --k 4 --pairs 3
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOCK = HERE.parent / "env" / "requirements.lock"
VERIFIER = [
    "python3",
    "-m",
    "pytest",
    "-q",
    "-p",
    "no:cacheprovider",
    "--junitxml=reports/junit.xml",
]


@dataclass(frozen=True)
class Project:
    """One real project: its pinned sdist, the planted bug and the hidden test file."""

    name: str
    sdist: str
    source: str
    """File (relative to the sdist root) that receives the bug."""
    good: str
    bad: str
    hidden: str
    """Test file (relative to the sdist root) moved to the case's hidden files."""
    tests: tuple[str, ...]
    """Arguments to pytest after the common ones: what the suite runs."""
    min_tests: int


PROJECTS = (
    Project(
        "six",
        "six==1.17.0",
        "six.py",
        "        return iter(d.keys(**kw))",
        "        return iter(d.values(**kw))",
        "test_six.py",
        ("test_six.py",),
        150,
    ),
    Project(
        "idna",
        "idna==3.10",
        "idna/core.py",
        '_alabel_prefix = b"xn--"',
        '_alabel_prefix = b"xm--"',
        "tests/test_idna.py",
        ("tests",),
        30,
    ),
    Project(
        "more-itertools",
        "more-itertools==10.5.0",
        "more_itertools/more.py",
        "    return sum(compress(repeat(1), zip(iterable)))",
        "    return sum(compress(repeat(1), zip(iterable))) - 1",
        "tests/test_more.py",
        ("tests",),
        500,
    ),
)


def fetch(sdists: Path) -> dict[str, Path]:
    """Return each project's sdist, downloading the pinned version when it is missing."""
    sdists.mkdir(parents=True, exist_ok=True)
    found = {}
    for p in PROJECTS:
        name, version = p.sdist.split("==")
        stem = f"{name.replace('-', '[-_]')}-{version}.tar.gz"
        hits = [f for f in sdists.glob("*.tar.gz") if _match(f.name, name, version)]
        if not hits:
            pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps"]
            subprocess.run([*pip, "--no-binary", ":all:", p.sdist, "-d", str(sdists)], check=True)
            hits = [f for f in sdists.glob("*.tar.gz") if _match(f.name, name, version)]
        if not hits:
            raise SystemExit(f"no sdist {stem} in {sdists}")
        found[p.name] = hits[0]
    return found


def _match(filename: str, name: str, version: str) -> bool:
    norm = filename.lower().replace("_", "-")
    return norm == f"{name.lower()}-{version}.tar.gz"


def build_project(root: Path, sdists: dict[str, Path]) -> None:
    """Write a harness project with one case per real project and a scripted fixer."""
    (root / "agent").mkdir(parents=True)
    (root / "env").mkdir()
    shutil.copy(LOCK, root / "env" / "requirements.lock")
    (root / "env" / "requirements.in").write_text("pytest==8.3.3\n")
    script = (
        'cp -R "$0/$HARNESS_CASE_ID/." "$HARNESS_WORKSPACE/" && '
        'printf \'{"status": "submitted"}\' > "$HARNESS_RESULT"'
    )
    fixer = ["sh", "-c", script, "{agent}/agent"]
    (root / "harness.yaml").write_text(
        "task_set: real\n"
        "environment: {python: '>=3.11', requirements: env/requirements.in,"
        " lock: env/requirements.lock}\n"
        "releases:\n"
        "  scripted:\n"
        f"    agent: {{adapter: command, command: {json.dumps(fixer)}, files: [agent]}}\n"
    )
    for p in PROJECTS:
        case = root / "cases" / p.name
        src = _extract(sdists[p.name], case / "_sdist")
        repo = case / "repo"
        shutil.copytree(src, repo, symlinks=True)
        shutil.rmtree(case / "_sdist")
        good = (repo / p.source).read_text()
        if good.count(p.good) != 1:
            raise SystemExit(f"{p.name}: the mutation site is not unique in {p.source}")
        bad = good.replace(p.good, p.bad)
        (repo / p.source).write_text(bad)
        (case / "hidden").mkdir()
        shutil.move(repo / p.hidden, case / "hidden" / Path(p.hidden).name)
        diff = difflib.unified_diff(
            bad.splitlines(keepends=True),
            good.splitlines(keepends=True),
            f"a/{p.source}",
            f"b/{p.source}",
        )
        (case / "reference.patch").write_text("".join(diff))
        fix = root / "agent" / p.name / p.source
        fix.parent.mkdir(parents=True)
        fix.write_text(good)
        command = [*VERIFIER, *p.tests]
        (case / "case.yaml").write_text(
            textwrap.dedent(
                f"""\
                id: {p.name}
                version: 1
                request: A test of {p.name} fails; fix the library.
                repo: {{kind: folder, path: repo}}
                contract:
                  agent: {{timeout_seconds: 120, memory_mb: 1024, pids: 128}}
                  verifier: {{timeout_seconds: 300, memory_mb: 2048, pids: 256}}
                verifier:
                  command: {json.dumps(command)}
                  artifacts:
                    - {{path: reports/junit.xml, rule: junit, min_tests: {p.min_tests}}}
                  hidden:
                    - {{src: hidden/{Path(p.hidden).name}, dest: {p.hidden}}}
                reference: {{patch: reference.patch}}
                """
            )
        )
    _cli(root, "cases", "lock")


def _extract(sdist: Path, dest: Path) -> Path:
    with tarfile.open(sdist) as tf:
        tf.extractall(dest)  # a pinned sdist downloaded by this script
    (top,) = list(dest.iterdir())
    return top


def _cli(root: Path, *args: str) -> float:
    t = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - t
    if done.returncode not in (0, 3):
        raise SystemExit(f"harness {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return elapsed


def bare_env(cache: Path) -> Path:
    """A venv from the same lock, built once (the bare side's locked environment).

    Compiled to bytecode at install, as the harness builds its environments: with
    ``PYTHONDONTWRITEBYTECODE`` set (CI machines often set it) an uncompiled venv would
    compile pytest from source on every bare run and flatter the harness's ratio.
    """
    venv = cache / "bare-venv"
    if not (venv / "bin" / "python").exists():
        subprocess.run(["uv", "venv", "-q", "-p", "/usr/bin/python3", str(venv)], check=True)
        install = ["uv", "pip", "install", "-q", "--require-hashes", "--compile-bytecode"]
        subprocess.run(
            [*install, "-r", str(LOCK)],
            env={**os.environ, "VIRTUAL_ENV": str(venv)},
            check=True,
        )
    return venv


def bare(root: Path, venv: Path, k: int, proof: bool, verifier: list[float] | None = None) -> float:
    """Do the trials' work by hand: copy, fix, stage hidden test, run the verifier.

    ``verifier``, when given, receives each verifier run's own seconds.
    """
    env = {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}"}
    t = time.perf_counter()
    for p in PROJECTS:
        case = root / "cases" / p.name
        runs = [("fix", i) for i in range(k)]
        if proof:
            runs += [("red", 0), ("green", 0)]
        for kind, _ in runs:
            with tempfile.TemporaryDirectory() as tmp:
                ws = Path(tmp) / "ws"
                shutil.copytree(case / "repo", ws, symlinks=True)
                if kind != "red":
                    shutil.copy(root / "agent" / p.name / p.source, ws / p.source)
                shutil.copy(case / "hidden" / Path(p.hidden).name, ws / p.hidden)
                v = time.perf_counter()
                subprocess.run(
                    [*VERIFIER, *p.tests], cwd=ws, env=env, capture_output=True, check=False
                )
                if verifier is not None:
                    verifier.append(time.perf_counter() - v)
    return time.perf_counter() - t


def steps(project: Path) -> dict[str, float]:
    """Sum the harness's own time per step over the trials of the project's latest run."""
    runs = [d for d in (project / ".harness" / "runs").iterdir() if d.is_dir()]
    latest = max(runs, key=lambda d: d.stat().st_mtime)
    total: dict[str, float] = {}
    for f in (latest / "trials").glob("*.json"):
        for name, seconds in json.loads(f.read_text())["steps"].items():
            total[name] = total.get(name, 0.0) + seconds
    return total


def where(harness_s: float, bare_s: float, harness_steps: dict[str, float], pytest_s: float) -> str:
    """One line: where a warm run's time above bare goes (from the trials' own records)."""
    outside = harness_s - harness_steps["wall_s"]
    verifier = harness_steps["verifier"]
    other = harness_steps["wall_s"] - verifier
    return (
        f"  where (warm, last pair): +{harness_s - bare_s:.1f} s = verifier phases {verifier:.1f} s"
        f" against {pytest_s:.1f} s of bare pytest (+{verifier - pytest_s:.1f}),"
        f" other trial steps {other:.1f} s against {bare_s - pytest_s:.1f} s of bare copying,"
        f" {outside:.1f} s outside trials (start-up, plan, decision)"
    )


def main() -> None:
    """Build the projects, then time harness and bare side by side, cold and warm."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--sdists", type=Path, default=None, help="folder of the pinned sdists")
    ap.add_argument("--report", action="store_true", help="also write the report folder")
    ap.add_argument("--workers", action="store_true", help="one job against two (threads, Dask)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="harness-bench-real-") as tmp:
        work = Path(tmp)
        sdists = fetch(args.sdists or work / "sdists")
        cache = work / "cache"
        os.environ["HARNESS_CACHE_DIR"] = str(cache)
        template = work / "template"
        build_project(template, sdists)
        _cli(template, "env", "build")  # the machine has built the environment once
        venv = bare_env(cache)
        if args.workers:
            workers(work, template, args.k, args.pairs)
            return
        run = ["run", "--release", "scripted", "--k", str(args.k), "--jobs", "1"]
        run += [] if args.report else ["--no-report"]
        rows: dict[str, list[tuple[float, float]]] = {"cold": [], "warm": []}
        for i in range(args.pairs):
            project = work / f"p{i}"
            shutil.copytree(template, project, symlinks=True)
            cold_h = _cli(project, *run)
            cold_b = bare(project, venv, args.k, proof=True)
            warm_h = _cli(project, *run, "--fresh")
            pytest_s: list[float] = []
            warm_b = bare(project, venv, args.k, proof=False, verifier=pytest_s)
            rows["cold"].append((cold_h, cold_b))
            rows["warm"].append((warm_h, warm_b))
            explained = where(warm_h, warm_b, steps(project), sum(pytest_s))
            shutil.rmtree(project)
    n = len(PROJECTS) * args.k
    print(f"{len(PROJECTS)} real projects x k={args.k} = {n} trials, one job, {args.pairs} pairs")
    for name, pairs in rows.items():
        ratios = [h / b for h, b in pairs]
        print(
            f"{name:5s} harness {statistics.median(h for h, _ in pairs):6.1f} s"
            f"  bare {statistics.median(b for _, b in pairs):6.1f} s"
            f"  ratio median {statistics.median(ratios):.2f}"
            f" (min {min(ratios):.2f}, max {max(ratios):.2f})  target <= 1.15"
        )
    print(explained)


def workers(work: Path, template: Path, k: int, pairs: int) -> None:
    """Time the warm run with one job against two, on threads and on a Dask cluster."""
    project = work / "workers"
    shutil.copytree(template, project, symlinks=True)
    run = ["run", "--release", "scripted", "--k", str(k), "--no-report", "--fresh"]
    _cli(project, *run, "--jobs", "1")  # store and preflight cache made once
    executors = {"threads": [], "dask": ["--executor", "dask"]}
    rows: dict[str, list[tuple[float, float]]] = {name: [] for name in executors}
    for _ in range(pairs):
        for name, extra in executors.items():
            one = _cli(project, *run, *extra, "--jobs", "1")
            two = _cli(project, *run, *extra, "--jobs", "2")
            rows[name].append((one, two))
    n = len(PROJECTS) * k
    print(f"{len(PROJECTS)} real projects x k={k} = {n} trials, warm, {pairs} pairs")
    for name, times in rows.items():
        ratios = [one / two for one, two in times]
        print(
            f"{name:7s} 1 job {statistics.median(o for o, _ in times):6.1f} s"
            f"  2 jobs {statistics.median(t for _, t in times):6.1f} s"
            f"  speed-up median {statistics.median(ratios):.2f}"
            f" (min {min(ratios):.2f}, max {max(ratios):.2f})  target >= 1.8"
        )


if __name__ == "__main__":
    main()
