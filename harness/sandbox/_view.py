"""The local backend's sealed view: the minimal system bwrap shows, and view checks.

:func:`system_binds` lists the bwrap arguments of the read-only minimal system (``/usr``
and a curated ``/etc``; nothing else of the host); :func:`check_view` refuses a
:class:`~harness.sandbox.base.SealedView` the host cannot provide. See
``docs/threat-model.md``.
"""

from __future__ import annotations

import os
import stat

from harness.errors import SandboxUnavailableError
from harness.sandbox._host import IsolationPlan
from harness.sandbox._relay import RELAY_PYTHON
from harness.sandbox.base import SealedView

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


def system_binds() -> list[str]:
    """Return the bwrap arguments of the minimal read-only system, nothing else of the host.

    ``/usr`` (with ``/bin``, ``/lib*``, ``/sbin`` as the host has them: usually links into
    ``/usr``) and a curated ``/etc``. The project folder, the store, ``/root``, ``/home``,
    ``/opt``, ``/srv``, ``/work``, host ``/var/tmp`` and every other session stay out. An
    interpreter installed outside ``/usr`` (pyenv under ``/root``, a venv) is not visible:
    sandboxes use the system's ``/usr/bin/python3`` or a declared environment.
    """
    out: list[str] = mount_parents("/etc/x")
    for name in _SYSTEM_TOP:
        out += _bind_entry(f"/{name}")
    for name in _SYSTEM_ETC:
        out += _bind_entry(f"/etc/{name}")
    # Tools expect /var/tmp: here it is the private /tmp, never the host's.
    return [*out, "--dir", "/var", "--symlink", "../tmp", "/var/tmp"]


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
