"""Pure statistics of one arm: per-case estimators and arm summaries.

Everything here is a deterministic function of its arguments: data in, frozen results
out, no I/O. The unit of inference is the *case*: trials are reduced to per-case values
first; ``infra_error`` and ``evaluator_error`` trials are excluded from ``n`` and counted
apart.

Undefined values (a pass rate without data, a CI over one case) are ``None`` in the
result models, so that results compare equal and serialise to JSON; the bare estimator
functions :func:`pass_hat_k` / :func:`pass_at_k` return NaN where the brief asks for it.

Two arms are compared in :mod:`harness.gate.compare` (E1, E2, Holm, per-case rows); the
regression budget (flip risks, Poisson-binomial) is :mod:`harness.gate.budget`; the drift test
(a re-executed baseline against the stored one) is :mod:`harness.gate.drift`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import Field

from harness.frozen import Frozen as _Frozen
from harness.store.records import Outcome, RunRecord

__all__ = [
    "ArmData",
    "ArmSummary",
    "CaseSummary",
    "Label",
    "MeanCI",
    "pass_at_k",
    "pass_hat_k",
    "recent_counts",
    "summarize_arm",
    "summarize_case",
]

Label = Literal["stable_pass", "stable_fail", "flaky", "no_data"]
_JUDGED = (Outcome.PASS, Outcome.FAIL)


# --------------------------------------------------------------------------- estimators


def check_counts(n: int, c: int, k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if n < 0 or c < 0 or c > n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass^k (all k trials pass): ``C(c,k) / C(n,k)``.

    Computed as the product ``prod_{i<k} (c-i)/(n-i)``, which never forms a large
    binomial coefficient. NaN when ``n < k`` (not enough trials to estimate).

    Raises:
        ValueError: ``k < 1`` or not ``0 <= c <= n``.

    """
    check_counts(n, c, k)
    if n < k:
        return math.nan
    if c < k:
        return 0.0
    prod = 1.0
    for i in range(k):
        prod *= (c - i) / (n - i)
    return prod


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass@k (at least one of k passes): ``1 - C(n-c,k)/C(n,k)``.

    Uses the numerically stable form ``1 - prod_{i=n-c+1}^{n} (1 - k/i)``. NaN when
    ``n < k``.

    Raises:
        ValueError: ``k < 1`` or not ``0 <= c <= n``.

    """
    check_counts(n, c, k)
    if n < k:
        return math.nan
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def _none_if_nan(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


# --------------------------------------------------------------------------- inputs


class ArmData(_Frozen):
    """The trial outcomes of one arm (candidate or baseline): per case, in trial order."""

    k: int = Field(ge=1)
    """Trials per case the run asked for."""
    cases: dict[str, tuple[Outcome, ...]]
    """Case id → the ordered outcomes of its trials (all four kinds)."""
    name: str = ""
    """Release name, for display."""

    @classmethod
    def from_records(cls, records: Iterable[RunRecord], k: int, name: str = "") -> ArmData:
        """Group run records by case id, ordered by trial index."""
        grouped: dict[str, list[tuple[int, Outcome]]] = {}
        for rec in records:
            grouped.setdefault(rec.key.case_id, []).append((rec.key.trial, rec.outcome))
        return cls(
            k=k,
            name=name,
            cases={
                cid: tuple(o for _, o in sorted(v, key=lambda t: t[0]))
                for cid, v in sorted(grouped.items())
            },
        )


# --------------------------------------------------------------------------- summaries


class CaseSummary(_Frozen):
    """One case in one arm, reduced from its trials."""

    case_id: str = ""
    k: int
    trials: int
    """All trials, whatever their outcome."""
    n: int
    """Judged trials (pass + fail); infra and evaluator errors are excluded."""
    passes: int
    fails: int
    infra_errors: int
    evaluator_errors: int
    pass_rate: float | None
    pass_hat_k: float | None
    """Unbiased pass^k; None when n < k."""
    pass_at_k: float | None
    run_sd: float | None
    """Run-to-run standard deviation of this case's 0/1 outcomes (sample sd; n >= 2)."""
    label: Label


def summarize_case(outcomes: Sequence[Outcome], k: int, case_id: str = "") -> CaseSummary:
    """Reduce one case's trial outcomes to counts, estimates and a stability label.

    Labels: ``no_data`` (no judged trial), ``stable_pass`` (every judged trial passed),
    ``stable_fail`` (none passed), ``flaky`` otherwise.
    """
    return _summarize_case(tuple(outcomes), k, case_id)


