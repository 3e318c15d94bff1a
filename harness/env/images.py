"""Per-case images: base image + the case's starting repository state, cached by digest.

The layering follows SWE-bench's harness (base, environment, instance): a case image is the
contract's base image with the materialized starting tree added at ``/opt/harness/seed``
and the label ``harness.seed`` pointing there. The Docker backend copies that folder into
each fresh session's workspace inside the engine (``cp -a`` in the holder container), so a
trial starts from image layers instead of copying the repository through the API.

The image is tagged ``harness-case:<short case digest>`` and labelled with a digest of its
inputs (base image id, case digest, tree digest, layout version); building again with the
same inputs is a no-op that returns the existing image id. No registry is involved: the
tree goes in with ``put_archive`` on a created (never started) container, then ``commit``.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet

from harness._safefs import tree_entries
from harness.digest import digest_file, digest_json, short, tree_digest
from harness.env.build import cache_root, uv_binary
from harness.env.lock import read_lock
from harness.env.model import ENV_MOUNT_ROOT, BuiltEnv, EnvSource
from harness.env.probe import PROBE, env_digest, fingerprint, parse_probe
from harness.errors import CaseError, ConfigError, InfraError, SandboxUnavailableError
from harness.sandbox.docker import LABEL, SEED_LABEL, engine_errors, find_image, owner_labels
from harness.sandbox.owner import EXPORTS, lease

__all__ = [
    "CASE_REPOSITORY",
    "ENV_REPOSITORY",
    "build_case_image",
    "build_env_image",
    "case_image_tag",
    "export_env",
    "fetch_wheels",
]

CASE_REPOSITORY = "harness-case"
_LAYOUT = 2
_SEED = "/opt/harness/seed"
_INPUTS = "harness.image.inputs"


def case_image_tag(case_digest: str) -> str:
    """Return ``harness-case:<first 12 hex of the case digest>``."""
    return f"{CASE_REPOSITORY}:{short(case_digest)}"


def _tree_tar(root: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for parent in ("opt", "opt/harness", _SEED.lstrip("/")):
            top = tarfile.TarInfo(parent)
            top.type, top.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(top)
        for entry in tree_entries(root):
            name = f"{_SEED.lstrip('/')}/{entry.relative_to(root).as_posix()}"
            info = tar.gettarinfo(str(entry), name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if info.isreg():
                with entry.open("rb") as fh:
                    tar.addfile(info, fh)
            elif info.isdir() or info.issym():
                tar.addfile(info)
    return buf.getvalue()


def _require_base(client: Any, image: str) -> Any:
    """Return the local base image ``image``; its absence is ``image_missing``."""
    base = find_image(client, image)
    if base is None:
        raise SandboxUnavailableError(
            f"docker: base image {image!r} is missing (build it with ci/docker-up.sh)",
            reason="image_missing",
        )
    return base


def build_case_image(client: Any, base_image: str, case_dir_tree: Path, case_digest: str) -> str:
    """Build (or reuse) the image of one case and return its id (``sha256:…``).

    ``case_dir_tree`` is the materialized starting state (what the agent's workspace holds
    at the start); it lands at ``/workspace`` on top of ``base_image``.

    Raises:
        CaseError: ``case_dir_tree`` is not a directory.
        SandboxUnavailableError: the engine is unreachable, the base image is missing, or
            the build failed (reason ``image_build_failed``).

    """
    if not case_dir_tree.is_dir():
        raise CaseError(
            f"starting tree {case_dir_tree} is not a directory", file=case_dir_tree, field="repo"
        )
    tag = case_image_tag(case_digest)
    base = _require_base(client, base_image)
    inputs = digest_json(
        {
            "base": base.id,
            "case": case_digest,
            "layout": _LAYOUT,
            "tree": tree_digest(case_dir_tree),
        }
    )
    existing = find_image(client, tag)
    if existing is not None and (existing.labels or {}).get(_INPUTS) == inputs:
        return str(existing.id)
    labels = {
        LABEL: "1",
        _INPUTS: inputs,
        SEED_LABEL: _SEED,
        "harness.case.digest": case_digest,
        "harness.base.id": str(base.id),
    }
    ctr = None
    with engine_errors(f"building {tag} from {base_image}", "image_build_failed"):
        try:
            ctr = client.containers.create(
                base.id, ["true"], labels={LABEL: "1", **owner_labels()}, network_mode="none"
            )
            if not ctr.put_archive("/", _tree_tar(case_dir_tree)):
                raise SandboxUnavailableError(
                    f"docker: building {tag}: archive refused", reason="image_build_failed"
                )
            image = ctr.commit(
                repository=CASE_REPOSITORY,
                tag=short(case_digest),
                conf={"Labels": {**(base.labels or {}), **labels}},
            )
        finally:
            if ctr is not None:
                ctr.remove(force=True)
    return str(image.id)


# --------------------------------------------------------------------------- environments

ENV_REPOSITORY = "harness-env"
_ENV_LAYOUT = 1
_BUILD = "/tmp/harness-env-build"
_ENV_BUILT = "harness.env.built"
_IMAGE_PROBE = (
    "import json,platform,sys,sysconfig;print(json.dumps({'version':platform.python_version(),"
    "'machine':platform.machine(),'libc':platform.libc_ver(),'exe':sys.executable,"
    "'nodot':sysconfig.get_config_var('py_version_nodot')}))"
)


def _exec(ctr: Any, argv: list[str], what: str, env: dict[str, str] | None = None) -> bytes:
    with engine_errors(what, "image_build_failed"):
        code, out = ctr.exec_run(argv, user="0", environment=env or {}, demux=False)
    if code != 0:
        raise SandboxUnavailableError(
            f"docker: {what} failed (exit {code}): "
            + bytes(out or b"")[-800:].decode(errors="replace"),
            reason="image_build_failed",
        )
    return bytes(out or b"")


def _build_tar(uv: Path, lock: Path, wheels: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, name in [(uv, "uv"), (lock, "requirements.lock")] + [
            (w, f"wheels/{w.name}") for w in sorted(wheels.iterdir())
        ]:
            info = tar.gettarinfo(str(path), f"{_BUILD.lstrip('/')}/{name}")
            info.uid = info.gid = 0
            with path.open("rb") as fh:
                tar.addfile(info, fh)
    return buf.getvalue()


def build_env_image(client: Any, base_image: str, src: EnvSource) -> tuple[str, BuiltEnv]:
    """Build (or reuse) ``base_image`` + the environment ``src`` as an image layer.

    The wheels are fetched on the host for the image's own interpreter (its version, ABI,
    glibc and machine), then installed offline inside a build container without network
    (containers cannot reach a package index) with the same uv and the same identity probe
    as a local build, at ``/opt/harness/env/<12 hex of the digest>``. The image is tagged
    ``harness-env:<key>`` and labelled with the built environment, so a rebuild with the
    same inputs is a no-op.

    Raises:
        ConfigError: bad lock, an image interpreter outside the constraint, a missing
            system package, a hash mismatch.
        InfraError: the package index is unreachable; the engine failed.
    """
    read_lock(src)
    base = _require_base(client, base_image)
    inputs = digest_json(
        {
            "base": base.id,
            "layout": _ENV_LAYOUT,
            "lock": digest_file(src.lock_path),
            "python": src.spec.python,
            "system_packages": list(src.spec.system_packages),
        }
    )
    tag = f"{ENV_REPOSITORY}:{short(inputs)}"
    existing = find_image(client, tag)
    labels = (existing.labels or {}) if existing is not None else {}
    if existing is not None and labels.get(_INPUTS) == inputs and _ENV_BUILT in labels:
        return str(existing.id), BuiltEnv.model_validate_json(labels[_ENV_BUILT])
    t0 = time.monotonic()
    ctr = None
    with engine_errors(f"building {tag} from {base_image}", "image_build_failed"):
        try:
            ctr = client.containers.run(
                base.id,
                ["infinity"],
                entrypoint=["sleep"],
                detach=True,
                network_mode="none",
                labels={LABEL: "1", "harness.role": "env-build", **owner_labels()},
                user="0",
            )
            built = _install_env(ctr, src, inputs, tag)
            built = built.model_copy(update={"build_seconds": round(time.monotonic() - t0, 3)})
            cfg = base.attrs.get("Config") or {}
            image = ctr.commit(
                repository=ENV_REPOSITORY,
                tag=short(inputs),
                conf={
                    "Labels": {
                        **(base.labels or {}),
                        LABEL: "1",
                        _INPUTS: inputs,
                        _ENV_BUILT: built.model_dump_json(),
                        "harness.env.digest": built.digest,
                    },
                    "Cmd": cfg.get("Cmd"),
                    "Entrypoint": cfg.get("Entrypoint"),
                },
            )
        finally:
            if ctr is not None:
                ctr.remove(force=True)
    return str(image.id), built


def export_env(client: Any, image_id: str, built: BuiltEnv) -> BuiltEnv:
    """Copy environment ``built`` out of its image layer ``image_id`` to a host prefix.

    An agent environment must be present in the agent phase only, so it cannot be a layer
    of the case image (the verifier runs there too): it is built as a layer over the base
    image (for that image's interpreter), copied once to
    ``<cache>/docker-envs/<image id>`` and mounted read-only like a local environment.
    The returned environment has that host prefix and its stat fingerprint (checked before
    each trial); the digest is the one probed in the image.

    The export is leased to this process (:func:`harness.sandbox.owner.lease`):
    ``harness sandbox prune`` removes it only once no live process holds a lease.

    Raises:
        InfraError: the engine failed to export the layer.
    """
    root = cache_root() / EXPORTS
    with lease(root, short(image_id)):  # kept from `sandbox prune` while this process lives
        return _export(client, image_id, built, root)


def _export(client: Any, image_id: str, built: BuiltEnv, root: Path) -> BuiltEnv:
    final = root / short(image_id)
    meta = root / f"{short(image_id)}.json"
    if final.is_dir() and meta.is_file():
        return BuiltEnv.model_validate_json(meta.read_bytes())
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".export-p{os.getpid()}-"))
    ctr = None
    try:
        with engine_errors(f"exporting {built.mount} from {short(image_id)}", "image_build_failed"):
            ctr = client.containers.create(
                image_id, ["true"], labels={LABEL: "1", **owner_labels()}
            )
            stream, _ = ctr.get_archive(built.mount)
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream)), mode="r") as tar:
                tar.extractall(tmp, filter="tar")  # our own image; keeps absolute symlinks
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp / Path(built.mount).name, final)
        out = built.model_copy(update={"prefix": str(final), "fingerprint": fingerprint(final)})
        meta.write_text(out.model_dump_json())
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if ctr is not None:
            with engine_errors("removing the export container", "image_build_failed"):
                ctr.remove(force=True)


def _install_env(ctr: Any, src: EnvSource, inputs: str, tag: str) -> BuiltEnv:
    info = json.loads(_exec(ctr, ["python3", "-I", "-c", _IMAGE_PROBE], f"{tag}: probing python3"))
    if not SpecifierSet(src.spec.python).contains(info["version"], prereleases=True):
        raise ConfigError(
            f"the image's python3 is {info['version']}, outside the constraint {src.spec.python!r}",
            file=src.file,
            field=f"{src.field}.python",
        )
    if src.spec.system_packages:
        out = ctr.exec_run(
            ["dpkg-query", "-W", "-f=${Package} ${db:Status-Abbrev}\n", *src.spec.system_packages],
            user="0",
        )[1].decode(errors="replace")
        have = {ln.split()[0] for ln in out.splitlines() if ln.split()[1:2] == ["ii"]}
        missing = [p for p in src.spec.system_packages if p not in have]
        if missing:
            raise ConfigError(
                f"the image lacks system package(s) {', '.join(missing)} (containers cannot "
                "install them here: add them to the base image)",
                file=src.file,
                field=f"{src.field}.system_packages",
            )
    wheels = fetch_wheels(src, info)
    with engine_errors(f"{tag}: copying wheels", "image_build_failed"):
        if not ctr.put_archive("/", _build_tar(Path(uv_binary()), src.lock_path, wheels)):
            raise SandboxUnavailableError(
                f"docker: {tag}: archive refused", reason="image_build_failed"
            )
    stage = f"{ENV_MOUNT_ROOT}/.build"
    uv = f"{_BUILD}/uv"
    uv_env = {"UV_CACHE_DIR": f"{_BUILD}/cache", "UV_NO_CONFIG": "1"}
    _exec(
        ctr,
        [
            uv,
            "venv",
            "-q",
            "--relocatable",
            "--no-python-downloads",
            "--python",
            info["exe"],
            stage,
        ],
        f"{tag}: uv venv",
        uv_env,
    )
    _exec(
        ctr,
        [
            uv,
            "pip",
            "install",
            "-q",
            "--offline",
            "--no-index",
            "--find-links",
            f"{_BUILD}/wheels",
            "--require-hashes",
            "--compile-bytecode",
            "--link-mode",
            "copy",
            "--python",
            f"{stage}/bin/python",
            "-r",
            f"{_BUILD}/requirements.lock",
        ],
        f"{tag}: offline install",
        uv_env,
    )
    identity = parse_probe(
        _exec(ctr, [f"{stage}/bin/python", "-I", "-c", PROBE], f"{tag}: probe"), tag
    )
    digest = env_digest(identity)
    mount = f"{ENV_MOUNT_ROOT}/{short(digest)}"
    _exec(ctr, ["sh", "-c", f"mv {stage} {mount} && rm -rf {_BUILD}"], f"{tag}: finishing")
    return BuiltEnv(
        digest=digest,
        identity=identity,
        prefix="",
        interpreter=info["exe"],
        fingerprint="",
        build_key=inputs,
    )


def fetch_wheels(src: EnvSource, info: dict[str, Any]) -> Path:
    """Download the lock's wheels for the image's interpreter into the harness cache.

    Raises:
        ConfigError: a hash mismatch or a pin without a wheel for that interpreter.
        InfraError: the package index is unreachable.
    """
    from harness import _proc

    machine, (libc, libc_version) = info["machine"], info["libc"]
    platforms = [f"linux_{machine}"]
    if libc == "glibc":  # pip does not widen --platform: name every older manylinux too
        major, minor = (int(x) for x in libc_version.split(".")[:2])
        platforms[:0] = [f"manylinux_{major}_{m}_{machine}" for m in range(minor, 4, -1)]
        platforms[-1:-1] = [f"manylinux{t}_{machine}" for t in ("2014", "2010", "1")]
    dest = cache_root() / "wheels" / short(digest_json([digest_file(src.lock_path), info]), 24)
    dest.mkdir(parents=True, exist_ok=True)
    argv = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--no-deps",
        "--require-hashes",
        "--only-binary=:all:",
        "--python-version",
        info["nodot"],
        "--implementation",
        "cp",
        "--abi",
        f"cp{info['nodot']}",
        "--abi",
        "abi3",
        "--abi",
        "none",
        *[x for p in platforms for x in ("--platform", p)],
        "-d",
        str(dest),
        "-r",
        str(src.lock_path),
    ]
    done = _proc.run(argv, timeout=900)
    if not done.ok:
        text = (done.stderr + done.stdout).decode(errors="replace")
        if "No module named pip" in text:
            raise InfraError("pip is needed to fetch wheels for the image", reason="pip_missing")
        if "DO NOT MATCH THE HASHES" in text:
            raise ConfigError(f"hash mismatch: {' '.join(text.split())[-500:]}", file=src.lock_path)
        if re.search(r"No matching distribution|Could not find a version", text):
            raise ConfigError(
                f"no wheel for the image's interpreter: {' '.join(text.split())[-500:]}",
                file=src.lock_path,
            )
        raise InfraError(
            f"fetching wheels for the image: the package index cannot be reached or pip "
            f"failed: {' '.join(text.split())[-500:]}",
            reason="package_index_unreachable",
        )
    return dest
