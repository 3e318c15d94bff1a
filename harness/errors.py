"""The one error tree of `harness`.

::

    HarnessError                     base; the CLI maps each branch to an exit code
    ├── ConfigError                  bad user input: harness.yaml, policy, CLI options  (exit 2)
    │   └── CaseError                a case folder, case.yaml or task-set lock is wrong   (exit 2)
    ├── LockMismatchError            a locked case version's content changed             (exit 2)
    ├── InfraError                   the environment broke; a trial becomes infra_error
    │   ├── SandboxUnavailableError  a sandbox could not be created or could not run a command
    │   └── ContractUnenforceableError
    │                                the backend cannot enforce a contract bound (fail closed)
    ├── EvaluatorError               the verifier could not run as specified; evaluator_error
    ├── BudgetExceededError          the agent overspent a budget the harness measured; fail
    ├── CandidateTooLarge            a candidate tree is over its files/bytes bound: a fail
    ├── StoreError                   the record store is unreadable, locked or inconsistent
    │   ├── StoreIntegrityError      a record or blob differs from the run's manifest (exit 4)
    │   └── StoreWriteError          the store cannot be written (disk full, read-only);
    │                                nothing half-written is left behind     (exit 4)
    └── InvalidRunError              a run cannot be judged (system changed mid-run, …)

Messages are written for the user: they name the file, the field and what was expected.
A command that runs and fails inside a sandbox is *not* an error: it returns an
``ExecResult``. Only a sandbox that cannot run it raises ``SandboxUnavailableError``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "BudgetExceededError",
    "CandidateTooLarge",
    "CaseError",
    "ConfigError",
    "ContractUnenforceableError",
    "EvaluatorError",
    "HarnessError",
    "InfraError",
    "InvalidRunError",
    "LockMismatchError",
    "SandboxUnavailableError",
    "StoreError",
    "StoreIntegrityError",
    "StoreWriteError",
]


class HarnessError(Exception):
    """Base of every error `harness` raises on purpose."""


class ConfigError(HarnessError):
    """User input is wrong: names the file, the field and what was expected."""

    def __init__(
        self,
        message: str,
        *,
        file: Path | str | None = None,
        field: str | None = None,
        line: int | None = None,
    ) -> None:
        self.file = str(file) if file is not None else None
        self.field = field
        self.line = line
        where = ""
        if self.file:
            where = self.file + (f":{line}" if line else "")
        if field:
            where = f"{where} [{field}]" if where else f"[{field}]"
        super().__init__(f"{where}: {message}" if where else message)
        self.message = message


class CaseError(ConfigError):
    """A case definition (folder, case.yaml, referenced file, task-set lock) is wrong."""


class LockMismatchError(HarnessError):
    """A locked case version's content no longer matches the digest in the lock file."""


class InfraError(HarnessError):
    """The environment broke. The trial is neither credited nor blamed: ``infra_error``."""

    def __init__(self, message: str, *, reason: str = "infra") -> None:
        super().__init__(message)
        self.reason = reason


class SandboxUnavailableError(InfraError):
    """A sandbox could not be created, or could not run a command at all."""


class ContractUnenforceableError(InfraError):
    """The backend cannot enforce a bound the contract asks for; fail closed."""

    def __init__(self, message: str, *, bound: str) -> None:
        super().__init__(message, reason=f"unenforceable:{bound}")
        self.bound = bound


class EvaluatorError(HarnessError):
    """The verifier itself could not run as specified: ``evaluator_error``."""


class BudgetExceededError(HarnessError):
    """The agent overspent a budget measured by the harness (turns, tokens at the gateway).

    The trial fails ``budget_exceeded``: the agent's fault, measured, never self-reported.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        limit: float | None = None,
        observed: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.limit = limit
        self.observed = observed


class CandidateTooLarge(HarnessError):
    """The candidate tree holds more entries or bytes than its contract allows.

    Raised while the tree is measured or copied out, before the harness does more work
    for it; the trial fails with the ``files`` or ``disk`` bound (the candidate's fault).
    ``kind`` names the bound: ``files``, ``disk``, ``depth`` (folders nested too deep),
    ``path`` (a path too long) or ``unreadable`` (an entry the agent made that cannot be
    read to copy it); all but ``disk`` fail as ``files``.
    """

    def __init__(self, message: str, *, kind: str, limit: float, observed: float) -> None:
        super().__init__(message)
        self.kind, self.limit, self.observed = kind, limit, observed


class StoreError(HarnessError):
    """The store is unreadable, locked by another run, or inconsistent."""


class StoreIntegrityError(StoreError):
    """A stored record or blob no longer matches the digest the run's manifest committed."""


class StoreWriteError(StoreError):
    """Writing the store failed (disk full, read-only, permissions); the write was undone."""


class InvalidRunError(HarnessError):
    """A run cannot be judged, e.g. its system digest changed while it ran."""
