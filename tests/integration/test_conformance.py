"""Every sandbox backend passes the shipped conformance suite (harness.sandbox.conformance).

Backends come from ``BACKENDS`` in conftest.py ("local" always; "docker" is added there).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cases.model import PhaseContract
from harness.sandbox.base import Sandbox
from harness.sandbox.conformance import conformance_checks

pytestmark = pytest.mark.integration

CHECK_NAMES = sorted(conformance_checks())


def test_suite_covers_the_required_behaviours() -> None:
    assert set(CHECK_NAMES) == {
        "closed_session_leaves_no_files",
        "drop_box",
        "endpoint_relay",
        "env_allowlist",
        "exec_exit_codes_and_output",
        "files_write_read_remove",
        "fork_bomb_contained",
        "memory_bound",
        "network_denied",
        "read_only_root",
        "stdout_truncation_recorded",
        "unprivileged",
        "view_mounts_path_env",
        "wall_clock_kills_grandchild",
        "workspace_round_trip",
    }


@pytest.mark.parametrize("check_name", CHECK_NAMES)
def test_conformance(
    check_name: str, sandbox: Sandbox, base_contract: PhaseContract, tmp_path: Path
) -> None:
    conformance_checks(base_contract)[check_name](sandbox, tmp_path)


# Where the Docker backend's two ways differ: how files and mounts reach a command. Running
# a command is the same code both ways (CommandContainers), checked by test_conformance.
VOLUMES_CHECKS = [
    "closed_session_leaves_no_files",
    "drop_box",
    "endpoint_relay",
    "files_write_read_remove",
    "read_only_root",
    "unprivileged",
    "view_mounts_path_env",
    "workspace_round_trip",
]


def test_the_volumes_checks_are_checks() -> None:
    assert set(VOLUMES_CHECKS) <= set(CHECK_NAMES)


@pytest.mark.docker
@pytest.mark.parametrize("check_name", VOLUMES_CHECKS)
def test_conformance_docker_volumes(
    check_name: str, docker_volumes: Sandbox, tmp_path: Path
) -> None:
    """The Docker backend's other way of keeping files: engine volumes and a holder."""
    contract = PhaseContract(image=None)
    with docker_volumes.open(contract, label="mode") as s:
        assert type(s).__name__ == "DockerSession"
    conformance_checks(contract)[check_name](docker_volumes, tmp_path)
