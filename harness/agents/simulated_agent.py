"""The `simulated` demo agent. NOT an AI: a labelled stand-in for examples and tests.

Runs inside the agent sandbox with the standard protocol variables plus
``HARNESS_SIMULATION`` (path to its settings). Per trial it draws, from a seed fixed by
(release, case, trial, attempt), whether to abstain, to apply the case's reference
change intact, or to botch it (apply it with one non-blank added line dropped). On a
correction attempt that received feedback it fixes the change with the configured
probability. It writes ``HARNESS_RESULT`` like any agent, and may overclaim success.

Standard library only: the same file runs in the local sandbox and in containers.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from typing import Any

_HUNK = re.compile(r"^@@ ")


def _drop_one_line(patch: str, rng: random.Random) -> str:
    """Return ``patch`` with one non-trivial added line of a non-test file removed."""
    lines = patch.splitlines(keepends=True)
    current = ""
    candidates = []
    for i, line in enumerate(lines):
        if line.startswith("+++ "):
            current = line[4:].strip()
            continue
        if line.startswith("+") and not line.startswith("+++"):
            body = line[1:].strip()
            is_test = "/test" in current or current.startswith("b/test")
            if body and not body.startswith("#") and not is_test:
                candidates.append(i)
    if not candidates:
        return ""
    drop = rng.choice(candidates)
    return "".join(line for i, line in enumerate(lines) if i != drop)


def _decide(sim: dict[str, Any], seed: int, had_feedback: bool, patch: str) -> tuple[str, str]:
    """Replayable decision of one attempt: ("abstain", "") or ("submit", change)."""
    rng = random.Random(seed)
    if rng.random() < sim.get("abstain", 0.0):
        return "abstain", ""
    intact = rng.random() < sim.get("skill", 1.0)
    if not intact and had_feedback and rng.random() < sim.get("learns_from_feedback", 0.0):
        intact = True
    change = patch if intact else _drop_one_line(patch, rng)
    return ("intact" if intact else "botched"), change


def _apply(patch: str, workspace: str, reverse: bool = False) -> bool:
    if not patch.strip():
        return True
    done = subprocess.run(
        ["git", "apply", "--recount", "--whitespace=nowarn", *(["-R"] if reverse else []), "-"],
        input=patch.encode(),
        cwd=workspace,
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        sys.stderr.write(done.stderr.decode(errors="replace"))
    return done.returncode == 0


def main() -> int:
    """Act once, write the result file, exit 0 (or 1 if the patch cannot be applied)."""
    with open(os.environ["HARNESS_SIMULATION"], encoding="utf-8") as fh:
        sim = json.load(fh)
    workspace = os.environ["HARNESS_WORKSPACE"]
    had_feedback = bool(os.environ.get("HARNESS_FEEDBACK"))
    result: dict[str, object] = {"turns": 1, "usage": {"input_tokens": 0, "output_tokens": 0}}
    patch = ""
    if sim.get("reference_patch"):
        with open(sim["reference_patch"], encoding="utf-8") as fh:
            patch = fh.read()
    # A correction attempt starts from the previous candidate: undo this agent's own
    # earlier changes (replayed from their seeds) before acting again.
    earlier = [
        _decide(sim, seed, i > 0, patch) for i, seed in enumerate(sim.get("prior_seeds", []))
    ]
    for _kind, change in reversed(earlier):
        _apply(change, workspace, reverse=True)
    kind, change = _decide(sim, sim["seed"], had_feedback, patch)
    rng = random.Random(sim["seed"] ^ 0x5EED)
    if kind == "abstain":
        result.update(status="abstained", claim="declined: request cannot be done safely")
    else:
        if not _apply(change, workspace):
            result.update(status="submitted", claim="patch did not apply", claimed_success=False)
            _write(result)
            return 1
        claims = kind == "intact" or rng.random() < sim.get("overclaim", 0.0)
        result.update(
            status="submitted",
            claim="applied the fix; tests pass" if claims else "attempted a fix; unsure",
            claimed_success=claims,
        )
    _write(result)
    return 0


def _write(result: dict[str, object]) -> None:
    with open(os.environ["HARNESS_RESULT"], "w", encoding="utf-8") as fh:
        json.dump(result, fh)


if __name__ == "__main__":
    sys.exit(main())
