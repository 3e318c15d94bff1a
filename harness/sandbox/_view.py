"""The local backend's sealed view: the minimal system bwrap shows, and view checks.

:func:`system_binds` lists the bwrap arguments of the read-only minimal system (``/usr``
and a curated ``/etc``; nothing else of the host); :func:`check_view` refuses a
:class:`~harness.sandbox.base.SealedView` the host cannot provide. See
``docs/threat-model.md``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

from harness._safefs import rmtree
from harness.errors import SandboxUnavailableError
from harness.sandbox._host import IsolationPlan, mount_tmpfs, umount
from harness.sandbox._relay import RELAY_PYTHON
from harness.sandbox.base import SealedView
from harness.sandbox.owner import owned_prefix

_SYSTEM_TOP = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
"""Top-level entries of the minimal system: programs, libraries, interpreters, git."""
_SYSTEM_ETC = (
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "debian_version",
    "gai.conf",
    "group",
    "host.conf",
    "hosts",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "localtime",
    "magic",
    "mime.types",
    "mtab",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "protocols",
    "python3",
    "python3.11",
    "python3.12",
    "python3.13",
    "resolv.conf",
    "services",
    "shells",
    "ssl",
    "terminfo",
    "timezone",
)
"""The curated ``/etc``: name lookup, linker, certificates, Debian's python config.
Never ``shadow``/``gshadow``, ssh keys, ``machine-id`` or anything credential-like."""


def system_binds(base_dir: Path | None = None) -> list[str]:
    """Return the bwrap arguments of the minimal read-only system, nothing else of the host.

    ``/usr`` (with ``/bin``, ``/lib*``, ``/sbin`` as the host has them: usually links into
    ``/usr``) and a curated ``/etc``. The project folder, the store, ``/root``, ``/home``,
    ``/opt``, ``/srv``, ``/work``, host ``/var/tmp`` and every other session stay out. An
    interpreter installed outside ``/usr`` (pyenv under ``/root``, a venv) is not visible:
    sandboxes use the system's ``/usr/bin/python3`` or a declared environment.

    With ``base_dir``, the curated ``/etc`` is one read-only bind of a copy staged once per
    process under it (:func:`staged_etc`): bwrap pays one mount instead of one per entry,
    about 5 ms of every command's start. Without it, or when the copy cannot be made, each
    entry is bound on its own (the same files, slower).
    """
    out: list[str] = []
    for name in _SYSTEM_TOP:
        out += _bind_entry(f"/{name}")
    etc = staged_etc(base_dir) if base_dir is not None else None
    if etc is not None:
        out += ["--ro-bind", str(etc), "/etc"]
    else:
        out += mount_parents("/etc/x")
        for name in _SYSTEM_ETC:
            out += _bind_entry(f"/etc/{name}")
    # Tools expect /var/tmp: here it is the private /tmp, never the host's.
    return [*out, "--dir", "/var", "--symlink", "../tmp", "/var/tmp"]


_STAGED_MB = 64
"""Size cap of the staged copy's tmpfs (the curated entries take a few MB; pages are
used only as written)."""

_staged: dict[Path, Path] = {}
_staged_lock = threading.Lock()


def staged_etc(base_dir: Path) -> Path | None:
    """Return this process's copy of the curated ``/etc`` under ``base_dir`` (made once).

    The copy holds exactly the :data:`_SYSTEM_ETC` entries the sandbox user can read
    (links as links; nothing only root or a group may read, such as ``ssl/private``): the
    files a per-entry bind would show that user. It lives in a folder owned by this
    process (``harness-etc-p<pid>-…``, mode 0700 around a 0755 ``etc``; as root a tmpfs of
    its own, so no host path shows in the sandbox's mount table), is removed at exit, and
    a killed run's copy is swept like its sessions
    (:func:`harness.sandbox.prune.prune_local`). None when it cannot be made.
    """
    with _staged_lock:
        etc = _staged.get(base_dir)
        if etc is not None and etc.is_dir():
            return etc
        try:
            root = Path(tempfile.mkdtemp(prefix=owned_prefix("etc"), dir=base_dir))
        except OSError:
            return None
        if os.geteuid() == 0:
            # A tmpfs of its own where mounts are allowed: the sandbox's mount table then
            # names the bind's source inside that tmpfs ("/etc"), not a host path.
            with contextlib.suppress(OSError):
                mount_tmpfs(root, _STAGED_MB)
        etc = root / "etc"
        try:
            etc.mkdir(mode=0o755)
            etc.chmod(0o755)
            for name in _SYSTEM_ETC:
                _stage_entry(Path("/etc") / name, etc / name)
        except OSError:
            _remove_staged(root)
            return None
        atexit.register(_remove_staged, root)
        _staged[base_dir] = etc
        return etc


def _world_readable(st: os.stat_result) -> bool:
    need = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(st.st_mode) else 0)
    return st.st_mode & need == need


def _stage_entry(src: Path, dst: Path) -> None:
    try:
        st = src.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), dst)
    elif stat.S_ISREG(st.st_mode) and _world_readable(st):
        shutil.copy2(src, dst, follow_symlinks=False)
    elif stat.S_ISDIR(st.st_mode) and _world_readable(st):
        dst.mkdir()
        for child in sorted(os.listdir(src)):
            _stage_entry(src / child, dst / child)
        shutil.copystat(src, dst, follow_symlinks=False)


def _remove_staged(root: Path) -> None:
    with contextlib.suppress(OSError):
        if os.path.ismount(root):
            umount(root)
        rmtree(root)


def mount_parents(*targets: str) -> list[str]:
    """Return bwrap arguments creating each target's missing parent folders as 0755.

    bwrap would create them 0700 as root, which the unprivileged command cannot traverse.
    """
    out: list[str] = []
    seen: set[str] = set()
    for target in targets:
        parts = target.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = "/" + "/".join(parts[:i])
            if d not in seen and d not in _SYSTEM_DIRS:
                seen.add(d)
                out += ["--perms", "0755", "--dir", d]
    return out


_SYSTEM_DIRS = frozenset(("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"))


def _bind_entry(path: str) -> list[str]:
    if os.path.islink(path):
        return ["--symlink", os.readlink(path), path]
    if os.path.exists(path):
        return ["--ro-bind", path, path]
    return []


def check_view(view: SealedView | None, plan: IsolationPlan) -> None:
    """Refuse a view this host cannot show: mounts need bwrap, sources must exist."""
    if view is None:
        return
    if (view.mounts or view.endpoint) and not plan.bwrap:
        raise SandboxUnavailableError(
            "local sandbox: the sealed view's mounts and endpoint relay need bwrap "
            "(package bubblewrap)",
            reason="view_unavailable",
        )
    if view.endpoint is not None:
        try:
            is_socket = stat.S_ISSOCK(os.stat(view.endpoint).st_mode)
        except OSError:
            is_socket = False
        if not is_socket:
            raise SandboxUnavailableError(
                f"local sandbox: endpoint {view.endpoint} is not a unix socket; cannot relay it",
                reason="relay_unavailable",
            )
        if not os.access(RELAY_PYTHON, os.X_OK):
            raise SandboxUnavailableError(
                f"local sandbox: the endpoint relay needs the system's {RELAY_PYTHON}",
                reason="relay_unavailable",
            )
    for m in view.mounts:
        if not os.path.isdir(m.source):
            raise SandboxUnavailableError(
                f"local sandbox: view mount source {m.source} is not a directory",
                reason="view_unavailable",
            )
