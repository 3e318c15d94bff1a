"""The verifier owns its tree: starting state + candidate changes − what it may not change.

:func:`build_verification_tree` materialises, in a fresh host folder, the tree the
verifier runs on:

1. the candidate's files, copied without following any link; a symlink whose target
   leaves the tree is left out (tampering): nothing of the host is reachable through it;
2. every *protected* path (the case's ``verifier.protect`` patterns, the Python/pytest
   defaults, the destinations of hidden files, modules that would shadow the runner or
   the standard library) is put back as it was in the starting state: a modified or
   deleted protected file is restored and recorded as tampering; a file the candidate
   *added* under a protected test folder is left out and noted (an honest agent's own
   test), one that configures or extends the runner is left out as tampering;
3. config files count as changed only when what the runner reads changed: the
   ``[tool.pytest]`` table of ``pyproject.toml`` (a new dependency is not tampering); any
   byte of a ``setup.cfg`` or ``tox.ini`` that names pytest at all (pytest's ini parser and
   the standard library's disagree on what a section header is);
4. hidden files are written in, required artifacts the candidate shipped are dropped;
5. candidate code outside the protected paths that reaches into the runner's internals
   (``_pytest``, ``pluggy``, ``pytest_*`` hooks, ``sys.modules['pytest']``) is noted as
   tampering: it runs inside the runner's process once the tests import it.

Every write goes to a path whose parents were created here as real folders, so no
candidate symlink is ever followed on the host side.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import stat
import sys
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.cases.load import LoadedCase
from harness.cases.model import DEFAULT_PROTECTED
from harness.errors import EvaluatorError
from harness.trial.workspace import display_path as display

__all__ = [
    "VerificationTree",
    "build_verification_tree",
    "glob_regex",
]

_RUNNER_MODULES = frozenset(
    {"pytest", "_pytest", "py", "pluggy", "iniconfig", "packaging", "exceptiongroup", "tomli"}
)
"""Modules the test runner imports besides the standard library."""
_SHADOWABLE = _RUNNER_MODULES | frozenset(sys.stdlib_module_names)
_MODULE_SUFFIX = re.compile(r"\.(py|pyc|pyo|pyd|so)$|\.cpython-[^/]*\.so$|\.abi3\.so$")
_CONFIG = {"pyproject.toml", "setup.cfg", "tox.ini"}
_RUNNER_CONTROL = re.compile(
    r"(^|/)(conftest\.py|\.?pytest\.(ini|toml)|sitecustomize\.py|usercustomize\.py|__init__\.py"
    r"|[^/]*\.pth|[^/]*\.egg-link)$"
    r"|(^|/)[^/]*\.(dist|egg)-info(/|$)",
    re.IGNORECASE,
)
# Python imports these without a source the scan (or a reviewer) can read: a candidate may
# not add or change them unless the case allows it (``verifier.protect.allow``).
_OPAQUE = re.compile(
    r"\.(pyc|pyo|pyd|so)$|(^|/)__pycache__(/|$)|\.cpython-[^/]*\.so$|\.abi3\.so$", re.IGNORECASE
)
_SCAN_CHUNK = 1 << 22
_INTERNALS = re.compile(
    rb"\b_pytest\b|\bpluggy\b|\bdef\s+pytest_\w+|sys\.modules\s*\[\s*['\"](?:_?pytest|pluggy)"
    rb"|\bjunitxml\b|\bTestReport\b"
)


@dataclass
class VerificationTree:
    """What building the verifier's tree found."""

    tampering: list[str] = field(default_factory=list)
    """Protected files the candidate changed or deleted (restored), runner config it added,
    escaping symlinks, shipped artifacts, runner internals touched by its code."""
    left_out: list[str] = field(default_factory=list)
    """Files the candidate added under protected test paths: left out, noted, not flagged."""
    candidate: list[str] = field(default_factory=list)
    """Files and links the candidate added or changed that the tree keeps (its code): the
    runner's guard treats what runs from them as the candidate's."""
    locked: list[str] = field(default_factory=list)
    """Regular files the verifier's run may read but never change, replace or remove:
    every protected file (tests, runner configuration, hidden files) and every Python module
    the candidate left as it was. Code the candidate runs under the tests cannot rewrite a
    test module the runner has not read yet, and the guard trusts runner hooks only from
    files in this list (or from outside the workspace)."""
    protected: list[str] = field(default_factory=list)
    """The regular files of ``locked`` that are protected (tests, runner configuration,
    hidden files): no candidate can change them, whatever it writes."""
    read_only: list[str] = field(default_factory=list)
    """What the verifier's run may read but never change: ``locked`` and every other regular
    file of the tree, the candidate's own included (its code, run by the tests, cannot
    rewrite a file it submitted, nor one the checks after the tests read). New files may
    still be made anywhere."""


