"""Build declared environments with uv, once per distinct input, cached by key.

A local environment is a *relocatable* venv (``uv venv --relocatable``) over a system
interpreter (``/usr/bin/python3.X`` or ``/usr/local/bin/python3.X``: the sandbox's minimal
system shows ``/usr``; the harness's own interpreter never reaches a sandbox), filled with
``uv pip install --require-hashes --compile-bytecode`` from the lock, then probed
(:mod:`harness.env.probe`) for its digest. It is mounted read-only inside the sandbox at
:attr:`~harness.env.model.BuiltEnv.mount`.

Cache: ``$HARNESS_CACHE_DIR/envs`` (default ``$XDG_CACHE_HOME/harness/envs``, i.e.
``~/.cache/harness/envs``), one folder per *build key* — the lock's bytes, the version
constraint and the chosen interpreter — plus ``<key>.json`` describing the built
environment. A folder whose stat fingerprint no longer matches its description is rebuilt.
Builds go to a temporary folder renamed into place, so concurrent runs never see half an
environment.

uv failures are classified by :func:`classify_uv_failure`: a hash mismatch or an
unresolvable pin is the user's input (:class:`~harness.errors.ConfigError`, exit 2); an
index that cannot be reached is infrastructure (:class:`~harness.errors.InfraError`, exit 4).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet

from harness import _proc
from harness.digest import digest_file, digest_json, short
from harness.env.lock import read_lock
from harness.env.model import BuiltEnv, EnvIdentity, EnvSource
from harness.env.probe import PROBE, env_digest, fingerprint, parse_probe
from harness.errors import ConfigError, InfraError

__all__ = [
    "Interpreter",
    "build_env",
    "cache_root",
    "classify_uv_failure",
    "compile_lock",
    "find_interpreter",
    "probe",
    "uv_binary",
]

_LAYOUT = 1
_SEARCH = ("/usr/bin", "/usr/local/bin")
_UV_TIMEOUT = 900.0

# uv's wording (0.4 … 0.13) for the failures that are the user's or the network's.
_HASH_MISMATCH = re.compile(r"hash mismatch for `?([A-Za-z0-9._-]+(?:==[^`\s]+)?)", re.I)
_UNRESOLVABLE = re.compile(
    r"no solution found|because .* was not found in the package registry|"
    r"no matching distribution|not found in the package registry",
    re.I,
)
_UNREACHABLE = re.compile(
    r"failed to fetch|error sending request|dns error|connection refused|tcp connect error|"
    r"could not connect|network is unreachable|operation timed out|failed to download|"
    r"request failed after \d+ retr",
    re.I,
)


@dataclass(frozen=True)
class Interpreter:
    """A system interpreter a venv can be built over."""

    path: str
    version: str
    build: str


def cache_root() -> Path:
    """``$HARNESS_CACHE_DIR``, else ``$XDG_CACHE_HOME/harness``, else ``~/.cache/harness``."""
    if os.environ.get("HARNESS_CACHE_DIR"):
        return Path(os.environ["HARNESS_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "harness"


def uv_binary() -> str:
    """Path of the uv executable (the ``uv`` wheel is a dependency of harness).

    Raises:
        InfraError: uv is not installed.
    """
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise InfraError("uv is not installed (pip install uv)", reason="uv_missing")


@functools.lru_cache(maxsize=64)
def _describe(path: str) -> Interpreter | None:
    try:
        done = _proc.run(
            [
                path,
                "-I",
                "-c",
                "import platform,sys;print(platform.python_version());print(sys.version)",
            ],
            timeout=30,
        )
    except InfraError:
        return None
    lines = done.stdout.decode(errors="replace").splitlines()
    if not done.ok or len(lines) < 2:
        return None
    return Interpreter(path, lines[0].strip(), lines[1].strip())


def _candidates() -> list[str]:
    found: dict[str, str] = {}
    for folder in _SEARCH:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if re.fullmatch(r"python3\.\d+", name):
                path = f"{folder}/{name}"
                found.setdefault(os.path.realpath(path), path)
    return list(found.values())


def find_interpreter(src: EnvSource) -> Interpreter:
    """Pick the newest system interpreter satisfying ``src``'s version constraint.

    Raises:
        ConfigError: no interpreter on this machine satisfies it (names the field).
    """
    spec = SpecifierSet(src.spec.python)
    seen = [i for i in (_describe(p) for p in _candidates()) if i is not None]
    fits = [i for i in seen if spec.contains(i.version, prereleases=True)]
    if not fits:
        have = ", ".join(f"{i.path} ({i.version})" for i in seen) or "none"
        raise ConfigError(
            f"no interpreter satisfies python {src.spec.python!r} on this machine "
            f"(system interpreters under {' and '.join(_SEARCH)}: {have})",
            file=src.file,
            field=f"{src.field}.python",
        )
    return max(fits, key=lambda i: tuple(int(x) for x in re.findall(r"\d+", i.version)[:3]))


def classify_uv_failure(src: EnvSource, what: str, stderr: bytes) -> Exception:
    """Turn a failed uv command into the error the user should see."""
    text = stderr.decode(errors="replace")
    tail = " ".join(text.strip().split())[-600:]
    m = _HASH_MISMATCH.search(text)
    if m:
        return ConfigError(
            f"hash mismatch for {m.group(1)}: the downloaded artifact does not match the "
            f"lock's --hash ({tail})",
            file=src.lock_path,
            field=m.group(1).split("==")[0],
        )
    if _UNRESOLVABLE.search(text):
        return ConfigError(
            f"the lock cannot be installed for this interpreter: {tail}",
            file=src.lock_path,
        )
    if _UNREACHABLE.search(text):
        return InfraError(
            f"{what}: the package index cannot be reached: {tail}",
            reason="package_index_unreachable",
        )
    return InfraError(f"{what} failed: {tail}", reason="env_build_failed")


def _uv(src: EnvSource, argv: list[str], what: str) -> None:
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)  # never install into the harness's own venv
    # Trust the system's certificate store, as pip and curl do: behind a TLS-inspecting
    # proxy uv's bundled roots reject the index (and a user can still set it to 0).
    env.setdefault("UV_NATIVE_TLS", "1")
    done = _proc.run([uv_binary(), *argv], env=env, timeout=_UV_TIMEOUT)
    if not done.ok:
        raise classify_uv_failure(src, what, done.stderr + done.stdout)


def build_key(src: EnvSource, interp: Interpreter) -> str:
    """Cache key of ``src`` built over ``interp``."""
    return digest_json(
        {
            "layout": _LAYOUT,
            "python": src.spec.python,
            "lock": digest_file(src.lock_path),
            "interpreter": interp.path,
            "interpreter_build": interp.build,
        }
    )


def probe(python: str, where: str) -> EnvIdentity:
    """Run the identity probe with ``python`` (the environment's own interpreter).

    Raises:
        InfraError: the interpreter failed or printed something else.
    """
    done = _proc.run([python, "-I", "-c", PROBE], timeout=120)
    if not done.ok:
        raise InfraError(
            f"{where}: the environment's interpreter failed: "
            f"{done.stderr.decode(errors='replace')[-400:]}",
            reason="env_probe_failed",
        )
    return parse_probe(done.stdout, where)


def _load_cached(meta: Path, prefix: Path) -> BuiltEnv | None:
    if not (meta.is_file() and prefix.is_dir()):
        return None
    try:
        built = BuiltEnv.model_validate(json.loads(meta.read_text()))
    except (OSError, ValueError):
        return None
    return built if fingerprint(prefix) == built.fingerprint else None


def build_env(src: EnvSource) -> BuiltEnv:
    """Build ``src`` (or reuse the cached build) and return its description.

    Raises:
        ConfigError: bad lock, no satisfying interpreter, hash mismatch (exit 2).
        InfraError: the index is unreachable or uv failed otherwise (exit 4).
    """
    read_lock(src)
    interp = find_interpreter(src)
    key = build_key(src, interp)
    root = cache_root() / "envs"
    prefix, meta = root / short(key, 24), root / f"{short(key, 24)}.json"
    cached = _load_cached(meta, prefix)
    if cached is not None:
        return cached
    t0 = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".build-{short(key, 24)}-{os.getpid()}-{time.monotonic_ns()}"
    try:
        what = f"building environment {src.field} of {src.file}"
        _uv(
            src,
            [
                "venv",
                "-q",
                "--relocatable",
                "--no-python-downloads",
                "--python",
                interp.path,
                str(tmp),
            ],
            what,
        )
        _uv(
            src,
            [
                "pip",
                "install",
                "-q",
                "--python",
                str(tmp / "bin" / "python"),
                "--require-hashes",
                "--compile-bytecode",
                "--link-mode",
                "copy",
                "-r",
                str(src.lock_path),
            ],
            what,
        )
        identity = probe(str(tmp / "bin" / "python"), what)
        if prefix.exists():
            shutil.rmtree(prefix, ignore_errors=True)
        try:
            tmp.rename(prefix)
        except OSError:  # a concurrent build won; use it
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    built = BuiltEnv(
        digest=env_digest(identity),
        identity=identity,
        prefix=str(prefix),
        interpreter=interp.path,
        fingerprint=fingerprint(prefix),
        build_key=key,
        build_seconds=round(time.monotonic() - t0, 3),
    )
    part = meta.with_name(meta.name + f".{os.getpid()}.part")
    part.write_text(built.model_dump_json(indent=2))
    part.replace(meta)
    return built


def _spelling(lock: Path, req: Path, base: Path) -> str | None:
    """Return how an existing ``lock`` names ``req`` in its ``-r`` comments, if it does."""
    try:
        text = lock.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for name in re.findall(r"^\s*#.*-r (\S+)$", text, flags=re.M):
        for root in (lock.parent, base):
            if (root / name).resolve() == req.resolve():
                return str(name)
    return None


def compile_lock(src: EnvSource) -> Path:
    """Write ``src``'s lock from its ``requirements`` with ``uv pip compile --generate-hashes``.

    Raises:
        ConfigError: ``requirements`` is not declared or missing, or cannot be resolved.
        InfraError: the package index cannot be reached.
    """
    if src.spec.requirements is None:
        raise ConfigError(
            "no `requirements` input to lock from", file=src.file, field=f"{src.field}.requirements"
        )
    req = src.base / src.spec.requirements
    if not req.is_file():
        raise ConfigError(
            f"requirements file {src.spec.requirements!r} does not exist",
            file=src.file,
            field=f"{src.field}.requirements",
        )
    interp = find_interpreter(src)
    out = src.lock_path
    out.parent.mkdir(parents=True, exist_ok=True)
    spelled = _spelling(out, req, src.base)
    _uv(
        src,
        [
            "pip",
            "compile",
            "-q",
            "--generate-hashes",
            "--no-header",
            "--python",
            interp.path,
            str(req),
            "-o",
            str(out),
        ],
        f"locking {req}",
    )
    # uv names the input as it was given (relative to where harness ran). Keep the lock's
    # own spelling of it (or name it relative to the lock), so re-locking an unchanged
    # input on a clean checkout reproduces the lock byte for byte.
    text = out.read_text(encoding="utf-8")
    relative = spelled or os.path.relpath(req.resolve(), out.parent.resolve())

    def _named(m: re.Match[str]) -> str:
        same = Path(m.group(2)).resolve() == req.resolve()
        return m.group(1) + (relative if same else m.group(2))

    fixed = re.sub(r"^(\s*#.*-r )(\S+)$", _named, text, flags=re.M)
    if fixed != text:
        out.write_text(fixed, encoding="utf-8")
    read_lock(src)
    return out
