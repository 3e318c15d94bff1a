"""The whole pipeline on the Docker backend gives the same verdicts as the local backend."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest
from support import harness, make_project

pytestmark = [pytest.mark.docker, pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def docker_engine() -> None:
    from harness.errors import SandboxUnavailableError
    from harness.sandbox.docker import DEFAULT_IMAGE, connect, find_image

    try:
        client = connect(timeout=30)
    except SandboxUnavailableError as exc:
        why = f"no Docker engine ({exc}); run ci/docker-up.sh"
    else:
        found = find_image(client, DEFAULT_IMAGE) is not None
        client.close()
        if found:
            return
        why = f"base image {DEFAULT_IMAGE} missing; run ci/docker-up.sh"
    if os.environ.get("HARNESS_REQUIRE_DOCKER") == "1":
        pytest.fail(f"HARNESS_REQUIRE_DOCKER=1 but {why}", pytrace=False)
    pytest.skip(why)


def _verdicts(root, backend: str, release: str) -> dict[str, str]:
    done = harness(
        root, "run", "--release", release, "--k", "2", "--backend", backend, "--no-report"
    )
    assert done.returncode in (0, 1, 3), done.stdout + done.stderr  # judged, never blocked
    shown = json.loads(harness(root, "show", "--json").stdout)
    assert shown["release"]["backend"] == backend
    return {
        f"{t['key']['case_id']}#{t['key']['trial']}": t["verdict"]["outcome"]
        + ":"
        + str(t["verdict"].get("failure_type"))
        for t in shown["trials"]
    }


@pytest.fixture(scope="module")
def built(docker_engine, tmp_path_factory) -> Path:
    """A two-case project with its case images built (one build for the releases below)."""
    root = make_project(tmp_path_factory.mktemp("parity") / "proj", n_cases=2)
    assert harness(root, "cases", "lock").returncode == 0
    built = harness(root, "images", "build")
    assert built.returncode == 0, built.stderr
    assert built.stdout.count("sha256:") == 2
    again = harness(root, "images", "build")
    assert again.stdout == built.stdout, "rebuilding with unchanged inputs is a no-op"
    return root


@pytest.mark.parametrize("release", ["good", "bad", "learner"])
def test_same_verdicts_on_docker_and_local(built, release):
    root = built
    local = _verdicts(root, "local", release)
    docker = _verdicts(root, "docker", release)
    assert docker == local
    shown = json.loads(harness(root, "show", "--json").stdout)
    assert set(shown["release"]["system"]["case_images"]) == {"add-0", "add-1"}
    assert all(t["attempts"][0]["verifier"]["image_id"] for t in shown["trials"])


def test_container_killed_from_outside_mid_trial_blocks_the_run(docker_engine, tmp_path):
    import threading
    import time

    from harness.sandbox.docker import connect

    root = make_project(tmp_path / "proj", n_cases=1)
    assert harness(root, "cases", "lock").returncode == 0
    client = connect()
    killed: list[str] = []
    stop = threading.Event()

    def killer() -> None:
        while not stop.is_set() and not killed:
            for c in client.containers.list(filters={"label": "harness.role=exec"}):
                if "sleep" in " ".join(c.attrs.get("Args", [])) or "sleep" in str(
                    c.attrs["Config"].get("Cmd")
                ):
                    time.sleep(1.0)
                    c.kill()
                    killed.append(c.name)
                    break
            time.sleep(0.2)

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        done = harness(
            root, "run", "--release", "sleepy", "--k", "1", "--backend", "docker", "--no-report"
        )
    finally:
        stop.set()
        thread.join(10)
        client.close()
    assert killed, "the test must have killed a running agent container"
    assert done.returncode == 4, done.stdout + done.stderr
    shown = json.loads(harness(root, "show", "--json").stdout)
    [trial] = shown["trials"]
    assert trial["verdict"]["outcome"] == "infra_error"
    assert (
        "kill" in trial["verdict"]["reason"].lower()
        or "outside" in trial["verdict"]["reason"].lower()
    )


def test_sigkilled_run_leaves_no_containers_once_the_next_run_starts(docker_engine, tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from harness.sandbox.docker import connect

    root = make_project(tmp_path / "proj", n_cases=1)
    assert harness(root, "cases", "lock").returncode == 0
    client = connect()
    try:
        argv = [sys.executable, "-m", "harness.cli", "run", "--release", "sleepy", "--k", "1"]
        proc = subprocess.Popen(
            [*argv, "--backend", "docker", "--no-report"],
            cwd=root,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

        def mine() -> list[Any]:
            return client.containers.list(
                all=True,
                filters={"label": f"harness.owner={socket.gethostname()}:{proc.pid}"},
                ignore_removed=True,
            )

        def agent_running() -> bool:
            # The preflight's containers come and go; the sleepy agent's command container
            # lives for 8 s, so a kill while it runs is sure to strand something.
            return any("sleep 8" in " ".join(c.attrs["Args"] or []) for c in mine())

        deadline = time.monotonic() + 120
        while not agent_running() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert agent_running(), "the run must have started the agent before it is killed"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert mine(), "a killed run leaves its containers behind until someone sweeps"
        done = harness(root, "run", "--release", "good", "--k", "1", "--backend", "docker")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "leftover sandbox" in done.stderr
        assert mine() == []
    finally:
        client.close()
