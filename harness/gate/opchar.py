"""Operating characteristics of the gate for one project: ``harness policy check``.

Is the golden set big enough to gate on? :func:`operating_characteristics` simulates the
gate's statistical rules (:func:`harness.gate.regression.regression_rule` plus the regression
budget) for the project's number of cases N, its k and its baseline's per-case pass
counts, and reports, with Wilson 95 % intervals:

* **false fail** and **false warn** — an unchanged release (A/A);
* **detection** of a 10-point drop in mean pass rate in three shapes: *diffuse* (every
  case loses the same amount), *partial* (the top 20 % of cases by pass rate lose half of
  it), *concentrated* (the top 10 %, at least one case, stop passing).

Each simulated replicate draws every case's true pass probability from its shrunk
posterior, Beta(passes + 1/2, fails + 1/2) (Jeffreys), so that a case seen all-pass still
carries risk, then draws k trials per arm. Seeded: the same inputs give the same numbers.
The result is cached under the project's store (``.harness/cache/opchar-*.json``) keyed by
a digest of everything it depends on; :func:`cached_summary` only reads that cache, so a
``harness run`` or ``gate`` never pays for the simulation.

Not simulated: drift, infra errors, missing cases, imputation (they depend on the
environment, not on the set's size).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, ValidationError

from harness.digest import digest_json
from harness.errors import ConfigError
from harness.frozen import Frozen as _Frozen
from harness.gate.budget import beta_prior, flip_risk, poisson_binomial_pmf
from harness.gate.decide import GATE_RULE_VERSION
from harness.gate.policy import Policy, policy_digest
from harness.gate.rules import policy_rule
from harness.project import Project
from harness.store.baseline import Baseline, load_baseline
from harness.store.records import Outcome, RunRecord

__all__ = [
    "SHAPES",
    "OperatingCharacteristics",
    "OperatingInputs",
    "Rate",
    "baseline_summary",
    "cache_path",
    "cached_summary",
    "check_project",
    "inputs_from_records",
    "operating_characteristics",
    "project_inputs",
    "read_cache",
    "wilson",
    "write_cache",
]

Shape = Literal["diffuse", "partial", "concentrated"]
SHAPES: tuple[Shape, ...] = ("diffuse", "partial", "concentrated")
DROP = 0.10
"""The drop the detection rates are about: 10 points of mean pass rate."""


class OperatingInputs(_Frozen):
    """Everything the simulation depends on (its digest keys the cache)."""

    policy_digest: str
    k: int = Field(ge=1)
    passes: tuple[int, ...]
    """Per case (sorted by id): the baseline's passes."""
    trials: tuple[int, ...]
    """Per case: the baseline's judged trials."""
    critical: tuple[int, ...] = ()
    """Indices (into ``passes``) of the critical cases."""
    reps: int = Field(default=1000, ge=50)
    seed: int = 0
    rule_version: int = GATE_RULE_VERSION

    @property
    def n_cases(self) -> int:
        """Number of scored cases N."""
        return len(self.passes)

    def key(self) -> str:
        """Digest of the inputs: the cache key."""
        return digest_json(self.model_dump(mode="json"))


class Rate(_Frozen):
    """A simulated rate with its Wilson 95 % interval."""

    rate: float
    low: float
    high: float
    reps: int


