"""Stored records: verdicts, run records (one per trial) and release records.

Every record is a frozen pydantic model with a ``schema_version``. Records are written
once, atomically, and never edited: a later decision is a new record.
"""

from __future__ import annotations

import datetime as dt
import enum
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, Literal, get_args

from pydantic import Field

from harness.frozen import Frozen as _Frozen
from harness.sandbox.base import Bound, Termination
from harness.system import SystemDefinition

__all__ = [
    "STEP_NAMES",
    "AgentClaim",
    "Arm",
    "AttemptRecord",
    "CheckResult",
    "FailureType",
    "ManifestEntry",
    "ModelCall",
    "ModelUsage",
    "Outcome",
    "PhaseRecord",
    "ReleaseRecord",
    "ResultRecord",
    "RunRecord",
    "StepClock",
    "StepName",
    "TrialKey",
    "TrialSteps",
    "ValidityRecord",
    "Verdict",
]

RECORD_SCHEMA_VERSION: Final = 1


class Outcome(str, enum.Enum):
    """The four verdict kinds, never blurred."""

    PASS = "pass"
    FAIL = "fail"
    """The candidate's fault; carries a :class:`FailureType`."""
    INFRA_ERROR = "infra_error"
    """The environment broke: not credited, not blamed, counted, blocks promotion."""
    EVALUATOR_ERROR = "evaluator_error"
    """The verifier itself could not run as specified."""


class FailureType(str, enum.Enum):
    """Why a candidate failed."""

    TEST_FAILURE = "test_failure"
    NO_TESTS = "no_tests"
    MISSING_ARTIFACT = "missing_artifact"
    INVALID_ARTIFACT = "invalid_artifact"
    TIMEOUT = "timeout"
    CPU = "cpu"
    MEMORY = "memory"
    PIDS = "pids"
    DISK = "disk"
    FILES = "files"
    """The candidate tree holds more files and folders than its contract allows."""
    TAMPERING = "tampering"
    """The candidate changed what the verifier owns, and the policy counts that as a fail."""
    AGENT_ERROR = "agent_error"
    BUDGET_EXCEEDED = "budget_exceeded"
    ABSTAINED = "abstained"
    UNEXPECTED_CHANGE = "unexpected_change"
    """A case that expects abstention received a submitted change."""
    NO_CHANGE = "no_change"
    """The agent submitted but left the workspace untouched."""


class Arm(str, enum.Enum):
    """Which system a trial belongs to in a gated run."""

    CANDIDATE = "candidate"
    BASELINE = "baseline"


class CheckResult(_Frozen):
    """One mechanical check the verdict depends on (exit status, one artifact rule, …)."""

    name: str
    ok: bool
    detail: str = ""


class Verdict(_Frozen):
    """The judgement of one attempt: an outcome, a failure type and the checks behind it."""

    outcome: Outcome
    failure_type: FailureType | None = None
    reason: str = ""
    """One line a reviewer can read: what decided this verdict."""
    checks: tuple[CheckResult, ...] = ()
    failing_tests: tuple[str, ...] = ()
    """Failing test ids from the structured report, when there is one."""
    tests_run: int | None = None


class PhaseRecord(_Frozen):
    """One sandboxed command (agent or verifier) as it ran."""

    phase: Literal["agent", "verifier"]
    argv: tuple[str, ...]
    exit_code: int | None
    signal: int | None = None
    termination: Termination
    bound: Bound | None = None
    duration_s: float
    cpu_s: float | None = None
    peak_memory_mb: float | None = None
    stdout_blob: str | None = None
    """Content address of the captured stdout in the blob store."""
    stderr_blob: str | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    excerpt: str = ""
    """Mechanically selected excerpt of the output (failures, tracebacks, tail)."""
    image_id: str | None = None
    downgraded: tuple[str, ...] = ()


class AgentClaim(_Frozen):
    """What the agent said about itself. Recorded; never changes a verdict."""

    status: Literal["submitted", "abstained", "missing", "invalid"]
    claim: str | None = None
    claimed_success: bool | None = None
    turns: int | None = None
    usage: dict[str, float] = Field(default_factory=dict)


class ModelCall(_Frozen):
    """One call of the agent to the model through the harness's gateway."""

    turn: int = Field(ge=0)
    """1-based index of the forwarded call; 0 for a call the gateway refused."""
    request_blob: str
    """The agent's request body, as received (the key is never in it)."""
    response_blob: str | None = None
    """The upstream's response body (plain JSON or the SSE stream), as received."""
    status: int
    """Status the agent got back."""
    stream: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    upstream_wait_s: float = 0.0
    refused: str | None = None
    """Why the gateway refused or failed the call (``model``, ``budget``, ``upstream``,
    ``response_seconds`` for a completion cut at the upstream's response bound,
    ``response_bytes`` for an answer cut at the gateway's byte bound…)."""


