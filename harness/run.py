"""Plan and execute a release run: cases × k × {candidate, baseline}, resumable.

:func:`run_release` owns the whole lifecycle — plan → sweep leftovers → execute → flaky
reruns → decide → report — and tells a :class:`RunObserver` what happens; the CLI only
renders those events and maps the outcome to an exit code.

The plan is fixed before the first trial: the release record (system digest, task-set
digest, case digests, k, backend, downgrades, baseline, promotion-policy digest, the seed
of the interleaved order) is written to the store first. Trials already recorded for the
same run identity are not run again; only the coordinator writes records.
"""

from __future__ import annotations

import datetime as dt
import random
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from harness import __version__
from harness.baseline import BASELINE_REPLAY, Baseline, load_baseline
from harness.cases.load import LoadedCase, load_cases
from harness.cases.lock import check_lock, read_lock, task_set_digest
from harness.digest import digest_json, short
from harness.env.plan import PreparedEnvs, prepare_for_backend
from harness.errors import ConfigError, InfraError, InvalidRunError, LockMismatchError
from harness.executors import Executor
from harness.policy import LoadedPolicy, Policy, load_policy
from harness.project import MAX_K, Project, Release, Upstream, agent_code_digests
from harness.records import Arm, ReleaseRecord, RunRecord, TrialKey
from harness.sandbox.prune import owned_prefix
from harness.store import RunHandle, Store
from harness.trial import TrialOutput, TrialSpec

if TYPE_CHECKING:
    from harness.decision import RunDecision
    from harness.gateway import LinkAddress

__all__ = [
    "PlannedRun",
    "RunObserver",
    "RunOutcome",
    "RunRequest",
    "case_images",
    "check_system_unchanged",
    "execute",
    "flaky_rerun_specs",
    "load_locked_cases",
    "make_executor",
    "model_gateway",
    "plan_run",
    "run_release",
    "sweep_orphans",
]

DOWNGRADABLE = frozenset({"network", "memory", "pids", "cpu", "disk", "read_only_root"})


@dataclass(frozen=True)
class PlannedRun:
    """A run whose identity and trial list are fixed."""

    record: ReleaseRecord
    specs: list[TrialSpec]
    cases: list[LoadedCase]
    baseline: Baseline | None
    arms: list[_ArmPlan]
    policy: Policy | None
    envs: PreparedEnvs = field(default_factory=PreparedEnvs)
    replayed_baseline: frozenset[tuple[str, int]] | None = None
    """Baseline replay (``--model-replay baseline:NAME``, :func:`harness.replay.replay_scope`):
    the baseline arm runs only these recorded (case, trial) pairs of the stored baseline."""

    def keep(self, specs: list[TrialSpec]) -> list[TrialSpec]:
        """Drop the baseline trials that baseline replay has no recorded responses for."""
        only = self.replayed_baseline
        if only is None:
            return specs
        return [
            s
            for s in specs
            if s.key.arm is not Arm.BASELINE or (s.key.case_id, s.key.trial) in only
        ]


def load_locked_cases(project: Project, only: Sequence[str] | None = None) -> list[LoadedCase]:
    """Load the active cases and check them against the task-set lock.

    Raises:
        LockMismatchError: a case is unlocked or changed beneath its locked digest.
    """
    cases = [lc for lc in load_cases(project.cases_dir, only) if lc.active]
    if not cases:
        raise ConfigError("no active cases to run", file=project.cases_dir)
    mismatches = check_lock(cases, read_lock(project.lock_path, project.file.task_set))
    if mismatches:
        raise LockMismatchError(
            f"{project.lock_path}: " + "; ".join(m.describe() for m in mismatches)
        )
    return cases


def _policy(project: Project) -> LoadedPolicy | None:
    path = project.policy_path
    return load_policy(path) if path is not None else None


