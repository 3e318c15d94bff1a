"""Preflight: every (case version, environment) pair is proven red and green before trials.

Before the first trial of a run, each exec-lane case that declares (or inherits) an
environment is validated *in that environment* with the red/green proof of
:mod:`harness.trial.validate`: on the untouched starting state the tests must run and fail
(a collection or import error is the wrong reason: the environment, not the starting
state, would be what fails), and with the reference solution they must pass. A pair that
fails refuses the whole run before any trial (exit 4), naming the case and the environment:
an environment fault is never blamed on an agent.

Successful proofs are cached under ``<store>/preflight/`` by the digest of (case digest,
environment digest, backend, image id), so a pair is validated once.
"""

from __future__ import annotations

import json
import re
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.cases.load import LoadedCase
from harness.digest import digest_json, short
from harness.env.model import BuiltEnv
from harness.env.plan import PreparedEnvs, prepare_envs, prepare_for_backend
from harness.errors import InfraError
from harness.project import Project
from harness.sandbox.base import Sandbox
from harness.store.records import FailureType, Outcome
from harness.trial.validate import ValidationResult, validate_case

if TYPE_CHECKING:
    from harness.planning import PlannedRun

__all__ = [
    "PREFLIGHT_DIR",
    "Proof",
    "preflight",
    "preflight_run",
    "proofs",
    "red_problem",
    "validate_in_envs",
]

PREFLIGHT_DIR = "preflight"
# pytest/unittest wording for "the tests never ran": a module that cannot be imported.
# A missing module counts when the runner died of it (a traceback's last line), not when a
# test failed on it (pytest's `E   ModuleNotFoundError` / `FAILED id - ModuleNotFoundError`).
_COLLECTION_ERROR = re.compile(
    r"ERROR collecting|ImportError while importing|Failed to import test module|"
    r"^(?:ModuleNotFoundError|ImportError)\b|errors? during collection|Interrupted: \d+ errors?",
    re.MULTILINE,
)


def red_problem(result: ValidationResult) -> str | None:
    """Why the red half of a proof does not count, or ``None`` when it does.

    Red counts when the verifier ran tests that failed: failure type ``test_failure``, at
    least one test executed (when a report says how many), and no collection or import
    error in its output.
    """
    red = result.red
    if red is None:
        return "no red run"
    if red.outcome is not Outcome.FAIL or red.failure_type is not FailureType.TEST_FAILURE:
        kind = red.failure_type.value if red.failure_type else red.outcome.value
        return f"red for the wrong reason ({kind}: {red.reason})"
    if red.tests_run == 0:
        return "red for the wrong reason: no test ran"
    m = _COLLECTION_ERROR.search(result.red_excerpt)
    if m:
        return f"red for the wrong reason: the tests could not be collected ({m.group(0)})"
    return None


_STAMP_FORMAT = 2
"""2: a stamp keeps the tests the reference solution passed (stamps of 1 are proven again)."""


def _key(lc: LoadedCase, env_digest: str, backend: str, image: str | None) -> str:
    return digest_json(
        {
            "case": lc.digest,
            "environment": env_digest,
            "backend": backend,
            "image": image,
            "stamp": _STAMP_FORMAT,
        }
    )


def _stamp_path(
    folder: Path, lc: LoadedCase, env_digest: str, backend: str, image: str | None
) -> Path:
    return folder / f"{short(_key(lc, env_digest, backend, image), 32)}.json"


