"""Per-trial overhead of the whole pipeline on the local backend (prints ratios).

Builds a no-op golden set of ``--cases`` cases and runs it ``--k`` times through the real
pipeline (plan, local sandbox for agent and verifier, candidate snapshot, verdict, store
writes) with one worker, side by side with the same agent and verifier commands run as
bare subprocesses in a loop (copying the same starting tree to a temp dir per trial).

    python bench/trial_overhead.py --cases 100 --k 5 --command python
    python bench/trial_overhead.py --cases 100 --k 5 --command true

``--env LOCK`` adds a declared environment (that lock, e.g. ``env/requirements.lock``) to
the golden set and runs the pipeline with and without it, to measure what mounting the
environment and checking its fingerprint costs per trial (built once before timing).

``--backend docker`` runs the pipeline on the Docker backend and compares it with plain
``docker run``s of the same image, one for the agent and one for the verifier per trial,
each with the trial's copied tree bound at ``/workspace`` (target: <= 1.3x):

    python bench/trial_overhead.py --backend docker --cases 10 --k 3 --command true

``--command python`` uses ``python3 -c pass``-like commands (what real agents and verifiers
start with); ``--command true`` isolates the fixed cost of the sandbox itself.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from harness.cases.load import load_cases
from harness.cases.lock import lock_cases, read_lock, write_lock
from harness.executors.local import LocalExecutor
from harness.planning import plan_run
from harness.project import load_project
from harness.run import execute
from harness.store.store import Store

COMMANDS = {
    "python": (
        ["python3", "-c", "open('out.txt','w').write('x')"],
        ["python3", "-c", "import sys; sys.exit(0)"],
    ),
    "true": (["sh", "-c", "echo x > out.txt"], ["true"]),
}


def build(root: Path, n: int, kind: str, env_lock: Path | None = None) -> None:
    agent, verifier = COMMANDS[kind]
    env = ""
    if env_lock is not None:
        shutil.copy(env_lock, root / "requirements.lock")
        env = "environment: {lock: requirements.lock}\n"
    (root / "harness.yaml").write_text(
        f"{env}releases:\n  noop:\n    agent: {{adapter: command, command: {agent}}}\n"
    )
    for i in range(n):
        d = root / "cases" / f"noop-{i:03d}"
        (d / "repo" / "src").mkdir(parents=True)
        for j in range(5):
            (d / "repo" / "src" / f"m{j}.py").write_text(f"X = {j}\n" * 20)
        (d / "case.yaml").write_text(
            f"id: noop-{i:03d}\nversion: 1\nrequest: nothing\nlane: judgment\n"
            f"repo: {{kind: folder, path: repo}}\nverifier: {{command: {verifier}}}\n"
        )
    lock, _ = lock_cases(
        load_cases(root / "cases"), read_lock(root / "cases/golden.lock.yaml", "golden")
    )
    write_lock(root / "cases/golden.lock.yaml", lock)


def pipeline(root: Path, k: int, backend: str = "local") -> float:
    project = load_project(root)
    store = Store(project.store_dir)
    plan = plan_run(project, "noop", k, fresh=True, store=store, backend=backend)
    ex = LocalExecutor(1)
    t = time.perf_counter()
    with store.open_run(plan.record) as h:
        execute(h, plan.specs, ex)
    ex.close()
    return time.perf_counter() - t


def _trees(root: Path, n: int, k: int) -> Iterator[Path]:
    """A fresh copy of each case's tree, ``k`` times per case (removed after use)."""
    for i in range(n):
        src = root / "cases" / f"noop-{i:03d}" / "repo"
        for _ in range(k):
            with tempfile.TemporaryDirectory() as tmp:
                ws = Path(tmp) / "ws"
                shutil.copytree(src, ws)
                yield ws


def bare(root: Path, n: int, k: int, kind: str) -> float:
    agent, verifier = COMMANDS[kind]
    t = time.perf_counter()
    for ws in _trees(root, n, k):
        subprocess.run(agent, cwd=ws, check=True)
        subprocess.run(verifier, cwd=ws, check=True)
    return time.perf_counter() - t


