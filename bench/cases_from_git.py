"""Measure `harness cases new --from-git` on real projects.

For each project, a git repository is built from successive pinned sdists (downloaded
with `pip download --no-deps --no-binary :all:`): one commit per version, so each commit
after the first is a real change of the project with the tests its sdist ships. Each such
commit is turned into a case with no hand edit; the script records whether it became a
validated case, the time it took, and the reason printed when it did not. Every produced
case is then run with a no-op agent (must fail) and an agent applying the reference (must
pass), and its starting state is checked for the hidden tests and the fix.

    python bench/cases_from_git.py --work /tmp/cases-bench [--only idna] [--commits 2]

Writes <work>/results.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import yaml

PROJECTS: dict[str, list[str]] = {
    "idna": ["3.4", "3.5", "3.6", "3.7", "3.8", "3.9"],
    "more-itertools": ["10.1.0", "10.2.0", "10.3.0", "10.4.0", "10.5.0", "10.6.0"],
    "itsdangerous": ["2.0.0", "2.0.1", "2.1.0", "2.1.1", "2.1.2", "2.2.0"],
    "click": ["8.1.3", "8.1.4", "8.1.5", "8.1.6", "8.1.7", "8.1.8"],
    "six": ["1.12.0", "1.13.0", "1.14.0", "1.15.0", "1.16.0", "1.17.0"],
}

KEPT_LINES = ("fail_to_pass", "pass_to_pass", "flaky", "deselected", "took")
HARNESS_YAML = """\
task_set: golden
policy: policy.yaml
releases:
  noop:
    agent: {adapter: command, command: [sh, -c, "true"]}
  reference:
    agent: {adapter: simulated, simulated: {skill: {default: 1.0}}}
"""


def run(
    argv: list[str], cwd: Path | None = None, timeout: float = 1800
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )


def git(repo: Path, *args: str) -> str:
    done = run(["git", "-C", str(repo), *args])
    if done.returncode != 0:
        raise RuntimeError(f"git {args}: {done.stderr}")
    return done.stdout.strip()


def sdist(name: str, version: str, cache: Path) -> Path:
    stem = name.replace("-", "_")
    for pattern in (f"{name}-{version}.tar.gz", f"{stem}-{version}.tar.gz"):
        if (cache / pattern).is_file():
            return cache / pattern
    done = run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                "-d", str(cache), f"{name}=={version}"])  # fmt: skip
    for pattern in (f"{name}-{version}.tar.gz", f"{stem}-{version}.tar.gz"):
        if (cache / pattern).is_file():
            return cache / pattern
    raise RuntimeError(f"cannot download {name}=={version}: {done.stderr[-400:]}")


def build_repo(name: str, versions: list[str], cache: Path, dest: Path) -> list[tuple[str, str]]:
    """One commit per version; return (version, sha) of every commit after the first."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    git(dest, "init", "-q")
    git(dest, "config", "user.email", "bench@example.org")
    git(dest, "config", "user.name", "bench")
    commits = []
    for i, version in enumerate(versions):
        for child in dest.iterdir():
            if child.name != ".git":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        with tarfile.open(sdist(name, version, cache)) as tf:
            tf.extractall(dest / ".unpack", filter="data")
        (top,) = list((dest / ".unpack").iterdir())
        for child in top.iterdir():
            child.rename(dest / child.name)
        shutil.rmtree(dest / ".unpack")
        git(dest, "add", "-A", "-f")
        message = (
            f"{name} {version}: the changes released in {version}\n\n"
            f"Bring {name} from {versions[i - 1]} to {version}: make the behaviour the "
            "project's new tests describe pass, without breaking the existing ones."
            if i
            else f"{name} {version}"
        )
        git(dest, "commit", "-q", "-m", message)
        if i:
            commits.append((version, git(dest, "rev-parse", "HEAD")))
    return commits


def check_case(proj: Path, cid: str) -> dict[str, object]:
    """Starting state holds neither the hidden tests' fix version nor the fix itself."""
    case_dir = proj / "cases" / cid
    case = yaml.safe_load((case_dir / "case.yaml").read_text())
    with tarfile.open(case_dir / case["repo"]["path"]) as tf:
        members = {m.name: m for m in tf.getmembers() if m.isfile()}
        start = {n: tf.extractfile(m).read() for n, m in members.items()}  # type: ignore
    leaked = [
        h["dest"] for h in case["verifier"]["hidden"]
        if start.get(h["dest"]) == (case_dir / h["src"]).read_bytes()
    ]  # fmt: skip
    return {"hidden_in_start": leaked, "git_in_start": any(n.startswith(".git/") for n in start)}


def agent_outcomes(proj: Path, release: str, cids: list[str]) -> dict[str, str]:
    if not cids:
        return {}
    run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--release",
            release,
            "--k",
            "1",
            "--no-report",
        ],
        cwd=proj,
    )
    shown = json.loads(
        run([sys.executable, "-m", "harness.cli", "show", "--json"], cwd=proj).stdout
    )
    return {t["key"]["case_id"]: t["verdict"]["outcome"] for t in shown["trials"]}


