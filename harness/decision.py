"""From stored records to a promotion decision: the glue between store, policy and gate.

:func:`decide_run` reads only what the store holds (the release record written before
the first trial, the run records, the end-of-run validity check) and the policy file,
which must still be the one recorded for the run. The same inputs give the same
decision every time.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from harness.errors import ConfigError, InvalidRunError
from harness.exitcodes import ExitCode, for_verdict
from harness.gate.decide import Decision, decide
from harness.gate.opchar import baseline_summary
from harness.gate.policy import DEFAULT_POLICY, Policy, PoolPolicy, load_policy, verify_policy
from harness.gate.stats import ArmData
from harness.planning import check_system_unchanged
from harness.pool import append_run, run_pool_view
from harness.project import Project
from harness.replay import baseline_replayed, replayed_baseline_flips
from harness.store.baseline import load_baseline
from harness.store.records import Arm, FailureType, Outcome, ReleaseRecord, ResultRecord, RunRecord
from harness.store.store import RunHandle, Store

__all__ = ["DEFAULT_POLICY", "RunDecision", "decide_run", "record_validity"]


@dataclass(frozen=True)
class RunDecision:
    """A gate decision plus what the CLI and reports need around it."""

    run_id: str
    release: ReleaseRecord
    decision: Decision
    notes: tuple[str, ...]
    judgment: dict[str, list[RunRecord]]
    """Judgment-lane cases: their trials, reported apart and never scored."""
    policy: Policy
    """The policy the decision applied: the one the run recorded (its file checked against the
    recorded digest, so it equals :attr:`ReleaseRecord.policy` parsed), or the built-in
    default when the run recorded none. Readers use it instead of the stored dict."""

    @property
    def verdict(self) -> str:
        """Pass / warn / fail / blocked."""
        return self.decision.verdict

    @property
    def headline(self) -> str:
        """One line summarising the decision."""
        c = self.decision.candidate
        rate = c.pass_rate.mean
        hat = c.pass_hat_k.mean
        parts = [f"candidate pass rate {rate:.3f}" if rate is not None else "no judged trials"]
        if hat is not None:
            parts.append(f"pass^{c.k} {hat:.3f}")
        d = self.decision
        if d.baseline_pooled and d.stored_baseline is not None:
            if d.stored_baseline.pass_rate.mean is not None:
                ref = d.stored_baseline.pass_rate.mean
                parts.append(f"baseline pool pass rate {ref:.3f}")
        elif d.baseline_replayed and d.stored_baseline is not None:
            if d.stored_baseline.pass_rate.mean is not None:
                ref = d.stored_baseline.pass_rate.mean
                parts.append(f"stored baseline pass rate {ref:.3f} (baseline arm replayed)")
        elif d.baseline is not None and d.baseline.pass_rate.mean is not None:
            parts.append(f"baseline pass rate {d.baseline.pass_rate.mean:.3f}")
        parts.append(f"{c.infra_errors} infra / {c.evaluator_errors} evaluator errors")
        return " · ".join(parts)

    @property
    def reasons(self) -> list[str]:
        """Human-readable reasons, most severe first."""
        return [f"[{r.severity}] {r.message}" for r in self.decision.reasons] + list(self.notes)

    def exit_code(self, *, warn_ok: bool = False) -> ExitCode:
        """Return the CLI's exit code for this decision."""
        return for_verdict(self.verdict, warn_ok=warn_ok)

    def case_rows(self) -> list[tuple[str, ...]]:
        """Rows of the per-case terminal table."""
        rows: list[tuple[str, ...]] = []
        arms = [("candidate", self.decision.candidate)]
        if self.decision.baseline is not None:
            arms.append(("baseline", self.decision.baseline))

        def f(x: float | None) -> str:
            return "—" if x is None else f"{x:.2f}"

        by_arm = {name: {c.case_id: c for c in s.cases} for name, s in arms}
        for cid in sorted(by_arm["candidate"]):
            for name, _ in arms:
                c = by_arm[name].get(cid)
                if c is None:
                    continue
                rows.append(
                    (
                        cid if name == "candidate" else "",
                        name,
                        str(c.trials),
                        str(c.passes),
                        str(c.fails),
                        str(c.infra_errors + c.evaluator_errors),
                        f(c.pass_rate),
                        f(c.pass_hat_k),
                        f(c.pass_at_k),
                        c.label,
                    )
                )
        for cid in sorted(self.judgment):
            rows.append(
                (cid, "judgment", str(len(self.judgment[cid])), "", "", "", "", "", "", "unscored")
            )
        return rows

    def to_json(self) -> dict[str, Any]:
        """Return the decision as JSON-ready data."""
        return {
            "run_id": self.run_id,
            "release": self.release.release,
            "system_digest": self.release.system_digest,
            "verdict": self.verdict,
            "notes": list(self.notes),
            "judgment_cases": sorted(self.judgment),
            "decision": json.loads(self.decision.model_dump_json()),
        }


