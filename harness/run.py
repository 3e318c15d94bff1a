"""Execute a release run: cases × k × {candidate, baseline}, resumable.

:func:`run_release` owns the whole lifecycle — plan → sweep leftovers → execute → flaky
reruns → decide → report — and tells a :class:`RunObserver` what happens; the CLI only
renders those events and maps the outcome to an exit code.

The plan (:mod:`harness.planning`) is fixed before the first trial: its release record is
written to the store first. Trials already recorded for the same run identity are not run
again; only the coordinator writes records.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import random
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from harness.errors import ConfigError, InfraError
from harness.executors import Executor
from harness.planning import PlannedRun, flaky_rerun_specs, plan_run
from harness.project import Project, Upstream
from harness.store.baseline import BASELINE_REPLAY, load_baseline
from harness.store.records import RunRecord
from harness.store.store import RunHandle, Store
from harness.trial.execute import TrialOutput
from harness.trial.spec import TrialSpec

if TYPE_CHECKING:
    from harness.decision import RunDecision
    from harness.preflight import Proof

__all__ = [
    "RunObserver",
    "RunOutcome",
    "RunRequest",
    "execute",
    "make_executor",
    "model_gateway",
    "run_release",
    "sweep_orphans",
]


def execute(
    handle: RunHandle,
    specs: Sequence[TrialSpec],
    executor: Executor,
    *,
    on_record: Callable[[RunRecord, bool], None] | None = None,
    expected: Mapping[str, float] | None = None,
) -> tuple[int, int]:
    """Run the specs not yet recorded: longest cases first, each case's trials interleaved.

    ``expected``: seconds per case id (:func:`harness.preflight.proofs`); cases
    without a figure go first, as the longest may be among them. Longest first keeps
    workers busy to the end (a long trial started last leaves the others idle). Within a
    case the trials of both arms run in the run's seeded random order, so whatever drifts
    while they run drifts for both arms of that case alike.

    Returns (trials run now, trials already recorded and skipped).
    """
    done = handle.done()
    todo = [s for s in specs if s.key.slug() not in done]
    random.Random(handle.record.seed).shuffle(todo)
    if expected:
        todo.sort(key=lambda s: -expected.get(s.key.case_id, math.inf))  # stable: seeded within
    ran = 0
    output: TrialOutput
    for output in executor.run(todo):
        written = handle.add_trial(output.record, output.blobs)
        ran += int(written)
        if on_record is not None:
            on_record(output.record, written)
    return ran, len(specs) - len(todo)


@contextmanager
def model_gateway(
    plan: PlannedRun,
    store: Store,
    *,
    executor: str = "local",
    baselines_dir: Path | None = None,
    scheduler: str | None = None,
) -> Iterator[object | None]:
    """Serve the run's model gateway while trials run (nothing when no arm calls a model).

    ``--model-replay RUN`` serves a run of the store; ``--model-replay baseline:NAME`` the
    transcript kept by baseline ``NAME`` (under ``baselines_dir``).

    Only the baseline arm is replayed when the source is the run's own baseline
    (:func:`harness.replay.replay_scope`); the candidate then calls its upstream live.
    Checked before the first trial: the key variable of every arm that calls its upstream
    live is set. Under ``--executor dask`` the gateway also serves its link to the
    workers, on the local address that routes to ``scheduler``.

    Raises:
        ConfigError: a key variable is unset, or the scheduler's address is unusable.
        InfraError: the link cannot be served.
    """
    from harness.gateway import Gateway, check_accounts, check_keys

    upstreams: dict[str, Upstream] = {
        arm.name: arm.release.upstream for arm in plan.arms if arm.release.upstream is not None
    }
    if not upstreams:
        yield None
        return
    from harness.replay import baseline_calls, recorded_calls, replay_scope

    source = plan.record.model_replay
    replayed = replay_scope(source, plan.record.baseline)
    live = {a.name: a.release.upstream for a in plan.arms if a.arm not in replayed}
    check_keys({name: up for name, up in live.items() if up is not None})
    check_accounts({name: up for name, up in live.items() if up is not None})
    gateway = Gateway(replay_arms={a.value for a in replayed})
    if source is not None:
        if source.startswith(BASELINE_REPLAY) and baselines_dir is not None:
            name = source.removeprefix(BASELINE_REPLAY)
            found = baseline_calls(load_baseline(baselines_dir, name), replayed)
        else:
            found = recorded_calls(store, store.resolve_run(source))
        for label, calls in found.items():
            gateway.add_replay(label, calls, source)
    with gateway.serving():
        if executor == "dask":
            from harness.gateway import LinkScope, link_host

            scope = LinkScope(
                trials={
                    (arm.arm.value, arm.name, lc.id, lc.version): (up, lc.case.limits)
                    for arm in plan.arms
                    if (up := arm.release.upstream) is not None
                    for lc in plan.cases
                    if lc.id in arm.case_ids
                }
            )
            gateway.serve_link(scope, link_host(scheduler))
        yield gateway


# ------------------------------------------------------------------------------ lifecycle


@dataclass(frozen=True)
class RunRequest:
    """What ``harness run`` was asked to do (everything but the project)."""

    release: str
    k: int = 5
    baseline: str | None = None
    backend: str | None = None
    """Sandbox backend; ``None`` means harness.yaml's."""
    executor: str = "local"
    """``local`` (thread pool) or ``dask``."""
    scheduler: str | None = None
    """Dask scheduler address (``executor="dask"`` only)."""
    jobs: int | None = None
    only: tuple[str, ...] = ()
    """Run only these case ids (empty: all active cases)."""
    downgrade: tuple[str, ...] = ()
    fresh: bool = False
    """Start a new run instead of resuming the one with the same identity."""
    report: bool = True
    """Write the report folder after deciding."""
    model_replay: str | None = None
    """Serve the model responses this recorded run received (upstream stopped)."""


