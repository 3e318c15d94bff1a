"""Baseline pools: the promoted run's trials plus the live baseline trials of later runs.

A pool belongs to one (baseline, environment) pair — the promoted baseline folder's digest,
the baseline system's definition without the task-set digest (agent, model, environments,
case images, harness version) and the backend — and holds trials per **case version** (case
digest): a pool never mixes environments or case versions. Its members:

* the promoted run's trials (``baselines/<name>/records``), always;
* the live baseline trials of later runs that passed the drift check against the pool, one
  **entry** per run (``.harness/pools/<pool-id>/entries/<run-id>.json``), written once and
  atomically through the store's writer, never edited. An entry references the run's trials
  (run id and trial slug) and copies their outcomes.

A run judged against the pool sees the entries of runs created before it (so ``harness gate``
recomputes the same decision whatever was pooled later), cut by the policy's
``baseline.pool.max_runs`` / ``max_age_days``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ValidationError

from harness.digest import digest_json, short
from harness.errors import StoreIntegrityError
from harness.frozen import Frozen as _Frozen
from harness.gate.policy import PoolPolicy
from harness.gate.stats import ArmData
from harness.store.records import Outcome, ReleaseRecord, RunRecord
from harness.store.store import Store
from harness.system import SystemDefinition

__all__ = [
    "PoolEntry",
    "PoolKey",
    "PoolTrial",
    "PoolView",
    "append_run",
    "environment_digest",
    "list_pools",
    "open_pool",
    "pool_id",
    "pool_view",
    "run_pool_view",
]

POOLS = "pools"
"""Folder of the pools inside the store."""


class PoolKey(_Frozen):
    """What a pool belongs to: one baseline in one environment (``pool.json``)."""

    schema_version: Literal[1] = 1
    baseline: str
    """Name of the promoted baseline."""
    baseline_digest: str
    """Tree digest of the baseline folder: a re-promoted baseline starts a new pool."""
    environment: str
    """:func:`environment_digest` of the baseline system as it runs now."""
    backend: str


class PoolTrial(_Frozen):
    """One pooled trial: a reference to a run's trial record and its outcome."""

    case_id: str
    case_digest: str
    slug: str
    """The trial record's slug in its run (``baseline--<case>--v<version>--t<index>``)."""
    outcome: Outcome


class PoolEntry(_Frozen):
    """The live baseline trials one run added to a pool (written once, never edited)."""

    schema_version: Literal[1] = 1
    pool_id: str
    run_id: str
    run_created_at: dt.datetime
    """When the run was planned: runs created later see this entry."""
    added_at: dt.datetime
    trials: tuple[PoolTrial, ...]


def environment_digest(baseline_system: SystemDefinition) -> str:
    """Digest of a baseline system definition without its task-set digest.

    The task set changes with any case; the pool keeps cases apart by their own digests.
    """
    definition = baseline_system.model_dump(mode="json")
    return digest_json({k: v for k, v in definition.items() if k != "task_set_digest"})


def pool_id(key: PoolKey) -> str:
    """Return the pool's id: ``<baseline>-<12 hex of the key's digest>``."""
    return f"{key.baseline}-{short(digest_json(key.model_dump(mode='json')), 12)}"


@dataclass(frozen=True)
class PoolView:
    """A pool as one run sees it: the reference arm and where its trials came from."""

    pool_id: str
    arm: ArmData
    """Outcomes per case (promoted trials first, then the entries in run order)."""
    promoted: Mapping[str, int]
    """Trials per case from the promoted run."""
    runs: tuple[tuple[str, int], ...]
    """(run id, trials added) of every entry in the view, oldest first."""
    dropped: tuple[str, ...] = ()
    """Runs left out by ``max_runs`` / ``max_age_days``."""

    def sizes(self) -> dict[str, int]:
        """Judged-or-not trials per case in the pool."""
        return {cid: len(outs) for cid, outs in self.arm.cases.items()}

    def describe(self) -> str:
        """One line for the report: size per case and where the trials came from."""
        live = sum(n for _, n in self.runs)
        text = (
            f"baseline pool {self.pool_id}: {_span(self.sizes().values())} trials per case "
            f"({_span(self.promoted.values())} promoted; {live} live in all from "
            f"{len(self.runs)} earlier run(s)"
        )
        if self.runs:
            text += ": " + ", ".join(f"{rid} +{n}" for rid, n in self.runs[-5:])
            text += " …" if len(self.runs) > 5 else ""
        text += ")"
        if self.dropped:
            text += f"; {len(self.dropped)} older run(s) left out by the pool's age/size limit"
        return text

    def case_lines(self) -> list[str]:
        """Per case: pool size and sources."""
        live: dict[str, int] = {}
        for cid, outs in self.arm.cases.items():
            live[cid] = len(outs) - self.promoted.get(cid, 0)
        return [
            f"  {cid}: {len(outs)} trials ({self.promoted.get(cid, 0)} promoted, {live[cid]} live)"
            for cid, outs in sorted(self.arm.cases.items())
        ]


def _span(values: Iterable[int]) -> str:
    v = sorted(values)
    if not v:
        return "0"
    return str(v[0]) if v[0] == v[-1] else f"{v[0]}–{v[-1]}"


def _dir(pid: str) -> str:
    return f"{POOLS}/{pid}"


def _entries(store: Store, pid: str) -> list[PoolEntry]:
    folder = store.root / _dir(pid) / "entries"
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json")):
        try:
            out.append(PoolEntry.model_validate_json(path.read_bytes()))
        except (OSError, ValidationError) as exc:
            raise StoreIntegrityError(f"pool entry {path} is unreadable: {exc}") from None
    return sorted(out, key=lambda e: (e.run_created_at, e.run_id))


