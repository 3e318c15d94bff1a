"""Engine-level helpers of the Docker backend: connection, image lookup, error mapping, prune.

Everything here talks to the engine as a whole, not to one session: :func:`connect` opens a
checked client, :func:`find_image` looks an image up, :func:`engine_errors` (``docker_engine``)
is the single boundary that turns the SDK's, ``requests``' and the socket's exceptions into
:class:`~harness.errors.SandboxUnavailableError`, and :func:`prune` sweeps the
harness-labelled containers and volumes left behind by dead owners: every object the
harness creates carries :func:`owner_labels` (host, pid, boot id) for that.
:mod:`harness.sandbox.docker` re-exports every public name.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import socket
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from harness.errors import SandboxUnavailableError
from harness.sandbox._docker_sdk import docker, requests
from harness.sandbox.owner import owner_alive

__all__ = [
    "BOOT_LABEL",
    "DEFAULT_IMAGE",
    "LABEL",
    "OWNER_LABEL",
    "SEED_LABEL",
    "PruneReport",
    "connect",
    "engine_errors",
    "find_image",
    "owner_labels",
    "owner_state",
    "prune",
]

DEFAULT_IMAGE = "harness-base:bookworm"
LABEL = "harness.managed"
SEED_LABEL = "harness.seed"
"""Image label naming a folder copied into a fresh session's workspace (case images)."""
ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException, OSError)


def engine_unavailable(what: str, exc: BaseException, reason: str) -> SandboxUnavailableError:
    msg = str(getattr(exc, "explanation", None) or exc).strip() or type(exc).__name__
    if "no space left on device" in msg.lower():  # a session volume's size bound is full
        reason = "disk_full"
    return SandboxUnavailableError(f"docker: {what}: {msg}", reason=reason)


@contextlib.contextmanager
def docker_engine(what: str, reason: str = "engine_error") -> Iterator[None]:
    """Translate every foreign engine exception into SandboxUnavailableError (one boundary)."""
    try:
        yield
    except docker.errors.ImageNotFound as exc:
        raise engine_unavailable(what, exc, "image_missing") from exc
    except docker.errors.NotFound as exc:
        raise engine_unavailable(what, exc, "container_gone") from exc
    except (requests.exceptions.ConnectionError, ConnectionError) as exc:
        raise engine_unavailable(what, exc, "engine_unreachable") from exc
    except ENGINE_ERRORS as exc:
        raise engine_unavailable(what, exc, reason) from exc


engine_errors = docker_engine


def find_image(client: Any, ref: str) -> Any | None:
    """Return the local image ``ref``, or ``None`` when the engine does not have it.

    Raises:
        SandboxUnavailableError: the engine cannot be asked.

    """
    with docker_engine(f"looking up image {ref!r}", "engine_error"):
        try:
            return client.images.get(ref)
        except docker.errors.ImageNotFound:
            return None


def connect(timeout: float = 60.0) -> Any:
    """Return a docker client from the environment (``DOCKER_HOST`` etc.), checked alive.

    Raises:
        SandboxUnavailableError: the engine cannot be reached (reason ``engine_unreachable``).

    """
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if host.startswith("unix://"):
        # Probe the socket ourselves: the SDK leaks its socket when the connect fails.
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.settimeout(min(timeout, 5.0))
            probe.connect(host[len("unix://") :])
        except OSError as exc:
            raise SandboxUnavailableError(
                f"docker: cannot reach the engine at {host} ({exc.strerror or exc}); "
                "is dockerd running? (ci/docker-up.sh starts one)",
                reason="engine_unreachable",
            ) from None
        finally:
            probe.close()
    with docker_engine(
        "connecting to the engine (is dockerd running? DOCKER_HOST?)", "engine_unreachable"
    ):
        client = docker.from_env(timeout=int(timeout))
        try:
            client.ping()
        except BaseException:
            client.close()
            raise
        return client


