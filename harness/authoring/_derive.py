"""Derive the verifier's test lists by execution, in the locked environment, in a sandbox.

The red tree is the parent with the hidden tests added; the green tree is the red tree
with the reference patch applied. Each runs ``repeats`` times in a fresh sandbox of the
chosen backend, with the built environment first on ``PATH`` (as the verifier will):

* ``fail_to_pass``: fails (or is absent) in every red run and passes in every green run;
* ``pass_to_pass``: passes in every run, red and green;
* ``flaky``: a test whose outcome differs between runs of the same tree: reported, left
  out of both lists and deselected, never silently listed;
* a test that fails in the green tree too is deselected, so the verifier's exit status
  means what it says.

The same idea as SWE-bench's FAIL_TO_PASS / PASS_TO_PASS, computed here from JUnit reports.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from harness.cases.model import PhaseContract
from harness.env.model import BuiltEnv
from harness.env.plan import phase_view
from harness.errors import ConfigError
from harness.sandbox.base import Sandbox
from harness.sandbox.owner import owned_prefix
from harness.trial.excerpt import select_excerpt
from harness.trial.junit import JUnitCase, JUnitError, parse_junit

__all__ = ["JUNIT_PATH", "Derived", "TreeRun", "base_command", "derive_lists", "run_tests"]

JUNIT_PATH: Final = "reports/harness-junit.xml"
"""Where the verifier's pytest writes its report, relative to the workspace."""
_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
# What the verifier phase sets too (harness.trial.runner_guard.guard_env): no implicit cwd on
# sys.path, no user site, no bytecode written into the tree.
_RUN_ENV: Final = {"PYTHONSAFEPATH": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"}


def base_command(targets: Sequence[str]) -> tuple[str, ...]:
    """Return the pytest command of a derived verifier, before deselections."""
    return (
        "python3",
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        "junit_family=xunit1",
        "-o",
        "pythonpath=. src",
        f"--junitxml={JUNIT_PATH}",
        *targets,
    )


def nodeid(case: JUnitCase) -> str | None:
    """Pytest node id of a JUnit (xunit1) test case, or ``None`` without a ``file``."""
    if not case.file or not case.file.endswith(".py"):
        return None
    module = case.file[:-3].replace("/", ".")
    rest = case.classname[len(module) :].lstrip(".") if case.classname.startswith(module) else ""
    return "::".join([case.file, *[p for p in rest.split(".") if p], case.name])


@dataclass(frozen=True)
class TreeRun:
    """One execution of the tests on one tree."""

    outcomes: dict[str, str]
    """Test id (``classname::name``) → worst status seen for it in this run."""
    nodeids: dict[str, str]
    """Test id → pytest node id (for ``--deselect``)."""
    files: dict[str, str]
    """Test id → the file it lives in (for a module that cannot be collected)."""
    exit_code: int | None
    excerpt: str
    seconds: float


def run_tests(
    sandbox: Sandbox,
    env: BuiltEnv,
    tree: Path,
    command: Sequence[str],
    contract: PhaseContract,
    label: str,
) -> TreeRun:
    """Run ``command`` on a copy of ``tree`` in a fresh sandbox; parse its JUnit report.

    Raises:
        ConfigError: the run left no readable report (the tests could not run at all);
            the message carries the output's excerpt.
        InfraError: the sandbox could not run it.
    """
    view = phase_view(env, None, "verifier")
    with sandbox.open(contract, label=label, view=view) as v:
        v.put_tree(tree)
        res = v.exec(list(command), env=_RUN_ENV, timeout=contract.timeout_seconds)
        data = v.read_file(f"{v.paths.workspace}/{JUNIT_PATH}", limit=64 << 20)
    text = select_excerpt(res.stdout, res.stderr)
    if data is None:
        tree_name = "the parent with the hidden tests" if "-red" in label else "the fix"
        slow = (
            f"did not finish within --timeout {contract.timeout_seconds:g}s (a test that hangs "
            "or is this slow there); "
            if res.termination.value == "wall_clock"
            else ""
        )
        raise ConfigError(
            f"the tests on {tree_name} wrote no report: {slow}({res.termination.value}, "
            f"exit {res.exit_code}); output: {' '.join(text.split())[-800:]}"
        )
    try:
        report = parse_junit(data)
    except JUnitError as exc:
        raise ConfigError(f"the tests' report cannot be read: {exc}") from None
    outcomes: dict[str, str] = {}
    ids: dict[str, str] = {}
    files: dict[str, str] = {}
    for case in report.cases:
        old = outcomes.get(case.id, "passed")
        outcomes[case.id] = case.status if _RANK[case.status] >= _RANK[old] else old
        nid = nodeid(case)
        if nid is not None:
            ids[case.id] = nid
        if case.file:
            files[case.id] = case.file
    return TreeRun(outcomes, ids, files, res.exit_code, text, res.duration_s)


@dataclass(frozen=True)
class Derived:
    """The lists derived from the red and green runs."""

    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    flaky: tuple[str, ...]
    """Tests whose outcome differed between runs of one tree (left out of both lists)."""
    broken: tuple[str, ...]
    """Tests that do not pass with the reference (failing both ways, or only after)."""
    deselect: tuple[str, ...]
    """pytest node ids the verifier deselects (``flaky`` and ``broken``)."""
    ignore: tuple[str, ...]
    """Test files the verifier ignores (they cannot be collected with the reference)."""
    sampled_out: int = 0
    """Stable passing tests left out of ``pass_to_pass`` by sampling."""
    red_excerpt: str = ""
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)