class OperatingCharacteristics(_Frozen):
    """What ``harness policy check`` found."""

    schema_version: Literal[1] = 1
    inputs: OperatingInputs
    false_fail: Rate
    false_warn: Rate
    """An unchanged release warns (and does not fail)."""
    detect: dict[str, Rate]
    """Shape → probability that a 10-point drop of that shape FAILS."""
    drop_cases: dict[str, int]
    """Shape → how many cases the drop touches."""
    recommended: dict[int, dict[str, float]] = {}
    """k → shape → detection, when a recommendation was asked for."""
    recommended_k: int | None = None
    """Smallest k tried whose detection reaches the target in every shape."""
    target: float | None = None
    recommend_reps: int = 0
    """Simulations per shape and k for the recommendation."""
    seconds: float = 0.0

    def render(self) -> list[str]:
        """Return the ``harness policy check`` table as plain text lines."""
        inp = self.inputs
        rows = [
            ("unchanged release", "FAIL (false fail)", self.false_fail),
            ("unchanged release", "WARN (false warn)", self.false_warn),
        ]
        rows += [
            (f"10-point drop, {s} ({self.drop_cases[s]} cases)", "FAIL (detection)", r)
            for s, r in self.detect.items()
        ]
        lines = [
            f"operating characteristics: N = {inp.n_cases} cases, k = {inp.k}, "
            f"{inp.reps} simulations, seed {inp.seed}, gate rule {inp.rule_version}",
            "",
            f"{'scenario':<42} {'gate':<18} {'rate':>6}  95% interval (Wilson)",
        ]
        lines += [
            f"{name:<42} {what:<18} {r.rate:>6.3f}  [{r.low:.3f}, {r.high:.3f}]"
            for name, what, r in rows
        ]
        lines += ["", self.summary()]
        if self.recommended:
            lines += ["", f"detection (FAIL) by k, {self.recommend_reps} simulations each:"]
            lines += [
                f"  k = {kk:>2}: " + ", ".join(f"{s} {v:.2f}" for s, v in rates.items())
                for kk, rates in self.recommended.items()
            ]
            best = str(self.recommended_k) if self.recommended_k else "none of those: add cases"
            lines.append(f"recommended k for {self.target:.0%} detection in every shape: {best}")
        return lines

    def summary(self) -> str:
        """Return the one-line summary the report carries."""
        c = self.detect["concentrated"]
        return (
            f"at N = {self.inputs.n_cases}, k = {self.inputs.k} this gate catches a 10-point "
            f"concentrated drop ({self.drop_cases['concentrated']} case(s) stop passing) with "
            f"probability {c.rate:.2f} [{c.low:.2f}, {c.high:.2f}] "
            f"(false fail {self.false_fail.rate:.3f}, false warn {self.false_warn.rate:.3f}; "
            f"`harness policy check`, {self.inputs.reps} simulations)"
        )


def wilson(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95 % by default)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _rate(successes: int, n: int) -> Rate:
    low, high = wilson(successes, n)
    return Rate(rate=successes / n, low=low, high=high, reps=n)


def shifted(p: np.ndarray, shape: Shape) -> tuple[np.ndarray, int]:
    """Return pass probabilities after a 10-point drop of ``shape``, and the cases hit."""
    n = p.size
    order = np.argsort(-p, kind="stable")
    q = p.copy()
    if shape == "concentrated":
        hit = order[: max(1, round(0.10 * n))]
        q[hit] = 0.0
        return q, hit.size
    if shape == "partial":
        hit = order[: max(1, round(0.20 * n))]
        q[hit] = p[hit] / 2
        return q, hit.size
    lo, hi = 0.0, 1.0  # diffuse: every case p - d, clipped at 0, mean drop 0.10
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if (p - np.clip(p - mid, 0, 1)).mean() < DROP else (lo, mid)
    return np.clip(p - hi, 0.0, 1.0), n