def plan_run(
    project: Project,
    release_name: str,
    k: int,
    *,
    backend: str | None = None,
    baseline: str | None = None,
    downgrade: Sequence[str] = (),
    only: Sequence[str] | None = None,
    fresh: bool = False,
    store: Store | None = None,
    model_replay: str | None = None,
) -> PlannedRun:
    """Fix the identity and the trial list of a run.

    Raises:
        ConfigError: unknown release, baseline, downgrade name or invalid k.
        LockMismatchError: cases differ from the lock.
    """
    if not 1 <= k <= MAX_K:
        raise ConfigError(f"--k must be between 1 and {MAX_K}, got {k}", field="--k")
    bad = sorted(set(downgrade) - DOWNGRADABLE)
    if bad:
        raise ConfigError(
            f"cannot downgrade {', '.join(bad)}; "
            f"expected any of: {', '.join(sorted(DOWNGRADABLE))}",
            field="--allow-unenforced",
        )
    from harness.replay import replay_scope, replayable_trials

    replayed = replay_scope(model_replay, baseline)  # bad combinations fail first
    release = project.release(release_name)
    backend = backend or project.file.backend
    cases = load_locked_cases(project, only)
    ts_digest = task_set_digest(project.file.task_set, cases)
    # Bad input first: the policy is read before anything is built.
    loaded_policy = _policy(project)
    policy = loaded_policy.policy if loaded_policy is not None else None
    pol_digest = loaded_policy.digest if loaded_policy is not None else None
    pol_file = loaded_policy.file_digest if loaded_policy is not None else None
    sysdef = project.system_definition(release_name, ts_digest, __version__)
    envs, env_bases = prepare_for_backend(project, cases, {release_name: release}, backend)
    sysdef.update(envs.system_entry(release_name, [lc.id for lc in cases]))
    images = case_images(cases, env_bases) if backend == "docker" else {}
    if images:
        sysdef["case_images"] = images
    sys_digest = digest_json(sysdef)
    pol = policy.model_dump(mode="json") if policy is not None else None

    base: Baseline | None = None
    base_release: Release | None = None
    base_digest: str | None = None
    if baseline is not None:
        base = load_baseline(project.baselines_dir, baseline)
        base_release = base.release_definition
        base_def = dict(
            base.file.release.system, task_set_digest=ts_digest, harness_version=__version__
        )
        # What actually runs now: the harness's own agent code and case images.
        base_def["agent_code"] = agent_code_digests(base_release)
        if base_release.agent.files or "agent_files" in base_def:
            try:
                now = project.agent_file_digests(baseline, base_release)
            except ConfigError as exc:
                raise base.stale(exc.message) from None
            base.check_agent_files(now)
        base_def.pop("case_images", None)
        for key in ("environments", "agent_environment"):
            base_def.pop(key, None)
        envs.agents.update(
            prepare_for_backend(project, (), {baseline: base_release}, backend)[0].agents
        )
        base_def.update(envs.system_entry(baseline, [lc.id for lc in cases]))
        if images:
            base_def["case_images"] = images
        base_digest = digest_json(base_def)

    identity = {
        "release": release_name,
        "system_digest": sys_digest,
        "k": k,
        "backend": backend,
        "downgrade": sorted(downgrade),
        "baseline": baseline,
        "baseline_system_digest": base_digest,
        "baseline_digest": base.digest if base is not None else None,
        "policy_digest": pol_digest,
    }
    if model_replay is not None:  # a replay is another run than a fresh sample
        identity["model_replay"] = model_replay
    run_id = f"{release_name}-{short(digest_json(identity), 10)}"
    if fresh and store is not None:
        n = 2
        stem = run_id
        while store.run_dir(run_id).exists():
            run_id = f"{stem}.{n}"
            n += 1
    record = ReleaseRecord(
        run_id=run_id,
        release=release_name,
        system_digest=sys_digest,
        system=sysdef,
        task_set=project.file.task_set,
        task_set_digest=ts_digest,
        cases={lc.id: lc.digest for lc in cases},
        judgment_cases=tuple(lc.id for lc in cases if lc.case.lane == "judgment"),
        critical_cases=tuple(lc.id for lc in cases if lc.case.critical),
        k=k,
        backend=backend,
        downgrade=tuple(sorted(downgrade)),
        baseline=baseline,
        baseline_system_digest=base_digest,
        baseline_digest=base.digest if base is not None else None,
        policy_digest=pol_digest,
        policy=pol,
        policy_file_digest=pol_file,
        model_replay=model_replay,
        seed=secrets.randbits(32),
        created_at=dt.datetime.now(dt.UTC),
        harness_version=__version__,
    )
    scored = [lc.id for lc in cases if lc.case.lane == "exec"]
    base_cases = policy.baseline.sample(scored) if policy is not None else scored
    arms = _arm_plans(record, release, base_release, base_cases)
    specs = _specs(
        project, record, arms, cases, range(k), replayed=_replayed(project, arms, store), envs=envs
    )
    recorded = None
    if base is not None and replayed == {Arm.BASELINE}:
        recorded = replayable_trials(base, record.cases)
    plan = PlannedRun(
        record=record,
        specs=specs,
        cases=cases,
        baseline=base,
        arms=arms,
        policy=policy,
        envs=envs,
        replayed_baseline=recorded,
    )
    return replace(plan, specs=plan.keep(specs))


