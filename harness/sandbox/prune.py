"""Sweep what killed runs left behind: temp dirs, local sessions, exec cgroups, containers.

Every temporary folder the harness makes on the host is discoverable and owned: its name
carries the owning process's pid (``harness-<kind>-p<pid>-XXXXXXXX``, see
:func:`harness.sandbox.owner.owned_prefix`), and a local session also records it in
``.harness-owner``. A
folder whose owner is gone is an orphan: trial workspaces and snapshots, verifier
staging, case-image build trees, and sessions (their processes died with bwrap's
``--die-with-parent``; their tmpfs mount and folder remain). ``harness run`` sweeps
orphans before starting, so a ``kill -9`` never accumulates leftovers; ``harness sandbox
prune`` does it on demand. A live owner's folders are never touched; a pid that was
reused by a process started after the folder was last changed does not count as alive.
Docker containers and volumes carry the same ownership as labels (host, pid, boot id;
:func:`harness.sandbox.docker.owner_labels`) and are judged the same way. Agent
environments exported from images to the cache (:data:`harness.sandbox.owner.EXPORTS`)
are held by a :func:`harness.sandbox.owner.lease` per process that uses them and go once
no live process holds one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from harness._safefs import rmtree
from harness.errors import HarnessError
from harness.sandbox.owner import (
    EXPORTS,
    OWNED_NAME,
    owner_alive,
    prune_leased,
)

__all__ = [
    "prune_all",
    "prune_local",
]


def _owner(d: Path) -> int | None:
    from harness.sandbox.local import OWNER_FILE

    m = OWNED_NAME.match(d.name)
    if m:
        return int(m.group(1))
    owner_file = d / OWNER_FILE
    if (d / "workspace").is_dir() and owner_file.is_file():
        try:
            return int(owner_file.read_text().strip() or "0")
        except (OSError, ValueError):
            return 0
    return None  # not recognisably ours: leave it


def prune_local(base_dir: Path | None = None) -> list[str]:
    """Remove harness temp folders and local sessions whose owning process is dead."""
    from harness.sandbox._host import umount

    base = base_dir or Path(tempfile.gettempdir())
    removed: list[str] = []
    for d in sorted(base.glob("harness-*")):
        if not d.is_dir() or d.is_symlink():
            continue
        owner = _owner(d)
        if owner is None or owner_alive(owner, d):
            continue
        if os.path.ismount(d):
            umount(d)
        rmtree(d)  # iterative: a 1,200-deep folder left by a command is removed too
        if not d.exists():
            removed.append(str(d))
    with contextlib.suppress(Exception):
        from harness.sandbox._cgroup import detect_cgroups

        driver = detect_cgroups()
        if driver is not None:
            driver.sweep()
    return removed


def prune_all(
    *,
    cache: Path,
    docker: bool = True,
    everything: bool = False,
    labels: Mapping[str, str] | None = None,
) -> list[str]:
    """Prune local orphans and, when an engine is reachable, orphaned harness containers.

    Containers and volumes go when their owner is dead (see
    :func:`harness.sandbox.docker.owner_state`); ``everything`` also removes those of live
    runs and of owners this host cannot judge. ``labels`` restricts the engine sweep to
    objects carrying every pair. Local folders carry no labels and are always swept
    orphans-only. ``cache`` is the harness's cache folder (``harness.env.build.cache_root``,
    passed in: the sandbox sits below the environments), where exported agent environments
    wait for their last lease.
    """
    lines = [f"removed local session {p}" for p in prune_local()]
    exports = prune_leased(cache / EXPORTS)
    lines += [f"removed exported environment {p}" for p in exports if p.suffix != ".json"]
    if docker:
        try:
            from harness.sandbox.docker import prune

            report = prune(orphans_only=not everything, labels=labels)
            lines += [f"removed container {c}" for c in report.containers]
            lines += [f"removed volume {v}" for v in report.volumes]
            if report.unknown:
                lines.append(
                    f"kept {report.unknown} container(s)/volume(s) whose owner cannot be "
                    "judged here (another host, or made by an older harness); --all removes them"
                )
        except HarnessError as exc:
            lines.append(f"docker: skipped ({exc})")
    if not lines:
        lines.append("nothing to prune")
    return lines
