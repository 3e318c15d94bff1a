"""What agents said about themselves, scored against what execution decided.

Pure functions over run records. Submission, abstention and self-assessment are
produced by the process under evaluation, so they are reported apart from verified
resolution and never change a verdict:

* submission rate — trials whose agent declared ``submitted``;
* verified resolution rate — trials whose verdict is ``pass``;
* abstention rate — trials whose agent declared ``abstained``;
* confident-wrong rate — trials that claimed success and were verified ``fail``;
* claim-match rate — ``verified_pass / (verified_pass + verified_fail)`` among trials that
  claimed success. Trials without a claim, or without a pass/fail verdict (infra or
  evaluator errors), stay out of that denominator.

Rates are over all trials of the group (the claim-match rate excepted); a group with no
trials has ``None`` rates.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from harness.store.records import Outcome, RunRecord

__all__ = ["ClaimStats", "claim_stats", "claim_stats_by_case"]


class ClaimStats(BaseModel):
    """Claims against verdicts for one group of trials (an arm, or one case of an arm)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    trials: int
    submitted: int
    abstained: int
    resolved: int
    """Verified pass."""
    claimed_success: int
    confident_wrong: int
    """Claimed success, verified fail."""
    claim_verified_pass: int
    claim_verified_fail: int
    submission_rate: float | None
    resolution_rate: float | None
    abstention_rate: float | None
    confident_wrong_rate: float | None
    claim_match_rate: float | None
    """verified_pass / (verified_pass + verified_fail) among trials claiming success."""
    attempts_used: float | None
    """Mean attempts per trial (correction loops)."""


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def claim_stats(records: Iterable[RunRecord]) -> ClaimStats:
    """Claims against verdicts for ``records``; each trial's claim is its last attempt's."""
    recs = list(records)
    submitted = abstained = resolved = claimed = wrong = cvp = cvf = attempts = 0
    for r in recs:
        claim = r.attempts[-1].claim
        status = claim.status if claim else "missing"
        submitted += status == "submitted"
        abstained += status == "abstained"
        resolved += r.outcome is Outcome.PASS
        attempts += len(r.attempts)
        if claim is not None and claim.claimed_success:
            claimed += 1
            if r.outcome is Outcome.PASS:
                cvp += 1
            elif r.outcome is Outcome.FAIL:
                cvf += 1
                wrong += 1
    n = len(recs)
    return ClaimStats(
        trials=n,
        submitted=submitted,
        abstained=abstained,
        resolved=resolved,
        claimed_success=claimed,
        confident_wrong=wrong,
        claim_verified_pass=cvp,
        claim_verified_fail=cvf,
        submission_rate=_rate(submitted, n),
        resolution_rate=_rate(resolved, n),
        abstention_rate=_rate(abstained, n),
        confident_wrong_rate=_rate(wrong, n),
        claim_match_rate=_rate(cvp, cvp + cvf),
        attempts_used=attempts / n if n else None,
    )


def claim_stats_by_case(records: Iterable[RunRecord]) -> dict[str, ClaimStats]:
    """:func:`claim_stats` per case id."""
    groups: dict[str, list[RunRecord]] = {}
    for r in records:
        groups.setdefault(r.key.case_id, []).append(r)
    return {cid: claim_stats(rs) for cid, rs in sorted(groups.items())}
