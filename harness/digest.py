"""Content digests: canonical JSON, files and directory trees.

Every identity in `harness` (case, task set, system, candidate, policy) is a sha256
over canonical bytes, so that changing any byte makes a new identity.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "canonical_json",
    "digest_bytes",
    "digest_file",
    "digest_json",
    "iter_tree",
    "short",
    "tree_digest",
    "tree_manifest",
]

_CHUNK = 1 << 20


def canonical_json(value: Any) -> bytes:
    """Serialise ``value`` to canonical JSON bytes (sorted keys, no whitespace, UTF-8).

    A file name that is not UTF-8 reaches Python as a string with surrogate escapes; it is
    written back as its original bytes, so every name has exactly one identity.
    """
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8", "surrogateescape")


def digest_bytes(data: bytes) -> str:
    """Return ``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest_json(value: Any) -> str:
    """Return the digest of the canonical JSON form of ``value``."""
    return digest_bytes(canonical_json(value))


def digest_file(path: Path) -> str:
    """Return ``sha256:<hex>`` of a file's bytes, streamed."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def short(digest: str, n: int = 12) -> str:
    """Return the first ``n`` hex digits of a ``sha256:`` digest, for display."""
    return digest.split(":", 1)[-1][:n]


def iter_tree(root: Path, *, exclude: Iterable[str] = ()) -> Iterator[Path]:
    """Yield the regular files and symlinks under ``root``, sorted, as relative paths.

    ``exclude`` names top-level entries to skip (e.g. ``.git``).
    """
    skip = set(exclude)
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        if rel_dir == Path("."):
            dirnames[:] = [d for d in dirnames if d not in skip]
            filenames = [f for f in filenames if f not in skip]
        dirnames.sort()
        # os.walk lists symlinks to directories in dirnames; treat them as entries.
        for d in list(dirnames):
            if (Path(dirpath) / d).is_symlink():
                dirnames.remove(d)
                filenames.append(d)
        for name in sorted(filenames):
            yield rel_dir / name


def tree_manifest(root: Path, *, exclude: Iterable[str] = ()) -> dict[str, str]:
    """Map each relative path under ``root`` to a digest of its kind, mode bit and bytes.

    Symlinks are recorded by target, never followed; the executable bit is part of
    the identity because it changes behaviour.
    """
    manifest: dict[str, str] = {}
    for rel in iter_tree(root, exclude=exclude):
        full = root / rel
        st = full.lstat()
        if stat.S_ISLNK(st.st_mode):
            manifest[rel.as_posix()] = "link:" + os.readlink(full)
        elif stat.S_ISREG(st.st_mode):
            mode = "x" if st.st_mode & 0o111 else "-"
            manifest[rel.as_posix()] = f"{mode}:{digest_file(full)}"
    return manifest


def tree_digest(root: Path, *, exclude: Iterable[str] = ()) -> str:
    """Return one digest for a directory tree: paths, kinds, exec bits and contents."""
    return digest_json(tree_manifest(root, exclude=exclude))
