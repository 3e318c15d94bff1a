"""The sandboxed phases of one attempt: the agent phase and the verifier phase.

:func:`agent_phase` runs the agent on the attempt's starting tree in its own sandbox (with
the release's staged agent files, its environment and, when the release calls a model, a
gateway session whose endpoint only that sandbox sees) and leaves the candidate tree
behind. :func:`verifier_phase` builds the verifier-owned tree from the candidate
(:mod:`harness.trial.vtree`), runs the case's verifier in a fresh sandbox and judges it, with the
runner's canary and collection cross-checks. :class:`TrialContext` is what both phases of
a trial share; :func:`harness.trial.execute.run_trial` drives them and turns their exceptions into
verdicts.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from harness._safefs import tree_entries
from harness.agents import prepare_agent, stage_agent_files
from harness.cases.load import LoadedCase
from harness.cases.model import Mutant, PhaseContract, Verifier
from harness.cases.patch import patched_paths
from harness.env.plan import phase_view
from harness.errors import (
    BudgetExceededError,
    CandidateTooLarge,
    EvaluatorError,
    InfraError,
    SandboxUnavailableError,
)
from harness.gateway import RemoteSession, Session, active_gateway, session_label
from harness.project import AGENT_DIR
from harness.sandbox.base import (
    DROP_BOX,
    SANDBOX_WORKSPACE,
    ExecResult,
    Sandbox,
    SandboxSession,
    SealedView,
    ViewMount,
    split_start,
    start_checked,
)
from harness.store.records import (
    CheckResult,
    FailureType,
    Outcome,
    PhaseRecord,
    StepClock,
    Verdict,
)
from harness.trial.evidence import (
    GUARD_MOUNT,
    KEY_BYTES,
    Stream,
    check_reports,
    guard_files,
    parse_stream,
    read_keys,
    strip_stream,
)
from harness.trial.excerpt import select_excerpt
from harness.trial.runner_guard import check_canary, guard_env, new_nonce
from harness.trial.verify import judge_mutant, judge_verifier
from harness.trial.vtree import VerificationTree, build_verification_tree
from harness.trial.workspace import extract_tree

if TYPE_CHECKING:
    from harness.trial.spec import TrialSpec

__all__ = [
    "Blobs",
    "TrialContext",
    "agent_phase",
    "env_view",
    "phase_label",
    "put_candidate",
    "verifier_phase",
]

_RESULT_LIMIT = 1 << 20
_WITH_BASE_URL = 'OPENAI_BASE_URL="$HARNESS_ENDPOINT/v1" exec "$@"'
_ARTIFACT_LIMIT = 32 << 20
_SETTLED_POLL = 0.25
"""Seconds between looks at the gateway's settled flag while the agent runs."""


class Blobs:
    """The blobs a trial's record refers to, by digest (collected as the phases run)."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def put(self, data: bytes) -> str:
        """Keep ``data``; return its digest."""
        from harness.digest import digest_bytes

        d = digest_bytes(data)
        self.data[d] = data
        return d


def _phase_record(
    phase: Literal["agent", "verifier"], res: ExecResult, session: SandboxSession, blobs: Blobs
) -> PhaseRecord:
    return PhaseRecord(
        phase=phase,
        argv=res.argv,
        exit_code=res.exit_code,
        signal=res.signal,
        termination=res.termination,
        bound=res.bound,
        duration_s=res.duration_s,
        cpu_s=res.cpu_s,
        peak_memory_mb=res.peak_memory_mb,
        stdout_blob=blobs.put(res.stdout),
        stderr_blob=blobs.put(res.stderr),
        stdout_truncated=res.stdout_truncated,
        stderr_truncated=res.stderr_truncated,
        excerpt=select_excerpt(res.stdout, res.stderr),
        image_id=session.image_id,
        downgraded=session.downgraded,
    )


@dataclass
class TrialContext:
    """What the phases of one trial share: its spec, case, sandbox, folders and blobs."""

    spec: TrialSpec
    lc: LoadedCase
    sandbox: Sandbox
    tmp: Path
    start_dir: Path
    start_manifest: dict[str, str]
    blobs: Blobs
    partial: dict[int, dict[str, object]] = field(default_factory=dict)
    """Per attempt: what the agent phase recorded before an exception ended the attempt."""
    clock: StepClock = field(default_factory=StepClock)
    """Times the trial's steps (the record's ``steps``)."""
    artifacts: dict[int, Mapping[str, bytes | None]] = field(default_factory=dict)
    """Per attempt: the verifier's artifacts as read after its run (what was judged)."""
    nodes: dict[int, dict[str, dict[str, str]]] = field(default_factory=dict)
    """Per attempt, per JUnit artifact: each test's pytest node id, from the guard's stream."""
    mutants: dict[int, list[PhaseRecord]] = field(default_factory=dict)
    """Per attempt: the verifier's runs on the case's mutants, in order."""
    mutant_artifacts: dict[int, list[Mapping[str, bytes | None]]] = field(default_factory=dict)
    """Per attempt: the artifacts of each mutant's run, in the case's order."""