class ModelUsage(_Frozen):
    """What the gateway measured in one agent phase: never the agent's own claim."""

    upstream: str
    """The upstream's base URL."""
    model: str
    """The pinned model id."""
    answered_model: str | None = None
    """The model id the upstream answered with (checked against the pinned one)."""
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    """From the release's price table, in its currency units."""
    upstream_wait_s: float = 0.0
    """Seconds spent waiting on the upstream (queueing, retries and backoff included)."""
    calls: tuple[ModelCall, ...] = ()
    """The transcript: every call with its request and response blobs."""
    fault: str | None = None
    """The upstream fault that made the attempt an infra_error, if any."""
    budget: str | None = None
    """The budget the agent overspent (the call was refused, or cut at the upstream's
    ``response_seconds`` while its completion was still arriving), if any."""
    replayed_from: str | None = None
    """Set when responses were served from a recorded run instead of the upstream."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


class AttemptRecord(_Frozen):
    """One attempt of a trial (correction attempts add more)."""

    attempt: int = Field(ge=1)
    candidate_digest: str | None = None
    """Tree digest of the workspace after the agent: the candidate identity."""
    diff_blob: str | None = None
    candidate_blob: str | None = None
    """Tarball of the candidate tree (lets ``replay`` re-verify it)."""
    diff_stats: dict[str, int] = Field(default_factory=dict)
    agent: PhaseRecord | None = None
    verifier: PhaseRecord | None = None
    mutants: tuple[PhaseRecord, ...] = ()
    """The verifier's runs on the case's mutants, in the case's order (they stop at the
    first mutant the tests do not catch); judged by the verdict's ``mutant.*`` checks."""
    claim: AgentClaim | None = None
    verdict: Verdict
    feedback_blob: str | None = None
    """Feedback package handed to this attempt (attempt 2 onwards)."""
    tampering: tuple[str, ...] = ()
    """Evidence of the agent touching what it should not (overwritten, ignored)."""
    left_out: tuple[str, ...] = ()
    """Files the agent added under protected test paths (its own tests), left out of the
    verifier's tree: noted, not tampering."""
    infra_retries: int = 0
    """How many times the harness's infrastructure ended this attempt and it was run again."""
    infra_tries: tuple[AttemptRecord, ...] = ()
    """The tries of this attempt that infrastructure ended, in order, kept whole: their
    phases, reasons and paid model calls. Never judged (the attempt's verdict is its own);
    counted in the cost. Records written before they were kept have ``infra_retries`` alone."""
    model: ModelUsage | None = None
    """Model calls measured by the gateway (agents with an upstream)."""

    def phases(self) -> tuple[PhaseRecord, ...]:
        """Return this try's sandboxed commands: the agent's, the verifier's, its mutant runs."""
        return tuple(p for p in (self.agent, self.verifier, *self.mutants) if p is not None)

    def tries(self) -> tuple[AttemptRecord, ...]:
        """Return every try of this attempt: the discarded infra tries first, this one last."""
        return (*self.infra_tries, self)


class TrialKey(_Frozen):
    """Identity of one trial within a run."""

    arm: Arm
    release: str
    case_id: str
    case_version: int
    trial: int = Field(ge=0)

    def slug(self) -> str:
        """Stable file-name-safe id."""
        return f"{self.arm.value}--{self.case_id}--v{self.case_version}--t{self.trial:03d}"


StepName = Literal[
    "workspace",
    "lease",
    "agent",
    "candidate",
    "verifier_tree",
    "cross_check",
    "verifier",
    "feedback",
    "store",
]
"""The steps of a trial whose time the harness records (see :class:`TrialSteps`)."""

STEP_NAMES: Final[tuple[StepName, ...]] = get_args(StepName)


