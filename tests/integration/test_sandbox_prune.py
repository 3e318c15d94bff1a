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
from support import harness

from harness.env.images import export_env
from harness.env.model import BuiltEnv, EnvIdentity
from harness.sandbox.docker import (
    BOOT_LABEL,
    DEFAULT_IMAGE,
    LABEL,
    OWNER_LABEL,
    owner_state,
)

pytestmark = [pytest.mark.docker, pytest.mark.integration]


@pytest.fixture
def tag(docker_client: Any) -> Iterator[str]:
    """A label value unique to this test; everything carrying it is removed afterwards."""
    value = f"pytest-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    yield value
    flt = {"label": f"harness.test={value}"}
    for c in docker_client.containers.list(all=True, filters=flt):
        c.remove(force=True)
    for v in docker_client.volumes.list(filters=flt):
        v.remove(force=True)


def _boot() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def _prune(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    private = {"TMPDIR": str(tmp_path), "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    return harness(tmp_path, "sandbox", "prune", *args, env=private)


def test_prune_removes_only_what_dead_owners_left(
    docker_client: Any, tag: str, live_pid: int, dead_pid: int, tmp_path: Path
) -> None:
    host, boot = socket.gethostname(), _boot()
    owners = {
        "live": {OWNER_LABEL: f"{host}:{live_pid}", BOOT_LABEL: boot},
        "dead": {OWNER_LABEL: f"{host}:{dead_pid}", BOOT_LABEL: boot},
        "reboot": {OWNER_LABEL: f"{host}:{live_pid}", BOOT_LABEL: "an-earlier-boot"},
        "elsewhere": {OWNER_LABEL: f"another-host-{tag}:{live_pid}", BOOT_LABEL: boot},
        "unowned": {},
    }
    names = {}
    for what, owner in owners.items():
        labels = {LABEL: "1", "harness.test": tag, **owner}
        names[what] = f"harness-{tag}-{what}"
        docker_client.containers.create(
            DEFAULT_IMAGE, ["true"], name=names[what], labels=labels, network_mode="none"
        )
        docker_client.volumes.create(name=names[what], driver="local", labels=labels)

    def left() -> tuple[set[str], set[str]]:
        flt = {"label": f"harness.test={tag}"}
        return (
            {c.name for c in docker_client.containers.list(all=True, filters=flt)},
            {v.name for v in docker_client.volumes.list(filters=flt)},
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


def test_owner_state_judges_host_boot_pid_and_reuse(live_pid: int, dead_pid: int) -> None:
    host, boot = socket.gethostname(), _boot()
    now = time.time()

    def state(owner: str, made: float = now, boot_id: str = boot) -> str:
        return owner_state({OWNER_LABEL: owner, BOOT_LABEL: boot_id}, made)

    assert state(f"{host}:{live_pid}") == "alive"
    assert state(f"{host}:{dead_pid}") == "dead"
    assert state(f"{host}:{live_pid}", boot_id="an-earlier-boot") == "dead"
    # The pid is alive but its process started an hour after the object was made: reused.
    assert state(f"{host}:{live_pid}", made=now - 3600) == "dead"
    assert state(f"another-host:{live_pid}") == "unknown"
    assert state("not-an-owner") == "unknown"
    assert owner_state({}, now) == "unknown"


_EXPORT = """
import json, sys
from harness.env.model import BuiltEnv
from harness.env.images import export_env
from harness.sandbox.docker import connect
client = connect()
out = export_env(client, sys.argv[1], BuiltEnv.model_validate_json(sys.argv[2]))
print(out.prefix)
client.close()
"""


@pytest.fixture
def env_image(docker_client: Any, tag: str) -> Iterator[tuple[str, BuiltEnv]]:
    """A tiny image holding an environment folder where ``export_env`` looks for it."""
    import io
    import tarfile

    built = BuiltEnv(
        digest="sha256:" + "ab" * 32,
        identity=EnvIdentity(
            implementation="cpython", version="3.11", soabi="", platform="", distributions={}
        ),
        prefix="",
        interpreter="/usr/bin/python3",
        fingerprint="",
        build_key=tag,
    )
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        path = built.mount.lstrip("/")
        parts = path.split("/")
        for i in range(1, len(parts) + 1):
            info = tarfile.TarInfo("/".join(parts[:i]))
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        data = b"#!/bin/sh\n"
        info = tarfile.TarInfo(f"{path}/bin-python")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    ctr = docker_client.containers.create(DEFAULT_IMAGE, ["true"], labels={"harness.test": tag})
    try:
        assert ctr.put_archive("/", buf.getvalue())
        image = ctr.commit(repository="harness-pytest-export", tag=tag)
    finally:
        ctr.remove(force=True)
    yield str(image.id), built
    docker_client.images.remove(image.id, force=True)


def test_prune_removes_an_exported_environment_only_when_no_live_run_holds_it(
    docker_client: Any,
    env_image: tuple[str, BuiltEnv],
    tag: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    image_id, built = env_image
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env["HARNESS_CACHE_DIR"] = str(tmp_path / "cache")
    done = subprocess.run(
        [sys.executable, "-c", _EXPORT, image_id, built.model_dump_json()],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    prefix = Path(done.stdout.strip())
    assert (prefix / "bin-python").is_file()
    assert prefix.parent == tmp_path / "cache" / "docker-envs"

    # The exporting process has exited: nothing uses the export any more.
    swept = _prune(tmp_path, "--label", f"harness.test={tag}")
    assert swept.returncode == 0, swept.stdout + swept.stderr
    assert f"removed exported environment {prefix}" in swept.stdout
    assert not prefix.exists() and not prefix.with_suffix(".json").exists()

    # This (live) process exports it again and holds it: prune keeps it.
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    assert export_env(docker_client, image_id, built).prefix == str(prefix)
    swept = _prune(tmp_path, "--label", f"harness.test={tag}")
    assert swept.returncode == 0, swept.stdout + swept.stderr
    assert "exported environment" not in swept.stdout
    assert (prefix / "bin-python").is_file()