def phase_label(ctx: TrialContext, phase: str, attempt: int) -> str:
    """Name one phase's sandbox: ``<trial slug>--a<attempt>--<phase>``."""
    return f"{ctx.spec.key.slug()}--a{attempt}--{phase}"


def agent_phase(
    ctx: TrialContext, attempt: int, base: Path, feedback: bytes | None, out: Path
) -> tuple[PhaseRecord | None, ExecResult | None, bytes | None, CandidateTooLarge | None]:
    """Run the agent on ``base``; leave the candidate tree in ``out`` (unless over bounds)."""
    case = ctx.lc.case
    if ctx.spec.release.agent.adapter == "replay":
        if ctx.spec.replay_tarball is None:
            raise EvaluatorError(
                "replay: the recorded run has no candidate for this case and trial index"
            )
        extract_tree(ctx.spec.replay_tarball, out)
        return None, None, None, None
    contract = _with_image(case.contract.agent, ctx.spec.image)
    timeout = min(contract.timeout_seconds, case.limits.wall_seconds)
    session = _gateway_session(ctx, attempt)
    if session is None:
        return _run_agent(ctx, attempt, base, feedback, out, contract, timeout, None)
    rec = None
    try:
        # Time waiting on the upstream is not the agent's: the contract's timeout stays the
        # hard bound and the judge subtracts the recorded wait from the wall-clock budget.
        rec = _run_agent(
            ctx, attempt, base, feedback, out, contract, contract.timeout_seconds, session
        )
    except Exception:
        if not session.settled.is_set():
            raise
        # The gateway decided the trial and the phase was stopped: how it stopped is moot.
    finally:
        usage = session.close()
        for data in session.blobs.values():
            ctx.blobs.put(data)
        ctx.partial.setdefault(attempt, {})["model"] = usage
    if usage.fault is not None:
        raise InfraError(usage.fault, reason="upstream")
    if usage.budget is not None:
        raise BudgetExceededError(usage.budget, kind="model_calls")
    if rec is None:
        raise InfraError("the agent phase failed after the gateway settled", reason="gateway")
    return rec


def _gateway_session(ctx: TrialContext, attempt: int) -> Session | RemoteSession | None:
    """Open this agent phase's gateway session when the release calls a model.

    The gateway of this process (the coordinator's, local executor), else the run's gateway
    over the link the spec carries (a Dask worker).
    """
    upstream = ctx.spec.release.upstream
    if upstream is None:
        return None
    gateway = active_gateway()
    # Opening waits for the phase's upstream lease (other trials' phases, the rate's
    # spacing): its own step, on neither the agent's clock nor the retry budget's.
    if gateway is not None:
        label = session_label(ctx.spec.key, attempt)
        with ctx.clock.step("lease"):
            return gateway.open_session(label, upstream, ctx.lc.case.limits)
    if ctx.spec.gateway_link is not None:
        with ctx.clock.step("lease"):
            return RemoteSession(ctx.spec.gateway_link, ctx.spec.key, attempt, upstream)
    raise InfraError(
        "the release calls a model but no gateway serves this process and the trial "
        "carries no gateway link",
        reason="gateway",
    )


