"""The whole pipeline on the Docker backend gives the same verdicts as the local backend."""

from __future__ import annotations

import json
import os

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
    assert done.returncode in (0, 3), done.stdout + done.stderr
    shown = json.loads(harness(root, "show", "--json").stdout)
    assert shown["release"]["backend"] == backend
    return {
        f"{t['key']['case_id']}#{t['key']['trial']}": t["verdict"]["outcome"]
        + ":"
        + str(t["verdict"].get("failure_type"))
        for t in shown["trials"]
    }


@pytest.mark.parametrize("release", ["good", "bad", "learner"])
def test_same_verdicts_on_docker_and_local(docker_engine, tmp_path, release):
    root = make_project(tmp_path / "proj", n_cases=2)
    assert harness(root, "cases", "lock").returncode == 0
    built = harness(root, "images", "build")
    assert built.returncode == 0, built.stderr
    assert built.stdout.count("sha256:") == 2
    again = harness(root, "images", "build")
    assert again.stdout == built.stdout, "rebuilding with unchanged inputs is a no-op"
    local = _verdicts(root, "local", release)
    docker = _verdicts(root, "docker", release)
    assert docker == local
    shown = json.loads(harness(root, "show", "--json").stdout)
    assert set(shown["release"]["system"]["case_images"]) == {"add-0", "add-1"}
    assert all(t["attempts"][0]["verifier"]["image_id"] for t in shown["trials"])