def _simulate(
    policy: Policy, inputs: OperatingInputs, k: int, shape: Shape | None, reps: int, seed: int
) -> tuple[int, int, int]:
    """Replicates that fail, warn (without failing), and drop size; rule + budget."""
    rng = np.random.Generator(np.random.PCG64([seed, k, SHAPES.index(shape) + 1 if shape else 0]))
    passes = np.array(inputs.passes)
    trials = np.array(inputs.trials)
    ids = [f"c{i}" for i in range(passes.size)]
    crit = [ids[i] for i in inputs.critical]
    n = np.full(passes.size, k)
    fails = warns = touched = 0
    for _ in range(reps):
        p = rng.beta(passes + 0.5, trials - passes + 0.5)
        q, touched = shifted(p, shape) if shape else (p, 0)
        b = rng.binomial(k, p)
        c = rng.binomial(k, q)
        res = policy_rule(policy, ids, c, n, b, n, k=k, critical=crit)
        if res.outcome == "fail":
            fails += 1
            continue
        warn = res.outcome == "warn"
        if not warn:
            # the gate pools the stored and re-executed baseline for the risks; here the
            # simulated baseline arm stands for both (k trials: a more cautious budget)
            at_risk = b == k
            prior = beta_prior(b, n)
            risks = [flip_risk(k, k, k, prior)] * int(at_risk.sum())
            flips = int((at_risk & (c < k)).sum())
            pmf = poisson_binomial_pmf(risks)
            budget = int(
                np.searchsorted(np.cumsum(pmf), policy.regression_budget.confidence - 1e-12)
            )
            warn = flips > max(policy.regression_budget.floor, budget)
        warns += warn
    return fails, warns, touched


def operating_characteristics(
    policy: Policy,
    inputs: OperatingInputs,
    *,
    recommend: Sequence[int] = (),
    target: float = 0.90,
    recommend_reps: int = 300,
) -> OperatingCharacteristics:
    """Simulate the gate for ``inputs`` (pure: seeded, no I/O); optionally try other k."""
    began = time.perf_counter()
    reps, seed, k = inputs.reps, inputs.seed, inputs.k
    ff, fw, _ = _simulate(policy, inputs, k, None, reps, seed)
    detect: dict[str, Rate] = {}
    touched: dict[str, int] = {}
    for shape in SHAPES:
        f, _, t = _simulate(policy, inputs, k, shape, reps, seed)
        detect[shape], touched[shape] = _rate(f, reps), t
    table: dict[int, dict[str, float]] = {}
    best: int | None = None
    for kk in sorted(set(recommend)):
        table[kk] = {
            s: _simulate(policy, inputs, kk, s, recommend_reps, seed)[0] / recommend_reps
            for s in SHAPES
        }
        if best is None and min(table[kk].values()) >= target:
            best = kk
    return OperatingCharacteristics(
        inputs=inputs,
        false_fail=_rate(ff, reps),
        false_warn=_rate(fw, reps),
        detect=detect,
        drop_cases=touched,
        recommended=table,
        recommended_k=best,
        target=target if recommend else None,
        recommend_reps=recommend_reps if recommend else 0,
        seconds=time.perf_counter() - began,
    )


# --------------------------------------------------------------------------- inputs, cache


def inputs_from_records(
    policy: Policy,
    records: Sequence[RunRecord],
    k: int,
    *,
    critical: Sequence[str] = (),
    skip: Sequence[str] = (),
    reps: int = 1000,
    seed: int = 0,
) -> OperatingInputs:
    """Per-case baseline counts from run records (judgment-lane cases in ``skip``)."""
    counts: dict[str, list[int]] = {}
    for r in records:
        if r.key.case_id in skip or r.outcome not in (Outcome.PASS, Outcome.FAIL):
            continue
        cell = counts.setdefault(r.key.case_id, [0, 0])
        cell[0] += r.outcome is Outcome.PASS
        cell[1] += 1
    ids = sorted(counts)
    wanted = set(critical) | set(policy.critical_cases)
    return OperatingInputs(
        policy_digest=policy_digest(policy),
        k=k,
        passes=tuple(counts[c][0] for c in ids),
        trials=tuple(counts[c][1] for c in ids),
        critical=tuple(i for i, c in enumerate(ids) if c in wanted),
        reps=reps,
        seed=seed,
    )


def cache_path(store_dir: Path, inputs: OperatingInputs) -> Path:
    """Where the result for ``inputs`` is cached."""
    return store_dir / "cache" / f"opchar-{inputs.key()[7:23]}.json"


