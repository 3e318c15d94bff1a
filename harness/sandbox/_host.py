"""What the host offers the local backend, and how a contract is enforced with it.

:class:`HostCapabilities` is probed once per process (a working ``bwrap``, ``unshare --net``,
a writable cgroup tree, whether a size-limited ``tmpfs`` can be mounted);
:func:`plan_isolation` turns a contract plus those capabilities into an
:class:`IsolationPlan`, failing closed (:class:`~harness.errors.ContractUnenforceableError`)
for a bound it cannot enforce unless downgraded. The ``mount(2)``/``umount2(2)`` wrappers
used for the session tmpfs live here too. :mod:`harness.sandbox.local` re-exports the
public names.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from harness.cases.model import PhaseContract
from harness.errors import ContractUnenforceableError
from harness.sandbox._cgroup import CgroupDriver, detect_cgroups
from harness.sandbox.owner import owned_prefix

__all__ = [
    "BOUND_NAMES",
    "HostCapabilities",
    "IsolationPlan",
    "plan_isolation",
]

_SETPRIV = ("/usr/bin/setpriv", "/usr/sbin/setpriv")
BOUND_NAMES = frozenset({"network", "memory", "pids", "cpu", "disk", "read_only_root"})
_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2


class HostCapabilities(BaseModel):
    """What this host offers the local backend (detected once per process)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bwrap: str | None
    """Path of a working ``bwrap``, or ``None``."""
    bwrap_version: str | None = None
    unshare: str | None
    """Path of a working ``unshare`` (util-linux), the network fallback."""
    root: bool
    cgroups: CgroupDriver | None
    can_mount: bool
    """Whether a size-limited tmpfs can be mounted (root, mount permitted)."""
    shell: str = "/bin/sh"
    setpriv: str | None = None
    """Path of ``setpriv`` (util-linux) under ``/usr``: how a root harness drops every
    sandboxed command to :data:`~harness.sandbox.base.SANDBOX_UID`."""

    @property
    def drops_privileges(self) -> bool:
        """Whether commands must be switched to the sandbox uid (the harness runs as root)."""
        return self.root

    @classmethod
    def detect(cls) -> HostCapabilities:
        """Probe this host (cached: the probes run once per process)."""
        return _detect()


