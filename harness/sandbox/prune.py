"""Sweep what killed runs left behind: local sessions, exec cgroups, Docker containers.

A local session records the pid of the harness process that opened it; a session whose
owner is gone is an orphan (its processes died with bwrap's ``--die-with-parent``; its
tmpfs mount and folder remain). ``harness run`` sweeps orphans before starting, so a
``kill -9`` never accumulates leftovers; ``harness sandbox prune`` does it on demand.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from harness.errors import HarnessError

__all__ = ["prune_all", "prune_local"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def prune_local(base_dir: Path | None = None) -> list[str]:
    """Remove local sessions (and exec cgroups) whose owning harness process is dead."""
    from harness.sandbox.local import OWNER_FILE, _umount

    base = base_dir or Path(tempfile.gettempdir())
    removed: list[str] = []
    for d in sorted(base.glob("harness-*")):
        owner_file = d / OWNER_FILE
        if not (d / "workspace").is_dir() or not owner_file.is_file():
            continue
        try:
            owner = int(owner_file.read_text().strip() or "0")
        except (OSError, ValueError):
            owner = 0
        if owner and _alive(owner):
            continue
        if os.path.ismount(d):
            _umount(d)
        shutil.rmtree(d, ignore_errors=True)
        removed.append(str(d))
    with contextlib.suppress(Exception):
        from harness.sandbox._cgroup import detect_cgroups

        driver = detect_cgroups()
        if driver is not None:
            driver.sweep()
    return removed


def prune_all(*, docker: bool = True) -> list[str]:
    """Prune local orphans and, when an engine is reachable, harness-labelled containers."""
    lines = [f"removed local session {p}" for p in prune_local()]
    if docker:
        try:
            from harness.sandbox.docker import prune

            report = prune()
            lines += [f"removed container {c}" for c in getattr(report, "containers", ())]
            lines += [f"removed volume {v}" for v in getattr(report, "volumes", ())]
        except HarnessError as exc:
            lines.append(f"docker: skipped ({exc})")
    if not lines:
        lines.append("nothing to prune")
    return lines