def record_validity(project: Project, handle: RunHandle) -> tuple[bool, list[str]]:
    """Re-check the system after the run and seal the result into the store (once)."""
    reasons: list[str] = []
    try:
        check_system_unchanged(project, handle.record)
    except InvalidRunError as exc:
        reasons.append(str(exc))
    stored = handle.seal(not reasons, reasons)
    return stored.valid, list(stored.reasons)


def _arm(records: list[RunRecord], arm: Arm, k: int, name: str, skip: set[str]) -> ArmData:
    return ArmData.from_records(
        [r for r in records if r.key.arm is arm and r.key.case_id not in skip], k, name
    )


def tampering_fails(rec: RunRecord) -> RunRecord:
    """Count a passing trial whose final attempt tampered as a fail (policy ``tampering``)."""
    last = rec.attempts[-1] if rec.attempts else None
    if rec.outcome is not Outcome.PASS or last is None or not last.tampering:
        return rec
    reason = f"tampering (policy: fail): {last.tampering[0]}"
    verdict = rec.verdict.model_copy(
        update={"outcome": Outcome.FAIL, "failure_type": FailureType.TAMPERING, "reason": reason}
    )
    return rec.model_copy(update={"verdict": verdict})


def _flips_note(trials: list[RunRecord], stored: list[RunRecord]) -> str:
    pairs, flips = replayed_baseline_flips(trials, stored)
    text = (
        f"baseline replay: {len(flips)} of {pairs} re-executed baseline trials changed "
        "verdict from the stored ones (same recorded responses)"
    )
    if flips:
        shown = ", ".join(
            f"{f.case_id} t{f.trial} {f.recorded.value} → {f.now.value}" for f in flips[:10]
        )
        text += f": {shown}" + (" …" if len(flips) > 10 else "")
    return text


def _pool_arms(
    store: Store,
    record: ReleaseRecord,
    policy: Policy,
    promoted: list[RunRecord],
    trials: list[RunRecord],
    judgment: set[str],
) -> tuple[ArmData, ArmData, str]:
    """Return the pool this run is judged against, its live baseline arm and a report note."""
    pool_policy = policy.baseline.pool or PoolPolicy(live_trials=record.k)
    scored = [r for r in promoted if r.key.case_id not in judgment]
    view = run_pool_view(store, record, scored, pool_policy)
    live = _arm(
        trials, Arm.BASELINE, max(1, pool_policy.live_trials), record.baseline or "", judgment
    )
    note = view.describe() + "; per case:\n" + "\n".join(view.case_lines())
    return view.arm, live, note


def _grow_pool(
    store: Store,
    record: ReleaseRecord,
    decision: Decision,
    valid: bool,
    trials: list[RunRecord],
    judgment: set[str],
) -> None:
    """Add the run's live baseline trials to the pool when they passed the drift check."""
    drift = decision.drift
    if not valid or drift is None or not drift.compared or drift.detected:
        return
    live = [r for r in trials if r.key.arm is Arm.BASELINE and r.key.case_id not in judgment]
    if live:
        append_run(store, record, live)


def _run_policy(project: Project, record: ReleaseRecord, notes: list[str]) -> Policy:
    """Return the policy the run recorded (checked against its digest) or the default.

    Appends to ``notes`` what the reader should know about it.

    Raises:
        InvalidRunError: the run recorded a policy and the project names none now.
        PolicyChangedError: the policy file no longer matches the recorded digest.
    """
    if record.policy_digest is not None:
        if project.policy_path is None:
            raise InvalidRunError("the run recorded a policy but harness.yaml names none now")
        loaded = load_policy(project.policy_path)
        notes += verify_policy(loaded, record.policy_digest, record.policy_file_digest)
        policy = loaded.policy
    else:
        policy = DEFAULT_POLICY
        notes.append("no promotion policy configured: the built-in default policy was applied")
    return policy


def _run_validity(
    project: Project, store: Store, run_id: str, handle: RunHandle | None
) -> tuple[bool, list[str]]:
    """Return whether the run is valid and why not: checked now, or as stored at its end."""
    if handle is not None:
        valid, invalid = record_validity(project, handle)
    else:
        stored = store.validity(run_id)
        if stored is not None:
            valid, invalid = stored.valid, list(stored.reasons)
        else:
            valid, invalid = (
                False,
                [
                    "the run has not finished (no end-of-run system check yet); "
                    "re-run the same `harness run` command to resume it"
                ],
            )
    return valid, invalid