class TrialSteps(_Frozen):
    """Where one trial's wall time went, in seconds per step, every attempt summed.

    Steps are measured with a monotonic clock and never overlap (a step inside another is
    taken out of the outer one), so the steps before ``store`` add up to at most ``wall_s``;
    the rest of ``wall_s`` is bookkeeping between steps. The agent's and the verifier's own
    command times stay on the phase records (``duration_s``): the harness's overhead is what
    the trial cost beyond them (:meth:`overhead_s`).
    """

    wall_s: float = Field(ge=0)
    """The trial from start to its record, before the store (``store`` comes after it)."""
    workspace: float = Field(default=0.0, ge=0)
    """Starting tree built and hashed, copied into the agent's sandbox with its files."""
    lease: float = Field(default=0.0, ge=0)
    """Waiting for an agent phase's upstream lease: other trials' phases holding the
    upstream's slots, and the lease's rate spacing. Neither the harness's time nor the
    agent's: left out of :meth:`overhead_s` and of ``retry.wall_seconds``."""
    agent: float = Field(default=0.0, ge=0)
    """The agent phase: its sandbox opened and closed, the agent's command, its result."""
    candidate: float = Field(default=0.0, ge=0)
    """The candidate copied out of the agent's sandbox, diffed, hashed and archived."""
    verifier_tree: float = Field(default=0.0, ge=0)
    """The verifier-owned tree built (protected paths restored, hidden files staged) and
    copied into the verifier's sandbox."""
    cross_check: float = Field(default=0.0, ge=0)
    """The verifier command's start probe, its artifacts read, the runner's evidence and
    canary checked, the verdict judged."""
    verifier: float = Field(default=0.0, ge=0)
    """The verifier phase: its sandbox opened and closed and the verifier's command."""
    feedback: float = Field(default=0.0, ge=0)
    """Feedback packages built between attempts (with the public command, when declared)."""
    store: float | None = Field(default=None, ge=0)
    """The trial's blobs written to the store by the run's writer, after ``wall_s``. The
    record's own file write follows and cannot be in it."""

    def steps_s(self) -> float:
        """Return the seconds of the steps inside the trial (all but ``store``)."""
        return (
            self.workspace
            + self.lease
            + self.agent
            + self.candidate
            + self.verifier_tree
            + self.cross_check
            + self.verifier
            + self.feedback
        )

    def overhead_s(self, commands_s: float) -> float:
        """Return the harness's own seconds: the trial and its store, less ``commands_s``.

        ``commands_s`` is the agent's and verifier's commands as their phase records timed them.
        The ``lease`` wait (other trials' time, not the harness's) is left out too.
        """
        return max(0.0, self.wall_s + (self.store or 0.0) - commands_s - self.lease)


class StepClock:
    """Times the named steps of one trial (:class:`TrialSteps`) with a monotonic clock.

    Use :meth:`step` as a context manager around each step. A step entered inside another
    is exclusive: its time is taken out of the enclosing step, so no second is counted
    twice. One clock belongs to one thread (one trial).
    """

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.totals: dict[StepName, float] = {}
        self._inner: list[float] = []

    @contextmanager
    def step(self, name: StepName) -> Iterator[None]:
        """Add the time spent in the block (less any nested step's) to ``name``."""
        start = time.monotonic()
        self._inner.append(0.0)
        try:
            yield
        finally:
            elapsed = time.monotonic() - start
            inner = self._inner.pop()
            self.totals[name] = self.totals.get(name, 0.0) + max(0.0, elapsed - inner)
            if self._inner:
                self._inner[-1] += elapsed

    def steps(self) -> TrialSteps:
        """Return the steps so far, with ``wall_s`` from the clock's creation until now."""
        return TrialSteps.model_validate({"wall_s": time.monotonic() - self.started, **self.totals})


class RunRecord(_Frozen):
    """Immutable record of one trial: what ran, where, and what execution decided."""

    schema_version: Literal[1] = RECORD_SCHEMA_VERSION
    key: TrialKey
    case_digest: str
    system_digest: str
    backend: str
    backend_info: dict[str, str] = Field(default_factory=dict)
    attempts: tuple[AttemptRecord, ...] = Field(min_length=1)
    verdict: Verdict
    """The trial's verdict: the last attempt's."""
    stop_reason: str = "single_attempt"
    """Why the correction loop stopped (``passed``, ``attempt_limit``, …)."""
    environment_digest: str | None = None
    """Digest of the case environment the verifier (and the agent's shell) ran in."""
    agent_environment_digest: str | None = None
    """Digest of the release's agent environment, when it declares one."""
    started_at: dt.datetime
    finished_at: dt.datetime
    harness_version: str
    steps: TrialSteps | None = None
    """The harness's own time per step; None in records written before it was measured."""

    def tries(self) -> tuple[AttemptRecord, ...]:
        """Return every try of every attempt, infra tries included, in the order they ran."""
        return tuple(t for a in self.attempts for t in a.tries())

    def commands_s(self) -> float:
        """Return the agent's and verifier's command seconds over every try."""
        return sum(p.duration_s for a in self.tries() for p in a.phases())

    def overhead_s(self) -> float | None:
        """Return the harness's own seconds beyond the commands (None: no steps recorded)."""
        return None if self.steps is None else self.steps.overhead_s(self.commands_s())

    @property
    def outcome(self) -> Outcome:
        """Shorthand for ``verdict.outcome``."""
        return self.verdict.outcome


