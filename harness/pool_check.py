"""``harness policy check`` for a baseline pool: the conditional rates of the user's pool.

Reads the promoted baseline and the store's pools of it, then calls the pure simulations
of :mod:`harness.gate.pool_rates`: the spread of the conditional false-FAIL rate over pools
of the same size as the promoted trials alone, as the pool now, and as the pool after five
more runs; this pool's own rates averaged over its posterior; and the FAIL level the gate
uses against it. :func:`pool_check` returns it as data (``policy check --json``),
:func:`pool_check_lines` turns that into the lines ``policy check`` prints.
"""

from __future__ import annotations

import datetime as dt

from harness.errors import ConfigError
from harness.frozen import Frozen as _Frozen
from harness.gate.conditional import pool_level
from harness.gate.policy import Policy
from harness.gate.pool_rates import PoolRates, PoolSpread, pool_spread, posterior_rates
from harness.gate.stats import recent_counts, summarize_case
from harness.pool import PoolKey, PoolView, list_pools, pool_view
from harness.project import Project
from harness.store.baseline import load_baseline
from harness.store.store import Store

__all__ = [
    "PoolCase",
    "PoolCheck",
    "PoolReport",
    "SpreadRow",
    "pool_check",
    "pool_check_lines",
    "render_pool",
]

_AHEAD = 5
"""Runs ahead the check projects the pool's growth."""


class PoolCase(_Frozen):
    """One case's trials in the pool and where they came from."""

    trials: int
    promoted: int
    live: int
    """Trials added by later runs' live baseline trials."""


class SpreadRow(_Frozen):
    """The conditional false-FAIL spread over simulated pools of one composition."""

    name: str
    """``promoted trials alone``, ``pools of this size (now)`` or ``after 5 more runs``."""
    spread: PoolSpread


class PoolReport(_Frozen):
    """One pool of the baseline: its size and sources, and its simulated conditional rates."""

    pool_id: str
    backend: str | None
    environment: str | None
    """The pool's environment digest (None before the first gated run made the pool)."""
    summary: str
    """The line the report prints about the pool."""
    cases: dict[str, PoolCase]
    runs: list[tuple[str, int]]
    """(run id, live trials added) of every run in the pool, oldest first."""
    dropped: list[str]
    """Runs left out by the pool's age or size limit."""
    k: int
    live_trials: int
    fail_level: float | None
    """The FAIL level of the next comparison against this pool (the policy's ``alpha``
    unless ``baseline.pool.conditional_share`` lowers it); None when no case has a trial."""
    alpha: float
    pools: int
    """Simulated pools per spread row."""
    releases: int
    seed: int
    spreads: list[SpreadRow]
    posterior: PoolRates | None
    """This pool's rates for unchanged releases, averaged over its posterior."""


class PoolCheck(_Frozen):
    """What ``harness policy check`` says about the baseline pool(s) of one baseline."""

    baseline: str
    conditional_share: float | None
    pools: list[PoolReport]


def pool_check(
    project: Project,
    policy: Policy,
    baseline: str,
    k: int,
    *,
    pools: int = 40,
    releases: int = 50,
    reps: int = 500,
    seed: int = 0,
) -> PoolCheck:
    """Return the baseline pool's sizes, sources and simulated conditional rates.

    Raises:
        ConfigError: the policy has no ``baseline.pool``, or the baseline cannot be loaded.
    """
    pp = policy.baseline.pool
    if pp is None:
        raise ConfigError("the policy has no baseline.pool", field="baseline.pool")
    from harness.planning import load_locked_cases

    bl = load_baseline(project.baselines_dir, baseline)
    cases = {lc.id: lc.digest for lc in load_locked_cases(project) if lc.case.lane == "exec"}
    store = Store(project.store_dir)
    found = [
        (pid, key)
        for pid, key, _ in list_pools(store, baseline)
        if key.baseline_digest == bl.digest
    ]
    now = dt.datetime.now(dt.UTC)
    keys: list[PoolKey | None] = [key for _, key in found] or [None]
    views = [pool_view(store, pid, cases, bl.records, pp, before=now, k=k) for pid, _ in found] or [
        pool_view(store, "(none yet)", cases, bl.records, pp, before=now, k=k)
    ]
    sim = {"pools": pools, "releases": releases, "reps": reps, "seed": seed}
    return PoolCheck(
        baseline=baseline,
        conditional_share=pp.conditional_share,
        pools=[
            _report(policy, view, key, k, pp.live_trials, **sim)
            for view, key in zip(views, keys, strict=True)
        ],
    )


def pool_check_lines(check: PoolCheck) -> list[str]:
    """Return the lines ``harness policy check`` prints about :func:`pool_check`'s result."""
    return [line for report in check.pools for line in render_pool(report)]


