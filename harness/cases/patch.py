"""The paths a unified diff (a case's reference patch) touches."""

from __future__ import annotations

import re

__all__ = ["patch_paths", "patched_paths"]

_HEADER = re.compile(r"^(?:\+\+\+|---) (?:[ab]/)?(\S+)", re.M)
_NEW = re.compile(r"^\+\+\+ (?:b/)?(\S+)", re.M)


def patch_paths(text: str) -> frozenset[str]:
    """Return the workspace paths a unified diff touches (before or after it)."""
    return frozenset(p for p in _HEADER.findall(text) if p != "/dev/null")


def patched_paths(text: str) -> frozenset[str]:
    """Return the workspace paths that exist once the diff is applied (added or changed)."""
    return frozenset(p for p in _NEW.findall(text) if p != "/dev/null")
