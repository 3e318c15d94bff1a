"""Counting a candidate tree against its bounds, stopping at the first entry over them."""

from __future__ import annotations

import os
import stat

from harness._safefs import MAX_PATH_BYTES, MAX_TREE_DEPTH
from harness.errors import CandidateTooLarge

__all__ = ["TreeCounter", "check_host_tree"]


class TreeCounter:
    """Running count of entries and bytes; raises as soon as either bound is passed."""

    def __init__(self, max_files: int | None, max_bytes: int | None) -> None:
        self.max_files, self.max_bytes = max_files, max_bytes
        self.files = self.bytes = 0

    def add(self, size: int, *, depth: int = 1, path_bytes: int = 0) -> None:
        """Count one entry (file, link or folder) of ``size`` bytes, ``depth`` levels down.

        ``path_bytes``: the length of the entry's path relative to the tree, in bytes.

        Raises:
            CandidateTooLarge: the tree is now over one of its bounds, the entry is
                deeper than :data:`~harness._safefs.MAX_TREE_DEPTH` (always bounded: every
                walk of the tree on the host stays far from Python's recursion limit), or
                its path is longer than :data:`~harness._safefs.MAX_PATH_BYTES` (always
                bounded: a copy on the host stays under ``PATH_MAX``).
        """
        if path_bytes > MAX_PATH_BYTES:
            raise CandidateTooLarge(
                f"the candidate has a path longer than {MAX_PATH_BYTES} bytes",
                kind="path",
                limit=MAX_PATH_BYTES,
                observed=path_bytes,
            )
        if depth > MAX_TREE_DEPTH:
            raise CandidateTooLarge(
                f"the candidate nests folders more than {MAX_TREE_DEPTH} levels deep",
                kind="depth",
                limit=MAX_TREE_DEPTH,
                observed=depth,
            )
        self.files += 1
        self.bytes += size
        if self.max_files is not None and self.files > self.max_files:
            raise CandidateTooLarge(
                f"the candidate holds more than {self.max_files} files and folders",
                kind="files",
                limit=self.max_files,
                observed=self.files,
            )
        if self.max_bytes is not None and self.bytes > self.max_bytes:
            raise CandidateTooLarge(
                f"the candidate holds more than {self.max_bytes / (1 << 20):g} MiB",
                kind="disk",
                limit=self.max_bytes / (1 << 20),
                observed=self.bytes / (1 << 20),
            )


def check_host_tree(root: str, max_files: int | None, max_bytes: int | None) -> None:
    """Walk ``root`` without following links; raise at the first entry over a bound.

    Every path counts: a file with hard links counts its size once per link, as the
    Docker backend's archive count does (:func:`harness.sandbox._docker_io.unpack_tree`).

    Raises:
        CandidateTooLarge: the tree is over one of its bounds.
    """
    counter = TreeCounter(max_files, max_bytes)
    skip = len(os.fsencode(root)) + 1  # the root and its "/": paths relative to it
    stack = [(root, 1)]
    while stack:
        top, depth = stack.pop()
        with os.scandir(top) as it:
            for entry in it:
                st = entry.stat(follow_symlinks=False)
                size = st.st_size if stat.S_ISREG(st.st_mode) else 0
                counter.add(size, depth=depth, path_bytes=len(os.fsencode(entry.path)) - skip)
                if stat.S_ISDIR(st.st_mode):
                    stack.append((entry.path, depth + 1))
