"""``reports/latest/``: a stable path to the report folder written last.

CI templates and people want one path that does not change from run to run (the run's own
folder is named by its run id, a hash). After every report write, ``<reports_dir>/latest/``
holds the same files as ``<reports_dir>/<run_id>/``:

* **a real folder, not a symlink**: CI artifact uploaders disagree about symlinks (GitHub's
  ``actions/upload-artifact`` cannot upload a path that is a symlink to a folder, and its
  releases have changed whether links are followed; GitLab's runner finds no files behind a
  linked folder and no longer follows links), so a link would upload as nothing. Its files
  are **hard links** to the run folder's (no second copy on disk; a plain copy where the
  file system refuses hard links). Sharing inodes is safe because the harness never writes
  a report file in place: every file and folder is replaced by a rename, so rewriting one
  folder never changes the other (a tool appending to a file in either would change both).
* **swapped in atomically**: the new tree is built beside ``latest`` under a hidden name,
  then exchanged with it in one ``renameat2(RENAME_EXCHANGE)`` call, so a reader (an
  uploader, a browser) sees the old folder or the new one, whole, and never a moment
  without one. Where the kernel or C library cannot exchange (not Linux), two renames are
  used: still never a half-written folder, but ``latest`` is briefly absent.

Anything already at ``latest`` (an older folder, a symlink someone made, a file) is
replaced, never followed.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from harness._safefs import rmtree
from harness.errors import ConfigError

__all__ = ["LATEST", "point_latest"]

LATEST = "latest"
"""The name of the pointer folder under the reports folder."""

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2  # linux/fs.h
# The kernel or file system cannot exchange: fall back to two renames.
_NO_EXCHANGE = frozenset({errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP})


def point_latest(reports_dir: Path, folder: Path) -> Path:
    """Make ``<reports_dir>/latest/`` a copy of ``folder``, swapped in atomically.

    ``folder`` is a finished report folder under ``reports_dir``. Returns the path of
    ``latest``.

    Raises:
        ConfigError: ``latest`` cannot be written (names the folder and the cause).

    """
    dest = reports_dir / LATEST
    try:
        staged = Path(tempfile.mkdtemp(dir=reports_dir, prefix=f".{LATEST}.", suffix=".tmp"))
    except OSError as exc:
        raise ConfigError(
            f"cannot write the report here: {exc.strerror or exc}", file=dest, field="reports_dir"
        ) from None
    try:
        shutil.copytree(folder, staged, copy_function=_link_or_copy, dirs_exist_ok=True)
        os.chmod(staged, 0o755)
        _swap_in(staged, dest)
    except shutil.Error as exc:  # copytree's list of (src, dst, why), one line is enough
        why = exc.args[0][0][2] if exc.args and exc.args[0] else exc
        raise ConfigError(
            f"cannot copy the report here: {why}", file=dest, field="reports_dir"
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot write the report here: {exc.strerror or exc}", file=dest, field="reports_dir"
        ) from None
    finally:
        # After the swap the staged name holds the previous `latest` (or nothing).
        rmtree(staged)
    return dest


def _link_or_copy(src: str, dst: str) -> str:
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)
    return dst


def _swap_in(staged: Path, dest: Path) -> None:
    """Put ``staged`` at ``dest``; afterwards ``staged`` names what was there (if anything)."""
    for _ in range(10):  # another writer may create or remove `dest` between two calls
        try:
            if _exchange(staged, dest):
                return
        except FileNotFoundError:
            # No `latest` yet: a plain rename, which refuses to land on a folder that
            # another writer has just put there (then exchange with that one).
            try:
                os.rename(staged, dest)
                return
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR):
                    raise
            continue
        # No exchange on this system: move the old one aside, then rename the new one in.
        aside = staged.with_name(staged.name + ".old")
        if os.path.lexists(dest):
            os.replace(dest, aside)
        os.replace(staged, dest)
        if os.path.lexists(aside):
            os.replace(aside, staged)
        return
    raise OSError(errno.EBUSY, "the folder kept changing while it was being replaced")


@functools.cache
def _renameat2() -> Callable[..., int] | None:
    try:
        fn: Callable[..., int] = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    return fn


def _exchange(a: Path, b: Path) -> bool:
    """Exchange ``a`` and ``b`` in one step; False when this system cannot.

    Raises:
        FileNotFoundError: ``b`` (or ``a``) does not exist.
        OSError: any other failure.

    """
    fn = _renameat2()
    if fn is None:
        return False
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in _NO_EXCHANGE:
        return False
    raise OSError(err, os.strerror(err), str(b))
