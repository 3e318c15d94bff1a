"""No sandboxed process is host root: an attacker through the CLI, on both backends.

The agent (tests/attacks/privilege_agent.py) passes only if it holds a privilege it must
never have, in the agent phase or inside the verifier (its ``calc.py`` re-runs the checks
when the hidden test imports it): host root or any capability, writable host kernel state
(``core_pattern``, ``domainname``, ``hostname``), core dumps it can turn back on, or a host
path (project, store, session folder) visible in its environment, working directory, mount
table or any visible process's command line. Every trial must end ``fail``; the host's
kernel state must be what it was.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import harness, make_project

from harness.store.store import Store

pytestmark = pytest.mark.integration

ATTACK = Path(__file__).resolve().parent.parent / "attacks" / "privilege_agent.py"
KERNEL = ("core_pattern", "domainname", "hostname")

RELEASE = """\
  privileged:
    agent:
      adapter: command
      command: [python3, "{agent}/agent/privilege_agent.py"]
      files: [agent]
    retry: {infra_retries: 0}
"""


@pytest.fixture
def project() -> Iterator[Path]:
    # Where real projects live ($HOME), so the project path is a host path worth hiding.
    home = Path(tempfile.mkdtemp(prefix="harness-privilege-test-", dir=Path.home()))
    root = make_project(home / "proj", n_cases=1)
    (root / "harness.yaml").write_text((root / "harness.yaml").read_text() + RELEASE)
    (root / "agent").mkdir()
    shutil.copy(ATTACK, root / "agent" / "privilege_agent.py")
    needles = [str(root), str(root / ".harness"), tempfile.gettempdir() + "/harness-"]
    (root / "agent" / "targets.json").write_text(json.dumps({"host_paths": needles}))
    assert harness(root, "cases", "lock").returncode == 0
    try:
        yield root
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _kernel_state() -> dict[str, str]:
    return {k: Path(f"/proc/sys/kernel/{k}").read_text() for k in KERNEL}


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_no_sandboxed_process_holds_a_host_privilege(project: Path, backend: str) -> None:
    if backend == "docker":
        from test_sealed_view import _need_docker

        _need_docker()
    before = _kernel_state()
    done = harness(
        project, "run", "--release", "privileged", "--k", "2", "--backend", backend, "--no-report"
    )
    assert "Traceback" not in done.stderr, done.stderr
    store = Store(project / ".harness")
    trials = list(store.trials(store.resolve_run("latest")))
    assert len(trials) == 2, done.stdout + done.stderr
    for rec in trials:
        agent = rec.attempts[-1].agent
        assert agent is not None and agent.stdout_blob is not None
        report = json.loads(store.get_blob(agent.stdout_blob).decode().strip().splitlines()[-1])
        assert report["found"] == [], f"the agent phase held a privilege: {report['found']}"
        assert rec.verdict.outcome.value == "fail", (
            f"a privilege was found in the verifier (the planted fix passed): {rec.verdict}"
        )
    assert _kernel_state() == before
