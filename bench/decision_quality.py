"""Decision quality of the gate at golden-set sizes: the grid of issue 11's Targets.

Simulated agents have known per-case pass probabilities; outcomes are drawn as counts (no
sandboxes). Every replicate draws three arms — the stored baseline, the re-executed
baseline and the candidate, k trials per case each — and applies the gate's rules in the
order :func:`harness.gate.decide` does, through the same pure functions: the drift check
(:func:`harness.gate.decide.drift_check`'s family, two-sided, at ``baseline.drift_alpha``) →
blocked; the regression family (:func:`harness.gate.regression.regression_rule`) → fail / warn;
the shrunk regression budget and non-inferiority (``auto``) → warn. ``--check-decide R``
runs R replicates of every cell through ``decide`` itself and asserts the same verdicts.

Populations (per N): **realistic** = 40 % stable cases (p evenly in 0.97–1.0), 10 %
broken (p in 0–0.03), 50 % flaky (p in 0.30–0.95); **very flaky** = p evenly in 0.2–0.8.
A 10-point drop: **diffuse** = every case p − δ (clipped at 0, mean drop 0.10);
**partial** = 20 % of cases (the stable ones) p → p/2; **concentrated** = 10 % of cases
(stable) → 0. Drift (the re-executed baseline harsher, candidate unchanged): **spread**
p·0.85, **concentrated** 15 % of cases (highest p first) killed. **critical**: N = 20
realistic with 2 critical cases (stable); A/A, a critical case observed 5/5 → 1/5 (fixed
counts), and a critical case whose p goes 1.0 → 0.2 (drawn; reported, no target).

Rates carry Wilson 95 % intervals; targets are judged on the point estimates.

``--pool`` prints the baseline-pool tables instead (docs/gate.md, "Baseline pool"): (ii)
the false-FAIL rate conditional on a pool grown for ``--ages`` runs by ``--live`` live
baseline trials per case, over ``--stored-samples`` pools × ``--releases`` unchanged
releases; (i) marginal rates against a full fresh re-run, the same candidate draws; (iii)
baseline trials executed per release. The gate on counts is
:func:`harness.gate.pool_rates.pooled_verdict` (property-tested against ``decide``; the
pool's most recent trials, which the magnitude rule reads, are drawn from its counts);
``--conditional-share G`` sets the policy's ``baseline.pool.conditional_share`` (the FAIL
level against the pool lowered by :func:`harness.gate.conditional.pooled_alpha`), and the
first line prints the digest of the policy in force.

``--replay`` prints the baseline-replay tables instead (docs/gate.md, "Baseline model
replay"): (i) the candidate judged against the stored sample vs against a fresh re-run,
the same draws; (ii) the false-FAIL rate conditional on one stored sample reused by
``--releases`` unchanged releases, over ``--stored-samples`` stored samples; (iii) drift
under replay with a flaky verifier, the gate's drift check beside an exact paired flip test.

    python bench/decision_quality.py [--reps 1000] [--reps-aa 2000] [--jobs 2]
        [--seed 20261201] [--only realistic] [--check-decide 20]
    python bench/decision_quality.py --replay [--reps 1000] [--stored-samples 200]
        [--releases 100] [--tables 123] [--only realistic] [--check-decide 5]
    python bench/decision_quality.py --pool [--live 1,2] [--ages 0,5] [--stored-samples 200]
        [--releases 100] [--reps 1000] [--shapes 3] [--tables 123] [--conditional-share 0.025]
"""

from __future__ import annotations

import argparse
import math
import time
import zlib
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats as sps

from harness.gate.budget import beta_prior, flip_risk, poisson_binomial_pmf
from harness.gate.conditional import pool_level
from harness.gate.decide import decide
from harness.gate.exact import allocate_alpha, broken_count_test, within_case_test
from harness.gate.opchar import wilson
from harness.gate.policy import Policy, PoolPolicy, load_policy, policy_digest
from harness.gate.pool_rates import live_drifted, pooled_verdict, recent_window
from harness.gate.rules import policy_rule
from harness.gate.stats import ArmData
from harness.store.records import Outcome

ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- populations