def preflight(
    cases: Sequence[LoadedCase],
    envs: PreparedEnvs,
    *,
    sandbox: Sandbox,
    backend: str,
    store_dir: Path,
    images: Mapping[str, str] | None = None,
    downgrade: frozenset[str] = frozenset(),
    on_case: Callable[[str, str], None] | None = None,
    jobs: int = 1,
) -> list[str]:
    """Validate every not-yet-validated (case, environment) pair; return the ones validated now.

    Up to ``jobs`` pairs are proven at once (each proof is two verifier runs in sandboxes
    of their own). Every proof that passed is cached, whatever happens to the others; the
    first pair in case order that failed is the one reported.

    Raises:
        InfraError: a pair failed its proof (reason ``preflight_failed``, exit 4); the
            message names the case, its environment digest and the excerpt.
    """
    images = images or {}
    folder = store_dir / PREFLIGHT_DIR
    todo: list[tuple[LoadedCase, str | None, Path]] = []
    for lc in cases:
        env = envs.cases.get(lc.id)
        case = lc.case
        if env is None or case.lane != "exec" or case.expect != "change":
            continue
        image = images.get(lc.id)
        stamp = _stamp_path(folder, lc, env.digest, backend, image)
        if _read_stamp(stamp) is None:  # none, or not whole: proven (and written) anew
            todo.append((lc, image, stamp))

    def prove(lc: LoadedCase, image: str | None) -> tuple[ValidationResult, float]:
        env = envs.cases[lc.id]
        if on_case is not None:  # when its proof starts (the callback must be thread-safe)
            on_case(lc.id, env.digest)
        started = time.monotonic()
        result = validate_case(lc, sandbox, downgrade, environment=env, image=image)
        return result, time.monotonic() - started

    results: list[tuple[ValidationResult, float]] = []
    workers = max(1, min(jobs, len(todo)))
    queue = iter(todo)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="preflight") as pool:
        running: deque[Future[tuple[ValidationResult, float]]] = deque()

        def fill() -> None:  # at most ``workers`` proofs started and not yet read
            while len(running) < workers and (nxt := next(queue, None)) is not None:
                running.append(pool.submit(prove, nxt[0], nxt[1]))

        fill()
        while running:  # read in case order; after a failure nothing new starts
            results.append(running.popleft().result())
            if _problem(results[-1][0]) is not None:
                break
            fill()
    done: list[str] = []
    for (lc, image, stamp), (result, took) in zip(todo, results, strict=False):  # to a failure
        problem = _problem(result)
        if problem is not None:
            raise _refusal(lc, envs.cases[lc.id], result, problem)
        _stamp(stamp, lc, envs.cases[lc.id].digest, backend, image, result, took)
        done.append(lc.id)
    return done


def _refusal(lc: LoadedCase, env: BuiltEnv, result: ValidationResult, problem: str) -> InfraError:
    excerpt = " ".join(result.red_excerpt.split())[-500:]
    ident = env.identity
    dists = ", ".join(f"{n}=={d['version']}" for n, d in sorted(ident.distributions.items()))
    return InfraError(
        f"preflight: case {lc.id} v{lc.version} does not validate in environment "
        f"{short(env.digest)} ({ident.implementation} {ident.version}; {dists}): {problem}"
        + (f" · red output: {excerpt}" if excerpt else "")
        + " · no trial was run",
        reason="preflight_failed",
    )


def _problem(result: ValidationResult) -> str | None:
    return result.message if result.status != "ok" else red_problem(result)


def _stamp(
    stamp: Path,
    lc: LoadedCase,
    env_digest: str,
    backend: str,
    image: str | None,
    result: ValidationResult,
    seconds: float,
) -> None:
    """Cache one pair's proof (written whole, then renamed into place).

    ``seconds``: how long the proof (two verifier runs) took; the run schedules its longest
    cases first with it (:func:`proofs`).
    """
    stamp.parent.mkdir(parents=True, exist_ok=True)
    part = stamp.with_suffix(".part")
    part.write_text(
        json.dumps(
            {
                "case": lc.id,
                "version": lc.version,
                "case_digest": lc.digest,
                "environment": env_digest,
                "backend": backend,
                "image": image,
                "red": result.red.reason if result.red else None,
                "green": result.green.reason if result.green else None,
                "proof_seconds": round(seconds, 3),
                "green_passed": {path: list(ids) for path, ids in result.green_passed.items()},
            },
            indent=2,
            sort_keys=True,
        )
    )
    part.replace(stamp)


