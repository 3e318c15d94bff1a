"""Measured model usage, verification cost and tampering notes, reduced for the report.

The model gateway measures every agent call (tokens, cost, upstream wait, the transcript);
the sandbox measures every verifier phase (CPU and wall seconds); each trial records the
harness's own time per step. All are summed here per arm and per case, from the run records
only. Tampering (paths restored or flagged) and
``left_out`` (the agent's own files under protected paths, noted, not held against it)
are counted per case; the paths are listed on each trial's evidence.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from harness.frozen import Frozen as _Frozen
from harness.store.records import AttemptRecord, RunRecord

__all__ = [
    "HarnessCost",
    "ModelCost",
    "VerifyCost",
    "harness_cost",
    "model_cost",
    "ordered_union",
    "transcript_refs",
    "verify_cost",
]

TRANSCRIPT_CALLS = 20
"""Calls of a failed trial's transcript copied into the folder (the last ones)."""


class ModelCost(_Frozen):
    """Model usage measured by the gateway, summed over trials and every attempt."""

    trials: int
    """Trials with at least one attempt measured by the gateway."""
    turns: int
    input_tokens: int
    output_tokens: int
    tokens: int
    """Input plus output tokens."""
    cost: float
    """From the release's price table, in its currency units."""
    upstream_wait_s: float
    """Seconds spent waiting on the upstream (not counted against the agent)."""
    models: tuple[str, ...]
    """Model ids the upstream answered with (the pinned id when it did not say)."""


class VerifyCost(_Frozen):
    """The cost of verification: the verifier phase of every candidate."""

    candidates: int
    """Verifier phases run (one per verified candidate, correction attempts included)."""
    cpu_s: float
    """Sandbox CPU seconds of those phases (phases without a CPU measure count 0)."""
    wall_s: float
    """Wall seconds of those phases."""


class HarnessCost(_Frozen):
    """The harness's own time beside the verifier's, over the trials that recorded steps."""

    trials: int
    """Trials whose records carry their steps (records written before steps have none)."""
    overhead_s: float
    """The harness's own seconds: the trials' wall time and store, less the agent's and
    verifier's commands."""
    overhead_median_s: float
    """Median of the harness's own seconds per trial."""
    verifier_s: float
    """Seconds of the verifier's commands in the same trials."""
    verifier_median_s: float
    """Median of the verifier's command seconds per trial."""
    steps: dict[str, float]
    """Seconds per step (``workspace``, ``agent``, … ``store``) summed over those trials."""


def harness_cost(records: Iterable[RunRecord]) -> HarnessCost | None:
    """Sum the harness's own time over ``records``; None when no record carries steps."""
    overhead: list[float] = []
    verifier: list[float] = []
    steps: dict[str, float] = {}
    for r in records:
        own = r.overhead_s()
        if r.steps is None or own is None:
            continue
        overhead.append(own)
        verifier.append(sum(a.verifier.duration_s for a in r.tries() if a.verifier))
        for name, value in r.steps.model_dump(exclude={"wall_s"}).items():
            steps[name] = steps.get(name, 0.0) + (value or 0.0)
    if not overhead:
        return None
    return HarnessCost(
        trials=len(overhead),
        overhead_s=sum(overhead),
        overhead_median_s=statistics.median(overhead),
        verifier_s=sum(verifier),
        verifier_median_s=statistics.median(verifier),
        steps=steps,
    )


def model_cost(records: Iterable[RunRecord]) -> ModelCost | None:
    """Sum the gateway's measures over ``records``; None when none was measured."""
    trials = turns = tin = tout = 0
    cost = wait = 0.0
    models: set[str] = set()
    for r in records:
        used = False
        for a in r.tries():  # an infra try's paid calls are paid too
            m = a.model
            if m is None:
                continue
            used = True
            turns += m.turns
            tin += m.input_tokens
            tout += m.output_tokens
            cost += m.cost
            wait += m.upstream_wait_s
            models.add(m.answered_model or m.model)
        trials += used
    if not trials:
        return None
    return ModelCost(
        trials=trials,
        turns=turns,
        input_tokens=tin,
        output_tokens=tout,
        tokens=tin + tout,
        cost=cost,
        upstream_wait_s=wait,
        models=tuple(sorted(models)),
    )


def verify_cost(records: Iterable[RunRecord]) -> VerifyCost:
    """Sum the verifier phases' CPU and wall seconds over ``records``."""
    n = 0
    cpu = wall = 0.0
    for r in records:
        for a in r.tries():
            if a.verifier is not None:
                n += 1
                wall += a.verifier.duration_s
                cpu += a.verifier.cpu_s or 0.0
    return VerifyCost(candidates=n, cpu_s=cpu, wall_s=wall)


def ordered_union(attempts: Iterable[AttemptRecord], field: str) -> tuple[str, ...]:
    """Return the paths of ``field`` (``tampering``, ``left_out``) over attempts, in order."""
    seen: dict[str, None] = {}
    for a in attempts:
        for p in getattr(a, field):
            seen.setdefault(p, None)
    return tuple(seen)


def transcript_refs(attempt: AttemptRecord) -> list[tuple[str, str]]:
    """(label, digest) of the last :data:`TRANSCRIPT_CALLS` calls of an attempt's transcript."""
    if attempt.model is None:
        return []
    out: list[tuple[str, str]] = []
    for i, call in enumerate(attempt.model.calls[-TRANSCRIPT_CALLS:], 1):
        n = call.turn or f"refused {i}"
        out.append((f"model request {n}", call.request_blob))
        if call.response_blob is not None:
            out.append((f"model response {n}", call.response_blob))
    return out
