"""Propose a verifier environment from what the repository declares for its tests.

Read at the fix commit (a fix may need what it declares): ``requirements*.txt`` and
``requirements/*.txt`` whose names say test (else dev; an ``X.in`` beside its compiled
``X.txt`` gives way to it: the pins are what the project's tests ran with), ``pyproject.toml``'s
``project.dependencies`` with its ``test``/``tests``/``testing`` extras or dependency
groups (else ``dev``), and ``setup.cfg``'s ``install_requires`` with its test extras.
``pytest`` is always added. The project itself is never a requirement: it is the
workspace the agent changes.
"""

from __future__ import annotations

import configparser
import re
import tomllib
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from harness.authoring._git import FixCommit, git

__all__ = ["Proposal", "propose_requirements"]

_TEST_KEYS = ("test", "tests", "testing")
_DEV_KEYS = ("dev",)
_REQ_FILE = re.compile(r"^(?:requirements[^/]*|requirements/[^/]+)\.(?:txt|in)$")


@dataclass(frozen=True)
class Proposal:
    """A loose requirements input and where each part came from."""

    requirements: tuple[str, ...]
    sources: tuple[str, ...]
    skipped: tuple[str, ...]
    """Lines that were not taken (editable installs, local paths, options), with why."""

    def text(self) -> str:
        """Render the ``requirements.in`` file."""
        head = "# Proposed by `harness cases new` from: " + (", ".join(self.sources) or "-")
        return "\n".join([head, *self.requirements]) + "\n"


def _project_name(files: dict[str, bytes]) -> str | None:
    if "pyproject.toml" in files:
        try:
            name = tomllib.loads(files["pyproject.toml"].decode()).get("project", {}).get("name")
            if isinstance(name, str):
                return canonicalize_name(name)
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            pass
    if "setup.cfg" in files:
        cfg = configparser.ConfigParser(interpolation=None)
        try:
            cfg.read_string(files["setup.cfg"].decode())
            if cfg.has_option("metadata", "name"):
                return canonicalize_name(cfg.get("metadata", "name"))
        except (configparser.Error, UnicodeDecodeError):
            pass
    return None


def _pick(table: dict[str, object], keys: tuple[str, ...]) -> list[tuple[str, list[str]]]:
    return [
        (k, [x for x in v if isinstance(x, str)])
        for k, v in table.items()
        if k in keys and isinstance(v, list)
    ]


def _from_pyproject(data: bytes, flavour: tuple[str, ...]) -> list[tuple[str, list[str]]]:
    try:
        doc = tomllib.loads(data.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return []
    project = doc.get("project", {})
    found: list[tuple[str, list[str]]] = []
    extras = project.get("optional-dependencies", {})
    groups = doc.get("dependency-groups", {})
    for where, table in (("optional-dependencies", extras), ("dependency-groups", groups)):
        if isinstance(table, dict):
            found += [(f"pyproject.toml {where}.{k}", v) for k, v in _pick(table, flavour)]
    return found


def _deps_of_pyproject(data: bytes) -> list[str]:
    try:
        deps = tomllib.loads(data.decode()).get("project", {}).get("dependencies", [])
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return []
    return [d for d in deps if isinstance(d, str)] if isinstance(deps, list) else []


def _from_setup_cfg(data: bytes, flavour: tuple[str, ...]) -> list[tuple[str, list[str]]]:
    cfg = configparser.ConfigParser(interpolation=None)
    try:
        cfg.read_string(data.decode())
    except (configparser.Error, UnicodeDecodeError):
        return []
    found = []
    if cfg.has_section("options.extras_require"):
        for key in flavour:
            if cfg.has_option("options.extras_require", key):
                lines = cfg.get("options.extras_require", key).splitlines()
                found.append((f"setup.cfg extras_require.{key}", [x for x in lines if x.strip()]))
    return found


def _req_lines(files: dict[str, bytes], path: str, seen: set[str], skipped: list[str]) -> list[str]:
    if path in seen or path not in files:
        return []
    seen.add(path)
    out: list[str] = []
    for raw in files[path].decode(errors="replace").splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if not line:
            continue
        if line.startswith(("-r ", "--requirement ", "-r")) and not line.startswith("-e"):
            inc = line.split(None, 1)[-1] if " " in line else line[2:]
            target = f"{path.rpartition('/')[0]}/{inc}".lstrip("/")
            out += _req_lines(files, target, seen, skipped)
        elif line.startswith("-"):
            skipped.append(f"{path}: {line} (an option or editable install)")
        else:
            out.append(line)
    return out


def propose_requirements(fix: FixCommit) -> Proposal:
    """Propose the verifier's requirements from the repository at the fix commit."""
    names = git(fix.repo, "ls-tree", "-r", "--name-only", fix.sha).stdout.decode().splitlines()
    wanted = [n for n in names if n in ("pyproject.toml", "setup.cfg") or _REQ_FILE.match(n)]
    files = {n: fix.blob(n) for n in wanted}
    me = _project_name(files)
    skipped: list[str] = []
    groups: list[tuple[str, list[str]]] = []
    for flavour in (_TEST_KEYS, _DEV_KEYS):
        req_files = [
            n
            for n in wanted
            if _REQ_FILE.match(n)
            and any(k in n.rpartition("/")[2].lower() for k in flavour)
            and not (n.endswith(".in") and n[:-3] + ".txt" in files)
        ]
        seen: set[str] = set()
        groups = [(n, _req_lines(files, n, seen, skipped)) for n in sorted(req_files)]
        if "pyproject.toml" in files:
            groups += _from_pyproject(files["pyproject.toml"], flavour)
        if "setup.cfg" in files:
            groups += _from_setup_cfg(files["setup.cfg"], flavour)
        if groups:
            break
    if "requirements.txt" in files:
        groups.append(("requirements.txt", _req_lines(files, "requirements.txt", set(), skipped)))
    if "pyproject.toml" in files:
        groups.append(("pyproject.toml dependencies", _deps_of_pyproject(files["pyproject.toml"])))
    if "setup.cfg" in files:
        cfg = configparser.ConfigParser(interpolation=None)
        try:
            cfg.read_string(files["setup.cfg"].decode())
            if cfg.has_option("options", "install_requires"):
                lines = cfg.get("options", "install_requires").splitlines()
                groups.append(("setup.cfg install_requires", [x for x in lines if x.strip()]))
        except (configparser.Error, UnicodeDecodeError):
            pass
    reqs: dict[str, str] = {}
    sources: list[str] = []
    for source, lines in groups:
        if lines:
            sources.append(source)
        for line in lines:
            try:
                req = Requirement(line.strip())
            except InvalidRequirement:
                skipped.append(f"{source}: {line.strip()} (not a requirement)")
                continue
            name = canonicalize_name(req.name)
            if name == me:
                skipped.append(f"{source}: {line.strip()} (the project itself)")
                continue
            if req.url:
                skipped.append(f"{source}: {line.strip()} (a direct URL)")
                continue
            reqs.setdefault(name, str(req))
    reqs.setdefault("pytest", "pytest")
    return Proposal(tuple(sorted(reqs.values())), tuple(sources), tuple(skipped))