def _baseline_arms(
    project: Project,
    store: Store,
    record: ReleaseRecord,
    policy: Policy,
    trials: list[RunRecord],
    judgment: set[str],
    notes: list[str],
) -> tuple[ArmData | None, ArmData | None, str | None]:
    """Return the re-executed and the stored baseline arms and the operating-characteristics line.

    Appends to ``notes`` what was not compared and why.

    Raises:
        ConfigError: the stored baseline changed after the run started.
    """
    assert record.baseline is not None
    replayed = baseline_replayed(record)
    bl = load_baseline(project.baselines_dir, record.baseline)
    # A replayed baseline arm re-executes the stored trials it has responses for.
    base_k = min(record.k, bl.file.release.k) if replayed else record.k
    base = _arm(trials, Arm.BASELINE, base_k, record.baseline, judgment)
    if record.baseline_digest is not None and bl.digest != record.baseline_digest:
        raise ConfigError(
            f"baseline {record.baseline!r} changed after the run started (recorded "
            f"{record.baseline_digest[7:19]}, now {bl.digest[7:19]}): the stored reference "
            "this run was planned against is gone; restore it or start a new run",
            file=project.baselines_dir / record.baseline / "baseline.json",
        )
    same = [r for r in bl.records if record.cases.get(r.key.case_id) == r.case_digest]
    dropped = {r.key.case_id for r in bl.records} - {r.key.case_id for r in same}
    # A case outside this run (a --case subset) was not run; only a case the run has
    # with other bytes changed version.
    not_run = sorted(c for c in dropped if c not in record.cases)
    changed = sorted(c for c in dropped if c in record.cases)
    if not_run:
        notes.append(
            "not run in this run (a subset of the set), so not compared with the stored "
            "baseline: " + ", ".join(not_run)
        )
    if changed:
        notes.append(
            "stored baseline results not comparable (case version changed): " + ", ".join(changed)
        )
    stored_base = _arm(
        same, Arm.CANDIDATE, bl.file.release.k, f"{record.baseline} (stored)", judgment
    )
    if record.baseline_pool is not None:
        stored_base, base, note = _pool_arms(store, record, policy, same, trials, judgment)
        notes.append(note)
    if replayed:
        notes.append(_flips_note(trials, same))
    # cache only: the simulation itself is `harness policy check`
    oc_line = baseline_summary(project.store_dir, policy, bl, record.k)
    if oc_line is None:
        notes.append(
            f"operating characteristics not computed: `harness policy check --baseline "
            f"{record.baseline} --k {record.k}` tells whether this set can catch a drop"
        )
    return base, stored_base, oc_line


def decide_run(
    project: Project,
    store: Store,
    run_id: str,
    *,
    write: bool = False,
    handle: RunHandle | None = None,
) -> RunDecision:
    """Decide run ``run_id`` from its stored records under its recorded policy.

    Raises:
        PolicyChangedError: the policy file no longer matches the recorded digest.
        ConfigError: the baseline named by the run cannot be loaded.
    """
    record = store.release(run_id)
    notes: list[str] = []
    policy = _run_policy(project, record, notes)
    if record.downgrade:
        notes.append("bounds accepted as unenforced for this run: " + ", ".join(record.downgrade))
    valid, invalid = _run_validity(project, store, run_id, handle)
    trials = store.trials(run_id)
    if policy.tampering == "fail":
        trials = [tampering_fails(r) for r in trials]
    judgment = set(record.judgment_cases)
    cand = _arm(trials, Arm.CANDIDATE, record.k, record.release, judgment)
    base = None
    stored_base = None
    oc_line = None
    replayed = baseline_replayed(record)
    if record.baseline is not None:
        base, stored_base, oc_line = _baseline_arms(
            project, store, record, policy, trials, judgment, notes
        )
    decision = decide(
        policy,
        cand,
        base,
        stored_base,
        run_valid=valid,
        invalid_reasons=invalid,
        critical_cases=record.critical_cases,
        operating_characteristics=oc_line,
        baseline_replayed=replayed,
        baseline_pooled=record.baseline_pool is not None and stored_base is not None,
    )
    if write and handle is not None and record.baseline_pool is not None:
        _grow_pool(store, record, decision, valid, trials, judgment)
    judged_trials: dict[str, list[RunRecord]] = {}
    for r in trials:
        if r.key.case_id in judgment and r.key.arm is Arm.CANDIDATE:
            judged_trials.setdefault(r.key.case_id, []).append(r)
    result = RunDecision(run_id, record, decision, tuple(notes), judged_trials, policy)
    if write and handle is not None:
        now = dt.datetime.now(dt.UTC)
        handle.add_result(ResultRecord.model_validate({"computed_at": now, **result.to_json()}))
    return result
