"""Replay, both levels, from a recorded run in the store.

* **Candidate replay** (the ``replay`` adapter): each trial re-verifies the candidate an
  earlier run recorded for the same case and trial index, under today's verifier and
  environment; :func:`verdict_flips` lists the trials whose verdict changed.
* **Model replay** (``harness run --model-replay RUN``): the agent runs again, but the
  gateway serves the recorded run's responses in order, keyed by request content, with the
  upstream stopped; a request that differs from the recorded one is ``infra_error``
  ("trajectory diverged"). A trial re-executed this way is not a fresh sample of the model:
  it measures evaluator and environment drift at no model cost.

Which arms a gated run replays (:func:`replay_scope`): with ``--baseline NAME
--model-replay baseline:NAME`` only the **baseline** arm is served from the responses the
baseline was promoted with (its drift check at no model cost) and the candidate calls its
upstream live; the gate then compares the candidate with the stored baseline's trials
(:func:`baseline_replayed`). Any other source replays every arm (a reproduction).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from pydantic import BaseModel, ConfigDict

from harness.errors import ConfigError
from harness.gateway import RecordedCall, request_key
from harness.store.baseline import BASELINE_REPLAY, Baseline
from harness.store.records import Arm, Outcome, ReleaseRecord, RunRecord
from harness.store.store import Store

__all__ = [
    "VerdictFlip",
    "baseline_calls",
    "baseline_replayed",
    "recorded_calls",
    "recorded_candidates",
    "replay_scope",
    "replayable_trials",
    "replayed_baseline_flips",
    "verdict_flips",
]


class VerdictFlip(BaseModel):
    """One re-verified trial whose verdict differs from the recorded one."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    case_id: str
    trial: int
    recorded: Outcome
    """The verdict the recorded run gave this candidate."""
    now: Outcome
    """The verdict of today's verifier and environment."""
    reason: str = ""


def _source_trials(store: Store, run_id: str) -> list[RunRecord]:
    trials = [t for t in store.trials(run_id) if t.key.arm is Arm.CANDIDATE]
    if not trials:
        raise ConfigError(f"run {run_id} has no recorded candidate trials to replay")
    return trials


def recorded_candidates(store: Store, run_id: str) -> dict[tuple[str, int], bytes]:
    """(case id, trial index) → the candidate tarball of that trial's last attempt.

    Raises:
        ConfigError: the run has no candidate trials.
        StoreError: a recorded blob is missing or corrupt.
    """
    out: dict[tuple[str, int], bytes] = {}
    for t in _source_trials(store, run_id):
        blob = t.attempts[-1].candidate_blob
        if blob is not None:
            out[(t.key.case_id, t.key.trial)] = store.get_blob(blob)
    return out


def recorded_calls(store: Store, run_id: str) -> dict[str, list[RecordedCall]]:
    """Gateway label of each recorded agent phase → its forwarded calls, in order.

    Raises:
        StoreError: a recorded blob is missing or corrupt.
    """
    return _calls(store.trials(run_id), store.get_blob)


def replay_scope(model_replay: str | None, baseline: str | None) -> frozenset[Arm]:
    """Return the arms a run serves from recorded model responses (empty: none).

    ``--baseline NAME --model-replay baseline:NAME`` replays the baseline arm only: the
    baseline is re-executed on the responses it was promoted with, the candidate is a fresh
    sample. Any other source (a run, or ``baseline:NAME`` without that baseline) replays
    every arm: a reproduction of a recorded trajectory.

    Raises:
        ConfigError: ``--model-replay baseline:B`` in a run gated against another baseline A
            (B's responses cannot re-execute A, and replaying B as the candidate against A
            would mix two references).
    """
    if model_replay is None:
        return frozenset()
    if model_replay.startswith(BASELINE_REPLAY) and baseline is not None:
        name = model_replay.removeprefix(BASELINE_REPLAY)
        if name != baseline:
            raise ConfigError(
                f"--model-replay {model_replay} with --baseline {baseline}: a gated run "
                f"replays only its own baseline's responses (use --model-replay "
                f"{BASELINE_REPLAY}{baseline}), or drop --baseline to reproduce {name}'s "
                "trajectories",
                field="--model-replay",
            )
        return frozenset({Arm.BASELINE})
    return frozenset({Arm.CANDIDATE, Arm.BASELINE})


def baseline_replayed(record: ReleaseRecord) -> bool:
    """Tell whether the run replayed its baseline arm only (the candidate called live)."""
    try:
        return replay_scope(record.model_replay, record.baseline) == {Arm.BASELINE}
    except ConfigError:
        return False  # never planned: plan_run refuses the combination


