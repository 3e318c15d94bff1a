"""``harness policy check`` for a baseline pool: the conditional rates of the user's pool.

Reads the promoted baseline and the store's pools of it, then calls the pure simulations
of :mod:`harness.gate.pool_rates`: the spread of the conditional false-FAIL rate over pools
of the same size as the promoted trials alone, as the pool now, and as the pool after five
more runs; and this pool's own rates averaged over its posterior.
"""

from __future__ import annotations

import datetime as dt

from harness.errors import ConfigError
from harness.gate.policy import Policy
from harness.gate.pool_rates import PoolSpread, pool_spread, posterior_rates
from harness.gate.stats import summarize_case
from harness.pool import PoolKey, PoolView, list_pools, pool_view
from harness.project import Project
from harness.store.baseline import load_baseline
from harness.store.store import Store

__all__ = ["pool_check_lines"]

_AHEAD = 5
"""Runs ahead the check projects the pool's growth."""


def _row(name: str, s: PoolSpread) -> str:
    return (
        f"  {name:<28} mean {100 * s.mean:4.1f} %  median {100 * s.median:4.1f} %  "
        f"90th pct {100 * s.p90:4.1f} %  pools above 2α ({100 * 2 * s.alpha:.0f} %): "
        f"{100 * s.share_above:.0f} %"
    )


def pool_check_lines(
    project: Project,
    policy: Policy,
    baseline: str,
    k: int,
    *,
    pools: int = 40,
    releases: int = 50,
    reps: int = 500,
    seed: int = 0,
) -> list[str]:
    """Return the lines ``harness policy check`` prints about the baseline pool.

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
    lines: list[str] = []
    keys: list[PoolKey | None] = [key for _, key in found] or [None]
    views = [pool_view(store, pid, cases, bl.records, pp, before=now, k=k) for pid, _ in found] or [
        pool_view(store, "(none yet)", cases, bl.records, pp, before=now, k=k)
    ]
    for view, key in zip(views, keys, strict=True):
        lines += _pool_lines(
            policy,
            view,
            key,
            k,
            pp.live_trials,
            pools=pools,
            releases=releases,
            reps=reps,
            seed=seed,
        )
    return lines


def _pool_lines(
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
) -> list[str]:
    """Return the lines about one pool: what it holds and its simulated false-alarm rates."""
    lines: list[str] = []
    counts = {cid: summarize_case(outs, k) for cid, outs in view.arm.cases.items()}
    ids = sorted(c for c in counts if counts[c].n > 0)
    passes = [counts[c].passes for c in ids]
    trials = [counts[c].n for c in ids]
    promoted = [view.promoted.get(c, 0) for c in ids]
    where = f" (backend {key.backend}, environment {key.environment[7:19]})" if key else ""
    lines.append(view.describe() + where)
    if not ids:
        lines.append("  no judged trial in the pool: nothing to simulate")
        return lines
    lines.append(
        f"conditional false FAIL of unchanged releases at k = {k}, {live} live baseline "
        f"trial(s) per case per run ({pools} simulated pools × {releases} releases each, "
        f"truth drawn from this pool's posterior, seed {seed}):"
    )
    sel = [i for i, n in enumerate(promoted) if n > 0]  # new case versions have none
    if sel:
        lines.append(
            _row(
                "promoted trials alone",
                pool_spread(
                    policy,
                    [passes[i] for i in sel],
                    [trials[i] for i in sel],
                    size=[promoted[i] for i in sel],
                    k=k,
                    live=live,
                    pools=pools,
                    releases=releases,
                    seed=seed,
                ),
            )
        )
    lines.append(
        _row(
            "pools of this size (now)",
            pool_spread(
                policy,
                passes,
                trials,
                k=k,
                live=live,
                pools=pools,
                releases=releases,
                seed=seed,
            ),
        )
    )
    if live > 0:
        ahead = [n + _AHEAD * live for n in trials]
        lines.append(
            _row(
                f"after {_AHEAD} more runs",
                pool_spread(
                    policy,
                    passes,
                    trials,
                    size=ahead,
                    k=k,
                    live=live,
                    pools=pools,
                    releases=releases,
                    seed=seed,
                ),
            )
        )
    mine = posterior_rates(policy, passes, trials, k=k, live=live, reps=reps, seed=seed)
    lines.append(
        f"this pool, averaged over its posterior ({mine.reps} simulations): false FAIL "
        f"{mine.fail.rate:.3f} [{mine.fail.low:.3f}, {mine.fail.high:.3f}], false WARN "
        f"{mine.warn.rate:.3f}, blocked for drift {mine.blocked.rate:.3f}"
    )
    return lines