def read_cache(store_dir: Path, inputs: OperatingInputs) -> OperatingCharacteristics | None:
    """Return the cached result for exactly these inputs, or None (missing, unreadable)."""
    path = cache_path(store_dir, inputs)
    try:
        found = OperatingCharacteristics.model_validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError):
        return None
    return found if found.inputs == inputs else None


def write_cache(store_dir: Path, result: OperatingCharacteristics) -> Path:
    """Store ``result`` atomically under the store's cache folder."""
    path = cache_path(store_dir, result.inputs)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(json.loads(result.model_dump_json()), indent=2), encoding="utf-8")
    tmp.replace(path)
    return path


def cached_summary(store_dir: Path, inputs: OperatingInputs) -> str | None:
    """Return the summary line if ``harness policy check`` ran for these inputs."""
    found = read_cache(store_dir, inputs)
    return found.summary() if found is not None else None


def choose_baseline(baselines_dir: Path, name: str | None) -> str:
    """Return ``name``, or the project's only promoted baseline.

    Raises:
        ConfigError: no name and not exactly one baseline.
    """
    if name is not None:
        return name
    found = sorted(p.name for p in baselines_dir.glob("*") if (p / "baseline.json").is_file())
    if len(found) == 1:
        return found[0]
    raise ConfigError(
        "policy check takes the per-case pass rates from a promoted baseline: "
        + (
            f"name one with --baseline ({', '.join(found)})"
            if found
            else "there is none yet; promote one with `harness baseline promote RUN --name NAME`"
        ),
        file=baselines_dir,
    )


def project_inputs(
    project: Project,
    baseline: str | None = None,
    k: int | None = None,
    *,
    reps: int = 1000,
    seed: int = 0,
) -> tuple[Policy, OperatingInputs]:
    """Return the policy and simulation inputs of a project's baseline (reads files).

    Raises:
        ConfigError: no baseline to use, or a bad policy file.

    """
    from harness.gate.policy import DEFAULT_POLICY, load_policy

    policy = load_policy(project.policy_path).policy if project.policy_path else DEFAULT_POLICY
    bl = load_baseline(project.baselines_dir, choose_baseline(project.baselines_dir, baseline))
    rec = bl.file.release
    return policy, inputs_from_records(
        policy,
        bl.records,
        k or rec.k,
        critical=rec.critical_cases,
        skip=rec.judgment_cases,
        reps=reps,
        seed=seed,
    )


def check_project(
    project: Project,
    baseline: str | None = None,
    k: int | None = None,
    *,
    reps: int = 1000,
    seed: int = 0,
    recommend: Sequence[int] = (),
    target: float = 0.90,
    use_cache: bool = True,
) -> tuple[OperatingCharacteristics, bool]:
    """``harness policy check``: simulate (or read the cache) and cache; (result, cached)."""
    policy, inputs = project_inputs(project, baseline, k, reps=reps, seed=seed)
    if inputs.n_cases == 0:
        raise ConfigError(
            "the baseline has no judged trial to take pass rates from", file=project.baselines_dir
        )
    found = read_cache(project.store_dir, inputs) if use_cache else None
    if (
        found is not None
        and set(recommend) <= set(found.recommended)
        and (not recommend or found.target == target)
    ):
        return found, True
    result = operating_characteristics(policy, inputs, recommend=recommend, target=target)
    write_cache(project.store_dir, result)
    return result, False


def baseline_summary(store_dir: Path, policy: Policy, baseline: Baseline, k: int) -> str | None:
    """Return the cached summary for a run at ``k`` against ``baseline``, or None."""
    rec = baseline.file.release
    inputs = inputs_from_records(
        policy, baseline.records, k, critical=rec.critical_cases, skip=rec.judgment_cases
    )
    return cached_summary(store_dir, inputs) if inputs.n_cases else None