def _run_agent(
    ctx: TrialContext,
    attempt: int,
    base: Path,
    feedback: bytes | None,
    out: Path,
    contract: PhaseContract,
    timeout: float,
    session: Session | RemoteSession | None,
) -> tuple[PhaseRecord | None, ExecResult | None, bytes | None, CandidateTooLarge | None]:
    case = ctx.lc.case
    with ctx.clock.step("workspace"):
        view = _agent_view(ctx, session)
    with ctx.sandbox.open(
        contract,
        label=phase_label(ctx, "agent", attempt),
        downgrade=ctx.spec.downgrade,
        view=view,
    ) as s:
        with ctx.clock.step("workspace"):
            if base == ctx.start_dir:
                if ctx.spec.image is None:
                    s.put_tree(base)
            else:  # a correction attempt: the last candidate, in place of the seeded tree
                if ctx.spec.image is not None:
                    s.remove(s.paths.workspace)
                put_candidate(s, base, contract.disk_mb, ())
            inv = prepare_agent(
                ctx.spec.key.release,
                ctx.spec.release,
                ctx.lc,
                trial=ctx.spec.key.trial,
                attempt=attempt,
                io_dir=s.paths.io,
                workspace=s.paths.workspace,
                feedback=feedback,
                run_seed=ctx.spec.run_seed,
            )
            for name, data in inv.io_files.items():
                s.write_file(f"{s.paths.io}/{name}", data)
        assert inv.argv is not None
        argv, env = inv.argv, dict(inv.env)
        if session is not None:
            # The relay's address is known inside the sandbox only (HARNESS_ENDPOINT).
            argv = ("/bin/sh", "-c", _WITH_BASE_URL, "agent", *argv)
            env.update(OPENAI_API_KEY=session.token, HARNESS_MODEL=session.upstream.model)
        with _stop_when_settled(session, s):
            res = s.exec(argv, env=env, timeout=timeout)
        result_file = s.read_file(f"{s.paths.io}/result.json", limit=_RESULT_LIMIT)
        overflow = None
        try:
            # A candidate that cannot fit the verifier's disk can never be verified: its fault.
            disk = case.contract.verifier.disk_mb
            mb = (
                case.contract.candidate_mb
                if disk is None
                else min(disk, case.contract.candidate_mb)
            )
            with ctx.clock.step("candidate"):
                s.get_tree(out, max_files=case.contract.candidate_files, max_bytes=mb << 20)
        except CandidateTooLarge as exc:
            overflow = exc
        record = _phase_record("agent", res, s, ctx.blobs)
        ctx.partial.setdefault(attempt, {})["agent"] = record
        return record, res, result_file, overflow


