"""Decision quality of the gate against a naive rule, on simulated agents.

Simulated agents have known per-case pass probabilities; outcomes are drawn directly
(no sandboxes). Every replicate draws three arms — candidate, re-executed baseline and
stored baseline — and runs :func:`harness.gate.decide` with the bundled ``policy.yaml``
(its case lists emptied: the simulated case ids are not the example's). The naive rule
fails when the candidate's aggregate pass rate is more than 5 points below the
re-executed baseline's.

Reported per scenario: the share of replicates the gate fails / warns / blocks, and
the naive rule's fail share, with binomial standard errors. Targets (issue 4): A/A fail
rate <= 5%; detection of a true 10-point drop with N = 50, k = 5 >= 80%.

    python bench/decision_quality.py [--reps 300] [--jobs 2] [--seed 20240601]
"""

from __future__ import annotations

import argparse
import math
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from harness.gate import decide
from harness.policy import Policy, load_policy
from harness.records import Outcome
from harness.stats import ArmData

N_CASES = 50
K = 5
ROOT = Path(__file__).resolve().parent.parent


def realistic() -> np.ndarray:
    """20 stable-pass cases, 5 stable-fail, 25 flaky with p evenly in [0.30, 0.95]."""
    return np.concatenate([np.ones(20), np.zeros(5), np.linspace(0.30, 0.95, 25)])


def very_flaky() -> np.ndarray:
    """Every case flaky: p evenly in [0.2, 0.8]."""
    return np.linspace(0.2, 0.8, N_CASES)


def diffuse_drop(p: np.ndarray) -> np.ndarray:
    """Every case that can drop loses the same amount; mean drop exactly 0.10."""
    movable = p > 0
    delta = 0.10 * len(p) / movable.sum()
    out = p.copy()
    out[movable] -= delta
    assert (out >= 0).all()
    return out


def concentrated_drop(p: np.ndarray) -> np.ndarray:
    """Five stable-pass cases break completely; mean drop exactly 0.10."""
    out = p.copy()
    out[np.flatnonzero(p == 1.0)[:5]] = 0.0
    return out


def partial_drop(p: np.ndarray) -> np.ndarray:
    """Ten stable-pass cases become coin flips (1.0 -> 0.5); mean drop exactly 0.10."""
    out = p.copy()
    out[np.flatnonzero(p == 1.0)[:10]] = 0.5
    return out


SCENARIOS: list[tuple[str, str, np.ndarray, np.ndarray]] = [
    ("A/A", "realistic mix (20 stable, 5 broken, 25 flaky)", realistic(), realistic()),
    ("A/A", "very flaky (all p in [0.2, 0.8])", very_flaky(), very_flaky()),
    ("drop 10 pts", "diffuse: every passing case -0.111", realistic(), diffuse_drop(realistic())),
    ("drop 10 pts", "partial: 10 stable cases -> p=0.5", realistic(), partial_drop(realistic())),
    (
        "drop 10 pts",
        "concentrated: 5 stable cases -> p=0",
        realistic(),
        concentrated_drop(realistic()),
    ),
]


def _arm(rng: np.random.Generator, p: np.ndarray, name: str) -> ArmData:
    draws = rng.random((len(p), K)) < p[:, None]
    return ArmData(
        k=K,
        name=name,
        cases={
            f"case-{i:02d}": tuple(Outcome.PASS if x else Outcome.FAIL for x in row)
            for i, row in enumerate(draws)
        },
    )


def _rate(arm: ArmData) -> float:
    outs = [o for v in arm.cases.values() for o in v]
    return sum(1 for o in outs if o == Outcome.PASS) / len(outs)


def _replicates(args: tuple[int, int, int, int, Policy]) -> tuple[Counter[str], int]:
    """Run replicates [start, stop) of a scenario; count verdicts and warn/fail codes."""
    scenario, start, stop, seed, policy = args
    _, _, p_base, p_cand = SCENARIOS[scenario]
    verdicts: Counter[str] = Counter()
    naive_fails = 0
    for rep in range(start, stop):
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, scenario, rep])))
        stored = _arm(rng, p_base, "stored")
        baseline = _arm(rng, p_base, "baseline")
        candidate = _arm(rng, p_cand, "candidate")
        decision = decide(policy, candidate, baseline, stored)
        verdicts[decision.verdict] += 1
        for code in {r.code for r in decision.reasons if r.severity != "info"}:
            verdicts["reason:" + code] += 1
        naive_fails += _rate(candidate) - _rate(baseline) < -0.05
    return verdicts, naive_fails


def _pct(x: int, n: int) -> str:
    p = x / n
    return f"{100 * p:5.1f}% ±{100 * math.sqrt(p * (1 - p) / n):3.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=20240601)
    ns = parser.parse_args()
    loaded = load_policy(ROOT / "policy.yaml")
    policy = loaded.policy.model_copy(update={"critical_cases": (), "required_cases": ()})
    began = time.perf_counter()
    chunks = [
        (s, lo, min(lo + 50, ns.reps), ns.seed, policy)
        for s in range(len(SCENARIOS))
        for lo in range(0, ns.reps, 50)
    ]
    results: dict[int, tuple[Counter[str], int]] = {}
    with ProcessPoolExecutor(max_workers=ns.jobs) as pool:
        for chunk, (verdicts, naive) in zip(chunks, pool.map(_replicates, chunks), strict=True):
            acc_v, acc_n = results.setdefault(chunk[0], (Counter(), 0))
            acc_v.update(verdicts)
            results[chunk[0]] = (acc_v, acc_n + naive)
    elapsed = time.perf_counter() - began

    print(
        f"policy.yaml version {policy.version} ({loaded.digest[7:19]}), N={N_CASES}, k={K}, "
        f"{ns.reps} replicates per scenario, seed {ns.seed}, {elapsed:.0f}s on {ns.jobs} jobs\n"
    )
    print(
        "| scenario | population | mean p base → cand | gate FAIL | gate warn | "
        "gate blocked | naive FAIL |"
    )
    print("|---|---|---|---|---|---|---|")
    for i, (kind, label, p_base, p_cand) in enumerate(SCENARIOS):
        v, naive = results[i]
        print(
            f"| {kind} | {label} | {p_base.mean():.3f} → {p_cand.mean():.3f} | "
            f"{_pct(v['fail'], ns.reps)} | {_pct(v['warn'], ns.reps)} | "
            f"{_pct(v['blocked'], ns.reps)} | {_pct(naive, ns.reps)} |"
        )
    print("\nReplicates carrying each warn/fail/blocked reason code:\n")
    for i, (kind, label, _, _) in enumerate(SCENARIOS):
        codes = sorted((c[7:], x) for c, x in results[i][0].items() if c.startswith("reason:"))
        print(
            f"- {kind}, {label}: "
            + (", ".join(f"{c} {_pct(x, ns.reps).strip()}" for c, x in codes) or "none")
        )
    print(
        "\nA/A rows: FAIL is the false-fail rate (target <= 5%); drop rows: FAIL is the "
        "detection rate (target >= 80%). ± is one binomial standard error."
    )


if __name__ == "__main__":
    main()
