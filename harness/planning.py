"""Plan a release run: fix its identity and its trial list before the first trial.

:func:`plan_run` loads the locked cases, the promotion policy and the baseline, computes
the system digests, and builds the :class:`ReleaseRecord` (system digest, task-set digest,
case digests, k, backend, downgrades, baseline, promotion-policy digest, the seed of the
interleaved order) that :func:`harness.run.run_release` stores before anything runs,
together with the :class:`TrialSpec` of every trial: cases × k × {candidate, baseline}.
:func:`flaky_rerun_specs` adds the policy's extra trials from the first k recorded ones,
and :func:`check_system_unchanged` recomputes the system digest after the run.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.cases.load import LoadedCase, load_cases
from harness.cases.lock import check_lock, read_lock, task_set_digest
from harness.digest import digest_json, short
from harness.env.plan import PreparedEnvs, prepare_for_backend
from harness.errors import ConfigError, InvalidRunError, LockMismatchError
from harness.gate.policy import LoadedPolicy, Policy, load_policy, policy_data
from harness.pool import PoolKey, environment_digest, pool_id
from harness.project import MAX_K, Project, Release, agent_code_digests
from harness.sandbox.owner import owned_prefix
from harness.store.baseline import Baseline, load_baseline
from harness.store.records import Arm, ReleaseRecord, TrialKey
from harness.store.store import Store
from harness.system import SystemDefinition
from harness.trial.spec import TrialSpec
from harness.version import __version__

__all__ = [
    "PlannedRun",
    "case_images",
    "check_system_unchanged",
    "flaky_rerun_specs",
    "load_locked_cases",
    "plan_run",
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
    """Baseline replay (``--model-replay baseline:NAME``,
    :func:`harness.replay.replay_scope`): the baseline arm runs only these recorded
    (case, trial) pairs of the stored baseline."""
    pool_key: PoolKey | None = None
    """The baseline pool the run is compared with (policy ``baseline.pool``)."""

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
    _check_k_and_downgrade(k, downgrade)
    from harness.replay import replay_scope

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
    sysdef, envs, images = _candidate_system(
        project, release_name, release, cases, ts_digest, backend
    )
    sys_digest = sysdef.digest()
    pol = policy_data(policy) if policy is not None else None

    base = load_baseline(project.baselines_dir, baseline) if baseline is not None else None
    base_release: Release | None = None
    base_def: SystemDefinition | None = None
    if base is not None and baseline is not None:
        base_release, base_def = _baseline_system(
            project, base, baseline, cases, ts_digest, backend, envs, images
        )
    base_digest = base_def.digest() if base_def is not None else None
    pool_key = _pool_key(policy, base, baseline, base_def, backend, model_replay)

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
    record = ReleaseRecord(
        run_id=_run_id(release_name, identity, fresh, store),
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
        baseline_pool=pool_id(pool_key) if pool_key is not None else None,
        seed=secrets.randbits(32),
        created_at=dt.datetime.now(dt.UTC),
        harness_version=__version__,
    )
    return _plan_trials(
        project, record, cases, release, base, base_release, policy, pool_key, store, envs, replayed
    )


def _plan_trials(
    project: Project,
    record: ReleaseRecord,
    cases: list[LoadedCase],
    release: Release,
    base: Baseline | None,
    base_release: Release | None,
    policy: Policy | None,
    pool_key: PoolKey | None,
    store: Store | None,
    envs: PreparedEnvs,
    replayed: frozenset[Arm],
) -> PlannedRun:
    """List the run's trials: cases x k x arms, less what the pool or baseline replay supply."""
    from harness.replay import replayable_trials

    k = record.k
    scored = [lc.id for lc in cases if lc.case.lane == "exec"]
    base_cases = policy.baseline.sample(scored) if policy is not None else scored
    arms = _arm_plans(record, release, base_release, base_cases)
    specs = _specs(
        project, record, arms, cases, range(k), replayed=_replayed(project, arms, store), envs=envs
    )
    if pool_key is not None and policy is not None and policy.baseline.pool is not None:
        live = policy.baseline.pool.live_trials  # the rest of the baseline comes from the pool
        specs = [s for s in specs if s.key.arm is not Arm.BASELINE or s.key.trial < live]
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
        pool_key=pool_key,
    )
    return replace(plan, specs=plan.keep(specs))


def _check_k_and_downgrade(k: int, downgrade: Sequence[str]) -> None:
    """Reject a k out of range or a downgrade name that is not a contract field."""
    if not 1 <= k <= MAX_K:
        raise ConfigError(f"--k must be between 1 and {MAX_K}, got {k}", field="--k")
    bad = sorted(set(downgrade) - DOWNGRADABLE)
    if bad:
        raise ConfigError(
            f"cannot downgrade {', '.join(bad)}; "
            f"expected any of: {', '.join(sorted(DOWNGRADABLE))}",
            field="--allow-unenforced",
        )