class ReleaseRecord(_Frozen):
    """A run of a release over a task set: written before the first trial, then sealed.

    The ``opened`` record carries everything fixed before execution (the promotion
    policy's digest above all); the ``sealed`` record adds the trial ids and the result.
    Both are separate immutable files.
    """

    schema_version: Literal[1] = RECORD_SCHEMA_VERSION
    run_id: str
    release: str
    system_digest: str
    system: SystemDefinition
    """The components that define the system, as hashed (``system_digest`` is its digest)."""
    task_set: str
    task_set_digest: str
    cases: dict[str, str]
    """case id → case digest of the versions this run uses."""
    judgment_cases: tuple[str, ...] = ()
    """Cases in the judgment lane: run and reported apart, never scored."""
    critical_cases: tuple[str, ...] = ()
    """Cases flagged critical in their case files."""
    k: int = Field(ge=1)
    backend: str
    downgrade: tuple[str, ...] = ()
    """Bounds the user explicitly allowed the backend not to enforce."""
    baseline: str | None = None
    baseline_system_digest: str | None = None
    baseline_digest: str | None = None
    """Tree digest of the stored baseline folder the run compares against."""
    policy_digest: str | None = None
    policy: dict[str, Any] | None = None
    policy_file_digest: str | None = None
    """Digest of the policy file's raw bytes when the run was opened."""
    model_replay: str | None = None
    """Model replay: the recorded run whose responses the gateway serves (upstream stopped)."""
    baseline_pool: str | None = None
    """Id of the baseline pool the run is compared with (policy ``baseline.pool``), fixed
    before the first trial; None: no pool."""
    seed: int = 0
    """Seed of the interleaved trial order (recorded so the order can be reproduced)."""
    created_at: dt.datetime
    harness_version: str


GENESIS: Final = "sha256:" + "0" * 64
"""The chain head before a run's first manifest entry."""


class ManifestEntry(_Frozen):
    """One line of a run's ``manifest.jsonl``: a file the run committed, and its digest.

    The manifest is the commit point: a record is part of the run once, and only once,
    its entry is appended. Entries form a hash chain (``head`` covers ``prev`` and this
    entry), so an edited, dropped or reordered line breaks every head after it.
    """

    schema_version: Literal[1] = RECORD_SCHEMA_VERSION
    seq: int = Field(ge=0)
    """Position in the manifest, from 0."""
    path: str
    """File relative to the run folder (``release.json``, ``trials/<slug>.json``, …)."""
    digest: str
    """sha256 of the file's bytes as written."""
    blobs: tuple[str, ...] = ()
    """Digests of the blobs the record refers to (checked to exist and match)."""
    prev: str
    """Chain head before this entry (:data:`GENESIS` for the first)."""
    head: str
    """sha256 over this entry's other fields: the chain head after it."""


class ValidityRecord(_Frozen):
    """``validity.json``: the end-of-run system re-check, written once, and the run's seal.

    ``manifest_head`` anchors every record committed before it: editing a record and
    recomputing the manifest changes the chain, which no longer reaches this head.
    """

    schema_version: Literal[1] = RECORD_SCHEMA_VERSION
    valid: bool
    reasons: tuple[str, ...] = ()
    """Why the run is invalid (system, cases or harness changed while it ran)."""
    checked_at: dt.datetime
    manifest_entries: int = Field(ge=0)
    """How many manifest entries the seal covers."""
    manifest_head: str
    """Chain head after entry ``manifest_entries - 1``."""


class ResultRecord(_Frozen):
    """``result-<n>.json``: one gate decision as computed at the end of a run (never edited)."""

    schema_version: Literal[1] = RECORD_SCHEMA_VERSION
    computed_at: dt.datetime
    run_id: str
    release: str
    system_digest: str
    verdict: Literal["pass", "warn", "fail", "blocked"]
    notes: tuple[str, ...] = ()
    judgment_cases: tuple[str, ...] = ()
    decision: dict[str, Any]
    """The gate's :class:`~harness.gate.decide.Decision` as JSON (its own schema)."""

    def reason_lines(self) -> tuple[str, ...]:
        """Return ``[severity] message`` for each reason of the stored decision, in order.

        The one reader of :attr:`decision` by key, so that callers need not know its layout.
        """
        reasons = self.decision.get("reasons", [])
        return tuple(f"[{r.get('severity')}] {r.get('message')}" for r in reasons)