def realistic(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Pass probabilities and the indices of the stable cases (highest p first)."""
    ns, nb = round(0.4 * n), round(0.1 * n)
    p = np.concatenate(
        [
            np.linspace(0.97, 1.0, ns),
            np.linspace(0.0, 0.03, nb),
            np.linspace(0.30, 0.95, n - ns - nb),
        ]
    )
    return p, np.arange(ns)[::-1]


def very_flaky(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every case flaky, p evenly in 0.2–0.8; no stable case."""
    return np.linspace(0.2, 0.8, n), np.argsort(-np.linspace(0.2, 0.8, n))


def diffuse(p: np.ndarray) -> np.ndarray:
    """Every case p − δ (clipped at 0) with a mean drop of exactly 0.10."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if (p - np.clip(p - mid, 0, 1)).mean() < 0.10 else (lo, mid)
    return np.clip(p - hi, 0.0, 1.0)


@dataclass(frozen=True)
class Cell:
    """One row of the grid."""

    group: str
    population: str
    n: int
    k: int
    scenario: str
    reps: int
    stored: np.ndarray
    rexec: np.ndarray
    cand: np.ndarray
    critical: tuple[int, ...] = ()
    fixed: tuple[tuple[int, int, int], ...] = ()
    """(case index, candidate passes, baseline passes) forced in every replicate."""


def grid(reps: int, reps_aa: int, only: str | None) -> list[Cell]:
    """Every cell of issue 11's Targets."""
    cells: list[Cell] = []
    pops = {"realistic": realistic, "very flaky": very_flaky}
    for name, make in pops.items():
        if only and only not in name:
            continue
        for n in (20, 50, 200):
            p, stable = make(n)
            for k in (3, 5, 10):
                cells.append(Cell("A/A", name, n, k, "unchanged", reps_aa, p, p, p))
                cells.append(Cell("drop", name, n, k, "diffuse", reps, p, p, diffuse(p)))
                if name == "realistic":
                    part, conc = p.copy(), p.copy()
                    part[stable[: round(0.2 * n)]] /= 2
                    conc[stable[: round(0.1 * n)]] = 0.0
                    cells.append(Cell("drop", name, n, k, "partial", reps, p, p, part))
                    cells.append(Cell("drop", name, n, k, "concentrated", reps, p, p, conc))
                    killed = p.copy()
                    killed[np.argsort(-p, kind="stable")[: round(0.15 * n)]] = 0.0
                    cells.append(Cell("drift", name, n, k, "spread p·0.85", reps, p, p * 0.85, p))
                    cells.append(Cell("drift", name, n, k, "concentrated 15 %", reps, p, killed, p))
    if not only or only in "realistic":
        p, stable = realistic(20)
        crit = (int(stable[0]), int(stable[1]))
        low = p.copy()
        low[crit[0]] = 0.2
        cells += [
            Cell("critical", "realistic", 20, 5, "A/A, 2 critical", reps_aa, p, p, p, crit),
            Cell(
                "critical",
                "realistic",
                20,
                5,
                "critical 5/5 → 1/5",
                reps,
                p,
                p,
                p,
                crit,
                ((crit[0], 1, 5),),
            ),
            Cell("critical", "realistic", 20, 5, "critical p 1.0 → 0.2", reps, p, p, low, crit),
        ]
    return cells


# --------------------------------------------------------------------------- the gate


def _drifted(policy: Policy, c: np.ndarray, b: np.ndarray, k: int) -> bool:
    """The drift family of harness.gate.decide.drift_check (re-executed c vs stored b)."""
    n = np.full(c.size, k)
    bp = policy.baseline
    within = within_case_test(c, n, b, n, alternative="two-sided")
    broken = broken_count_test(c, n, b, n, alternative="two-sided")
    shares = {
        s.name: s.share
        for s in allocate_alpha(
            bp.drift_alpha,
            [("drift", 1.0, [("within", 0.8, within.min_p), ("broken", 0.2, broken.min_p)])],
        )
    }
    mean = float((c - b).mean()) / k
    big = abs(mean) >= bp.drift_tolerance - 1e-12
    flipped = shares["broken"] > 0 and broken.p_value <= shares["broken"]
    return (shares["within"] > 0 and within.p_value <= shares["within"] and big) or flipped


def fast_verdict(
    policy: Policy,
    stored: np.ndarray,
    rexec: np.ndarray,
    cand: np.ndarray,
    k: int,
    critical: tuple[str, ...],
    *,
    replayed: bool = False,
    stored_k: int | None = None,
) -> tuple[str, str]:
    """The gate's verdict on counts, and the rule that set it.

    ``replayed``: ``rexec`` is the baseline re-executed from recorded model responses
    (``decide(..., baseline_replayed=True)``): drift is checked with it, the candidate is
    compared with ``stored`` (``stored_k`` trials per case, default k) and the budget's
    rates come from ``stored`` alone.
    """
    ks = stored_k if replayed and stored_k is not None else k
    if _drifted(policy, rexec, stored, ks):
        return "blocked", "drift"
    ids = [f"case-{i:03d}" for i in range(cand.size)]
    n = np.full(cand.size, k)
    th = policy.thresholds
    if replayed:
        rexec = stored  # the reference; no pooling with a copy of itself
    res = policy_rule(policy, ids, cand, n, rexec, np.full(cand.size, ks), k=k, critical=critical)
    if res.outcome == "fail":
        return "fail", "regression"
    if cand.sum() == 0:
        return "fail", "absolute"
    if res.outcome == "warn":
        return "warn", "regression"
    at_risk = rexec == ks
    pooled, m = (stored, ks) if replayed else (stored + rexec, 2 * k)
    prior = beta_prior(pooled, np.full(pooled.size, m))
    risks = [flip_risk(int(x), m, k, prior) for x in pooled[at_risk]]
    flips = int((at_risk & (cand < k)).sum())
    cdf = np.cumsum(poisson_binomial_pmf(risks))
    budget = max(
        policy.regression_budget.floor,
        int(np.searchsorted(cdf, policy.regression_budget.confidence - 1e-12)),
    )
    if flips > budget:
        return "warn", "budget"
    d = cand / k - rexec / ks
    if d.size >= 2 and th.non_inferiority != "info":
        sd = float(d.std(ddof=1))
        half = float(sps.t.ppf(1 - policy.alpha, d.size - 1)) * sd / math.sqrt(d.size)
        low = float(d.mean()) - half
        if low <= -th.non_inferiority_margin + 1e-12 and (
            th.non_inferiority == "warn" or half < th.non_inferiority_margin / 2
        ):
            return "warn", "non-inferiority"
    return "pass", ""


def _arm(counts: np.ndarray, k: int) -> ArmData:
    P, F = Outcome.PASS, Outcome.FAIL
    return ArmData(
        k=k,
        cases={f"case-{i:03d}": (P,) * int(c) + (F,) * (k - int(c)) for i, c in enumerate(counts)},
    )


def _run(args: tuple[Cell, int, int, int, Policy, int]) -> tuple[Counter[str], int]:
    cell, start, stop, seed, policy, check = args
    critical = tuple(f"case-{i:03d}" for i in cell.critical)
    tally: Counter[str] = Counter()
    checked = 0
    for rep in range(start, stop):
        rng = np.random.Generator(
            np.random.PCG64(
                np.random.SeedSequence(
                    [
                        seed,
                        cell.n,
                        cell.k,
                        zlib.crc32(f"{cell.population}|{cell.scenario}".encode()),
                        rep,
                    ]
                )
            )
        )
        stored = rng.binomial(cell.k, cell.stored)
        rexec = rng.binomial(cell.k, cell.rexec)
        cand = rng.binomial(cell.k, cell.cand)
        for i, c, b in cell.fixed:
            cand[i], rexec[i], stored[i] = c, b, b
        verdict, why = fast_verdict(policy, stored, rexec, cand, cell.k, critical)
        tally[verdict] += 1
        tally["why:" + why] += 1
        if rep - start < check:
            full = decide(
                policy,
                _arm(cand, cell.k),
                _arm(rexec, cell.k),
                _arm(stored, cell.k),
                critical_cases=critical,
            )
            assert full.verdict == verdict, (
                cell.scenario,
                rep,
                full.verdict,
                verdict,
                [r.code for r in full.reasons],
            )
            checked += 1
    return tally, checked


# --------------------------------------------------------------------------- targets


def _target(cell: Cell, rates: dict[str, float]) -> str:
    """The issue's target for this cell, and whether the point estimate meets it."""
    fail, warn, blocked = rates["fail"], rates["warn"], rates["blocked"]

    def mark(ok: bool, text: str) -> str:
        return f"{'✅' if ok else '❌'} {text}"

    if cell.group == "A/A" or cell.scenario == "A/A, 2 critical":
        return mark(
            fail <= 0.05 and warn <= 0.10 and blocked <= 0.01,
            "FAIL ≤ 5 %, WARN ≤ 10 %, false drift ≤ 1 %",
        )
    if cell.scenario == "concentrated" and cell.n in (20, 50) and cell.k >= 5:
        return mark(fail >= 0.95, "FAIL ≥ 95 %")
    if (
        cell.scenario in ("diffuse", "partial")
        and cell.n == 50
        and cell.k == 5
        and (cell.population == "realistic")
    ):
        return mark(fail >= 0.90, "FAIL ≥ 90 %")
    if cell.scenario == "concentrated 15 %" and cell.n == 50 and cell.k == 5:
        return mark(blocked >= 0.90, "flagged ≥ 90 %")
    if cell.scenario == "critical 5/5 → 1/5":
        return mark(fail >= 0.90, "FAIL ≥ 90 %")
    return "—"


def _pct(x: int, n: int) -> str:
    lo, hi = wilson(x, n)
    return f"{100 * x / n:5.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"


# --------------------------------------------------------------------------- baseline replay
#
# `--model-replay baseline:NAME` in a gated run re-executes the baseline arm from the
# responses it was promoted with: the gate then compares the candidate with the STORED
# baseline (one fixed sample, reused by every release gated against it) and uses the
# replayed arm only for the drift check. Three questions:
#  (i)   marginal rates: candidate vs the stored sample, against candidate vs a fresh re-run
#        (the same draws, paired);
#  (ii)  the conditional false-FAIL rate given one stored sample, reused by R releases;
#  (iii) drift under replay: the replayed arm equals the stored outcomes except where the
#        verifier itself flips (probability q per trial); an evaluator change flips a share
#        x of the passes of the cases it hits.


def _rng(seed: int, *parts: object) -> np.random.Generator:
    tag = zlib.crc32("|".join(map(str, parts)).encode())
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, tag])))