def _sample(ids: list[str], limit: int) -> list[str]:
    """Pick ``limit`` ids deterministically (by digest: the same input picks the same)."""
    if limit <= 0 or len(ids) <= limit:
        return ids
    return sorted(sorted(ids, key=lambda s: hashlib.sha256(s.encode()).hexdigest())[:limit])


def derive_lists(
    red: Sequence[TreeRun], green: Sequence[TreeRun], pass_to_pass_limit: int = 0
) -> Derived:
    """Compute fail_to_pass, pass_to_pass, flaky and deselections from repeated runs."""
    every = sorted({t for r in (*red, *green) for t in r.outcomes})
    flaky, broken, f2p, p2p = [], [], [], []
    for t in every:
        r = {run.outcomes.get(t, "absent") for run in red}
        g = {run.outcomes.get(t, "absent") for run in green}
        if len(r) > 1 or len(g) > 1:
            flaky.append(t)
        elif g == {"passed"}:
            if r == {"passed"}:
                p2p.append(t)
            elif r <= {"failed", "error", "absent"}:
                f2p.append(t)
        elif g & {"failed", "error"}:
            broken.append(t)
    nodeids: dict[str, str] = {}
    files: dict[str, str] = {}
    for run in (*red, *green):
        nodeids.update(run.nodeids)
        files.update(run.files)
    deselect, ignore = [], []
    for t in (*flaky, *broken):
        if t in nodeids:
            deselect.append(nodeids[t])
        elif ("::" not in t and t.replace(".", "/") + ".py" in {*files.values()}) or "::" not in t:
            ignore.append(t.replace(".", "/") + ".py")
    kept = _sample(p2p, pass_to_pass_limit)
    return Derived(
        fail_to_pass=tuple(f2p),
        pass_to_pass=tuple(kept),
        flaky=tuple(flaky),
        broken=tuple(broken),
        deselect=tuple(sorted(set(deselect))),
        ignore=tuple(sorted(set(ignore))),
        sampled_out=len(p2p) - len(kept),
        red_excerpt=red[0].excerpt if red else "",
        seconds=sum(r.seconds for r in (*red, *green)),
    )


def run_both(
    sandbox: Sandbox,
    env: BuiltEnv,
    red_tree: Path,
    green_tree: Path,
    command: Sequence[str],
    contract: PhaseContract,
    repeats: int,
    label: str,
    jobs: int = 1,
) -> tuple[list[TreeRun], list[TreeRun]]:
    """Run the red and the green tree ``repeats`` times each, ``jobs`` runs at a time.

    Every run has its own fresh sandbox and its own copy of the tree, so running them side
    by side changes nothing a run sees; the lists come back in run order either way.
    """
    runs = [
        (tree, f"{label}-{name}{i}")
        for i in range(repeats)
        for name, tree in (("red", red_tree), ("green", green_tree))
    ]
    if jobs <= 1:
        done = [run_tests(sandbox, env, tree, command, contract, lab) for tree, lab in runs]
    else:
        pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="derive")
        try:
            futures = [
                pool.submit(run_tests, sandbox, env, tree, command, contract, lab)
                for tree, lab in runs
            ]
            done = [f.result() for f in futures]
        finally:
            # The first failure decides: runs not started yet are dropped, not waited for.
            pool.shutdown(wait=True, cancel_futures=True)
    return done[0::2], done[1::2]


def scratch(prefix: str) -> tempfile.TemporaryDirectory[str]:
    """Make a temporary folder the sandbox sweep recognises as this process's."""
    return tempfile.TemporaryDirectory(prefix=owned_prefix(prefix))


def copy_tree(src: Path, dest: Path) -> None:
    """Copy a tree keeping links as links."""
    shutil.copytree(src, dest, symlinks=True)
