"""Agents that try to turn their own failure into the harness's, through the public CLI.

The agent (tests/attacks/mess_agent.py, one mechanism per release) cannot fix the bug. It
tries to block the gate (a FIFO where the harness reads a protocol file), to crash a walk
or a parser (a folder 1,200 levels deep), to exhaust the harness's memory (a 1 GiB sparse
result file) or the verifier's disk, or to pass its own exit status off as "the verifier
could not run". Every trial must end as the agent's ``fail`` with a named failure type:
never ``infra_error``, ``evaluator_error``, exit 5, a traceback or a hang; and the run
must leave nothing behind that breaks the next ``harness run`` or ``harness sandbox prune``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import harness, make_project

from harness.store.store import Store

pytestmark = pytest.mark.integration

ATTACK = Path(__file__).resolve().parent.parent / "attacks" / "mess_agent.py"
MODES = ("fifo-result", "sparse-result", "fifo-junit", "deep", "disk", "exit127", "outside-link")
MODES += ("fifo-link", "long-path", "hard-links", "chmod-root", "fill", "small-files")

RELEASE = """\
  mess-{mode}:
    agent:
      adapter: command
      command: [python3, "{{agent}}/agent/mess_agent.py", {args}]
      files: [agent]
    retry: {{infra_retries: 0}}
"""

# hard-links: 4 MiB and 4,000 links to it, 16 GiB read path by path, against a 64 MiB bound.
ARGS = {"disk": '"disk", "32"', "hard-links": '"hard-links", "4", "4000"'}
ARGS["small-files"] = '"small-files", "3000"'

# Modes that leave their mark on a later attempt: two attempts, feedback from a command.
RETRIED = {"chmod-root", "fill", "small-files"}

BACKENDS = [
    pytest.param("local", id="local"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]

# A hang is the failure we look for: long enough for a slow shared machine, far below
# "forever".
RUN_TIMEOUT = 240


@pytest.fixture
def project() -> Iterator[Path]:
    home = Path(tempfile.mkdtemp(prefix="harness-mess-test-"))
    root = make_project(home / "proj", n_cases=1)
    text = (root / "harness.yaml").read_text()
    releases = [RELEASE.format(mode=m, args=ARGS.get(m, f'"{m}"')) for m in MODES]
    releases = [
        r.replace("{infra_retries: 0}", "{max_attempts: 2, infra_retries: 0}")
        if m in RETRIED
        else r
        for m, r in zip(MODES, releases, strict=True)
    ]
    (root / "harness.yaml").write_text(text + "".join(releases))
    case = root / "cases" / "add-0" / "case.yaml"
    case.write_text(
        case.read_text() + "feedback: {public_command: [python3, -c, \"print('public')\"]}\n"
    )
    (root / "agent").mkdir()
    shutil.copy(ATTACK, root / "agent" / "mess_agent.py")
    assert harness(root, "cases", "lock").returncode == 0
    try:
        yield root
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _need_docker() -> None:
    from harness.errors import SandboxUnavailableError
    from harness.sandbox.docker import DEFAULT_IMAGE, connect, find_image

    try:
        client = connect(timeout=30)
    except SandboxUnavailableError as exc:
        if os.environ.get("HARNESS_REQUIRE_DOCKER") == "1":
            pytest.fail(f"no Docker engine: {exc}")
        pytest.skip(f"no Docker engine ({exc})")
    try:
        if find_image(client, DEFAULT_IMAGE) is None:
            pytest.skip(f"{DEFAULT_IMAGE} missing; run ci/docker-up.sh")
    finally:
        client.close()


def _run(project: Path, release: str, backend: str) -> subprocess.CompletedProcess[str]:
    if backend == "docker":
        _need_docker()
    try:
        done = harness(
            project,
            "run",
            "--release",
            release,
            "--k",
            "1",
            "--backend",
            backend,
            "--no-report",
            "--fresh",
            timeout=RUN_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{release} on {backend}: the harness hung (> {RUN_TIMEOUT} s)")
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode != 5, done.stdout + done.stderr
    return done


def _verifier_disk(project: Path, mb: int) -> None:
    """Give the case's verifier ``mb`` MiB of disk (a new case version, locked)."""
    case = project / "cases" / "add-0" / "case.yaml"
    text = case.read_text().replace("version: 1", "version: 2")
    text = text.replace(
        "verifier: {timeout_seconds: 30, memory_mb: 256, pids: 64, disk_mb: 64}",
        f"verifier: {{timeout_seconds: 30, memory_mb: 256, pids: 64, disk_mb: {mb}}}",
    )
    assert f"disk_mb: {mb}}}" in text
    case.write_text(text)
    assert harness(project, "cases", "lock").returncode == 0


