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
import tarfile
from pathlib import Path
from typing import Any

from harness.digest import digest_json, short, tree_digest
from harness.errors import CaseError, SandboxUnavailableError
from harness.sandbox.docker import LABEL, SEED_LABEL, engine_errors, find_image

__all__ = ["CASE_REPOSITORY", "build_case_image", "case_image_tag"]

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
        for entry in sorted(root.rglob("*")):
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
    base = find_image(client, base_image)
    if base is None:
        raise SandboxUnavailableError(
            f"docker: base image {base_image!r} is missing (build it with ci/docker-up.sh)",
            reason="image_missing",
        )
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
                base.id, ["true"], labels={LABEL: "1"}, network_mode="none"
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