def recent_counts(arm: ArmData, k: int) -> dict[str, tuple[int, int]]:
    """Per case: passes and judged trials among its ``k`` most recent judged trials.

    An arm's outcomes are in the order they were run (a baseline pool: promoted trials
    first, then each pooled run's, then this run's live trials), so these are its last
    ``k`` judged outcomes; fewer when the case has fewer.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    out: dict[str, tuple[int, int]] = {}
    for cid, outs in arm.cases.items():
        last = [o for o in outs if o in _JUDGED][-k:]
        out[cid] = (last.count(Outcome.PASS), len(last))
    return out


@functools.lru_cache(maxsize=1 << 14)
def _summarize_case(outs: tuple[Outcome, ...], k: int, case_id: str) -> CaseSummary:
    passes = outs.count(Outcome.PASS)
    fails = outs.count(Outcome.FAIL)
    infra = outs.count(Outcome.INFRA_ERROR)
    evaluator = outs.count(Outcome.EVALUATOR_ERROR)
    n = passes + fails
    label: Label
    if n == 0:
        label = "no_data"
    elif passes == n:
        label = "stable_pass"
    elif passes == 0:
        label = "stable_fail"
    else:
        label = "flaky"
    rate = passes / n if n else None
    run_sd = math.sqrt(passes * fails / (n * (n - 1))) if n >= 2 else None
    return CaseSummary(
        case_id=case_id,
        k=k,
        trials=len(outs),
        n=n,
        passes=passes,
        fails=fails,
        infra_errors=infra,
        evaluator_errors=evaluator,
        pass_rate=rate,
        pass_hat_k=_none_if_nan(pass_hat_k(n, passes, k)),
        pass_at_k=_none_if_nan(pass_at_k(n, passes, k)),
        run_sd=run_sd,
        label=label,
    )


@functools.lru_cache(maxsize=1024)
def t_ppf(q: float, df: int) -> float:
    """Return Student's t quantile of ``q`` with ``df`` degrees of freedom.

    ``scipy.special.stdtrit``, what ``scipy.stats.t.ppf`` calls (the same bits), without
    importing ``scipy.stats``: about a second of a run without a baseline.
    """
    from scipy.special import stdtrit

    return float(stdtrit(df, q))


class MeanCI(_Frozen):
    """A mean over cases with a t-based confidence interval over cases."""

    n_cases: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    level: float


def _mean_ci(values: Sequence[float], level: float) -> MeanCI:
    n = len(values)
    if n == 0:
        return MeanCI(n_cases=0, mean=None, ci_low=None, ci_high=None, level=level)
    import numpy as np  # here, not at the top: planning a run imports this module

    arr = np.asarray(values, dtype=float)
    mean = float(arr.mean())
    if n < 2:
        return MeanCI(n_cases=n, mean=mean, ci_low=None, ci_high=None, level=level)
    se = float(arr.std(ddof=1)) / math.sqrt(n)
    half = t_ppf(0.5 + level / 2, n - 1) * se
    # Every averaged quantity is a proportion: the interval is clipped to [0, 1].
    low, high = max(0.0, mean - half), min(1.0, mean + half)
    return MeanCI(n_cases=n, mean=mean, ci_low=low, ci_high=high, level=level)


class ArmSummary(_Frozen):
    """One arm: per-case summaries, means over cases and run-to-run spread."""

    name: str
    k: int
    n_cases: int
    cases_with_data: int
    trials: int
    passes: int
    fails: int
    infra_errors: int
    evaluator_errors: int
    unverifiable_fraction: float
    """(infra + evaluator errors) / all trials; 0 for an empty arm."""
    labels: dict[str, int]
    """Label → number of cases."""
    pass_rate: MeanCI
    """Mean per-case pass rate over cases with data, with a t-based CI over cases."""
    pass_hat_k: MeanCI
    """Mean unbiased pass^k over cases with n >= k."""
    pass_at_k: MeanCI
    spread: float | None
    """Run-to-run sd: sd over trial indices j of the aggregate pass rate of run j."""
    mean_case_sd: float | None
    """Mean over cases of the per-case run-to-run sd of outcomes."""
    cases: tuple[CaseSummary, ...]


def summarize_arm(arm: ArmData, *, level: float = 0.95) -> ArmSummary:
    """Summarise an arm: means over cases with t-based CIs over cases, and spread."""
    import numpy as np

    cases = tuple(summarize_case(arm.cases[cid], arm.k, cid) for cid in sorted(arm.cases))
    rates = [c.pass_rate for c in cases if c.pass_rate is not None]
    hats = [c.pass_hat_k for c in cases if c.pass_hat_k is not None]
    ats = [c.pass_at_k for c in cases if c.pass_at_k is not None]
    sds = [c.run_sd for c in cases if c.run_sd is not None]
    runs: list[float] = []
    for j in range(max((len(v) for v in arm.cases.values()), default=0)):
        judged = [v[j] for v in arm.cases.values() if len(v) > j and v[j] in _JUDGED]
        if judged:
            runs.append(sum(1 for o in judged if o == Outcome.PASS) / len(judged))
    trials = sum(c.trials for c in cases)
    unverifiable = sum(c.infra_errors + c.evaluator_errors for c in cases)
    labels: dict[str, int] = {}
    for c in cases:
        labels[c.label] = labels.get(c.label, 0) + 1
    return ArmSummary(
        name=arm.name,
        k=arm.k,
        n_cases=len(cases),
        cases_with_data=len(rates),
        trials=trials,
        passes=sum(c.passes for c in cases),
        fails=sum(c.fails for c in cases),
        infra_errors=sum(c.infra_errors for c in cases),
        evaluator_errors=sum(c.evaluator_errors for c in cases),
        unverifiable_fraction=unverifiable / trials if trials else 0.0,
        labels=dict(sorted(labels.items())),
        pass_rate=_mean_ci(rates, level),
        pass_hat_k=_mean_ci(hats, level),
        pass_at_k=_mean_ci(ats, level),
        spread=float(np.std(runs, ddof=1)) if len(runs) >= 2 else None,
        mean_case_sd=float(np.mean(sds)) if sds else None,
        cases=cases,
    )