def _verdict(project: Path) -> dict[str, object]:
    store = Store(project / ".harness")
    (rec,) = store.trials(store.resolve_run("latest"))
    return rec.verdict.model_dump(mode="json")


def _agents_fail(project: Path, done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    verdict = _verdict(project)
    assert verdict["outcome"] == "fail", (verdict, done.stdout, done.stderr)
    assert verdict["failure_type"], verdict
    assert done.returncode == 1, done.stdout + done.stderr  # the gate's "fail", not blocked
    return verdict


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_fifo_as_the_result_file_is_refused_not_waited_on(project: Path, backend: str) -> None:
    done = _run(project, "mess-fifo-result", backend)
    _agents_fail(project, done)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_fifo_as_the_junit_report_is_refused_not_waited_on(project: Path, backend: str) -> None:
    done = _run(project, "mess-fifo-junit", backend)
    verdict = _agents_fail(project, done)
    # Candidate code may also change the exit status on the way out: any fail of its own.
    assert verdict["failure_type"] in ("missing_artifact", "invalid_artifact", "test_failure")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_1_gib_sparse_result_file_is_read_with_a_real_bound(project: Path, backend: str) -> None:
    if backend == "docker":
        _need_docker()
    # The CLI under a parent that reports the peak memory of its child (the harness).
    probe = (
        "import resource, subprocess, sys\n"
        "subprocess.run(sys.argv[1:], check=False)\n"
        "print('PEAK_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    argv = [sys.executable, "-m", "harness.cli", "run", "--release", "mess-sparse-result"]
    argv += ["--k", "1", "--backend", backend, "--no-report", "--fresh"]
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        env=env,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    peak_mb = int(done.stdout.rsplit("PEAK_KB", 1)[1].split()[0]) / 1024
    assert peak_mb < 600, f"the harness peaked at {peak_mb:.0f} MiB reading the result file"
    verdict = _verdict(project)
    assert verdict["outcome"] == "fail", verdict


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_1200_deep_folder_is_the_candidates_fail_and_leaves_no_debris(
    project: Path, backend: str
) -> None:
    done = _run(project, "mess-deep", backend)
    verdict = _agents_fail(project, done)
    assert "deep" in str(verdict["reason"]), verdict
    # Nothing left behind breaks the next commands.
    again = _run(project, "mess-deep", backend)
    _agents_fail(project, again)
    pruned = harness(project, "sandbox", "prune")
    assert pruned.returncode == 0, pruned.stdout + pruned.stderr
    assert "Traceback" not in pruned.stderr, pruned.stderr


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_disk_filled_to_its_quota_is_the_candidates_fail(project: Path, backend: str) -> None:
    # The verifier's disk is smaller than the agent's: the candidate fills it to the brim.
    _verifier_disk(project, 32)
    done = _run(project, "mess-disk", backend)
    verdict = _agents_fail(project, done)
    assert verdict["failure_type"] in ("disk", "test_failure"), verdict


@pytest.mark.parametrize("backend", BACKENDS)
def test_candidate_code_exiting_127_is_not_the_verifier_failing_to_start(
    project: Path, backend: str
) -> None:
    done = _run(project, "mess-exit127", backend)
    verdict = _agents_fail(project, done)
    assert verdict["failure_type"] == "test_failure", verdict


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_verifier_command_that_is_missing_is_still_an_evaluator_error(
    project: Path, backend: str
) -> None:
    case = project / "cases" / "add-0" / "case.yaml"
    text = case.read_text().replace("version: 1", "version: 2")
    case.write_text(text.replace("command: [python3,", "command: [no-such-runner,"))
    assert harness(project, "cases", "lock").returncode == 0
    _run(project, "mess-exit127", backend)
    verdict = _verdict(project)
    assert verdict["outcome"] == "evaluator_error", verdict
    assert "no-such-runner" in str(verdict["reason"]), verdict


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_replayed_candidate_with_a_link_out_of_its_tree_is_judged_again(
    project: Path, backend: str
) -> None:
    done = _run(project, "mess-outside-link", backend)
    first = _agents_fail(project, done)
    run_id = Store(project / ".harness").resolve_run("latest")
    release = f"  replayer:\n    agent: {{adapter: replay, replay_run: {run_id}}}\n"
    (project / "harness.yaml").write_text((project / "harness.yaml").read_text() + release)
    again = _run(project, "replayer", backend)
    replayed = _agents_fail(project, again)
    assert replayed["failure_type"] == first["failure_type"], (first, replayed)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_hard_link_to_a_fifo_is_left_out_with_the_fifo(project: Path, backend: str) -> None:
    # Neither FIFO is part of the snapshot, so neither is the link between them: the
    # candidate is judged on what is left (the unfixed bug), never blocked.
    done = _run(project, "mess-fifo-link", backend)
    verdict = _agents_fail(project, done)
    assert verdict["failure_type"] == "test_failure", verdict


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_path_over_path_max_is_the_candidates_fail_without_a_host_path(
    project: Path, backend: str
) -> None:
    done = _run(project, "mess-long-path", backend)
    verdict = _agents_fail(project, done)
    assert verdict["failure_type"] == "files", verdict
    assert "1024 bytes" in str(verdict["reason"]), verdict
    # Nothing shown to reviewers names a host folder (the session's or the candidate's).
    shown = str(verdict) + done.stdout + done.stderr
    assert tempfile.gettempdir() + "/" not in shown, shown
    assert "harness-candidate" not in shown and "harness-trial" not in shown, shown
    # Nothing left behind breaks the next commands.
    pruned = harness(project, "sandbox", "prune")
    assert pruned.returncode == 0, pruned.stdout + pruned.stderr
    assert "Traceback" not in pruned.stderr, pruned.stderr


def test_deep_debris_of_a_dead_run_is_pruned_not_fatal(tmp_path: Path) -> None:
    """A folder 1,200 deep left by an earlier crashed run: prune removes it, exit 0."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    debris = tmp_path / f"harness-trial-p{dead.pid}-leftover"
    debris.mkdir()
    here = os.getcwd()
    os.chdir(debris)
    try:
        for _ in range(1200):
            os.mkdir("d")
            os.chdir("d")
    finally:
        os.chdir(here)
    old = debris.stat().st_mtime - 3600
    os.utime(debris, (old, old))  # older than any process that could reuse the pid
    done = harness(tmp_path, "sandbox", "prune", env={"TMPDIR": str(tmp_path)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert not debris.exists()


@pytest.mark.docker
def test_a_hard_link_bomb_is_over_the_size_bound_on_both_backends_and_stops_early(
    project: Path,
) -> None:
    # Every link counts its file's full size (each step reads the tree path by path), so
    # the fixed candidate is over its 64 MiB bound on both backends alike, and found so
    # before the harness reads gigabytes: the candidate step stays short on both.
    store = Store(project / ".harness")
    seen: dict[str, tuple[int, dict[str, object], float]] = {}
    for backend in ("local", "docker"):
        done = _run(project, "mess-hard-links", backend)
        (rec,) = store.trials(store.resolve_run("latest"))
        assert rec.steps is not None
        seen[backend] = (done.returncode, rec.verdict.model_dump(mode="json"), rec.steps.candidate)
    # Reading every link took 27 s on two cores (16 GiB); counting them stops at the 17th.
    assert all(s < 20 for _, _, s in seen.values()), seen
    (local_rc, local, _), (docker_rc, docker, _) = seen["local"], seen["docker"]
    assert local["outcome"] == "fail" and local["failure_type"] == "disk", local
    assert local_rc == docker_rc == 1, seen  # the gate's "fail", not blocked
    for field in ("outcome", "failure_type", "reason"):
        assert docker[field] == local[field], (local, docker)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", sorted(RETRIED - {"small-files"}))
def test_what_an_attempt_leaves_in_its_tree_is_never_the_next_sessions_failure(
    project: Path, backend: str, mode: str
) -> None:
    """An outside red team (round fourteen) blocked the gate on the local backend from a
    first attempt: ``chmod 000`` on the workspace (the next sessions could not enter it), or
    the workspace filled to its tmpfs's brim (the next session's protocol folder, on the
    same tmpfs, could not take the feedback). Both are the agent's own failure."""
    # The verifier's disk is larger than the agent's: the filled tree is judged, and fed back.
    _verifier_disk(project, 128)
    done = _run(project, f"mess-{mode}", backend)
    _agents_fail(project, done)
    store = Store(project / ".harness")
    (rec,) = store.trials(store.resolve_run("latest"))
    assert len(rec.attempts) == 2, rec  # the second attempt ran


def test_a_candidate_that_fits_its_byte_bound_but_not_the_verifiers_disk_ends_the_loop(
    project: Path,
) -> None:
    """3,000 one-byte files pass the candidate's byte bound but take a block each on the
    verifier's 4 MiB disk, so the verifier's copy overflows: the candidate's ``disk`` fail,
    and the correction loop stops there (nothing to hand on), never an infrastructure
    error."""
    _verifier_disk(project, 4)
    done = _run(project, "mess-small-files", "local")
    assert done.returncode == 1, done.stdout + done.stderr
    store = Store(project / ".harness")
    (rec,) = store.trials(store.resolve_run("latest"))
    assert (rec.verdict.outcome.value, rec.verdict.failure_type.value) == ("fail", "disk")
    assert rec.stop_reason == "candidate_too_large" and len(rec.attempts) == 1, rec
