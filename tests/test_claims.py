"""Claim metrics on hand-built records with known answers."""

from __future__ import annotations

import datetime as dt

from harness.store.records import (
    AgentClaim,
    Arm,
    AttemptRecord,
    FailureType,
    Outcome,
    RunRecord,
    TrialKey,
    Verdict,
)
from harness.trial.claims import claim_stats, claim_stats_by_case

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def rec(
    case: str, t: int, outcome: Outcome, status: str | None, claimed: bool | None, attempts: int = 1
) -> RunRecord:
    v = Verdict(
        outcome=outcome, failure_type=FailureType.TEST_FAILURE if outcome is Outcome.FAIL else None
    )
    claim = AgentClaim(status=status, claimed_success=claimed) if status else None
    atts = tuple(AttemptRecord(attempt=i + 1, verdict=v, claim=claim) for i in range(attempts))
    return RunRecord(
        key=TrialKey(arm=Arm.CANDIDATE, release="c", case_id=case, case_version=1, trial=t),
        case_digest="sha256:x",
        system_digest="sha256:s",
        backend="local",
        attempts=atts,
        verdict=v,
        started_at=NOW,
        finished_at=NOW,
        harness_version="0",
    )


RECORDS = [
    rec("a", 0, Outcome.PASS, "submitted", True),  # claimed, verified pass
    rec("a", 1, Outcome.FAIL, "submitted", True),  # confident wrong
    rec("a", 2, Outcome.FAIL, "submitted", False),  # honest failure
    rec("a", 3, Outcome.INFRA_ERROR, "submitted", True),  # claim, no verdict: out of denominator
    rec("b", 0, Outcome.FAIL, "abstained", None),  # abstained
    rec("b", 1, Outcome.PASS, None, None, attempts=3),  # no result file at all, 3 attempts
]


def test_known_answers():
    s = claim_stats(RECORDS)
    assert (s.trials, s.submitted, s.abstained, s.resolved) == (6, 4, 1, 2)
    assert s.claimed_success == 3 and s.confident_wrong == 1
    assert s.claim_match_rate == 0.5  # 1 pass / (1 pass + 1 fail); the infra trial is excluded
    assert s.confident_wrong_rate == 1 / 6
    assert s.submission_rate == 4 / 6 and s.abstention_rate == 1 / 6 and s.resolution_rate == 2 / 6
    assert s.attempts_used == 8 / 6


def test_per_case_and_empty_groups():
    by = claim_stats_by_case(RECORDS)
    assert by["b"].claim_match_rate is None and by["b"].abstained == 1
    assert by["a"].confident_wrong == 1
    empty = claim_stats([])
    assert empty.submission_rate is None and empty.claim_match_rate is None
