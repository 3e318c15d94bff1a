"""Backends under test for the integration suite.

``BACKENDS`` maps a backend name to a factory ``(tmp_path) -> Sandbox``. The conformance
suite (test_conformance.py) runs every check against every entry.

DOCKER HOOK: the Docker backend's engineer adds ``"docker"`` here, e.g.::

    def _docker(tmp: Path) -> Sandbox:
        from harness.sandbox.docker import DockerSandbox
        return DockerSandbox()

    BACKENDS["docker"] = _docker
    BACKEND_BASE_CONTRACTS["docker"] = PhaseContract(image="python:3.11-slim")
    BACKEND_MARKS["docker"] = [pytest.mark.docker]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.cases.model import PhaseContract
from harness.sandbox.base import Sandbox
from harness.sandbox.local import LocalSandbox


def _local(tmp: Path) -> Sandbox:
    return LocalSandbox(base_dir=tmp / "sessions")


BACKENDS: dict[str, Callable[[Path], Sandbox]] = {"local": _local}
"""Backend name -> factory. Add "docker" here (see the module docstring)."""

BACKEND_BASE_CONTRACTS: dict[str, PhaseContract] = {}
"""Backend name -> base contract for the conformance checks (e.g. the image to use)."""

BACKEND_MARKS: dict[str, list[pytest.MarkDecorator]] = {"local": []}
"""Backend name -> extra pytest marks (e.g. ``pytest.mark.docker``)."""


def _docker(tmp: Path, files: str | None = None) -> Sandbox:
    """The Docker backend; a missing engine skips, or fails with HARNESS_REQUIRE_DOCKER=1.

    ``files``: where its sessions keep their files (``DockerSandbox(files=)``; by default
    host tmpfs when the engine is local, as on CI).
    """
    import os

    from harness.errors import SandboxUnavailableError
    from harness.sandbox.docker import DEFAULT_IMAGE, DockerSandbox, connect, find_image

    why = None
    try:
        client = _DOCKER_CLIENT[0] if _DOCKER_CLIENT else connect(timeout=30)
        if find_image(client, DEFAULT_IMAGE) is None:
            client.close()
            why = f"base image {DEFAULT_IMAGE} missing; run ci/docker-up.sh"
    except SandboxUnavailableError as exc:
        why = f"no Docker engine ({exc}); run ci/docker-up.sh"
    if why is not None:
        if os.environ.get("HARNESS_REQUIRE_DOCKER") == "1":
            pytest.fail(f"HARNESS_REQUIRE_DOCKER=1 but {why}", pytrace=False)
        pytest.skip(why)
    _DOCKER_CLIENT[:] = [client]  # one client for the session: no leaked connections
    return DockerSandbox(client, run_id="pytest-conformance", files=files)


_DOCKER_CLIENT: list[object] = []


BACKENDS["docker"] = _docker
BACKEND_BASE_CONTRACTS["docker"] = PhaseContract(image=None)  # default harness-base:bookworm
BACKEND_MARKS["docker"] = [pytest.mark.docker]


@pytest.fixture
def docker_volumes(tmp_path: Path) -> Sandbox:
    """The Docker backend keeping its sessions' files in engine volumes (remote engines)."""
    return _docker(tmp_path, files="volumes")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize every test asking for ``backend_name`` over ``BACKENDS``."""
    if "backend_name" in metafunc.fixturenames:
        metafunc.parametrize(
            "backend_name",
            [pytest.param(n, marks=BACKEND_MARKS.get(n, []), id=n) for n in BACKENDS],
        )


@pytest.fixture
def sandbox(backend_name: str, tmp_path: Path) -> Sandbox:
    """A fresh backend instance for ``backend_name``."""
    return BACKENDS[backend_name](tmp_path)


@pytest.fixture
def base_contract(backend_name: str) -> PhaseContract:
    """The base contract the conformance checks derive theirs from."""
    return BACKEND_BASE_CONTRACTS.get(backend_name, PhaseContract())


@pytest.fixture(scope="module")
def docker_client() -> Iterator[Any]:
    """A checked engine client with the base image; skips (or fails, see above) without one."""
    import os

    from harness.errors import SandboxUnavailableError
    from harness.sandbox.docker import DEFAULT_IMAGE, connect, find_image

    def need(reason: str) -> None:
        if os.environ.get("HARNESS_REQUIRE_DOCKER") == "1":
            pytest.fail(f"HARNESS_REQUIRE_DOCKER=1 but {reason}", pytrace=False)
        pytest.skip(reason)

    try:
        client = connect(timeout=30)
    except SandboxUnavailableError as exc:
        need(f"no Docker engine ({exc}); run ci/docker-up.sh")
    if find_image(client, DEFAULT_IMAGE) is None:
        client.close()
        need(f"base image {DEFAULT_IMAGE} missing; run ci/docker-up.sh")
    yield client
    client.close()