def validate_in_envs(
    project: Project,
    cases: Sequence[LoadedCase],
    sandbox: Sandbox,
    downgrade: frozenset[str] = frozenset(),
    side_by_side: bool = False,
) -> list[ValidationResult]:
    """Build the cases' environments, then prove each case in its own (``cases validate``).

    A red that ran no test (a collection or import error) is reported broken.
    ``side_by_side``: each case's red and green verifier run at once.
    """
    images: dict[str, str] = {}
    if sandbox.name == "docker":
        from harness.planning import case_images

        envs, bases = prepare_for_backend(project, cases, {}, "docker")
        images = case_images([lc for lc in cases if lc.id in bases], bases)
    else:
        envs = prepare_envs(project, cases, {})
    out: list[ValidationResult] = []
    for lc in cases:
        env = envs.cases.get(lc.id)
        result = validate_case(
            lc,
            sandbox,
            downgrade,
            environment=env,
            image=images.get(lc.id),
            side_by_side=side_by_side,
        )
        problem = red_problem(result) if result.status == "ok" else None
        if problem is not None:
            result = ValidationResult(
                lc.id, "broken", result.red, result.green, problem, result.red_excerpt
            )
        out.append(result)
    return out


@dataclass(frozen=True)
class Proof:
    """What a run reads back from one case's cached red/green proof."""

    seconds: float | None
    """How long the proof took (``None``: cached before proofs were timed)."""
    green_passed: tuple[tuple[str, tuple[str, ...]], ...]
    """Per JUnit artifact path, the tests the reference solution passed."""


def _read_stamp(stamp: Path) -> Proof | None:
    """Read one cached proof back, or ``None`` when there is none or it is not whole."""
    try:
        doc = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("green_passed"), dict):
        return None
    passed: list[tuple[str, tuple[str, ...]]] = []
    for path, ids in sorted(doc["green_passed"].items()):
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            return None
        passed.append((path, tuple(ids)))
    seconds = doc.get("proof_seconds")
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0:
        seconds = None
    return Proof(None if seconds is None else float(seconds), tuple(passed))


def proofs(project: Project, plan: PlannedRun) -> dict[str, Proof]:
    """Each case's cached red/green proof, for the run's backend and images.

    Read after :func:`preflight_run` proved every pair: the run starts its longest cases
    first (:func:`harness.run.execute`) and hands each trial the tests its proof passed
    (:attr:`harness.trial.spec.TrialSpec.proven`). Cases without a proof (no environment,
    not an exec-lane change) are left out.

    Raises:
        InfraError: a proof preflight stands on cannot be read back whole (reason
            ``preflight_failed``): the trials would lose a check.
    """
    folder = project.store_dir / PREFLIGHT_DIR
    images = plan.record.system.case_images or {}
    found: dict[str, Proof] = {}
    for lc in plan.cases:
        env = plan.envs.cases.get(lc.id)
        if env is None or lc.case.lane != "exec" or lc.case.expect != "change":
            continue
        stamp = _stamp_path(folder, lc, env.digest, plan.record.backend, images.get(lc.id))
        proof = _read_stamp(stamp)
        if proof is None:
            raise InfraError(
                f"preflight: the proof of case {lc.id} cannot be read back whole "
                f"({PREFLIGHT_DIR}/{stamp.name}); run again to prove the case anew",
                reason="preflight_failed",
            )
        found[lc.id] = proof
    return found


def preflight_run(
    project: Project,
    plan: PlannedRun,
    *,
    on_case: Callable[[str, str], None] | None = None,
    jobs: int = 1,
) -> list[str]:
    """Run :func:`preflight` for a planned run, on its backend and case images."""
    if not plan.envs.cases:
        return []
    from harness.sandbox.registry import get_backend

    return preflight(
        plan.cases,
        plan.envs,
        sandbox=get_backend(plan.record.backend),
        backend=plan.record.backend,
        store_dir=project.store_dir,
        images=plan.record.system.case_images or {},
        downgrade=frozenset(plan.record.downgrade),
        on_case=on_case,
        jobs=jobs,
    )
