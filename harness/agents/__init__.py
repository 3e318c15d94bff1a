"""Agent adapters: how a release's agent is invoked in the agent-phase sandbox.

The protocol (environment of the agent command):

``HARNESS_REQUEST``    path of the request (markdown)
``HARNESS_WORKSPACE``  the workspace holding the starting state; the candidate is what is
                       left there
``HARNESS_TOOLS``      JSON list of allowed tool names
``HARNESS_LIMITS``     JSON object: turns, tokens, wall_seconds
``HARNESS_RESULT``     where to write ``{"status": "submitted"|"abstained", "claim": ...,
                       "claimed_success": bool, "turns": n, "usage": {...}}``
``HARNESS_FEEDBACK``   on correction attempts: path of the feedback package (JSON)
``HARNESS_CASE_ID``    the case id; ``HARNESS_TRIAL`` the trial index (0-based);
                       ``HARNESS_ATTEMPT`` the attempt (1-based)
``HARNESS_SEED``       an integer seed derived from the run's recorded seed and (release,
                       case, version, trial, attempt): a scripted agent that draws from it
                       is reproducible, and a resumed run hands it the same seed
``HARNESS_AGENT_DIR``  where the release's declared ``agent.files`` are (read-only)

Adapters: ``command`` (any program), ``simulated`` (the labelled demo agent, no LLM) and
``replay`` (re-applies a candidate recorded by an earlier run; no agent process).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from harness.cases.load import LoadedCase
from harness.errors import EvaluatorError
from harness.project import AGENT_DIR, Release

__all__ = ["AgentInvocation", "agent_seed", "prepare_agent", "stage_agent_files", "trial_seed"]


@dataclass(frozen=True)
class AgentInvocation:
    """What to run in the agent sandbox, and which protocol files to put in ``io``."""

    argv: tuple[str, ...] | None
    """``None`` when no agent process runs (``replay``)."""
    env: dict[str, str]
    io_files: dict[str, bytes] = field(default_factory=dict)
    """File name (inside the io folder) → bytes, written before the agent starts."""


def trial_seed(release: str, case_id: str, version: int, trial: int, attempt: int) -> int:
    """Deterministic seed of one attempt (so a resumed run draws the same way)."""
    key = f"{release}|{case_id}|{version}|{trial}|{attempt}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big")


def agent_seed(
    run_seed: int, release: str, case_id: str, version: int, trial: int, attempt: int
) -> int:
    """``HARNESS_SEED``: from the run's recorded seed, fixed per attempt (resume-safe)."""
    key = f"{run_seed}|{release}|{case_id}|{version}|{trial}|{attempt}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") >> 1


def stage_agent_files(project_root: Path, release: Release, dest: Path) -> Path | None:
    """Copy the release's declared ``agent.files`` into ``dest`` (``None`` when none).

    Symlinks are copied as links, never followed: only declared bytes enter the sandbox.

    Raises:
        EvaluatorError: a declared file vanished since the run was planned.
    """
    if not release.agent.files:
        return None
    dest.mkdir(parents=True, exist_ok=True)
    for rel in release.agent.files:
        src, target = project_root / rel, dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir() and not src.is_symlink():
            shutil.copytree(
                src,
                target,
                symlinks=True,
                dirs_exist_ok=True,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
        elif src.is_file() or src.is_symlink():
            shutil.copy2(src, target, follow_symlinks=False)
        else:
            raise EvaluatorError(f"declared agent file {rel!r} is missing from the project")
    return dest


def prepare_agent(
    release_name: str,
    release: Release,
    lc: LoadedCase,
    *,
    trial: int,
    attempt: int,
    io_dir: str,
    workspace: str,
    feedback: bytes | None,
    run_seed: int = 0,
) -> AgentInvocation:
    """Build the invocation of ``release``'s agent for one attempt of one case."""
    case = lc.case
    files: dict[str, bytes] = {"request.md": case.request.encode()}
    seed = agent_seed(run_seed, release_name, case.id, case.version, trial, attempt)
    env = {
        "HARNESS_REQUEST": f"{io_dir}/request.md",
        "HARNESS_WORKSPACE": workspace,
        "HARNESS_TOOLS": json.dumps(list(case.tools)),
        "HARNESS_LIMITS": case.limits.model_dump_json(),
        "HARNESS_RESULT": f"{io_dir}/result.json",
        "HARNESS_CASE_ID": case.id,
        "HARNESS_TRIAL": str(trial),
        "HARNESS_ATTEMPT": str(attempt),
        "HARNESS_SEED": str(seed),
    }
    if release.agent.files:
        env["HARNESS_AGENT_DIR"] = AGENT_DIR
    if feedback is not None:
        files["feedback.json"] = feedback
        env["HARNESS_FEEDBACK"] = f"{io_dir}/feedback.json"
    spec = release.agent
    if spec.adapter == "replay":
        return AgentInvocation(argv=None, env=env, io_files=files)
    if spec.adapter == "simulated":
        settings = spec.simulated
        sim: dict[str, object] = {
            "seed": trial_seed(release_name, case.id, case.version, trial, attempt),
            "skill": settings.skill_for(case.id) if settings else 1.0,
            "abstain": settings.abstain_for(case.id) if settings else 0.0,
            "overclaim": settings.overclaim if settings else 0.0,
            "learns_from_feedback": settings.learns_from_feedback if settings else 0.0,
            "reference_patch": None,
            "prior_seeds": [
                trial_seed(release_name, case.id, case.version, trial, a) for a in range(1, attempt)
            ],
        }
        if case.reference is not None:
            # The demo agent "knows" the answer; a real agent never gets this file.
            files["simulated-reference.patch"] = lc.path(case.reference.patch).read_bytes()
            sim["reference_patch"] = f"{io_dir}/simulated-reference.patch"
        files["simulation.json"] = json.dumps(sim).encode()
        files["simulated_agent.py"] = (
            resources.files("harness.agents").joinpath("simulated_agent.py").read_bytes()
        )
        env["HARNESS_SIMULATION"] = f"{io_dir}/simulation.json"
        return AgentInvocation(
            argv=("python3", f"{io_dir}/simulated_agent.py"), env=env, io_files=files
        )
    argv = tuple(a.replace("{agent}", AGENT_DIR) for a in spec.command)
    return AgentInvocation(argv=argv, env=env, io_files=files)