class IsolationPlan(BaseModel):
    """Mechanisms one session uses; the result of :func:`plan_isolation`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bwrap: bool
    network: Literal["bwrap", "unshare", "host", "none"]
    """How network is denied (``host``: the contract allows it; ``none``: downgraded)."""
    read_only_root: bool
    memory: Literal["cgroup", "rlimit_as", "none"]
    pids: Literal["cgroup", "none"]
    disk: Literal["tmpfs", "none"]
    cpu: Literal["rlimit+cgroup", "rlimit", "none"]
    downgraded: tuple[str, ...] = ()


def plan_isolation(
    contract: PhaseContract, caps: HostCapabilities, downgrade: frozenset[str] = frozenset()
) -> IsolationPlan:
    """Decide how to enforce ``contract`` on a host with ``caps``.

    Raises:
        ValueError: ``downgrade`` names an unknown bound.
        ContractUnenforceableError: a bound cannot be enforced and is not in ``downgrade``.

    """
    unknown = set(downgrade) - BOUND_NAMES
    if unknown:
        raise ValueError(f"unknown bound name(s) in downgrade: {sorted(unknown)}")
    downgraded: list[str] = []

    def cannot(bound: str, why: str) -> None:
        if bound not in downgrade:
            raise ContractUnenforceableError(
                f"local sandbox cannot enforce contract.{bound}: {why}; "
                f"pass downgrade={{'{bound}'}} to run without it",
                bound=bound,
            )
        downgraded.append(bound)

    if caps.drops_privileges and caps.setpriv is None:
        # Not a bound one may downgrade: a sandboxed process is never host root.
        raise ContractUnenforceableError(
            "local sandbox: the harness runs as root and `setpriv` (package util-linux) is "
            "missing from /usr/bin, so commands cannot be dropped to an unprivileged uid",
            bound="user",
        )
    network: Literal["bwrap", "unshare", "host", "none"] = "host"
    if contract.network == "none":
        if caps.bwrap:
            network = "bwrap"
        elif caps.unshare:
            network = "unshare"
        else:
            cannot("network", "neither bwrap nor a working `unshare --net` is available")
            network = "none"
    ro_root = bool(contract.read_only_root and caps.bwrap)
    if not caps.bwrap:
        # Without a mount namespace there is no sealed view either: the command would see
        # the host's files (project, store, /root). Even a contract that allows a writable
        # root must say so explicitly.
        cannot(
            "read_only_root",
            "bwrap (package bubblewrap) is not available: no read-only root and no sealed "
            "view (the command would see the host's files)",
        )
    memory: Literal["cgroup", "rlimit_as", "none"] = "cgroup" if caps.cgroups else "rlimit_as"
    if caps.cgroups and not caps.cgroups.swap_accounted:
        cannot("memory", "swap is on but the cgroup cannot account it (memsw/swap.max)")
        memory = "none"
    pids: Literal["cgroup", "none"] = "cgroup"
    if not caps.cgroups:
        cannot(
            "pids",
            "no writable cgroup with the pids controller (RLIMIT_NPROC counts "
            "every process of the user, not the sandbox, and is ignored for root)",
        )
        pids = "none"
    disk: Literal["tmpfs", "none"] = "none"
    if contract.disk_mb is not None:
        if caps.can_mount:
            disk = "tmpfs"
        else:
            cannot(
                "disk",
                "cannot mount a size-limited tmpfs (needs root); RLIMIT_FSIZE "
                "bounds single files only",
            )
    cpu: Literal["rlimit+cgroup", "rlimit", "none"] = "none"
    if contract.cpu_seconds is not None:
        has_acct = caps.cgroups is not None and "cpu" in caps.cgroups.bases
        cpu = "rlimit+cgroup" if has_acct else "rlimit"
    return IsolationPlan(
        bwrap=caps.bwrap is not None,
        network=network,
        read_only_root=ro_root,
        memory=memory,
        pids=pids,
        disk=disk,
        cpu=cpu,
        downgraded=tuple(downgraded),
    )


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def mount_tmpfs(target: Path, size_mb: int | None) -> None:
    """Mount a ``nosuid,nodev`` tmpfs of ``size_mb`` (the kernel's default when ``None``)."""
    size = f"size={size_mb}m," if size_mb is not None else ""
    opts = f"{size}mode=0700".encode()
    rc = _libc().mount(b"tmpfs", str(target).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts)
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(target))


def umount(target: Path) -> None:
    _libc().umount2(str(target).encode(), _MNT_DETACH)


def _works(argv: Sequence[str]) -> bool:
    try:
        done = subprocess.run(
            list(argv), capture_output=True, timeout=20, check=False, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@functools.cache
def _detect() -> HostCapabilities:
    root = os.geteuid() == 0
    bwrap = shutil.which("bwrap")
    version = None
    if bwrap and _works(
        [
            bwrap,
            "--ro-bind",
            "/",
            "/",
            "--unshare-net",
            "--unshare-pid",
            "--cap-drop",
            "ALL",
            "--",
            "true",
        ]
    ):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = (
                subprocess.run([bwrap, "--version"], capture_output=True, timeout=10, check=False)
                .stdout.decode()
                .split()
            )
            version = out[-1] if out else None
    else:
        bwrap = None
    unshare = shutil.which("unshare")
    if unshare:
        probe = [unshare, "--net"] + ([] if root else ["--map-root-user"]) + ["true"]
        unshare = unshare if _works(probe) else None
    can_mount = False
    if root:
        with tempfile.TemporaryDirectory(prefix=owned_prefix("mountprobe")) as d:
            try:
                mount_tmpfs(Path(d), 1)
                umount(Path(d))
                can_mount = True
            except OSError:
                can_mount = False
    # setpriv must be visible inside the sealed view too, which shows /usr only.
    setpriv = next((p for p in _SETPRIV if os.access(p, os.X_OK)), None)
    return HostCapabilities(
        setpriv=setpriv,
        bwrap=bwrap,
        bwrap_version=version,
        unshare=unshare,
        root=root,
        cgroups=detect_cgroups() if root or os.access("/sys/fs/cgroup", os.W_OK) else None,
        can_mount=can_mount,
    )