class PruneReport(BaseModel):
    """What :func:`prune` removed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    containers: tuple[str, ...] = ()
    """Names of removed containers."""
    volumes: tuple[str, ...] = ()
    """Names of removed volumes."""
    unknown: int = 0
    """Containers and volumes kept because their owner cannot be judged from this host."""


def _created(text: str) -> float:
    """Parse the engine's RFC 3339 timestamps (nanoseconds, ``Z``) into epoch seconds."""
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)?", text)
    if not m:
        return 0.0
    frac = float(m.group(2) or 0.0)
    tz = m.group(3) or "Z"
    stamp = dt.datetime.fromisoformat(m.group(1) + ("+00:00" if tz == "Z" else tz))
    return stamp.timestamp() + frac


OWNER_LABEL = "harness.owner"
"""``<hostname>:<pid>`` of the harness process that created an object."""
BOOT_LABEL = "harness.owner.boot"
"""The kernel's boot id when the object was created (a pid means nothing after a reboot)."""


def _boot_id() -> str:
    with contextlib.suppress(OSError):
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return ""


def owner_labels() -> dict[str, str]:
    """Labels naming this process as the owner of an engine object (see :func:`prune`)."""
    return {OWNER_LABEL: f"{socket.gethostname()}:{os.getpid()}", BOOT_LABEL: _boot_id()}


def owner_state(labels: Mapping[str, str], created: float) -> str:
    """``alive``, ``dead`` or ``unknown``: the owner of an object created at ``created``.

    Dead: the owner ran on this host and its pid is gone, belongs to a process started
    after the object was created (reused), or belongs to an earlier boot. Unknown: no
    owner label (an older harness) or another host's process, which this host cannot see.
    """
    host, _, pid = labels.get(OWNER_LABEL, "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return "unknown"
    boot = labels.get(BOOT_LABEL)
    if boot and boot != _boot_id():
        return "dead"
    return "alive" if owner_alive(int(pid), created or None) else "dead"


def prune(
    client: Any | None = None,
    older_than: float | dt.timedelta | None = None,
    *,
    orphans_only: bool = True,
    run_id: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> PruneReport:
    """Remove harness-labelled containers and volumes left behind (``harness sandbox prune``).

    By default only orphans go: objects whose owner (:func:`owner_state`) is dead, so a
    sweep never touches a live run's sandboxes. ``orphans_only=False`` removes every
    matching object, live or of unknown owner. ``older_than`` (seconds or a timedelta)
    keeps anything younger; ``run_id`` and ``labels`` restrict the sweep to objects that
    carry ``harness.run=<run_id>`` and every ``labels`` pair. What stays because its owner
    cannot be judged is counted in :attr:`PruneReport.unknown`.

    Raises:
        SandboxUnavailableError: the engine cannot be reached or refuses the removal.

    """
    client = client if client is not None else connect()
    age = older_than.total_seconds() if isinstance(older_than, dt.timedelta) else older_than
    now = time.time()
    unknown = 0

    def doomed(labels: Mapping[str, str], created: str) -> bool:
        nonlocal unknown
        made = _created(created)
        if age is not None and now - made < age:
            return False
        if not orphans_only:
            return True
        state = owner_state(labels, made)
        unknown += state == "unknown"
        return state == "dead"

    wanted = {**(labels or {}), **({"harness.run": run_id} if run_id else {})}
    flt = {"label": [f"{LABEL}=1", *(f"{k}={v}" for k, v in wanted.items())]}
    gone_c: list[str] = []
    gone_v: list[str] = []
    with docker_engine("pruning harness containers"):
        # A container removed between the list and its inspection (another sweep, a run
        # closing its sessions) is what a sweep wants: skipped, never an error.
        for c in client.containers.list(all=True, filters=flt, ignore_removed=True):
            if doomed(c.labels, c.attrs.get("Created", "")):
                with contextlib.suppress(docker.errors.NotFound):
                    c.remove(force=True)
                    gone_c.append(c.name)
        for v in client.volumes.list(filters=flt):
            if doomed(v.attrs.get("Labels") or {}, v.attrs.get("CreatedAt", "")):
                try:
                    v.remove(force=True)
                    gone_v.append(v.name)
                except docker.errors.NotFound:
                    pass
                except docker.errors.APIError as exc:
                    if exc.status_code != 409:  # 409: still in use by a live session
                        raise
    return PruneReport(
        containers=tuple(sorted(gone_c)), volumes=tuple(sorted(gone_v)), unknown=unknown
    )
