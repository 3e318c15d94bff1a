"""Sandboxes: the :class:`Sandbox` protocol, the local backend and the conformance suite.

The Docker backend lives in ``harness.sandbox.docker`` and is imported on demand (it needs
the docker SDK and an engine); backends are looked up by name in ``harness.sandbox.registry``.
"""

from harness.sandbox._seccomp import seal_program
from harness.sandbox.base import (
    Bound,
    DropBox,
    ExecResult,
    Sandbox,
    SandboxPaths,
    SandboxSession,
    Termination,
)
from harness.sandbox.conformance import Check, conformance_checks
from harness.sandbox.local import LocalSandbox, LocalSession

__all__ = [
    "Bound",
    "Check",
    "DropBox",
    "ExecResult",
    "LocalSandbox",
    "LocalSession",
    "Sandbox",
    "SandboxPaths",
    "SandboxSession",
    "Termination",
    "conformance_checks",
    "seal_program",
]
