"""What an environment's own interpreter reports about itself, and its digest.

:data:`PROBE` runs under the environment's interpreter (``python -I``), on the host for a
local prefix and inside the build container for an image layer, so both backends compute
the identity the same way from what is installed: every distribution's files listed in
its ``RECORD`` are re-hashed from disk (files the installer writes itself — ``RECORD``,
``INSTALLER``, ``REQUESTED``, ``direct_url.json``, bytecode, console scripts outside
site-packages — are left out, so uv and pip, host and image, agree).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from pydantic import ValidationError

from harness.digest import digest_json
from harness.env.model import EnvIdentity
from harness.errors import InfraError

__all__ = ["PROBE", "env_digest", "fingerprint", "parse_probe"]

PROBE = r"""
import hashlib, json, platform, re, sys, sysconfig
from importlib import metadata
paths = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
skip = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json", "uv_cache.json"}
dists = {}
for dist in metadata.distributions(path=paths):
    name = re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower()
    h = hashlib.sha256()
    for f in sorted(dist.files or [], key=str):
        rel = str(f).replace("\\", "/")
        if rel.startswith("..") or rel.endswith((".pyc", ".pyo")) or "__pycache__/" in rel:
            continue
        if ".dist-info/" in rel and rel.rsplit("/", 1)[-1] in skip:
            continue
        try:
            data = open(f.locate(), "rb").read()
        except OSError:
            data = b"<missing>"
        h.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
    dists[name] = {"version": dist.version, "files": "sha256:" + h.hexdigest()}
print(json.dumps({
    "implementation": sys.implementation.name,
    "version": platform.python_version(),
    "soabi": sysconfig.get_config_var("SOABI") or "",
    "platform": sysconfig.get_platform(),
    "distributions": dists,
    "build": sys.version,
}))
"""


def parse_probe(out: bytes, where: str) -> EnvIdentity:
    """Parse the probe's output.

    Raises:
        InfraError: the probe printed something else (the environment is broken).
    """
    try:
        return EnvIdentity.model_validate(json.loads(out.decode().strip().splitlines()[-1]))
    except (ValueError, IndexError, ValidationError) as exc:
        raise InfraError(
            f"{where}: the environment's interpreter did not describe itself: {exc}",
            reason="env_probe_failed",
        ) from None


def env_digest(identity: EnvIdentity) -> str:
    """Return the environment digest: interpreter, platform, installed distributions."""
    return digest_json(identity.digest_input())


def fingerprint(prefix: Path) -> str:
    """Digest of every entry's path, kind, size, mode and mtime under ``prefix`` (no reads).

    Cheap enough to check before every trial: a changed file changes its mtime or size.
    """
    rows: list[str] = []
    for dirpath, dirnames, filenames in os.walk(prefix):
        dirnames.sort()
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(f"{dirpath}/{d}")]):
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            rel = os.path.relpath(full, prefix)
            if stat.S_ISLNK(st.st_mode):
                rows.append(f"{rel}|l|{os.readlink(full)}")
            else:
                rows.append(f"{rel}|{st.st_mode:o}|{st.st_size}|{st.st_mtime_ns}")
    return digest_json(rows)