@functools.lru_cache(maxsize=256)
def glob_regex(pattern: str, *, fold: bool = False) -> re.Pattern[str]:
    """Compile a workspace glob (``*`` within a name, ``**`` across folders).

    ``dir/**`` also matches ``dir`` itself, so a test folder replaced by a file or link is
    caught too. ``fold``: match in any letter case (importers and some file systems fold
    case: ``X.DIST-INFO`` is a ``*.dist-info``).
    """
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("(?:/.*)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out), re.S | (re.IGNORECASE if fold else 0))


class _Rules:
    def __init__(self, lc: LoadedCase, start_top: set[str]) -> None:
        prot = lc.case.verifier.protect
        pats = [*(DEFAULT_PROTECTED if prot.defaults else ()), *prot.paths]
        self._protect = [glob_regex(p, fold=True) for p in pats]
        self._allow = [glob_regex(p) for p in prot.allow]
        self.hidden = {h.dest for h in lc.case.verifier.hidden}
        self.mutated = {f.dest for m in lc.case.verifier.mutants for f in m.replace}
        self._start_top = start_top
        self._defaults = prot.defaults

    def allowed(self, rel: str) -> bool:
        return any(r.fullmatch(rel) for r in self._allow)

    def shadows(self, rel: str) -> bool:
        """Tell whether ``rel`` is a new top-level module over a runner or stdlib one."""
        top = rel.split("/", 1)[0]
        name = _MODULE_SUFFIX.sub("", top)
        return self._defaults and top not in self._start_top and name in _SHADOWABLE

    def protected(self, rel: str) -> bool:
        if rel in self.hidden or any(rel.startswith(h + "/") for h in self.hidden):
            return True
        if self.allowed(rel):
            return False
        if rel in self.mutated:  # the judged run has the starting file the mutants replace
            return True
        if self._defaults and _RUNNER_CONTROL.search(rel) and not rel.endswith("__init__.py"):
            return True  # runner configuration under any name or letter case
        if self._defaults and _OPAQUE.search(rel):
            return True
        return self.shadows(rel) or any(r.fullmatch(rel) for r in self._protect)

    def runner_control(self, rel: str) -> bool:
        return (
            rel in self.hidden
            or self.shadows(rel)
            or bool(_RUNNER_CONTROL.search(rel))
            or bool(_OPAQUE.search(rel))
        )


# ---------------------------------------------------------------------------- file ops


def _entries(root: Path) -> dict[str, os.stat_result]:
    """Every file, link and folder under ``root`` (relative path → lstat), links unfollowed."""
    out: dict[str, os.stat_result] = {}
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        with os.scandir(root / rel_dir if rel_dir else root) as it:
            for entry in it:
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                st = entry.stat(follow_symlinks=False)
                out[rel] = st
                if stat.S_ISDIR(st.st_mode):
                    stack.append(rel)
    return out


def _same(a: Path, sa: os.stat_result, b: Path, sb: os.stat_result) -> bool:
    if stat.S_IFMT(sa.st_mode) != stat.S_IFMT(sb.st_mode):
        return False
    if stat.S_ISLNK(sa.st_mode):
        return os.readlink(a) == os.readlink(b)
    if stat.S_ISDIR(sa.st_mode):
        return True
    if (sa.st_mode & 0o111 != 0) != (sb.st_mode & 0o111 != 0) or sa.st_size != sb.st_size:
        return False
    return _read(a) == _read(b)


def _read(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def _link_escapes(rel: str, target: str) -> bool:
    if os.path.isabs(target):
        return True
    joined = os.path.normpath(os.path.join(os.path.dirname(rel), target))
    return joined == ".." or joined.startswith("../")


def _real_dirs(root: Path, rel_dir: str, vt: VerificationTree) -> Path:
    """Make ``root/rel_dir`` a chain of real folders (replacing files or links in the way)."""
    cur = root
    for part in [p for p in rel_dir.split("/") if p]:
        cur = cur / part
        try:
            st = cur.lstat()
        except FileNotFoundError:
            cur.mkdir()
            continue
        if not stat.S_ISDIR(st.st_mode):
            cur.unlink()
            cur.mkdir()
            vt.tampering.append(
                f"{display(str(cur.relative_to(root)))}: a folder holding protected files was "
                "replaced; restored"
            )
    return cur


def _copy_entry(src: Path, st: os.stat_result, dest: Path) -> None:
    """Copy one file or link (never following it) to ``dest``, replacing what is there."""
    if dest.is_symlink() or dest.exists():
        if dest.is_dir() and not dest.is_symlink():
            shutil.rmtree(dest)
        else:
            dest.unlink()
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), dest)
    elif stat.S_ISREG(st.st_mode):
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as fin:
            out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(out, "wb") as fout:
                shutil.copyfileobj(fin, fout)
        os.chmod(dest, stat.S_IMODE(st.st_mode))
    elif stat.S_ISDIR(st.st_mode):
        dest.mkdir()


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.is_symlink() or path.exists():
        path.unlink()