def add_agents(proj: Path, made: list[str], results: list[dict[str, object]]) -> None:
    noop = agent_outcomes(proj, "noop", made)
    ref = agent_outcomes(proj, "reference", made)
    for row in results:
        if row["case"] in made:
            row["noop"] = noop.get(str(row["case"]))
            row["reference"] = ref.get(str(row["case"]))


# What a commit that cannot make a case is refused for, rightly: the release changed no test,
# changed only tests, or its tests already pass on the parent (nothing they prove was fixed).
CORRECT_REFUSALS = (
    "adds or changes no test file",
    "changes no source",
    "no test fails on the parent and passes with the fix",
)


def status(row: dict[str, object]) -> str:
    """``validated`` (made, no-op fails, reference passes), ``refused`` (rightly) or ``failed``."""
    if row["exit"] == 0:
        agents = (row.get("noop"), row.get("reference"))
        return "validated" if agents == ("fail", "pass") else f"made, agents {agents}"
    if any(r in str(row.get("reason", "")) for r in CORRECT_REFUSALS):
        return "refused"
    return "failed"


def print_table(results: list[dict[str, object]]) -> None:
    print("\n| project | version | outcome | seconds | where the time went | reason |")
    print("|---|---|---|---|---|---|")
    for r in results:
        derived = [str(d) for d in r.get("derived", [])]  # type: ignore[attr-defined]
        took = next((d for d in derived if d.startswith("took")), "")
        steps = str(took).partition("(")[2].rstrip(")")
        print(f"| {r['project']} | {r['version']} | {status(r)} | {r['seconds']} | {steps} | "
              f"{str(r.get('reason', ''))[:300]} |")  # fmt: skip
    counts = {k: sum(status(r) == k for r in results) for k in ("validated", "refused", "failed")}
    made = sorted(float(r["seconds"]) for r in results if r["exit"] == 0)  # type: ignore[arg-type]
    median = statistics.median(made) if made else float("nan")
    print(f"\n{len(results)} commits: {counts['validated']} validated, {counts['refused']} "
          f"refused correctly, {counts['failed']} failed; median {median:.1f}s per made case, "
          f"slowest {max(made, default=float('nan')):.1f}s")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--sdists", type=Path, default=None)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--repeats", default="3")
    ap.add_argument(
        "--commits", type=int, default=0, help="at most this many commits per project (0: all)"
    )
    ap.add_argument("--agents-only", action="store_true", help="only run the agents again")
    ap.add_argument("--table", action="store_true", help="only print <work>/results.json")
    args = ap.parse_args()
    if args.table:
        print_table(json.loads((args.work / "results.json").read_text()))
        return 0
    work: Path = args.work
    cache = args.sdists or work / "sdists"
    cache.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, object]] = []
    out_file = work / "results.json"
    if args.agents_only:
        results = json.loads(out_file.read_text())
    for name, versions in PROJECTS.items():
        if args.only and name not in args.only:
            continue
        if args.agents_only:
            proj = work / "projects" / name
            made = [str(r["case"]) for r in results if r["project"] == name and r["exit"] == 0]
            add_agents(proj, made, results)
            out_file.write_text(json.dumps(results, indent=2))
            continue
        repo = work / "repos" / name
        commits = build_repo(name, versions, cache, repo)
        if args.commits:
            commits = commits[: args.commits]
        proj = work / "projects" / name
        if proj.exists():
            shutil.rmtree(proj)
        (proj / "cases").mkdir(parents=True)
        (proj / "harness.yaml").write_text(HARNESS_YAML)
        (proj / "policy.yaml").write_text('version: "1"\n')
        made = []
        for version, sha in commits:
            cid = f"{name}-{version}".lower()
            t0 = time.monotonic()
            argv = ["cases", "new", cid, "--from-git", str(repo), "--commit", sha]
            argv += ["--repeats", args.repeats]
            done = run([sys.executable, "-m", "harness.cli", *argv], cwd=proj)
            took = time.monotonic() - t0
            row: dict[str, object] = {
                "project": name, "version": version, "commit": sha, "case": cid,
                "exit": done.returncode, "seconds": round(took, 1),
            }  # fmt: skip
            if done.returncode == 0:
                made.append(cid)
                row.update(check_case(proj, cid))
                row["derived"] = [
                    line.strip() for line in done.stdout.splitlines()
                    if line.strip().startswith(KEPT_LINES)
                ]  # fmt: skip
            else:
                row["reason"] = " ".join(done.stderr.split())[:700]
            results.append(row)
            out_file.write_text(json.dumps(results, indent=2))
            print(json.dumps(row), flush=True)
        add_agents(proj, made, results)
        out_file.write_text(json.dumps(results, indent=2))
    print_table(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