def bare_docker(root: Path, n: int, k: int, kind: str) -> float:
    """Plain ``docker run``s: the agent's and the verifier's, on a copy of the tree."""
    from harness.sandbox.docker import DEFAULT_IMAGE

    agent, verifier = COMMANDS[kind]
    flags = ["--rm", "--network", "none", "--memory", "512m", "--pids-limit", "128"]
    flags += ["-w", "/workspace", "-u", "65534:65534"]
    t = time.perf_counter()
    for ws in _trees(root, n, k):
        ws.chmod(0o777)
        for argv in (agent, verifier):
            mount = ["-v", f"{ws}:/workspace"]
            cmd = ["docker", "run", *flags, *mount, DEFAULT_IMAGE, *argv]
            subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t


def main_docker(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build(root, args.cases, args.command)
        pipeline(root, 1, "docker")  # image and engine warm, outside the timings
        pairs = [
            (bare_docker(root, args.cases, args.k, args.command), pipeline(root, args.k, "docker"))
            for _ in range(2)
        ]
    trials = args.cases * args.k
    b, p = min(x for x, _ in pairs), min(y for _, y in pairs)
    print(f"{trials} trials, commands={args.command}, one worker, docker")
    print(f"plain docker runs    : {b:8.2f} s  ({1000 * b / trials:7.1f} ms/trial)")
    print(f"harness docker       : {p:8.2f} s  ({1000 * p / trials:7.1f} ms/trial)")
    print(f"ratios pair by pair  : {', '.join(f'{y / x:.2f}' for x, y in pairs)}")
    print(f"overhead ratio       : {p / b:8.2f}  (target <= 1.3)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--command", choices=sorted(COMMANDS), default="python")
    ap.add_argument("--env", type=Path, default=None, help="lock file of an environment")
    ap.add_argument("--backend", choices=("local", "docker"), default="local")
    args = ap.parse_args()
    if args.backend == "docker":
        main_docker(args)
        return
    if args.env is not None:
        compare_env(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build(root, args.cases, args.command)
        b1 = bare(root, args.cases, args.k, args.command)
        p = pipeline(root, args.k)
        b2 = bare(root, args.cases, args.k, args.command)
    trials = args.cases * args.k
    b = min(b1, b2)
    print(f"{trials} trials, commands={args.command}, one worker")
    print(
        f"bare subprocess loop : {b:8.2f} s  ({1000 * b / trials:7.1f} ms/trial)"
        f"  [runs: {b1:.2f}, {b2:.2f}]"
    )
    print(f"harness local backend: {p:8.2f} s  ({1000 * p / trials:7.1f} ms/trial)")
    print(f"overhead ratio       : {p / b:8.2f}  (target <= 1.5)")


def compare_env(args: argparse.Namespace) -> None:
    trials = args.cases * args.k
    times: dict[str, list[float]] = {"without": [], "with": []}
    with tempfile.TemporaryDirectory() as tmp:
        plain, env = Path(tmp) / "plain", Path(tmp) / "env"
        plain.mkdir()
        env.mkdir()
        build(plain, args.cases, args.command)
        build(env, args.cases, args.command, args.env.resolve())
        t = time.perf_counter()
        plan_run(load_project(env), "noop", 1)  # builds the environment (cold or cached)
        print(f"environment build/lookup: {time.perf_counter() - t:.2f} s")
        for _ in range(2):  # alternate, so machine load hits both alike
            times["without"].append(pipeline(plain, args.k))
            times["with"].append(pipeline(env, args.k))
    a, b = min(times["without"]), min(times["with"])
    print(f"{trials} trials, commands={args.command}, one worker")
    print(
        f"without environment: {a:8.2f} s ({1000 * a / trials:7.1f} ms/trial)  {times['without']}"
    )
    print(f"with environment   : {b:8.2f} s ({1000 * b / trials:7.1f} ms/trial)  {times['with']}")
    print(f"ratio with/without : {b / a:8.3f}  (target <= 1.10)")


if __name__ == "__main__":
    main()