@dataclass(frozen=True)
class _ArmPlan:
    arm: Arm
    name: str
    release: Release
    system_digest: str
    case_ids: frozenset[str]


def _arm_plans(
    record: ReleaseRecord,
    release: Release,
    base_release: Release | None,
    baseline_cases: Sequence[str],
) -> list[_ArmPlan]:
    plans = [
        _ArmPlan(
            Arm.CANDIDATE, record.release, release, record.system_digest, frozenset(record.cases)
        )
    ]
    if base_release is not None and record.baseline is not None:
        assert record.baseline_system_digest is not None
        plans.append(
            _ArmPlan(
                Arm.BASELINE,
                record.baseline,
                base_release,
                record.baseline_system_digest,
                frozenset(baseline_cases),
            )
        )
    return plans


def case_images(
    cases: Sequence[LoadedCase], bases: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Build (or reuse, when the inputs are unchanged) the Docker image of each case.

    A case image is the agent phase's base image plus the case's starting tree, so each
    trial starts its containers from image layers instead of copying the repository.
    Cases whose two phases name different images get none (the tree is copied in).
    ``bases`` maps a case to the image to build on instead (its environment's layer).
    """
    import tempfile

    from harness.images import build_case_image
    from harness.sandbox.docker import DEFAULT_IMAGE, connect
    from harness.workspace import materialize

    client = connect()
    out: dict[str, str] = {}
    try:
        for lc in cases:
            contract = lc.case.contract
            if contract.agent.image != contract.verifier.image:
                continue
            with tempfile.TemporaryDirectory(prefix=owned_prefix("image")) as tmp:
                tree = Path(tmp) / "tree"
                materialize(lc, tree)
                base = (bases or {}).get(lc.id) or contract.agent.image or DEFAULT_IMAGE
                out[lc.id] = build_case_image(client, base, tree, lc.digest)
    finally:
        client.close()
    return out


def _replayed(
    project: Project, arms: Sequence[_ArmPlan], store: Store | None
) -> dict[tuple[str, int], bytes]:
    """Read the recorded candidates of arms using the ``replay`` adapter from the store.

    Raises:
        ConfigError: ``replay_run`` is missing or names no run with candidate trials.
    """
    from harness.replay import recorded_candidates

    out: dict[tuple[str, int], bytes] = {}
    for arm in arms:
        agent = arm.release.agent
        if agent.adapter != "replay":
            continue
        if agent.replay_run is None or store is None:
            raise ConfigError(
                "the replay adapter needs replay_run: the recorded run to re-verify",
                file=project.root / "harness.yaml",
                field=f"releases.{arm.name}.agent.replay_run",
            )
        out.update(recorded_candidates(store, store.resolve_run(agent.replay_run)))
    return out


def _spec(
    project: Project,
    record: ReleaseRecord,
    arm: _ArmPlan,
    lc: LoadedCase,
    t: int,
    replayed: Mapping[tuple[str, int], bytes],
    envs: PreparedEnvs,
) -> TrialSpec:
    key = TrialKey(arm=arm.arm, release=arm.name, case_id=lc.id, case_version=lc.version, trial=t)
    replay = replayed.get((lc.id, t)) if arm.release.agent.adapter == "replay" else None
    return TrialSpec(
        key=key,
        project_root=str(project.root),
        case_dir=str(lc.dir),
        case_digest=lc.digest,
        release=arm.release,
        system_digest=arm.system_digest,
        backend=record.backend,
        downgrade=frozenset(record.downgrade),
        image=record.system.get("case_images", {}).get(lc.id),
        replay_tarball=replay,
        run_seed=record.seed,
        environment=envs.cases.get(lc.id),
        agent_environment=envs.agents.get(arm.name),
        record_path=str(
            project.store_dir / "runs" / record.run_id / "trials" / f"{key.slug()}.json"
        ),
    )


def _specs(
    project: Project,
    record: ReleaseRecord,
    arms: Sequence[_ArmPlan],
    cases: Sequence[LoadedCase],
    trials: range,
    only: frozenset[str] | None = None,
    replayed: Mapping[tuple[str, int], bytes] | None = None,
    envs: PreparedEnvs | None = None,
) -> list[TrialSpec]:
    envs = envs if envs is not None else PreparedEnvs()
    return [
        _spec(project, record, arm, lc, t, replayed or {}, envs)
        for lc in cases
        if only is None or lc.id in only
        for arm in arms
        if lc.id in arm.case_ids
        for t in trials
    ]


def flaky_rerun_specs(plan: PlannedRun, store: Store, project: Project) -> list[TrialSpec]:
    """Extra trials for flaky-looking cases (both arms, to keep the pairs), per the policy.

    Decided from the first k recorded trials only, so a resumed run decides the same way.
    """
    from harness.gate import rerun_plan
    from harness.stats import ArmData, summarize_arm

    if plan.policy is None or plan.policy.flaky_reruns.extra_trials == 0:
        return []
    k = plan.record.k
    records = [r for r in store.trials(plan.record.run_id) if r.key.trial < k]
    flaky: set[str] = set()
    for arm in plan.arms:
        data = ArmData.from_records([r for r in records if r.key.arm is arm.arm], k)
        flaky |= set(rerun_plan(plan.policy, summarize_arm(data)))
    flaky -= set(plan.record.judgment_cases)
    extra = range(k, k + plan.policy.flaky_reruns.extra_trials)
    return plan.keep(
        _specs(project, plan.record, plan.arms, plan.cases, extra, frozenset(flaky), envs=plan.envs)
    )


def execute(
    handle: RunHandle,
    specs: Sequence[TrialSpec],
    executor: Executor,
    *,
    on_record: Callable[[RunRecord, bool], None] | None = None,
) -> tuple[int, int]:
    """Run the specs not yet recorded, in the run's seeded interleaved order.

    Returns (trials run now, trials already recorded and skipped).
    """
    done = handle.done()
    todo = [s for s in specs if s.key.slug() not in done]
    random.Random(handle.record.seed).shuffle(todo)
    ran = 0
    output: TrialOutput
    for output in executor.run(todo):
        written = handle.add_trial(output.record, output.blobs)
        ran += int(written)
        if on_record is not None:
            on_record(output.record, written)
    return ran, len(specs) - len(todo)


def check_system_unchanged(
    project: Project, record: ReleaseRecord, root: Path | None = None
) -> None:
    """Recompute the system digest after the run.

    Raises:
        InvalidRunError: the release's components, the cases or the harness changed mid-run.
    """
    try:
        cases = load_locked_cases(project, sorted(record.cases))
    except (ConfigError, LockMismatchError) as exc:
        raise InvalidRunError(f"cases changed while the run was in progress: {exc}") from None
    now = {lc.id: lc.digest for lc in cases}
    if now != record.cases:
        changed = sorted(k for k in record.cases if now.get(k) != record.cases[k])
        raise InvalidRunError(f"case content changed during the run: {', '.join(changed)}")
    ts = task_set_digest(project.file.task_set, cases)
    sysdef = project.system_definition(record.release, ts, __version__)
    now_envs, bases = prepare_for_backend(
        project, cases, {record.release: project.release(record.release)}, record.backend,
        verify=True,
    )  # fmt: skip
    sysdef.update(now_envs.system_entry(record.release, [lc.id for lc in cases]))
    if "case_images" in record.system:
        sysdef["case_images"] = case_images(cases, bases)
    digest = digest_json(sysdef)
    if digest != record.system_digest:
        raise InvalidRunError(
            f"system digest changed during the run ({short(record.system_digest)} → "
            f"{short(digest)}): a component of release {record.release!r} was modified"
        )


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
    from harness.gateway import Gateway, check_keys

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


def make_executor(
    name: str, scheduler: str | None, jobs: int | None, link: LinkAddress | None = None
) -> Executor:
    """Start the executor named by ``--executor`` (``local`` or ``dask``)."""
    if name == "dask":
        from harness.executors.dask import DaskExecutor

        return DaskExecutor(scheduler=scheduler, jobs=jobs, link=link)
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


def run_release(
    project: Project, request: RunRequest, observer: RunObserver | None = None
) -> RunOutcome:
    """Plan, execute (resuming), add flaky reruns, decide and report one release run.

    Raises:
        ConfigError: bad request or project input (nothing is stored).
        LockMismatchError: cases differ from the task-set lock.
        InfraError: the sandbox backend cannot run at all.
    """
    from harness.decision import decide_run

    obs: RunObserver = observer or _Silent()
    _check_executor_options(request)
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
        _preflight(project, plan, obs)
        link = getattr(served, "link", None)  # where Dask workers reach the gateway
        executor = make_executor(request.executor, request.scheduler, request.jobs, link)
    except BaseException:
        gateway.close()
        raise
    try:
        with gateway, store.open_run(plan.record) as handle:
            obs.started(plan, handle.run_id, len(handle.done()))
            execute(handle, plan.specs, executor, on_record=obs.trial_finished)
            extra = flaky_rerun_specs(plan, store, project)
            if extra:
                done = handle.done()
                obs.planned(
                    len(plan.specs) + len(extra),
                    len(plan.specs) + sum(s.key.slug() in done for s in extra),
                )
                execute(handle, extra, executor, on_record=obs.trial_finished)
            decision = decide_run(project, store, handle.run_id, write=True, handle=handle)
    finally:
        executor.close()
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


def _preflight(project: Project, plan: PlannedRun, obs: RunObserver) -> None:
    """Prove each (case, environment) pair red and green before the first trial."""
    from harness.env.preflight import preflight_run

    done = preflight_run(
        project,
        plan,
        on_case=lambda cid, env: obs.note(
            f"preflight: validating {cid} in environment {env[7:19]}"
        ),
    )
    if done:
        obs.note(f"preflight: {len(done)} case(s) validated red and green")


def _write_reports(
    project: Project, store: Store, run_id: str, decision: RunDecision
) -> tuple[Path, ...]:
    """Write the whole report folder (HTML, JUnit, Markdown, JSON, evidence, history)."""
    from harness.report import write_report_folder

    folder = write_report_folder(project, store, run_id, decision)
    return (*folder.paths, *((folder.history,) if folder.history else ()))