class RunObserver(Protocol):
    """Receives the lifecycle's events, e.g. to draw progress; must not raise."""

    def swept(self, removed: int) -> None:
        """Leftovers of killed runs were removed before starting."""

    def started(self, plan: PlannedRun, run_id: str, done_before: int) -> None:
        """Report that the release record is stored and ``done_before`` trials exist."""

    def planned(self, total: int, done: int) -> None:
        """Report a new trial count (flaky reruns added), ``done`` of them recorded."""

    def trial_finished(self, record: RunRecord, written: bool) -> None:
        """One trial's record was handed to the store (``written``: it was new)."""

    def note(self, message: str) -> None:
        """Report a step before the trials (e.g. the environments' preflight)."""


class _Silent:
    def swept(self, removed: int) -> None:
        pass

    def started(self, plan: PlannedRun, run_id: str, done_before: int) -> None:
        pass

    def planned(self, total: int, done: int) -> None:
        pass

    def trial_finished(self, record: RunRecord, written: bool) -> None:
        pass

    def note(self, message: str) -> None:
        pass


@dataclass(frozen=True)
class RunOutcome:
    """A finished run: its id, the decision under the recorded policy, the reports written."""

    run_id: str
    decision: RunDecision
    reports: tuple[Path, ...] = ()


def _check_executor_options(request: RunRequest) -> None:
    if request.jobs is not None and request.jobs < 1:
        raise ConfigError(f"--jobs must be at least 1, got {request.jobs}", field="--jobs")
    if request.scheduler and request.executor != "dask":
        raise ConfigError("--scheduler needs --executor dask", field="--scheduler")


def make_executor(name: str, scheduler: str | None, jobs: int | None) -> Executor:
    """Start the executor named by ``--executor`` (``local`` or ``dask``).

    The gateway's link reaches Dask workers through :meth:`Executor.ready`.
    """
    if name == "dask":
        from harness.executors.dask import DaskExecutor

        return DaskExecutor(scheduler=scheduler, jobs=jobs)
    from harness.executors.local import LocalExecutor

    return LocalExecutor(jobs)


def sweep_orphans(backend: str) -> int:
    """Remove leftovers of killed runs before starting (never those of live runs)."""
    from harness.sandbox.prune import prune_local

    removed = len(prune_local())
    if backend == "docker":
        from harness.sandbox.docker import prune

        removed += len(prune(orphans_only=True).containers)
    return removed


def _preload_gate(*, paired: bool) -> None:
    """Import the gate on a thread while preflight and trials run.

    The decision's modules and numpy, ``scipy.special`` (the t quantile) and, when
    ``paired`` (a baseline), ``scipy.stats`` take up to a second or two to import, paid
    before the first trial or after the last one otherwise; the run's own import of a
    module waits for this one to finish it.
    """

    def load() -> None:
        # A failure here is the run's own to report, when it imports the same module.
        with contextlib.suppress(Exception):
            import scipy.special

            import harness.decision  # noqa: F401

            if paired:
                import scipy.stats  # noqa: F401

    threading.Thread(target=load, name="preload-gate", daemon=True).start()


