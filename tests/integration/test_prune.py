"""``harness sandbox prune`` through the CLI against the real engine: only orphans go.

Every object these tests create carries a unique ``harness.test`` label and every prune
they run is restricted to it with ``--label``, so other runs' containers on the shared
engine are never candidates. Local folders are swept in a private ``TMPDIR``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.errors import SandboxUnavailableError
from harness.sandbox.docker import (
    BOOT_LABEL,
    DEFAULT_IMAGE,
    LABEL,
    OWNER_LABEL,
    connect,
    owner_state,
)
from harness.sandbox.docker import find_image as _find_image

pytestmark = [pytest.mark.docker, pytest.mark.integration]


def _need(reason: str) -> None:
    if os.environ.get("HARNESS_REQUIRE_DOCKER") == "1":
        pytest.fail(f"HARNESS_REQUIRE_DOCKER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    try:
        c = connect(timeout=30)
    except SandboxUnavailableError as exc:
        _need(f"no Docker engine ({exc}); run ci/docker-up.sh")
    if _find_image(c, DEFAULT_IMAGE) is None:
        c.close()
        _need(f"base image {DEFAULT_IMAGE} missing; run ci/docker-up.sh")
    yield c
    c.close()


@pytest.fixture
def tag(client: Any) -> Iterator[str]:
    """A label value unique to this test; everything carrying it is removed afterwards."""
    value = f"pytest-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    yield value
    flt = {"label": f"harness.test={value}"}
    for c in client.containers.list(all=True, filters=flt):
        c.remove(force=True)
    for v in client.volumes.list(filters=flt):
        v.remove(force=True)


@pytest.fixture
def live_pid() -> Iterator[int]:
    proc = subprocess.Popen(["sleep", "600"])
    yield proc.pid
    proc.kill()
    proc.wait()


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _boot() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def _prune(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env.update(TMPDIR=str(tmp_path), HARNESS_CACHE_DIR=str(tmp_path / "cache"))
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "sandbox", "prune", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )


def test_prune_removes_only_what_dead_owners_left(
    client: Any, tag: str, live_pid: int, tmp_path: Path
) -> None:
    host, boot = socket.gethostname(), _boot()
    owners = {
        "live": {OWNER_LABEL: f"{host}:{live_pid}", BOOT_LABEL: boot},
        "dead": {OWNER_LABEL: f"{host}:{_dead_pid()}", BOOT_LABEL: boot},
        "reboot": {OWNER_LABEL: f"{host}:{live_pid}", BOOT_LABEL: "an-earlier-boot"},
        "elsewhere": {OWNER_LABEL: f"another-host-{tag}:{live_pid}", BOOT_LABEL: boot},
        "unowned": {},
    }
    names = {}
    for what, owner in owners.items():
        labels = {LABEL: "1", "harness.test": tag, **owner}
        names[what] = f"harness-{tag}-{what}"
        client.containers.create(
            DEFAULT_IMAGE, ["true"], name=names[what], labels=labels, network_mode="none"
        )
        client.volumes.create(name=names[what], driver="local", labels=labels)

    def left() -> tuple[set[str], set[str]]:
        flt = {"label": f"harness.test={tag}"}
        return (
            {c.name for c in client.containers.list(all=True, filters=flt)},
            {v.name for v in client.volumes.list(filters=flt)},
        )

    done = _prune(tmp_path, "--label", f"harness.test={tag}")
    assert done.returncode == 0, done.stdout + done.stderr
    gone = {names["dead"], names["reboot"]}
    for name in gone:
        assert f"removed container {name}" in done.stdout
        assert f"removed volume {name}" in done.stdout
    assert "kept 4 container(s)/volume(s) whose owner cannot be judged" in done.stdout
    kept = {names["live"], names["elsewhere"], names["unowned"]}
    assert left() == (kept, kept)

    done = _prune(tmp_path, "--all", "--label", f"harness.test={tag}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert left() == (set(), set())


def test_prune_help_and_bad_label(tmp_path: Path) -> None:
    done = _prune(tmp_path, "--help")
    assert done.returncode == 0 and "--all" in done.stdout and "LIVE" in done.stdout
    done = _prune(tmp_path, "--label", "no-equals-sign")
    assert done.returncode == 2
    assert "'no-equals-sign' is not KEY=VALUE" in done.stderr and "Traceback" not in done.stderr


def test_owner_state_judges_host_boot_pid_and_reuse(live_pid: int) -> None:
    host, boot = socket.gethostname(), _boot()
    now = time.time()

    def state(owner: str, made: float = now, boot_id: str = boot) -> str:
        return owner_state({OWNER_LABEL: owner, BOOT_LABEL: boot_id}, made)

    assert state(f"{host}:{live_pid}") == "alive"
    assert state(f"{host}:{_dead_pid()}") == "dead"
    assert state(f"{host}:{live_pid}", boot_id="an-earlier-boot") == "dead"
    # The pid is alive but its process started an hour after the object was made: reused.
    assert state(f"{host}:{live_pid}", made=now - 3600) == "dead"
    assert state(f"another-host:{live_pid}") == "unknown"
    assert state("not-an-owner") == "unknown"
    assert owner_state({}, now) == "unknown"