def _population(name: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    return realistic(n) if name == "realistic" else very_flaky(n)


def _shape(p: np.ndarray, stable: np.ndarray, scenario: str) -> np.ndarray:
    """The candidate's pass probabilities under a scenario of the grid."""
    if scenario == "diffuse":
        return diffuse(p)
    out = p.copy()
    if scenario == "concentrated":
        out[stable[: max(1, round(0.1 * p.size))]] = 0.0
    return out


def _replay_flips(
    rng: np.random.Generator,
    stored: np.ndarray,
    k: int,
    q: float,
    x: np.ndarray,
    *,
    one_way: bool = False,
) -> tuple[np.ndarray, int, int]:
    """Re-verify the stored trials: (replayed counts, pass→fail flips, fail→pass flips).

    A pass survives w.p. (1−x)(1−q); a fail passes w.p. q(1−x), or never when the
    verifier's flakiness is ``one_way`` (it only ever fails a good candidate: timeouts).
    """
    keep = rng.binomial(stored, (1 - x) * (1 - q))
    back = rng.binomial(k - stored, 0.0 if one_way else q * (1 - x))
    return np.asarray(keep + back), int((stored - keep).sum()), int(back.sum())


def _paired(stored: np.ndarray, k: int, lost: int, gained: int, alpha: float) -> bool:
    """Exact paired flip test: more pass→fail than fail→pass flips than symmetric noise allows.

    Under "the verifier flips any verdict with the same probability", given D flips in all,
    the pass→fail ones are Bin(D, S / (S + F)) (S passes, F fails stored). Needs no q.
    """
    d = lost + gained
    s = int(stored.sum())
    if d == 0 or s == 0:
        return False
    return bool(sps.binom.sf(lost - 1, d, s / (stored.size * k)) <= alpha)


def _marginal(
    args: tuple[str, int, int, str, int, int, int, Policy, int],
) -> dict[str, Counter[str]]:
    pop, n, k, scenario, start, stop, seed, policy, check = args
    p, stable = _population(pop, n)
    pc = _shape(p, stable, scenario)
    out: dict[str, Counter[str]] = {"fresh": Counter(), "stored": Counter()}
    for rep in range(start, stop):
        rng = _rng(seed, "marginal", pop, n, k, scenario, rep)
        stored, rexec, cand = (rng.binomial(k, p), rng.binomial(k, p), rng.binomial(k, pc))
        out["fresh"][fast_verdict(policy, stored, rexec, cand, k, ())[0]] += 1
        verdict = fast_verdict(policy, stored, stored, cand, k, (), replayed=True)[0]
        out["stored"][verdict] += 1
        if rep - start < check:
            full = decide(
                policy, _arm(cand, k), _arm(stored, k), _arm(stored, k), baseline_replayed=True
            )
            assert full.verdict == verdict, (scenario, rep, full.verdict, verdict)
            out["stored"]["checked"] += 1
    return out


def _conditional(
    args: tuple[str, int, int, int, int, int, int, int, Policy, int],
) -> list[tuple[int, ...]]:
    """Per stored sample: (fresh FAIL, fresh WARN, stored FAIL, stored WARN) over R releases.

    The stored sample has ``ks`` trials per case (the promoted run's k), releases k.
    """
    pop, n, k, ks, start, stop, releases, seed, policy, check = args
    p, _ = _population(pop, n)
    rows = []
    for m in range(start, stop):
        stored = _rng(seed, "stored", pop, n, ks, m).binomial(ks, p)
        rng = _rng(seed, "releases", pop, n, k, m)
        tally = [0, 0, 0, 0]
        for r in range(releases):
            rexec, cand = rng.binomial(k, p), rng.binomial(k, p)
            # A fresh re-run is judged against k re-executed trials whatever the stored k.
            fresh = fast_verdict(policy, stored, rexec, cand, k, ())[0] if ks == k else ""
            again = fast_verdict(policy, stored, stored, cand, k, (), replayed=True, stored_k=ks)
            if m - start < check and r == 0:
                full = decide(
                    policy,
                    _arm(cand, k),
                    _arm(stored, ks),
                    _arm(stored, ks),
                    baseline_replayed=True,
                )
                assert full.verdict == again[0], (pop, n, k, ks, m, full.verdict, again)
            tally[0] += fresh == "fail"
            tally[1] += fresh == "warn"
            tally[2] += again[0] == "fail"
            tally[3] += again[0] == "warn"
        rows.append(tuple(tally))
    return rows


DRIFT_MODES: tuple[tuple[str, float | None, bool], ...] = (
    ("fresh re-run", None, False),
    ("replay, q = 0", 0.0, False),
    ("replay, q = 0.02", 0.02, False),
    ("replay, q = 0.02 pass→fail only", 0.02, True),
)
DRIFT_COLUMNS = ["fresh re-run: drift check"] + [
    f"{name}: {test}"
    for name, q, _ in DRIFT_MODES
    if q is not None
    for test in ("drift check", "paired flips")
]
DRIFT_CHANGES = (
    ("none", 0.0, 1.0),
    ("every case loses 10 % of its passes", 0.10, 1.0),
    ("every case loses 25 % of its passes", 0.25, 1.0),
    ("10 % of cases lose 50 % of their passes", 0.50, 0.10),
    ("10 % of cases lose all passes", 1.0, 0.10),
)


def _drift(args: tuple[str, int, int, int, int, int, int, Policy]) -> list[int]:
    """How often each column flags drift, per evaluator change."""
    pop, n, k, change, start, stop, seed, policy = args
    _, x_share, hit = DRIFT_CHANGES[change]
    p, stable = _population(pop, n)
    x = np.zeros(n)
    x[stable[: max(1, round(hit * n))] if hit < 1 else slice(None)] = x_share
    alpha = policy.baseline.drift_alpha
    counts = [0] * len(DRIFT_COLUMNS)
    for rep in range(start, stop):
        rng = _rng(seed, "drift", pop, n, k, change, rep)
        stored = rng.binomial(k, p)
        col = 0
        for _, q, one_way in DRIFT_MODES:
            if q is None:
                counts[col] += _drifted(policy, rng.binomial(k, p * (1 - x)), stored, k)
                col += 1
                continue
            rexec, lost, gained = _replay_flips(rng, stored, k, q, x, one_way=one_way)
            counts[col] += _drifted(policy, rexec, stored, k)
            counts[col + 1] += _paired(stored, k, lost, gained, alpha)
            col += 2
    return counts


def _chunks(total: int, step: int) -> list[tuple[int, int]]:
    return [(lo, min(lo + step, total)) for lo in range(0, total, step)]


def replay_tables(ns: argparse.Namespace, policy: Policy) -> None:
    """Print the three baseline-replay tables (docs/gate.md)."""
    pops = [x for x in ("realistic", "very flaky") if not ns.only or ns.only in x]
    shapes = [(20, 5), (50, 5), (20, 3)]
    alpha = policy.alpha
    began = time.perf_counter()
    with ProcessPoolExecutor(max_workers=ns.jobs) as pool:
        marg_keys = [
            (pop, n, k, sc)
            for pop in pops
            for n, k in shapes
            for sc in ("unchanged", "diffuse", "concentrated")
            if "1" in ns.tables
        ]
        marg_jobs = [
            (key, (*key, lo, hi, ns.seed, policy, ns.check_decide if lo == 0 else 0))
            for key in marg_keys
            for lo, hi in _chunks(ns.reps, 250)
        ]
        marg: dict[tuple[str, int, int, str], dict[str, Counter[str]]] = {
            key: {"fresh": Counter(), "stored": Counter()} for key in marg_keys
        }
        for (key, _), got in zip(
            marg_jobs, pool.map(_marginal, [a for _, a in marg_jobs]), strict=True
        ):
            for mode, tally in got.items():
                marg[key][mode].update(tally)
        cond_keys = [
            (pop, n, k, ks)
            for pop in pops
            for n, k in shapes[:2]
            for ks in (k, 2 * k)
            if "2" in ns.tables
        ]
        cond_jobs = [
            (key, (*key, lo, hi, ns.releases, ns.seed, policy, ns.check_decide))
            for key in cond_keys
            for lo, hi in _chunks(ns.stored_samples, 10)
        ]
        cond: dict[tuple[str, int, int, int], list[tuple[int, ...]]] = {
            key: [] for key in cond_keys
        }
        for (key, _), rows in zip(
            cond_jobs, pool.map(_conditional, [a for _, a in cond_jobs]), strict=True
        ):
            cond[key] += rows
        drift_keys = [
            (pop, n, k, c)
            for pop in pops
            for n, k in shapes[:2]
            for c in range(len(DRIFT_CHANGES))
            if "3" in ns.tables
        ]
        drift_jobs = [
            (key, (*key, lo, hi, ns.seed, policy))
            for key in drift_keys
            for lo, hi in _chunks(ns.reps, 500)
        ]
        drift: dict[tuple[str, int, int, int], np.ndarray] = {
            key: np.zeros(len(DRIFT_COLUMNS), dtype=int) for key in drift_keys
        }
        for (key, _), counts in zip(
            drift_jobs, pool.map(_drift, [a for _, a in drift_jobs]), strict=True
        ):
            drift[key] += np.array(counts)
    elapsed = time.perf_counter() - began
    checked = sum(m["stored"]["checked"] for m in marg.values())
    print(
        f"baseline replay: seed {ns.seed}, {elapsed:.0f}s on {ns.jobs} jobs; {checked} "
        "marginal replicates cross-checked against harness.decide(..., "
        "baseline_replayed=True); the conditional rows assert it for the first release of "
        "--check-decide stored samples per chunk of 10\n"
    )
    if marg:
        print(f"(i) marginal rates, {ns.reps} replicates per row, the same draws in both columns\n")
        print(
            "| population | N | k | scenario | fresh re-run: FAIL % | WARN % | BLOCKED % | "
            "stored sample: FAIL % | WARN % | BLOCKED % |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for (pop, n, k, sc), tallies in marg.items():
            f, st = tallies["fresh"], tallies["stored"]
            r = ns.reps
            print(
                f"| {pop} | {n} | {k} | {sc} | {_pct(f['fail'], r)} | {_pct(f['warn'], r)} | "
                f"{_pct(f['blocked'], r)} | {_pct(st['fail'], r)} | {_pct(st['warn'], r)} | "
                f"{_pct(st['blocked'], r)} |"
            )
    if cond:
        print(
            f"\n(ii) conditional A/A false-FAIL rate given the stored sample: {ns.stored_samples} "
            f"stored samples × {ns.releases} unchanged releases each (rates per stored sample; "
            f"α = {alpha}; the fresh column is the same statistic when every release re-runs "
            "its baseline, i.e. binomial noise alone)\n"
        )
        print(
            "| population | N | k | reference | mean FAIL % | median | 90th pct | max | "
            "share of stored samples > 2α | mean WARN % |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for (pop, n, k, ks), rows in cond.items():
            arr = np.array(rows, dtype=float) / ns.releases
            refs = [("fresh re-run", 0, 1)] if ks == k else []
            for name, fail_col, warn_col in [*refs, (f"stored sample, k = {ks}", 2, 3)]:
                v = arr[:, fail_col]
                print(
                    f"| {pop} | {n} | {k} | {name} | {100 * v.mean():.1f} | "
                    f"{100 * np.median(v):.1f} | {100 * np.quantile(v, 0.9):.1f} | "
                    f"{100 * v.max():.1f} | {100 * (v > 2 * alpha).mean():.1f} % | "
                    f"{100 * arr[:, warn_col].mean():.1f} |"
                )
    if drift:
        print(
            f"\n(iii) blocked for drift, % of {ns.reps} replicates "
            f"(drift_alpha {policy.baseline.drift_alpha})\n"
        )
        print("| population | N | k | evaluator change | " + " | ".join(DRIFT_COLUMNS) + " |")
        print("|---|---|---|---|" + "---|" * len(DRIFT_COLUMNS))
        for (pop, n, k, c), counts in drift.items():
            cells = " | ".join(_pct(int(x), ns.reps) for x in counts)
            print(f"| {pop} | {n} | {k} | {DRIFT_CHANGES[c][0]} | {cells} |")


# --------------------------------------------------------------------------- baseline pool
#
# A baseline pool (harness.pool) holds, per case, the promoted run's trials plus the live
# baseline trials of later runs that passed the drift check against the pool. Each run
# executes `live` baseline trials per case (the rest replayed or not run at all), checks
# them against the pool for drift and compares the candidate with the pool plus them. The
# conditional error a team lives with is conditional on the pool's frozen part; it shrinks
# as the pool grows.


def _grow(
    policy: Policy, rng: np.random.Generator, p: np.ndarray, k: int, s: int, releases: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The pool after 0..releases runs: promoted k trials, then s live per run when they
    pass the drift check against the pool (a drifted run's trials are not pooled)."""
    pool, pool_n = rng.binomial(k, p), np.full(p.size, k)
    out = [(pool.copy(), pool_n.copy())]
    for _ in range(releases):
        live = rng.binomial(s, p)
        if s > 0 and not live_drifted(policy, live, np.full(p.size, s), pool, pool_n):
            pool, pool_n = pool + live, pool_n + s
        out.append((pool.copy(), pool_n.copy()))
    return out


def _tail(seed: int, pool: np.ndarray, pool_n: np.ndarray, size: int, *key: object) -> np.ndarray:
    """Passes among the pool's ``size`` most recent trials per case. Trials are exchangeable
    here, so they are drawn from the pool's counts, on a stream of their own (the other
    draws stay those of the tables measured before the gate looked at recent trials)."""
    rng = _rng(seed, "pool-tail", *key)
    return np.asarray(rng.hypergeometric(pool, pool_n - pool, np.minimum(size, pool_n)))


def _pool_conditional(
    args: tuple[str, int, int, int, int, int, int, int, Policy, tuple[int, ...]],
) -> list[tuple[int, ...]]:
    """Per pool: (FAIL, WARN, BLOCKED) over R unchanged releases, at each of ``ages``."""
    pop, n, k, s, start, stop, releases, seed, policy, ages = args
    p, _ = _population(pop, n)
    rows = []
    for m in range(start, stop):
        pools = _grow(policy, _rng(seed, "pool", pop, n, k, s, m), p, k, s, max(ages))
        row: list[int] = []
        for age in ages:
            pool, pool_n = pools[age]
            tail = _tail(seed, pool, pool_n, k - s, pop, n, k, s, m, age)
            rng = _rng(seed, "pool-releases", pop, n, k, s, m, age)
            tally: Counter[str] = Counter()
            for _ in range(releases):
                live = rng.binomial(s, p)
                window = recent_window(tail, pool_n, live, s, k)
                cand = rng.binomial(k, p)
                tally[pooled_verdict(policy, pool, pool_n, live, s, cand, k, recent=window)] += 1
            row += [tally["fail"], tally["warn"], tally["blocked"]]
        rows.append(tuple(row))
    return rows


def _pool_marginal(
    args: tuple[str, int, int, int, str, int, int, int, Policy, int],
) -> list[int]:
    """(fresh FAIL, WARN, BLOCKED, pool FAIL, WARN, BLOCKED) over fresh draws of everything;
    the pool at age ``age``."""
    pop, n, k, s, scenario, start, stop, seed, policy, age = args
    p, stable = _population(pop, n)
    pc = _shape(p, stable, scenario)
    out = [0] * 6
    idx = {"fail": 0, "warn": 1, "blocked": 2}
    for rep in range(start, stop):
        rng = _rng(seed, "pool-marginal", pop, n, k, s, scenario, rep)
        pool, pool_n = _grow(policy, rng, p, k, s, age)[-1]
        stored, rexec, cand = rng.binomial(k, p), rng.binomial(k, p), rng.binomial(k, pc)
        v = fast_verdict(policy, stored, rexec, cand, k, ())[0]
        if v in idx:
            out[idx[v]] += 1
        live = rng.binomial(s, p)
        tail = _tail(seed, pool, pool_n, k - s, pop, n, k, s, scenario, rep)
        window = recent_window(tail, pool_n, live, s, k)
        w = pooled_verdict(policy, pool, pool_n, live, s, cand, k, recent=window)
        if w in idx:
            out[3 + idx[w]] += 1
    return out


def pool_tables(ns: argparse.Namespace, policy: Policy) -> None:
    """Print the baseline-pool tables (docs/gate.md, "Baseline pool")."""
    pops = [x for x in ("realistic", "very flaky") if not ns.only or ns.only in x]
    lives = [int(x) for x in ns.live.split(",")]
    ages = tuple(int(x) for x in ns.ages.split(","))
    alpha = policy.alpha
    began = time.perf_counter()
    with ProcessPoolExecutor(max_workers=ns.jobs) as pool:
        cond_keys = [
            (pop, n, 5, s) for pop in pops for n in (20, 50) for s in lives if "2" in ns.tables
        ]
        cond_jobs = [
            (key, (*key, lo, hi, ns.releases, ns.seed, policy, ages))
            for key in cond_keys
            for lo, hi in _chunks(ns.stored_samples, 10)
        ]
        cond: dict[tuple[str, int, int, int], list[tuple[int, ...]]] = {
            key: [] for key in cond_keys
        }
        for (key, _), rows in zip(
            cond_jobs, pool.map(_pool_conditional, [a for _, a in cond_jobs]), strict=True
        ):
            cond[key] += rows
        marg_keys = [
            (pop, n, k, s, sc)
            for pop in pops
            for n, k in ((20, 5), (50, 5), (20, 3))[: ns.shapes]
            for s in lives
            for sc in ("unchanged", "diffuse", "concentrated")
            if "1" in ns.tables and s <= k
        ]
        marg_jobs = [
            (key, (*key, lo, hi, ns.seed, policy, ages[-1]))
            for key in marg_keys
            for lo, hi in _chunks(ns.reps, 250)
        ]
        marg: dict[tuple[str, int, int, int, str], np.ndarray] = {
            key: np.zeros(6, dtype=int) for key in marg_keys
        }
        for (key, _), got in zip(
            marg_jobs, pool.map(_pool_marginal, [a for _, a in marg_jobs]), strict=True
        ):
            marg[key] += np.array(got)
    elapsed = time.perf_counter() - began
    print(f"baseline pool: seed {ns.seed}, {elapsed:.0f}s on {ns.jobs} jobs\n")
    if cond:
        print(
            f"(ii) conditional A/A false-FAIL rate given the pool: {ns.stored_samples} pools × "
            f"{ns.releases} unchanged releases each, k = 5; a pool of age R holds the promoted "
            "5 trials per case plus the live trials of R earlier runs (α = "
            f"{alpha})\n"
        )
        print(
            "| population | N | live per case | pool age (runs) | pool trials per case | "
            "FAIL level a | mean FAIL % | median | 90th pct | max | share of pools > 2α | "
            "mean WARN % | mean BLOCKED % | target: 90th pct ≤ 2α, share > 2α ≤ 5 % |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for (pop, n, k, s), rows in cond.items():
            arr = np.array(rows, dtype=float) / ns.releases
            for a, age in enumerate(ages):
                v = arr[:, 3 * a]
                q90, above = np.quantile(v, 0.9), (v > 2 * alpha).mean()
                # "after at most 5 releases": every age is held to the target
                mark = "✅" if q90 <= 2 * alpha and above <= 0.05 else "❌"
                # the level for a pool that admitted every run (a drifted run is not pooled)
                level = pool_level(policy, [k], [k + s * age], [s])
                print(
                    f"| {pop} | {n} | {s} | {age} | {k + s * age} + {s} live | {level:.3g} | "
                    f"{100 * v.mean():.1f} | {100 * np.median(v):.1f} | "
                    f"{100 * q90:.1f} | {100 * v.max():.1f} | {100 * above:.1f} % | "
                    f"{100 * arr[:, 3 * a + 1].mean():.1f} | {100 * arr[:, 3 * a + 2].mean():.1f} "
                    f"| {mark} |"
                )
    if marg:
        print(
            f"\n(i) marginal rates, {ns.reps} replicates per row, pool of age "
            f"{ages[-1]}; the same candidate draws in both columns\n"
        )
        print(
            "| population | N | k | live per case | scenario | fresh re-run: FAIL % | WARN % | "
            "BLOCKED % | pool: FAIL % | WARN % | BLOCKED % |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for (pop, n, k, s, sc), t in marg.items():
            r = ns.reps
            cells = " | ".join(_pct(int(x), r) for x in t)
            print(f"| {pop} | {n} | {k} | {s} | {sc} | {cells} |")
    if "3" in ns.tables:
        print("\n(iii) baseline trials executed per release, k = 5 (the rest come from the pool)\n")
        print("| live per case | N | executed per release | full re-run (k·N) | fewer |")
        print("|---|---|---|---|---|")
        for s in lives:
            for n in (20, 50):
                print(f"| {s} | {n} | {s * n} | {5 * n} | {100 * (1 - s / 5):.0f} % |")


def main() -> None:
    """Run the grid and print a Markdown table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=1000, help="replicates per cell")
    parser.add_argument("--reps-aa", type=int, default=2000, help="replicates per A/A cell")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--only", default=None, help="'realistic' or 'very flaky'")
    parser.add_argument(
        "--check-decide",
        type=int,
        default=0,
        help="replicates per cell also run through harness.gate.decide",
    )
    parser.add_argument(
        "--replay",
        action="store_true",
        help="the baseline-replay tables instead of the grid (--reps per marginal/drift row)",
    )
    parser.add_argument("--stored-samples", type=int, default=200, help="--replay: M")
    parser.add_argument("--releases", type=int, default=100, help="--replay: R per sample")
    parser.add_argument("--tables", default="123", help="--replay: which of (i)-(iii), e.g. 3")
    parser.add_argument(
        "--pool",
        action="store_true",
        help="the baseline-pool tables instead of the grid (--stored-samples pools)",
    )
    parser.add_argument("--live", default="1,2", help="--pool: live baseline trials per case")
    parser.add_argument("--ages", default="0,5", help="--pool: pool ages (runs) of table (ii)")
    parser.add_argument("--shapes", type=int, default=3, help="--pool: (N, k) rows of (i)")
    parser.add_argument(
        "--conditional-share",
        type=float,
        default=None,
        help="--pool: policy baseline.pool.conditional_share (unset: the plain alpha)",
    )
    ns = parser.parse_args()
    loaded = load_policy(ROOT / "policy.yaml")
    policy = loaded.policy.model_copy(update={"critical_cases": (), "required_cases": ()})
    if ns.pool:
        live = max(int(x) for x in ns.live.split(","))
        pp = PoolPolicy(live_trials=live, conditional_share=ns.conditional_share)
        policy = policy.model_copy(
            update={"baseline": policy.baseline.model_copy(update={"pool": pp})}
        )
        print(
            f"policy.yaml version {policy.version} with baseline.pool {pp.model_dump()} "
            f"({policy_digest(policy)[7:19]}), gate rule 2"
        )
        pool_tables(ns, policy)
        return
    if ns.replay:
        print(f"policy.yaml version {policy.version} ({loaded.digest[7:19]}), gate rule 2")
        replay_tables(ns, policy)
        return
    cells = grid(ns.reps, ns.reps_aa, ns.only)
    began = time.perf_counter()
    step = 250
    chunks = [
        (
            i,
            (
                cell,
                lo,
                min(lo + step, cell.reps),
                ns.seed,
                policy,
                ns.check_decide if lo == 0 else 0,
            ),
        )
        for i, cell in enumerate(cells)
        for lo in range(0, cell.reps, step)
    ]
    tallies: dict[int, Counter[str]] = {i: Counter() for i in range(len(cells))}
    checked = 0
    with ProcessPoolExecutor(max_workers=ns.jobs) as pool:
        for (i, _), (tally, nchk) in zip(
            chunks, pool.map(_run, [c for _, c in chunks]), strict=True
        ):
            tallies[i].update(tally)
            checked += nchk
    elapsed = time.perf_counter() - began
    print(
        f"policy.yaml version {policy.version} ({loaded.digest[7:19]}), gate rule 2, seed "
        f"{ns.seed}, {elapsed:.0f}s on {ns.jobs} jobs; {checked} replicates cross-checked "
        "against harness.gate.decide\n"
    )
    print(
        "| group | population | N | k | scenario | reps | FAIL % [95 % CI] | WARN % | "
        "BLOCKED % | target (point estimate) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for i, cell in enumerate(cells):
        t = tallies[i]
        reps = cell.reps
        rates = {v: t[v] / reps for v in ("fail", "warn", "blocked")}
        print(
            f"| {cell.group} | {cell.population} | {cell.n} | {cell.k} | {cell.scenario} | "
            f"{reps} | {_pct(t['fail'], reps)} | {_pct(t['warn'], reps)} | "
            f"{_pct(t['blocked'], reps)} | {_target(cell, rates)} |"
        )


if __name__ == "__main__":
    main()
