"""The kernel keyrings are closed to every local sandboxed command: an attacker via the CLI.

The local backend shares the host's kernel. A key stored in the sandbox uid's user keyring
outlives the command and the run, so without a seccomp filter a candidate's code imported
by the hidden test could store the hidden test there and a later trial's agent read it back.
The agent (tests/attacks/keyring_agent.py) tries both, twice in a row; the planted
``calc.py`` breaks ``add`` when the verifier's store succeeded. Every trial must pass
(unaffected), no agent may read or store a key, and no key may land in ``/proc/keys``.
"""

from __future__ import annotations

import ctypes
import json
import platform
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import harness, make_project

from harness.store.store import Store

pytestmark = pytest.mark.integration

ATTACK = Path(__file__).resolve().parent.parent / "attacks" / "keyring_agent.py"
KEYCTL = {"x86_64": 250, "aarch64": 219}
KEYCTL_INVALIDATE = 21

RELEASE = """\
  keyring:
    agent:
      adapter: command
      command: [python3, "{agent}/agent/keyring_agent.py"]
      files: [agent]
    retry: {infra_retries: 0}
"""


def _keys(tag: str) -> list[str]:
    return [line for line in Path("/proc/keys").read_text().splitlines() if tag in line]


def _invalidate(tag: str) -> None:
    """Remove whatever a leak left on this host (the keys are world-writable by design)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    for line in _keys(tag):
        libc.syscall(KEYCTL[platform.machine()], KEYCTL_INVALIDATE, int(line.split()[0], 16))


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    tag = f"hxkr_{uuid.uuid4().hex[:12]}"
    root = make_project(tmp_path / "proj", n_cases=1)
    (root / "harness.yaml").write_text((root / "harness.yaml").read_text() + RELEASE)
    (root / "agent").mkdir()
    shutil.copy(ATTACK, root / "agent" / "keyring_agent.py")
    (root / "agent" / "tag.txt").write_text(tag)
    assert harness(root, "cases", "lock").returncode == 0
    try:
        yield root, tag
    finally:
        _invalidate(tag)


def test_no_sandboxed_command_reaches_the_kernel_keyrings(project: tuple[Path, str]) -> None:
    root, tag = project
    # One trial at a time: the second trial's agent runs after the first trial's verifier.
    done = harness(
        root, "run", "--release", "keyring", "--k", "2", "--jobs", "1", "--backend", "local",
        "--no-report",
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    store = Store(root / ".harness")
    trials = store.trials(store.resolve_run("latest"))  # in trial order
    assert len(trials) == 2, done.stdout + done.stderr
    for rec in trials:
        agent = rec.attempts[-1].agent
        assert agent is not None and agent.stdout_blob is not None
        report = json.loads(store.get_blob(agent.stdout_blob).decode().strip().splitlines()[-1])
        assert report["leaked"] is None, f"an agent read a key: {report['leaked']!r}"
        assert report["store"] == -1, f"the agent phase stored a key (or errno): {report}"
        assert report["fetch_errno"] == 1, report  # EPERM, not "no such key"
        assert rec.verdict.outcome.value == "pass", (
            f"the verifier reached the keyring (the planted store broke add): {rec.verdict}"
        )
    assert _keys(tag) == [], "a sandboxed command left a key on the host"