def _row(name: str, s: PoolSpread) -> str:
    return (
        f"  {name:<28} mean {100 * s.mean:4.1f} %  median {100 * s.median:4.1f} %  "
        f"90th pct {100 * s.p90:4.1f} %  pools above 2α ({100 * 2 * s.alpha:.0f} %): "
        f"{100 * s.share_above:.0f} %"
    )


def render_pool(report: PoolReport) -> list[str]:
    """Return the lines about one pool: what it holds and its simulated false-alarm rates."""
    where = (
        f" (backend {report.backend}, environment {report.environment[7:19]})"
        if report.backend is not None and report.environment is not None
        else ""
    )
    lines = [report.summary + where]
    if not report.cases:
        return [*lines, "  no judged trial in the pool: nothing to simulate"]
    if report.fail_level is not None and report.fail_level < report.alpha:
        lines.append(
            f"FAIL level against this pool: α = {report.fail_level:.3g} (policy α = "
            f"{report.alpha}, lowered by baseline.pool.conditional_share for the pool's "
            "fixed share; docs/gate.md)"
        )
    lines.append(
        f"conditional false FAIL of unchanged releases at k = {report.k}, "
        f"{report.live_trials} live baseline trial(s) per case per run ({report.pools} "
        f"simulated pools × {report.releases} releases each, truth drawn from this pool's "
        f"posterior, seed {report.seed}):"
    )
    lines += [_row(r.name, r.spread) for r in report.spreads]
    mine = report.posterior
    if mine is not None:
        lines.append(
            f"this pool, averaged over its posterior ({mine.reps} simulations): false FAIL "
            f"{mine.fail.rate:.3f} [{mine.fail.low:.3f}, {mine.fail.high:.3f}], false WARN "
            f"{mine.warn.rate:.3f}, blocked for drift {mine.blocked.rate:.3f}"
        )
    return lines


def _report(
    policy: Policy,
    view: PoolView,
    key: PoolKey | None,
    k: int,
    live: int,
    *,
    pools: int,
    releases: int,
    reps: int,
    seed: int,
) -> PoolReport:
    """Return one pool's sizes and sources and its simulated false-alarm rates."""
    counts = {cid: summarize_case(outs, k) for cid, outs in view.arm.cases.items()}
    ids = sorted(c for c in counts if counts[c].n > 0)
    passes = [counts[c].passes for c in ids]
    trials = [counts[c].n for c in ids]
    promoted = [view.promoted.get(c, 0) for c in ids]
    spreads: list[SpreadRow] = []
    level: float | None = None
    mine: PoolRates | None = None
    if ids:
        spreads = _spreads(policy, passes, trials, promoted, k, live, pools, releases, seed)
        level = pool_level(policy, [k] * len(ids), trials, [live] * len(ids))
        # the pool's trials that a run's k most recent reference trials reach past its live ones
        tail = recent_counts(view.arm, k - live) if k > live else {}
        recent = [tail.get(c, (0, 0))[0] for c in ids]
        mine = posterior_rates(
            policy, passes, trials, k=k, live=live, reps=reps, seed=seed, recent=recent
        )
    return PoolReport(
        pool_id=view.pool_id,
        backend=key.backend if key else None,
        environment=key.environment if key else None,
        summary=view.describe(),
        cases={
            cid: PoolCase(trials=n, promoted=(got := view.promoted.get(cid, 0)), live=n - got)
            for cid, n in sorted(view.sizes().items())
        },
        runs=list(view.runs),
        dropped=list(view.dropped),
        k=k,
        live_trials=live,
        fail_level=level,
        alpha=policy.alpha,
        pools=pools,
        releases=releases,
        seed=seed,
        spreads=spreads,
        posterior=mine,
    )


def _spreads(
    policy: Policy,
    passes: list[int],
    trials: list[int],
    promoted: list[int],
    k: int,
    live: int,
    pools: int,
    releases: int,
    seed: int,
) -> list[SpreadRow]:
    """Return the spread rows: the promoted trials alone, the pool now, after five more runs."""

    def spread(p: list[int], t: list[int], size: list[int] | None = None) -> PoolSpread:
        return pool_spread(
            policy, p, t, size=size, k=k, live=live, pools=pools, releases=releases, seed=seed
        )

    rows: list[SpreadRow] = []
    sel = [i for i, n in enumerate(promoted) if n > 0]  # new case versions have none
    if sel:
        alone = spread(
            [passes[i] for i in sel], [trials[i] for i in sel], [promoted[i] for i in sel]
        )
        rows.append(SpreadRow(name="promoted trials alone", spread=alone))
    rows.append(SpreadRow(name="pools of this size (now)", spread=spread(passes, trials)))
    if live > 0:
        ahead = spread(passes, trials, [n + _AHEAD * live for n in trials])
        rows.append(SpreadRow(name=f"after {_AHEAD} more runs", spread=ahead))
    return rows