def replayable_trials(baseline: Baseline, cases: Mapping[str, str]) -> frozenset[tuple[str, int]]:
    """(case id, trial) of the stored trials baseline replay can re-execute.

    Those of a case version still in ``cases`` (id → digest) with a recorded transcript.

    Raises:
        ConfigError: the baseline's release calls no model, or it kept no transcript.
    """
    name = baseline.file.name
    if baseline.release_definition.upstream is None:
        raise ConfigError(
            f"--model-replay {BASELINE_REPLAY}{name}: baseline {name!r} calls no model "
            "(its release has no upstream): there are no responses to replay",
            field="--model-replay",
        )
    out = frozenset(
        (r.key.case_id, r.key.trial)
        for r in baseline.records
        if r.key.arm is Arm.CANDIDATE
        and cases.get(r.key.case_id) == r.case_digest
        and any(a.model is not None and a.model.calls for a in r.attempts)
    )
    if not out:
        raise ConfigError(
            f"--model-replay {BASELINE_REPLAY}{name}: baseline {name!r} kept no model "
            "transcript for the current case versions; promote a run made through the "
            "gateway again, or run without --model-replay",
            field="--model-replay",
        )
    return out


def baseline_calls(
    baseline: Baseline, arms: Iterable[Arm] = (Arm.CANDIDATE, Arm.BASELINE)
) -> dict[str, list[RecordedCall]]:
    """Return the recorded calls a promoted baseline kept, offered under ``arms``' labels.

    The baseline's (candidate) trials are offered under each arm's label: with both arms
    (a reproduction) a candidate that asks the same gets the same; with the baseline arm
    only (``--baseline NAME --model-replay baseline:NAME``) the baseline system is
    re-executed on the responses it was promoted with and the candidate gets none.

    Raises:
        StoreIntegrityError: a transcript file is missing or corrupt.
    """
    own = [r for r in baseline.records if r.key.arm is Arm.CANDIDATE]
    out: dict[str, list[RecordedCall]] = {}
    for label, calls in _calls(own, baseline.transcript).items():
        rest = label.partition("--")[2]
        for arm in arms:
            out[f"{arm.value}--{rest}"] = calls
    return out


def _calls(
    trials: Iterable[RunRecord], get_blob: Callable[[str], bytes]
) -> dict[str, list[RecordedCall]]:
    out: dict[str, list[RecordedCall]] = {}
    for t in trials:
        k = t.key
        for a in t.attempts:
            if a.model is None:
                continue
            label = f"{k.arm.value}--{k.case_id}--v{k.case_version}--t{k.trial:03d}--a{a.attempt}"
            calls = sorted(
                (c for c in a.model.calls if c.turn > 0 and c.response_blob), key=lambda c: c.turn
            )
            out[label] = [
                RecordedCall(
                    request_key=request_key(get_blob(c.request_blob)),
                    response=get_blob(c.response_blob or ""),
                    status=c.status,
                    stream=c.stream,
                    refused=c.refused,
                )
                for c in calls
            ]
    return out


def verdict_flips(store: Store, run_id: str, source_run: str) -> list[VerdictFlip]:
    """Trials of replay run ``run_id`` whose verdict differs from ``source_run``'s."""
    recorded: Mapping[tuple[str, int], RunRecord] = {
        (t.key.case_id, t.key.trial): t for t in _source_trials(store, source_run)
    }
    flips = []
    for t in store.trials(run_id):
        before = recorded.get((t.key.case_id, t.key.trial))
        if before is not None and before.outcome is not t.outcome:
            flips.append(_flip(before, t))
    return sorted(flips, key=lambda f: (f.case_id, f.trial))


def _flip(before: RunRecord, now: RunRecord) -> VerdictFlip:
    return VerdictFlip(
        case_id=now.key.case_id,
        trial=now.key.trial,
        recorded=before.outcome,
        now=now.outcome,
        reason=now.verdict.reason,
    )


def replayed_baseline_flips(
    replayed: Iterable[RunRecord], stored: Iterable[RunRecord]
) -> tuple[int, list[VerdictFlip]]:
    """Pair the replayed baseline arm's judged trials with the stored ones, trial by trial.

    Returns the number of pairs and the pairs whose verdict differs. Under baseline replay
    the same responses should rebuild the same candidate: a flip is the verifier or the
    environment answering differently (or a flaky verifier; nothing here says which).
    """
    judged = (Outcome.PASS, Outcome.FAIL)
    before = {
        (r.key.case_id, r.key.trial): r
        for r in stored
        if r.key.arm is Arm.CANDIDATE and r.outcome in judged
    }
    pairs = 0
    flips = []
    for t in replayed:
        was = before.get((t.key.case_id, t.key.trial))
        if t.key.arm is not Arm.BASELINE or was is None or t.outcome not in judged:
            continue
        pairs += 1
        if was.case_digest == t.case_digest and was.outcome is not t.outcome:
            flips.append(_flip(was, t))
    return pairs, sorted(flips, key=lambda f: (f.case_id, f.trial))
