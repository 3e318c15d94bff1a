"""What a case's own reference solution changes: edits the report does not call tampering.

A protected path the candidate changed is restored before verification and recorded on the
attempt. When the case's reference solution changes that same path (its task is to edit
those tests), the candidate did what the reference does: the report notes the restore and
shows no tampering badge. Only paths beyond the reference (and beyond ``verifier.protect
.allow``, which are never restored) are flagged.

The reference is read from the case folder only when the folder's digest equals the
digest the run recorded for the case: evidence never transfers to changed bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness.cases.load import load_case
from harness.cases.patch import patch_paths
from harness.errors import HarnessError

__all__ = ["is_reference_edit", "patch_paths", "reference_patches", "reference_paths"]


def reference_patches(cases_dir: Path, digests: Mapping[str, str]) -> dict[str, str]:
    """Case id → its reference patch's text (cases whose folder digest matches the run's)."""
    out: dict[str, str] = {}
    for cid, digest in digests.items():
        try:
            loaded = load_case(cases_dir / cid)
            ref = loaded.case.reference
            if loaded.digest != digest or ref is None:
                continue
            out[cid] = (loaded.dir / ref.patch).read_text(encoding="utf-8", errors="replace")
        except (HarnessError, OSError):
            continue
    return out


def reference_paths(cases_dir: Path, digests: Mapping[str, str]) -> dict[str, frozenset[str]]:
    """Case id → workspace paths its reference patch touches (cases whose digest matches)."""
    return {cid: patch_paths(t) for cid, t in reference_patches(cases_dir, digests).items()}


def _entry_path(entry: str) -> str:
    """Return the workspace path a recorded tampering entry is about."""
    if entry.startswith("candidate has ") and " (a hidden path)" in entry:
        return entry[len("candidate has ") :].split(" (a hidden path)", 1)[0]
    return entry.split(": protected,", 1)[0]


def is_reference_edit(entry: str, expected: frozenset[str]) -> bool:
    """Whether a recorded tampering entry is about a path the case's reference changes."""
    return _entry_path(entry) in expected