def _candidate_system(
    project: Project,
    release_name: str,
    release: Release,
    cases: Sequence[LoadedCase],
    ts_digest: str,
    backend: str,
) -> tuple[SystemDefinition, PreparedEnvs, dict[str, str]]:
    """Return the candidate's system definition, its prepared environments and case images."""
    sysdef = project.system_definition(release_name, ts_digest, __version__)
    envs, env_bases = prepare_for_backend(project, cases, {release_name: release}, backend)
    images = case_images(cases, env_bases) if backend == "docker" else {}
    sysdef = sysdef.replace(
        **envs.system_entry(release_name, [lc.id for lc in cases]), case_images=images or None
    )
    return sysdef, envs, images


def _baseline_system(
    project: Project,
    base: Baseline,
    name: str,
    cases: Sequence[LoadedCase],
    ts_digest: str,
    backend: str,
    envs: PreparedEnvs,
    images: Mapping[str, str],
) -> tuple[Release, SystemDefinition]:
    """Return the stored baseline's release and its system definition as it runs now.

    Adds the baseline agent's prepared environment to ``envs``.
    """
    base_release = base.release_definition
    stored = base.file.release.system
    if base_release.agent.files or stored.agent_files is not None:
        try:
            now = project.agent_file_digests(name, base_release)
        except ConfigError as exc:
            raise base.stale(exc.message) from None
        base.check_agent_files(now)
    envs.agents.update(prepare_for_backend(project, (), {name: base_release}, backend)[0].agents)
    # What actually runs now: this task set and harness, the harness's own agent code, this
    # run's environments and case images.
    base_def = stored.replace(
        task_set_digest=ts_digest,
        harness_version=__version__,
        agent_code=agent_code_digests(base_release),
        **envs.system_entry(name, [lc.id for lc in cases]),
        case_images=dict(images) or None,
    )
    return base_release, base_def


def _run_id(
    release_name: str, identity: Mapping[str, Any], fresh: bool, store: Store | None
) -> str:
    """Name the run by its identity's digest; ``fresh`` numbers it past the runs stored."""
    run_id = f"{release_name}-{short(digest_json(identity), 10)}"
    if fresh and store is not None:
        n = 2
        stem = run_id
        while store.run_dir(run_id).exists():
            run_id = f"{stem}.{n}"
            n += 1
    return run_id


def _pool_key(
    policy: Policy | None,
    base: Baseline | None,
    name: str | None,
    base_def: SystemDefinition | None,
    backend: str,
    model_replay: str | None,
) -> PoolKey | None:
    """Return the baseline pool of this run, when the policy asks for one and a baseline is given.

    Raises:
        ConfigError: live baseline trials together with ``--model-replay`` (one arm cannot
            mix live and replayed trials yet).
    """
    if (
        policy is None
        or policy.baseline.pool is None
        or base is None
        or name is None
        or base_def is None
    ):
        return None
    if model_replay is not None and policy.baseline.pool.live_trials > 0:
        raise ConfigError(
            f"the policy's baseline.pool.live_trials is {policy.baseline.pool.live_trials}: "
            "live baseline trials cannot be mixed with --model-replay in one run; drop "
            "--model-replay, or set live_trials: 0 to replay the promoted trials for drift",
            field="--model-replay",
        )
    return PoolKey(
        baseline=name,
        baseline_digest=base.digest,
        environment=environment_digest(base_def),
        backend=backend,
    )


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

    from harness.env.images import build_case_image
    from harness.sandbox.docker import DEFAULT_IMAGE, connect
    from harness.trial.workspace import materialize

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
        image=(record.system.case_images or {}).get(lc.id),
        replay_tarball=replay,
        run_seed=record.seed,
        environment=envs.cases.get(lc.id),
        agent_environment=envs.agents.get(arm.name),
        # Relative to the store: the feedback package quotes it, and no host path may
        # reach a sandbox.
        record_path=f"runs/{record.run_id}/trials/{key.slug()}.json",
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
    from harness.gate.decide import rerun_plan
    from harness.gate.stats import ArmData, summarize_arm

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
        project,
        cases,
        {record.release: project.release(record.release)},
        record.backend,
        verify=True,
    )
    sysdef = sysdef.replace(**now_envs.system_entry(record.release, [lc.id for lc in cases]))
    if record.system.case_images is not None:
        sysdef = sysdef.replace(case_images=case_images(cases, bases))
    digest = sysdef.digest()
    if digest != record.system_digest:
        raise InvalidRunError(
            f"system digest changed during the run ({short(record.system_digest)} → "
            f"{short(digest)}): a component of release {record.release!r} was modified"
        )