def run_release(
    project: Project, request: RunRequest, observer: RunObserver | None = None
) -> RunOutcome:
    """Plan, execute (resuming), add flaky reruns, decide and report one release run.

    Raises:
        ConfigError: bad request or project input (nothing is stored).
        LockMismatchError: cases differ from the task-set lock.
        InfraError: the sandbox backend cannot run at all.
    """
    obs: RunObserver = observer or _Silent()
    _check_executor_options(request)
    # A Dask cluster starts now, while the run plans and proves its cases.
    executor = make_executor(request.executor, request.scheduler, request.jobs)
    try:
        return _run(project, request, obs, executor)
    finally:
        executor.close()


def _run(project: Project, request: RunRequest, obs: RunObserver, executor: Executor) -> RunOutcome:
    from harness.pool import open_pool

    store = Store(project.store_dir)
    plan = plan_run(
        project,
        request.release,
        request.k,
        backend=request.backend,
        baseline=request.baseline,
        downgrade=request.downgrade,
        only=request.only or None,
        fresh=request.fresh,
        store=store,
        model_replay=request.model_replay,
    )
    gateway = ExitStack()  # checks key variables and the executor before anything is stored
    served = gateway.enter_context(
        model_gateway(
            plan,
            store,
            executor=request.executor,
            baselines_dir=project.baselines_dir,
            scheduler=request.scheduler,
        )
    )
    try:
        removed = sweep_orphans(plan.record.backend)
        if removed:
            obs.swept(removed)
        _preload_gate(paired=plan.record.baseline is not None)
        _preflight(project, plan, obs, request.jobs or os.cpu_count() or 1)
        executor.ready(getattr(served, "link", None))  # where Dask workers reach the gateway
    except BaseException:
        gateway.close()
        raise
    try:
        if plan.pool_key is not None:  # the pool's identity is on disk before any trial
            open_pool(store, plan.pool_key)
        with gateway, store.open_run(plan.record) as handle:
            obs.started(plan, handle.run_id, len(handle.done()))
            from harness.preflight import proofs

            proven = proofs(project, plan)
            expected = {k: p.seconds for k, p in proven.items() if p.seconds is not None}
            specs = with_proofs(plan.specs, proven)
            execute(handle, specs, executor, on_record=obs.trial_finished, expected=expected)
            extra = with_proofs(flaky_rerun_specs(plan, store, project), proven)
            if extra:
                done = handle.done()
                obs.planned(
                    len(plan.specs) + len(extra),
                    len(plan.specs) + sum(s.key.slug() in done for s in extra),
                )
                execute(handle, extra, executor, on_record=obs.trial_finished, expected=expected)
            # Every trial is recorded: the workers go while the gate decides.
            threading.Thread(target=executor.close, name="executor-close", daemon=True).start()
            from harness.decision import decide_run  # imported meanwhile (_preload_gate)

            decision = decide_run(project, store, handle.run_id, write=True, handle=handle)
    finally:
        executor.close()  # waits for a close already under way
    reports: tuple[Path, ...] = ()
    try:
        if request.report:
            reports = _write_reports(project, store, handle.run_id, decision)
        else:
            from harness.report.history import write_summary

            write_summary(store, decision)  # the run still appears in the release history
    except OSError as exc:
        # The decision is stored; only its rendering failed (e.g. a full disk).
        raise InfraError(
            f"run {handle.run_id}: the decision ({decision.verdict}) is stored, but the "
            f"report could not be written: {exc}; free the space and run "
            f"`harness report {handle.run_id}`",
            reason="report_write",
        ) from exc
    return RunOutcome(handle.run_id, decision, reports)


def with_proofs(specs: Sequence[TrialSpec], proven: Mapping[str, Proof]) -> list[TrialSpec]:
    """Hand each trial the tests its case's proof passed (no trial may skip them)."""
    return [
        dataclasses.replace(s, proven=proven[s.key.case_id].green_passed)
        if s.key.case_id in proven
        else s
        for s in specs
    ]


def _preflight(project: Project, plan: PlannedRun, obs: RunObserver, jobs: int) -> None:
    """Prove each (case, environment) pair red and green before any trial, ``jobs`` at once."""
    from harness.preflight import preflight_run

    done = preflight_run(
        project,
        plan,
        on_case=lambda cid, env: obs.note(
            f"preflight: validating {cid} in environment {env[7:19]}"
        ),
        jobs=jobs,
    )
    if done:
        obs.note(f"preflight: {len(done)} case(s) validated red and green")


def _write_reports(
    project: Project, store: Store, run_id: str, decision: RunDecision
) -> tuple[Path, ...]:
    """Write the whole report folder (HTML, JUnit, Markdown, JSON, evidence, history, latest)."""
    from harness.report import write_report_folder

    folder = write_report_folder(project, store, run_id, decision)
    extra = (folder.history, folder.latest)
    return (*folder.paths, *(p for p in extra if p is not None))