# ---------------------------------------------------------------------------- config


_CONFIG_PARSE_MAX = 1 << 20
"""Config files larger than this (1 MiB) are compared byte for byte, never parsed."""


def _runner_sections(name: str, data: bytes) -> object:
    """Return the parts of a config file the test runner reads (``None``: none; unparsable: raw).

    The candidate wrote the file: whatever it holds (a nesting deep enough to exhaust the
    parser's recursion, ``tool`` that is not a table, megabytes to parse on the host) makes
    it *unparsable*, compared as raw bytes, never an error of the harness.
    """
    if len(data) > _CONFIG_PARSE_MAX:
        return ("unparsable", data)
    try:
        if name == "pyproject.toml":
            tool = tomllib.loads(data.decode()).get("tool", {})
            return tool.get("pytest") if isinstance(tool, dict) else ("unparsable", data)
        # pytest reads these files with its own ini parser, not configparser, and the two
        # disagree on headers (``[pytest] # ...]`` is a pytest section to pytest, not to
        # configparser: red team round twenty-three's addopts loaded so). A file that names
        # pytest anywhere counts by its bytes; one that never does has no runner section.
        if b"pytest" in data.lower():
            return ("raw", data)
        return None
    except (ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return ("unparsable", data)


def _config_changed(rel: str, start: Path | None, cand: Path | None) -> bool:
    """Whether the runner sections of config file ``rel`` differ between the two trees."""
    name = rel.rsplit("/", 1)[-1]
    before = _runner_sections(name, _read(start)) if start is not None else None
    after = _runner_sections(name, _read(cand)) if cand is not None else None
    try:
        return before != after
    except RecursionError:  # nested past what a comparison can walk: not the same
        return True


# ---------------------------------------------------------------------------- building


def build_verification_tree(
    lc: LoadedCase,
    start: Path,
    candidate: Path,
    dest: Path,
    *,
    artifacts: Sequence[str] = (),
    replace: Sequence[tuple[Path, str]] = (),
) -> VerificationTree:
    """Materialise the verifier's tree for ``candidate`` into the fresh folder ``dest``.

    ``replace``: (file, path in the tree) pairs written last, over whatever is there, with
    its permission bits and modification time (a mutant's run: see
    :class:`~harness.cases.model.Mutant`).

    Raises:
        EvaluatorError: a hidden file of the case is missing.
    """
    vt = VerificationTree()
    dest.mkdir(parents=True, exist_ok=False)
    s_entries, c_entries = _entries(start), _entries(candidate)
    rules = _Rules(lc, {r for r in s_entries if "/" not in r})
    _copy_candidate(candidate, c_entries, dest, vt)
    for rel in sorted(set(s_entries) | set(c_entries)):
        if rules.protected(rel):
            _protect_one(rel, start, s_entries, candidate, c_entries, dest, rules, vt)
    for hidden in lc.case.verifier.hidden:
        _stage_hidden(lc.path(hidden.src), hidden.dest, dest, vt, start)
    for src, rel in replace:
        _replace_one(src, rel, dest, vt)
    for rel in artifacts:
        if (dest / rel).is_symlink() or (dest / rel).exists():
            vt.tampering.append(
                f"candidate shipped required artifact {display(rel)}; removed before verifying"
            )
            _remove(dest / rel)
    _refuse_module_links(start, s_entries, candidate, c_entries, dest, rules, vt)
    _scan_internals(start, s_entries, candidate, c_entries, rules, vt)
    _lock(dest, rules, vt)
    return vt


def _lock(dest: Path, rules: _Rules, vt: VerificationTree) -> None:
    """List what the verifier's run may not change (``vt.locked``), with empty caches.

    Compiled-module caches are dropped and an empty ``__pycache__`` is locked next to every
    locked module: the importer (and pytest's assertion rewriter) reads a cached module
    before its source, so a cache planted at run time would stand in for a locked test.
    """
    kept = set(vt.candidate)
    entries = {}
    for rel, st in sorted(_entries(dest).items()):
        if "__pycache__" not in rel.split("/"):
            entries[rel] = st
        elif rel.rsplit("/", 1)[-1] == "__pycache__":
            _remove(dest / rel)  # a nested one may be gone with its parent already
    locked = [
        rel
        for rel, st in sorted(entries.items())
        if stat.S_ISREG(st.st_mode)
        and rel not in kept
        and (rules.protected(rel) or rel.endswith((".py", ".pyi")))
    ]
    caches = sorted(
        {
            f"{r.rsplit('/', 1)[0]}/__pycache__" if "/" in r else "__pycache__"
            for r in locked
            if r.endswith(".py")
        }
    )
    for rel in caches:
        (dest / rel).mkdir(mode=0o755)
    vt.locked = [*locked, *caches]
    vt.protected = [rel for rel in locked if rules.protected(rel)]
    regular = [rel for rel, st in sorted(entries.items()) if stat.S_ISREG(st.st_mode)]
    vt.read_only = [*regular, *caches]


def _copy_candidate(
    candidate: Path, entries: dict[str, os.stat_result], dest: Path, vt: VerificationTree
) -> None:
    for rel in sorted(entries):  # parents sort before their children
        st = entries[rel]
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            continue
        parent = dest / rel.rsplit("/", 1)[0] if "/" in rel else dest
        if parent.is_symlink() or not parent.is_dir():
            continue  # under a link or a left-out entry
        if stat.S_ISLNK(st.st_mode) and _link_escapes(rel, os.readlink(candidate / rel)):
            vt.tampering.append(
                f"{display(rel)}: symlink to {display(os.readlink(candidate / rel))} leaves the "
                "tree; left out"
            )
            continue
        if stat.S_ISREG(st.st_mode):
            # A hard link is one syscall instead of a copy; nothing writes into this tree
            # in place (restores and hidden files replace entries), so sharing is safe.
            try:
                os.link(candidate / rel, dest / rel, follow_symlinks=False)
                continue
            except OSError:
                pass
        _copy_entry(candidate / rel, st, dest / rel)


def _protect_one(
    rel: str,
    start: Path,
    s_entries: dict[str, os.stat_result],
    candidate: Path,
    c_entries: dict[str, os.stat_result],
    dest: Path,
    rules: _Rules,
    vt: VerificationTree,
) -> None:
    s_st, c_st = s_entries.get(rel), c_entries.get(rel)
    s_kind = stat.S_IFMT(s_st.st_mode) if s_st is not None else None
    c_kind = stat.S_IFMT(c_st.st_mode) if c_st is not None else None
    if s_kind == c_kind == stat.S_IFDIR:
        return  # folders are judged by their files
    regular = {None, stat.S_IFREG}
    is_config = rel.rsplit("/", 1)[-1] in _CONFIG and s_kind in regular and c_kind in regular
    if is_config:
        s_file = start / rel if s_st is not None else None
        c_file = candidate / rel if c_st is not None else None
        if not _config_changed(rel, s_file, c_file):
            return  # the runner reads the same sections: e.g. only a dependency changed
    elif s_st is not None and c_st is not None and _same(start / rel, s_st, candidate / rel, c_st):
        return
    target = dest / rel
    if c_st is not None:
        if s_st is None and c_kind != stat.S_IFDIR:
            what = f"{display(rel)}: added under a protected path; left out"
            runner = is_config or rules.runner_control(rel)
            (vt.tampering if runner else vt.left_out).append(what)
        elif s_st is not None:
            vt.tampering.append(f"{display(rel)}: protected, changed by the candidate; restored")
        parent = target.parent
        if parent == dest or (not parent.is_symlink() and parent.is_dir()):
            _remove(target)
    elif s_kind != stat.S_IFDIR:
        vt.tampering.append(f"{display(rel)}: protected, deleted by the candidate; restored")
    if s_st is not None:
        _real_dirs(dest, rel.rsplit("/", 1)[0] if "/" in rel else "", vt)
        if not (target.is_dir() and not target.is_symlink()):
            _copy_entry(start / rel, s_st, target)


def _stage_hidden(src: Path, dest_rel: str, dest: Path, vt: VerificationTree, start: Path) -> None:
    if not (src.is_file() or src.is_dir()):
        raise EvaluatorError(f"hidden file {src} is missing")
    files: Iterable[tuple[str, Path, os.stat_result]]
    if src.is_dir():
        files = [(f"{dest_rel}/{r}", src / r, st) for r, st in sorted(_entries(src).items())]
    else:
        files = [(dest_rel, src, src.lstat())]
    for rel, path, st in files:
        parent_rel = rel.rsplit("/", 1)[0] if "/" in rel else ""
        _real_dirs(dest, parent_rel, vt)
        target = dest / rel
        if target.is_symlink() or target.exists():
            plain = target.is_file() and not target.is_symlink()
            same = plain and _read(target) == _read(path)
            # The starting state's own file at a hidden path (a test the case replaces) is
            # not the candidate's doing: only a change of it is.
            original = start / rel
            unchanged = (
                plain
                and original.is_file()
                and not original.is_symlink()
                and _read(target) == _read(original)
            )
            if not same and not unchanged and not stat.S_ISDIR(st.st_mode):
                vt.tampering.append(
                    f"candidate has {display(rel)} (a hidden path); overwritten by the case's file"
                )
        if stat.S_ISDIR(st.st_mode):
            _real_dirs(dest, rel, vt)
            continue
        _copy_entry(path, st, target)


def _replace_one(src: Path, rel: str, dest: Path, vt: VerificationTree) -> None:
    """Write ``src`` over ``dest/rel``, looking like what was there (mode, mtime)."""
    if not src.is_file() or src.is_symlink():
        raise EvaluatorError(f"mutant file {src} is missing")
    _real_dirs(dest, rel.rsplit("/", 1)[0] if "/" in rel else "", vt)
    target = dest / rel
    was = target.lstat() if target.is_file() and not target.is_symlink() else None
    _copy_entry(src, src.lstat(), target)
    if was is not None:
        os.chmod(target, stat.S_IMODE(was.st_mode))
        os.utime(target, ns=(was.st_atime_ns, was.st_mtime_ns))


def _refuse_module_links(
    start: Path,
    s_entries: dict[str, os.stat_result],
    candidate: Path,
    c_entries: dict[str, os.stat_result],
    dest: Path,
    rules: _Rules,
    vt: VerificationTree,
) -> None:
    """Leave out a candidate link that Python would import as a module (or a module's source).

    ``helper.py -> notes.txt`` is imported as ``helper``, yet no scan of ``.py`` files reads it.
    """
    for rel, st in sorted(c_entries.items()):
        if not stat.S_ISLNK(st.st_mode) or rules.allowed(rel):
            continue
        s_st = s_entries.get(rel)
        if s_st is not None and _same(start / rel, s_st, candidate / rel, st):
            continue
        target = os.readlink(candidate / rel)
        if not (_MODULE_SUFFIX.search(rel.lower()) or _MODULE_SUFFIX.search(target.lower())):
            continue
        if (dest / rel).is_symlink():
            _remove(dest / rel)
            vt.tampering.append(
                f"{display(rel)}: a link the candidate added as a module ({display(target)}); "
                "left out"
            )


def _findall(path: Path, size: int) -> set[bytes]:
    """Every runner-internals match in the file, read in chunks (no size skips the scan)."""
    found: set[bytes] = set()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        tail = b""
        while True:
            chunk = fh.read(_SCAN_CHUNK)
            if not chunk:
                break
            data = tail + chunk
            found.update(_INTERNALS.findall(data))
            tail = data[-256:]
    return found


def _scan_internals(
    start: Path,
    s_entries: dict[str, os.stat_result],
    candidate: Path,
    c_entries: dict[str, os.stat_result],
    rules: _Rules,
    vt: VerificationTree,
) -> None:
    """Note candidate code (outside protected paths) that reaches into the runner.

    Also lists, in ``vt.candidate``, every file and link the candidate added or changed that
    the tree keeps: the runner's guard attributes what runs from them to the candidate.
    """
    for rel, st in sorted(c_entries.items()):
        if stat.S_ISDIR(st.st_mode) or rules.protected(rel):
            continue
        s_st = s_entries.get(rel)
        if s_st is not None and _same(start / rel, s_st, candidate / rel, st):
            continue
        vt.candidate.append(rel)
        if not rel.endswith(".py") or not stat.S_ISREG(st.st_mode):
            continue
        found = _findall(candidate / rel, st.st_size)
        if s_st is not None and stat.S_ISREG(s_st.st_mode):
            found -= _findall(start / rel, s_st.st_size)
        if found:
            names = ", ".join(sorted(f.decode(errors="replace") for f in found))
            vt.tampering.append(
                f"{display(rel)}: candidate code touches the test runner's internals ({names})"
            )