def _window(
    entries: Sequence[PoolEntry], before: dt.datetime, policy: PoolPolicy, skip: str | None
) -> tuple[list[PoolEntry], list[PoolEntry]]:
    """Entries a run sees (created before it, within the policy's limits) and the cut."""
    seen = [e for e in entries if e.run_created_at < before and e.run_id != skip]
    cut: list[PoolEntry] = []
    if policy.max_age_days is not None:
        oldest = before - dt.timedelta(days=policy.max_age_days)
        cut += [e for e in seen if e.run_created_at < oldest]
        seen = [e for e in seen if e.run_created_at >= oldest]
    if policy.max_runs is not None and len(seen) > policy.max_runs:
        cut += seen[: len(seen) - policy.max_runs]
        seen = seen[len(seen) - policy.max_runs :]
    return seen, cut


def pool_view(
    store: Store,
    pid: str,
    cases: Mapping[str, str],
    promoted: Iterable[RunRecord],
    policy: PoolPolicy,
    *,
    before: dt.datetime,
    run_id: str | None = None,
    k: int,
    name: str = "",
) -> PoolView:
    """Return pool ``pid`` as a run created at ``before`` sees it, for ``cases`` (id → digest).

    ``promoted`` are the baseline's stored records; trials of other case versions than
    ``cases`` are never pooled. Only entries of runs created before ``before`` (other than
    ``run_id``) count, so the same records give the same pool.

    Raises:
        StoreIntegrityError: an entry cannot be read.
    """
    outs: dict[str, list[Outcome]] = {}
    count: dict[str, int] = {}
    for r in sorted(promoted, key=lambda r: (r.key.case_id, r.key.trial)):
        if cases.get(r.key.case_id) == r.case_digest:
            outs.setdefault(r.key.case_id, []).append(r.outcome)
            count[r.key.case_id] = count.get(r.key.case_id, 0) + 1
    seen, cut = _window(_entries(store, pid), before, policy, run_id)
    runs = []
    for entry in seen:
        added = 0
        for t in entry.trials:
            if cases.get(t.case_id) == t.case_digest:
                outs.setdefault(t.case_id, []).append(t.outcome)
                added += 1
        runs.append((entry.run_id, added))
    arm = ArmData(k=k, name=name, cases={cid: tuple(o) for cid, o in sorted(outs.items())})
    return PoolView(pid, arm, count, tuple(runs), tuple(e.run_id for e in cut))


def run_pool_view(
    store: Store, record: ReleaseRecord, promoted: Iterable[RunRecord], policy: PoolPolicy
) -> PoolView:
    """Return the pool run ``record`` is judged against (entries of runs created before it)."""
    assert record.baseline_pool is not None
    return pool_view(
        store,
        record.baseline_pool,
        record.cases,
        promoted,
        policy,
        before=record.created_at,
        run_id=record.run_id,
        k=record.k,
        name=f"{record.baseline} (pool)",
    )


def open_pool(store: Store, key: PoolKey) -> str:
    """Write the pool's ``pool.json`` once (before a run's first trial); return its id.

    Raises:
        StoreWriteError: the file could not be written.
        StoreIntegrityError: a pool with this id holds another key.
    """
    pid = pool_id(key)
    rel = f"{_dir(pid)}/pool.json"
    if not store.put_record(rel, _json(key)):
        try:
            held = PoolKey.model_validate_json((store.root / rel).read_bytes())
        except (OSError, ValidationError) as exc:
            raise StoreIntegrityError(
                f"pool file {store.root / rel} is unreadable: {exc}"
            ) from None
        if held != key:
            raise StoreIntegrityError(f"pool file {store.root / rel} holds another pool's key")
    return pid


def append_run(store: Store, record: ReleaseRecord, live: Iterable[RunRecord]) -> bool:
    """Add the run's live baseline trials to its pool (once); False if already added.

    Call only when the trials passed the drift check against the pool and the run is valid.

    Raises:
        StoreWriteError: the entry could not be written (nothing half-written is left).
    """
    assert record.baseline_pool is not None
    trials = tuple(
        PoolTrial(
            case_id=r.key.case_id, case_digest=r.case_digest, slug=r.key.slug(), outcome=r.outcome
        )
        for r in sorted(live, key=lambda r: r.key.slug())
    )
    entry = PoolEntry(
        pool_id=record.baseline_pool,
        run_id=record.run_id,
        run_created_at=record.created_at,
        added_at=dt.datetime.now(dt.UTC),
        trials=trials,
    )
    return store.put_record(
        f"{_dir(record.baseline_pool)}/entries/{record.run_id}.json", _json(entry)
    )


def _json(model: BaseModel) -> bytes:
    return model.model_dump_json(indent=2).encode() + b"\n"


def list_pools(store: Store, baseline: str | None = None) -> list[tuple[str, PoolKey, int]]:
    """(pool id, key, number of entries) of the store's pools, for one baseline or all.

    Raises:
        StoreIntegrityError: a ``pool.json`` cannot be read.
    """
    root = store.root / POOLS
    out = []
    for path in sorted(root.glob("*/pool.json")) if root.is_dir() else []:
        try:
            key = PoolKey.model_validate_json(path.read_bytes())
        except (OSError, ValidationError) as exc:
            raise StoreIntegrityError(f"pool file {path} is unreadable: {exc}") from None
        if baseline is None or key.baseline == baseline:
            out.append((path.parent.name, key, len(_entries(store, path.parent.name))))
    return out
