"""The stored summary of one decided run (``runs/<run_id>/summary.json``): the history's input.

Kept apart from :mod:`harness.report.history` (which writes and lists summaries) and
:mod:`harness.report.trend` (which plots them), so that both import it and not each other.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from harness.frozen import Frozen as _Frozen
from harness.gate.stats import ArmSummary, MeanCI

__all__ = ["ArmTrend", "CaseTrend", "RunSummary"]


class ArmTrend(_Frozen):
    """One arm of a run, aggregated: counts and the estimates with 95% intervals."""

    trials: int
    passes: int
    fails: int
    infra_errors: int
    evaluator_errors: int
    pass_rate: MeanCI
    pass_hat_k: MeanCI
    """pass^k: share of cases whose k trials all passed, mean over cases."""
    pass_at_k: MeanCI

    @classmethod
    def of(cls, s: ArmSummary) -> ArmTrend:
        """Reduce a gate arm summary."""
        return cls(
            trials=s.trials,
            passes=s.passes,
            fails=s.fails,
            infra_errors=s.infra_errors,
            evaluator_errors=s.evaluator_errors,
            pass_rate=s.pass_rate,
            pass_hat_k=s.pass_hat_k,
            pass_at_k=s.pass_at_k,
        )


class CaseTrend(_Frozen):
    """One case of the candidate arm of a run."""

    n: int
    """Judged trials."""
    pass_rate: float | None
    pass_hat_k: float | None
    label: str


class RunSummary(_Frozen):
    """What the history needs of one decided run (``runs/<run_id>/summary.json``)."""

    schema_version: Literal[1] = 1
    run_id: str
    release: str
    system_digest: str
    task_set: str
    k: int
    baseline: str | None
    created_at: dt.datetime
    """When the run started (its release record)."""
    decided_at: dt.datetime
    verdict: str
    headline: str
    candidate: ArmTrend
    baseline_arm: ArmTrend | None
    """The baseline re-executed in this run, when it was."""
    named_cases: tuple[str, ...]
    """Cases the gate names (regressions, broken, critical)."""
    cases: dict[str, CaseTrend]
    baseline_replayed: bool = False
    """The baseline arm was replayed from recorded model responses: the candidate was
    compared with the stored baseline, the replayed arm checked drift only."""
