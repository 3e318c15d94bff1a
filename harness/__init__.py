"""harness: golden-set release testing for coding agents.

Execution decides whether work moves: every case runs k times in fresh sandboxes, an
executable verifier (never the agent) decides each trial, and a promotion policy recorded
before the first trial compares the candidate with a re-executed baseline.

The names below are the public API. They are loaded on first use, so that
``import harness`` (and the CLI) stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from harness.version import __version__

_EXPORTS: dict[str, str] = {
    "ArmData": "harness.gate.stats",
    "Case": "harness.cases.model",
    "Decision": "harness.gate.decide",
    "ExecResult": "harness.sandbox.base",
    "FakeSandbox": "harness.sandbox.fake",
    "HarnessError": "harness.errors",
    "LoadedCase": "harness.cases.load",
    "LocalSandbox": "harness.sandbox.local",
    "Outcome": "harness.store.records",
    "PhaseContract": "harness.cases.model",
    "Policy": "harness.gate.policy",
    "Project": "harness.project",
    "ReleaseRecord": "harness.store.records",
    "RunRecord": "harness.store.records",
    "Sandbox": "harness.sandbox.base",
    "SandboxSession": "harness.sandbox.base",
    "Store": "harness.store.store",
    "Termination": "harness.sandbox.base",
    "TrialSpec": "harness.trial.spec",
    "Verdict": "harness.store.records",
    "claim_stats": "harness.trial.claims",
    "decide": "harness.gate.decide",
    "decide_run": "harness.decision",
    "judge_verifier": "harness.trial.verify",
    "load_cases": "harness.cases.load",
    "load_policy": "harness.gate.policy",
    "load_project": "harness.project",
    "operating_characteristics": "harness.gate.opchar",
    "pass_at_k": "harness.gate.stats",
    "pass_hat_k": "harness.gate.stats",
    "plan_run": "harness.planning",
    "run_trial": "harness.trial.execute",
    "write_reports": "harness.report",
}

__all__ = [
    "ArmData",
    "Case",
    "Decision",
    "ExecResult",
    "FakeSandbox",
    "HarnessError",
    "LoadedCase",
    "LocalSandbox",
    "Outcome",
    "PhaseContract",
    "Policy",
    "Project",
    "ReleaseRecord",
    "RunRecord",
    "Sandbox",
    "SandboxSession",
    "Store",
    "Termination",
    "TrialSpec",
    "Verdict",
    "__version__",
    "claim_stats",
    "decide",
    "decide_run",
    "judge_verifier",
    "load_cases",
    "load_policy",
    "load_project",
    "operating_characteristics",
    "pass_at_k",
    "pass_hat_k",
    "plan_run",
    "run_trial",
    "write_reports",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # pragma: no cover
    from harness.cases.load import LoadedCase, load_cases
    from harness.cases.model import Case, PhaseContract
    from harness.decision import decide_run
    from harness.errors import HarnessError
    from harness.gate.decide import Decision, decide
    from harness.gate.opchar import operating_characteristics
    from harness.gate.policy import Policy, load_policy
    from harness.gate.stats import ArmData, pass_at_k, pass_hat_k
    from harness.planning import plan_run
    from harness.project import Project, load_project
    from harness.report import write_reports
    from harness.sandbox.base import ExecResult, Sandbox, SandboxSession, Termination
    from harness.sandbox.fake import FakeSandbox
    from harness.sandbox.local import LocalSandbox
    from harness.store.records import Outcome, ReleaseRecord, RunRecord, Verdict
    from harness.store.store import Store
    from harness.trial.claims import claim_stats
    from harness.trial.execute import run_trial
    from harness.trial.spec import TrialSpec
    from harness.trial.verify import judge_verifier