@contextmanager
def _stop_when_settled(
    session: Session | RemoteSession | None, sandbox: SandboxSession
) -> Iterator[None]:
    """Kill the agent's command once the gateway has decided the trial (budget, fault).

    Nothing the agent does after that can change the verdict: running on to the timeout
    would only waste the phase's time. The gateway's verdict stays the trial's.
    """
    if session is None:
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if session.settled.wait(_SETTLED_POLL):
                sandbox.interrupt()
                return

    watcher = threading.Thread(target=watch, name="gateway-settled", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def _agent_view(ctx: TrialContext, session: Session | RemoteSession | None) -> SealedView | None:
    """Build what the agent phase sees besides the minimal system (files, model endpoint)."""
    staged = ctx.tmp / "agent-files"
    if not staged.exists():
        stage_agent_files(Path(ctx.spec.project_root), ctx.spec.release, staged)
    view = env_view(ctx.spec, "agent") or SealedView()
    mounts = view.mounts
    if staged.exists():
        mounts += (ViewMount(source=str(staged), target=AGENT_DIR),)
    endpoint = session.socket_path if session is not None else None
    view = view.model_copy(update={"mounts": mounts, "endpoint": endpoint})
    return None if view == SealedView() else view


def env_view(spec: TrialSpec, phase: str) -> SealedView | None:
    """Return the built environments' view of ``phase`` (none in a Docker case image)."""
    in_image = spec.image is not None and spec.backend == "docker"
    return phase_view(spec.environment, spec.agent_environment, phase, in_image=in_image)


def _with_image(contract: PhaseContract, image: str | None) -> PhaseContract:
    return contract if image is None else contract.model_copy(update={"image": image})


def verifier_phase(
    ctx: TrialContext, attempt: int, candidate_dir: Path
) -> tuple[PhaseRecord, Verdict, VerificationTree]:
    """Verify the verifier-owned tree of ``candidate_dir`` (see :mod:`harness.trial.vtree`).

    When the case declares mutants, the same command runs on each at the same time, in
    sandboxes of their own (:func:`_twin_runs`): a mutant the tests do not catch fails a
    trial whose own run passed.
    """
    ctx.mutants.pop(attempt, None)
    ctx.mutant_artifacts.pop(attempt, None)
    mutants = ctx.lc.case.verifier.mutants
    if mutants:
        run, *twins = _twin_runs(ctx, attempt, candidate_dir, mutants)
        ctx.mutants[attempt] = [t.record for t in twins]
        ctx.mutant_artifacts[attempt] = [t.artifacts for t in twins]
    else:
        run, twins = _verifier_run(ctx, attempt, candidate_dir, None, ctx.clock), []
    ctx.artifacts[attempt] = run.artifacts
    if run.nodes is not None:
        ctx.nodes[attempt] = run.nodes
    verdict, vt = run.verdict, run.vt
    if verdict.outcome is Outcome.PASS and twins:
        verdict = _judge_mutants(ctx, verdict, vt, twins)
    return run.record, verdict, vt


@dataclass
class _Run:
    """One run of the verifier's command, judged."""

    record: PhaseRecord
    verdict: Verdict
    vt: VerificationTree
    artifacts: Mapping[str, bytes | None]
    nodes: dict[str, dict[str, str]] | None
    """Per JUnit artifact, each test's pytest node id (None: no guard stream)."""


_TWIN_START_S = 600.0
"""Longest a run waits at the start line for its twins (their trees and sandboxes)."""


class _Turns:
    """Let twin runs make their sandboxes one at a time, in a random order.

    What a sandbox gets as it is made (the device numbers of its mounts, a descriptor's
    number) follows the order the twins are made in: made in a fixed order, the judged
    run's workspace always had the lowest device number (red team round thirty).
    """

    def __init__(self, n: int, rng: random.Random | None = None) -> None:
        self.order = (rng or random.SystemRandom()).sample(range(n), n)
        self._done: set[int] = set()
        self._cond = threading.Condition()

    def take(self, run: int) -> None:
        """Wait until every run before ``run`` in the order is done (or gave up)."""
        before = set(self.order[: self.order.index(run)])
        with self._cond:
            self._cond.wait_for(lambda: before <= self._done, timeout=_TWIN_START_S)

    def done(self, run: int) -> None:
        """Mark ``run``'s turn over (safe to repeat, and for a run that never took it)."""
        with self._cond:
            self._done.add(run)
            self._cond.notify_all()


def _twin_runs(
    ctx: TrialContext, attempt: int, candidate_dir: Path, mutants: Sequence[Mutant]
) -> list[_Run]:
    """Run the judged tree and each mutant's at once: the judged run first in the result.

    Each run is the others' twin (the same tree at the same path, a fresh sandbox with the
    same label, contract and environments): only a mutant's files differ. Their commands
    start together (a barrier once every sandbox holds its tree), so no clock tells a
    mutant's run from the judged one, as it did when the mutants ran after it (red team
    round twenty-seven: a test that slept, then failed when it ran late). The mutant runs
    keep their own step clocks: they overlap the judged run's, which the trial records.
    """
    barrier = threading.Barrier(1 + len(mutants))
    turns = _Turns(1 + len(mutants))
    runs: list[_Run | None] = [None] * (1 + len(mutants))
    errors: list[BaseException] = []

    def one(i: int, mutant: Mutant | None, clock: StepClock) -> None:
        try:
            runs[i] = _verifier_run(ctx, attempt, candidate_dir, mutant, clock, barrier, (turns, i))
        except BaseException as exc:
            barrier.abort()  # the others go on; this run's error decides the attempt
            errors.append(exc)
        finally:
            turns.done(i)

    threads = [
        threading.Thread(target=one, args=(i + 1, m, StepClock()), name=f"mutant-{m.name}")
        for i, m in enumerate(mutants)
    ]
    for t in threads:
        t.start()
    try:
        one(0, None, ctx.clock)
    finally:
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
    return [r for r in runs if r is not None]


def _judge_mutants(
    ctx: TrialContext, passed: Verdict, vt: VerificationTree, twins: Sequence[_Run]
) -> Verdict:
    """Judge the mutants' runs of a judged run that passed; return the trial's verdict.

    Every mutant gets its ``mutant.<name>`` check, in the case's order. Tampering seen in
    a mutant's run is the trial's; a mutant the tests do not catch fails the trial.
    """
    case = ctx.lc.case
    checks = list(passed.checks)
    failed: Verdict | None = None
    for mutant, run in zip(case.verifier.mutants, twins, strict=True):
        tampered = [c for c in run.verdict.checks if c.name == "runner.canary" and not c.ok]
        if tampered:
            vt.tampering.extend(t for t in run.vt.tampering if t not in vt.tampering)
            detail = f"tampering in the mutant's run: {tampered[0].detail}"
            checks.append(CheckResult(name=f"mutant.{mutant.name}", ok=False, detail=detail))
            failed = failed or Verdict(
                outcome=Outcome.FAIL,
                failure_type=FailureType.TAMPERING,
                reason=f"verifier (mutant {mutant.name}): {tampered[0].detail}"[:400],
            )
            continue
        caught = judge_mutant(case.verifier, mutant, run.artifacts)
        checks.append(caught)
        if not caught.ok:
            failed = failed or Verdict(
                outcome=Outcome.FAIL,
                failure_type=FailureType.TEST_FAILURE,
                reason=f"verifier: {caught.detail}"[:400],
            )
    if failed is not None:
        return failed.model_copy(update={"checks": tuple(checks)})
    return passed.model_copy(update={"checks": tuple(checks)})


def _verifier_run(
    ctx: TrialContext,
    attempt: int,
    candidate_dir: Path,
    mutant: Mutant | None,
    clock: StepClock,
    barrier: threading.Barrier | None = None,
    turn: tuple[_Turns, int] | None = None,
) -> _Run:
    case = ctx.lc.case
    suffix = "" if mutant is None else f"-mutant-{mutant.name}"
    tree = ctx.tmp / f"verify-{attempt}{suffix}"
    replace = [(ctx.lc.path(f.src), f.dest) for f in mutant.replace] if mutant is not None else []
    with clock.step("verifier_tree"):
        if tree.exists():
            shutil.rmtree(tree)
        vt = build_verification_tree(
            ctx.lc,
            ctx.start_dir,
            candidate_dir,
            tree,
            artifacts=[rule.path for rule in case.verifier.artifacts],
            replace=replace,
        )
        nonce = new_nonce()
        view = _verifier_view(ctx, vt)
    if turn is not None:
        turn[0].take(turn[1])
    with (
        clock.step("verifier"),
        ctx.sandbox.open(
            _with_image(case.contract.verifier, ctx.spec.image),
            label=phase_label(ctx, "verifier", attempt),
            downgrade=ctx.spec.downgrade,
            view=view,
        ) as v,
    ):
        with clock.step("verifier_tree"):
            if ctx.spec.image is not None:  # the image seeded the starting tree: start empty
                v.remove(v.paths.workspace)
            put_candidate(v, tree, case.contract.verifier.disk_mb, vt.read_only)
            box = f"{v.paths.io}/{os.path.basename(DROP_BOX)}" if _junit(case.verifier) else None
            if box is not None:
                v.make_drop_box(box)
        if turn is not None:
            turn[0].done(turn[1])
        ws = v.paths.workspace
        timeout = case.contract.verifier.timeout_seconds
        if barrier is not None:
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait(_TWIN_START_S)
        res = _run_verifier(v, case.verifier.command, guard_env(GUARD_MOUNT, nonce), timeout)
        with clock.step("cross_check"):
            artifacts = {
                rule.path: v.read_file(f"{ws}/{rule.path}", limit=_ARTIFACT_LIMIT)
                for rule in case.verifier.artifacts
            }
            keys, canary = _guard_keys(v, box)
            found, stream = _runner_checks(ws, case.verifier, res, artifacts, nonce, keys)
            canary += found
            canary += _appeared(v, ws, tree, ctx.lc)
        # The guard's records are evidence, not output: the reviewer reads the rest.
        shown = res.model_copy(update={"stderr": strip_stream(res.stderr, keys)})
        record = _phase_record("verifier", shown, v, ctx.blobs)
    with clock.step("cross_check"):
        verdict = judge_verifier(
            res, case.verifier, artifacts, started=True, proven=dict(ctx.spec.proven)
        )
        nodes = None
        if stream is not None:
            nodes = {
                rule.path: stream.nodes(os.path.normpath(f"{ws}/{rule.path}")) or {}
                for rule in case.verifier.artifacts
                if rule.rule == "junit"
            }
    if canary:
        vt.tampering.extend(canary)
        verdict = Verdict(
            outcome=Outcome.FAIL,
            failure_type=FailureType.TAMPERING,
            reason=f"verifier: {canary[0]}"[:400],
            checks=(*verdict.checks, CheckResult(name="runner.canary", ok=False, detail=canary[0])),
        )
    return _Run(record, verdict, vt, artifacts, nodes)


_MAX_KEYS = 256
"""More guarded pytest processes than one verifier command honestly starts."""


def _junit(verifier: Verifier) -> bool:
    return any(rule.rule == "junit" for rule in verifier.artifacts)


def _guard_keys(v: SandboxSession, box: str | None) -> tuple[list[bytes], list[str]]:
    """Read the guards' keys back from the drop box; anything else there is tampering."""
    if box is None:
        return [], []
    found = v.read_drop_box(box, max_files=_MAX_KEYS, max_bytes=2 * KEY_BYTES)
    keys, odd = read_keys(found.files)
    return keys, [f"the harness's drop box: {why}" for why in (*found.odd, *odd)]


def _verifier_view(ctx: TrialContext, vt: VerificationTree) -> SealedView:
    """Show the verifier its environments and the harness's guard (read-only, ``GUARD_MOUNT``).

    The guard's host folder has a random name: the run sees it in its mount table, and a
    name saying which run it serves told a mutant's run from the judged one (red team round
    twenty-nine).
    """
    guard = Path(tempfile.mkdtemp(prefix="guard-", dir=ctx.tmp))
    guard.chmod(0o755)
    # each guarded pytest leaves its key in the verifier's drop box
    owner = ctx.sandbox.drop_box_owner
    files = guard_files(SANDBOX_WORKSPACE, vt.candidate, vt.locked, box=DROP_BOX, box_owner=owner)
    for name, data in files.items():
        (guard / name).write_bytes(data)
        (guard / name).chmod(0o644)
    view = env_view(ctx.spec, "verifier") or SealedView()
    mount = ViewMount(source=str(guard), target=GUARD_MOUNT)
    return view.model_copy(update={"mounts": (*view.mounts, mount)})


def put_candidate(
    v: SandboxSession, tree: Path, disk_mb: int | None, locked: Sequence[str]
) -> None:
    """Copy a candidate's tree in; a disk bound it overflows is the candidate's ``disk``.

    Raises:
        CandidateTooLarge: the tree does not fit the session's disk bound.
        SandboxUnavailableError: the copy failed for another reason.
    """
    try:
        v.put_tree(tree, locked=locked)
    except SandboxUnavailableError as exc:
        if exc.reason != "disk_full":
            raise
        raise CandidateTooLarge(
            f"the candidate does not fit the verifier's disk of {disk_mb} MiB ({exc})",
            kind="disk",
            limit=float(disk_mb or 0),
            observed=float(disk_mb or 0),
        ) from exc


def _run_verifier(
    v: SandboxSession, command: Sequence[str], env: dict[str, str], timeout: float
) -> ExecResult:
    """Run the verifier, telling "it could not start" apart from candidate code exiting 127.

    The command runs under :func:`~harness.sandbox.base.start_checked`: before any
    candidate code runs, the session's shell resolves its first word (a name on ``PATH``
    or an executable path) in the same start. Only a command that does not resolve is the
    evaluator's error; once it resolved, any exit status is judged as the verifier's
    (:func:`harness.trial.verify.judge_verifier` with ``started``).

    Raises:
        EvaluatorError: the verifier command is not found or not executable here.
    """
    res = v.exec(start_checked(command), env=env, timeout=timeout)
    started, res = split_start(res, command)
    if not started:
        raise EvaluatorError(
            f"the verifier command {command[0]!r} is not found or not executable in the "
            f"verifier's sandbox (exit {res.exit_code}, {res.termination.value})"
        )
    return res


def _appeared(v: SandboxSession, ws: str, tree: Path, lc: LoadedCase) -> list[str]:
    """Files the reference solution has, absent from the candidate's tree, found after the run.

    Nothing the candidate submitted can change during the run (the tree is read-only), but
    a new file can be made anywhere (tests write next to their modules): code under test
    made a deliverable the candidate never shipped (a committed report, a generated file)
    while the tests ran, and the checks read it (outside red team, round twenty-five). The
    verifier's declared artifacts are its own to write.
    """
    ref = lc.case.reference
    wanted: frozenset[str] = frozenset()
    if ref is not None:
        with contextlib.suppress(OSError):
            text = lc.path(ref.patch).read_text(encoding="utf-8", errors="replace")
            wanted = patched_paths(text)
    outputs = {os.path.normpath(a.path) for a in lc.case.verifier.artifacts}
    found = []
    for rel in sorted(wanted):
        rel = os.path.normpath(rel)
        if rel in outputs or rel.startswith(("..", "/")) or os.path.lexists(tree / rel):
            continue
        if v.read_file(f"{ws}/{rel}", limit=1) is not None:
            found.append(
                f"{rel}: not in the candidate's tree (the reference solution has it), "
                "written while the verifier ran"
            )
    # A link pointing at nothing stands in for a file the same way once the run makes its
    # target (red team round twenty-six: a committed artifact and a spec file as links).
    for link, target in _dangling_links(tree):
        if target not in outputs and v.read_file(f"{ws}/{target}", limit=1) is not None:
            found.append(
                f"{link}: a link the candidate submitted pointing at nothing ({target}), "
                "whose target was written while the verifier ran"
            )
    return found


def _dangling_links(tree: Path) -> list[tuple[str, str]]:
    """Return the tree's relative links whose target, inside the tree, does not exist."""
    out = []
    for path in tree_entries(tree):
        if not path.is_symlink():
            continue
        rel = path.relative_to(tree).as_posix()
        target = os.readlink(path)
        if os.path.isabs(target):
            continue  # absolute links never reach the verifier's tree (left out)
        resolved = os.path.normpath(os.path.join(os.path.dirname(rel), target))
        if resolved.startswith("..") or os.path.lexists(tree / resolved):
            continue
        out.append((rel, resolved))
    return out


def _runner_checks(
    ws: str,
    verifier: Verifier,
    res: ExecResult,
    artifacts: dict[str, bytes | None],
    nonce: str,
    keys: Sequence[bytes],
) -> tuple[list[str], Stream | None]:
    """Check each JUnit artifact's canary and compare it with the guard's stream.

    Strips the canary from ``artifacts`` in place; returns the problems (tampering) and the
    stream (``None`` when no artifact is a JUnit report).
    """
    stream = parse_stream(res.stderr, keys)
    problems: list[str] = []
    reports: dict[str, bytes | None] = {}
    for rule in verifier.artifacts:
        if rule.rule != "junit":
            continue
        path = os.path.normpath(f"{ws}/{rule.path}")
        data, problem = check_canary(artifacts[rule.path], nonce, guarded=stream.ran_tests(path))
        artifacts[rule.path] = data
        reports[path] = data
        if problem is not None:
            problems.append(f"{rule.path}: {problem}")
    if not reports:
        return problems, None
    pytest_command = any("pytest" in a or "py.test" in a for a in verifier.command)
    found = check_reports(stream, reports, nonce, pytest_command=pytest_command)
    if found and res.stderr_truncated:
        found.append(
            "the verifier's stderr was cut at the contract's output_bytes, with the "
            "harness's evidence in it"
        )
    problems.extend(p.replace(f"{ws}/", "", 1) for p in found)
    return problems, stream
