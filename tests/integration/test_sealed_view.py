"""Hostile agents through the public CLI, on both backends: the sealed view holds.

The agent (tests/attacks/sealed_agent.py, declared as ``agent.files``) cannot fix the bug;
it hunts for the answer (canaries planted in the case's reference patch and hidden
verifier), for the project folder, the store, /root, host /var/tmp, another trial's dir
and /etc/shadow, writes outside its workspace and tries the network. Every trial must
end in ``fail`` (a leak of the reference would make it pass), nothing planted may appear
in what it printed, nothing may appear on the host. An honest control agent passes.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import harness, make_project

from harness.store.store import Store

pytestmark = pytest.mark.integration

ATTACK = Path(__file__).resolve().parent.parent / "attacks" / "sealed_agent.py"

RELEASES = """\
  attacker:
    agent:
      adapter: command
      command: [python3, "{agent}/agent/sealed_agent.py"]
      files: [agent]
    retry: {infra_retries: 0}
  honest:
    agent:
      adapter: command
      command: [sh, "{agent}/honest/fix.sh"]
      files: [honest]
    retry: {infra_retries: 0}
"""

FIX = """\
cd "$HARNESS_WORKSPACE"
printf 'def add(a, b):\\n    return a + b\\n' > calc.py
printf '{"status": "submitted", "claimed_success": true}' > "$HARNESS_RESULT"
"""


class Planted:
    """Canaries and escape targets planted on the host for one test."""

    def __init__(self, project: Path) -> None:
        tag = uuid.uuid4().hex[:12]
        self.tag = tag
        self.canaries = {
            name: f"CANARY_{name.upper()}_{tag}"
            for name in (
                "reference",
                "hidden",
                "project",
                "store",
                "root",
                "vartmp",
                "trial",
                "home",
            )
        }
        c = self.canaries
        case = project / "cases" / "add-0"
        patch = case / "reference.patch"
        # Text before the first diff line is ignored by `git apply`: the patch still works.
        patch.write_text(f"{c['reference']}\n{patch.read_text()}")
        hidden = case / "hidden" / "verify_hidden.py"
        hidden.write_text(f"# {c['hidden']}\n{hidden.read_text()}")
        (project / "project-canary.txt").write_text(c["project"])
        self.other_trial = Path("/tmp") / f"harness-trial-canary-{tag}"
        self.host_files = {
            Path("/root") / f"harness-canary-{tag}.txt": c["root"],
            Path("/var/tmp") / f"harness-canary-{tag}.txt": c["vartmp"],
            self.other_trial / "secret.txt": c["trial"],
            Path("/home") / f"harness-canary-{tag}.txt": c["home"],
        }
        for path, text in self.host_files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        self.writes = [
            project / f"pwned-{tag}.txt",
            project / ".harness" / f"pwned-{tag}.txt",
            hidden,
            Path("/root") / f"pwned-{tag}.txt",
            Path("/var/tmp") / f"pwned-{tag}.txt",
            Path("/tmp") / f"pwned-{tag}.txt",
            Path(f"/pwned-{tag}.txt"),
            Path(f"/usr/pwned-{tag}.txt"),
            self.other_trial / "pwned.txt",
        ]
        self.hidden, self.hidden_text = hidden, hidden.read_text()
        self.project = project

    def targets(self, port: int) -> dict[str, object]:
        p = self.project
        return {
            "read": [
                "/etc/shadow",
                "/etc/gshadow",
                str(p / "project-canary.txt"),
                str(p / ".harness" / "canary.txt"),
                str(p / "cases" / "add-0" / "reference.patch"),
                str(self.hidden),
                *(str(f) for f in self.host_files),
            ],
            "list": ["/root", "/home", str(p), str(p / ".harness"), "/var/tmp", "/tmp", "/work"],
            "write": [str(w) for w in self.writes],
            "port": port,
        }

    def cleanup(self) -> None:
        for path in [*self.host_files, *self.writes]:
            if path != self.hidden and path.is_file():
                path.unlink()
        shutil.rmtree(self.other_trial, ignore_errors=True)


@pytest.fixture
def listener() -> Iterator[int]:
    srv = socket.create_server(("127.0.0.1", 0))
    try:
        yield srv.getsockname()[1]
    finally:
        srv.close()


@pytest.fixture
def attack_project(listener: int) -> Iterator[tuple[Path, Planted]]:
    # Not under /tmp (private in the sandbox anyway): where real projects live, in $HOME.
    home = Path(tempfile.mkdtemp(prefix="harness-sealed-test-", dir=Path.home()))
    project = make_project(home / "proj", n_cases=1)
    (project / "harness.yaml").write_text((project / "harness.yaml").read_text() + RELEASES)
    (project / "agent").mkdir()
    shutil.copy(ATTACK, project / "agent" / "sealed_agent.py")
    (project / "honest").mkdir()
    (project / "honest" / "fix.sh").write_text(FIX)
    planted = Planted(project)
    (project / ".harness").mkdir()
    (project / ".harness" / "canary.txt").write_text(planted.canaries["store"])
    (project / "agent" / "targets.json").write_text(json.dumps(planted.targets(listener)))
    assert harness(project, "cases", "lock").returncode == 0
    try:
        yield project, planted
    finally:
        planted.cleanup()
        shutil.rmtree(home, ignore_errors=True)


def _host_state(planted: Planted) -> dict[str, object]:
    project = planted.project
    return {
        "project": sorted(
            str(p.relative_to(project))
            for p in project.rglob("*")
            if p.parts[len(project.parts)] not in (".harness", "reports")
        ),
        "writes": {str(w): w.exists() for w in planted.writes if w != planted.hidden},
        "hidden": planted.hidden.read_text(),
    }


def _agent_outputs(project: Path) -> list[tuple[str, bytes]]:
    store = Store(project / ".harness")
    run = store.resolve_run("latest")
    out = []
    for rec in store.trials(run):
        for a in rec.attempts:
            assert a.agent is not None and a.agent.stdout_blob is not None
            out.append((rec.verdict.outcome.value, store.get_blob(a.agent.stdout_blob)))
    return out


BACKENDS = [
    pytest.param("local", id="local"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_hostile_agent_finds_nothing_writes_nothing_reaches_nothing(
    attack_project: tuple[Path, Planted], backend: str
) -> None:
    project, planted = attack_project
    if backend == "docker":
        _need_docker()
    before = _host_state(planted)
    done = harness(
        project, "run", "--release", "attacker", "--k", "2", "--backend", backend, "--no-report"
    )
    assert "Traceback" not in done.stderr, done.stderr
    outputs = _agent_outputs(project)
    assert len(outputs) == 2, done.stdout + done.stderr
    for outcome, stdout in outputs:
        text = stdout.decode("latin-1")
        for name, canary in planted.canaries.items():
            assert canary not in text, f"the agent read the {name} canary"
        report = json.loads(text.strip().splitlines()[-1])
        assert outcome == "fail", f"a hostile agent was judged {outcome}: {report}"
        assert report["net"] == [], f"network reached: {report['net']}"
        shadow = Path("/etc/shadow").read_text()
        assert report["read"]["/etc/shadow"] != shadow, "host /etc/shadow read"
        assert not any(str(planted.project) in p for p in report["found"]), report["found"]
        assert report["listed"][str(project)] is None, "the project folder is visible"
        for listed, names in report["listed"].items():
            assert not names or not any(planted.tag in n for n in names), (listed, names)
    assert _host_state(planted) == before, "the agent changed the host filesystem"


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_honest_control_passes(attack_project: tuple[Path, Planted], backend: str) -> None:
    project, _ = attack_project
    if backend == "docker":
        _need_docker()
    done = harness(
        project, "run", "--release", "honest", "--k", "1", "--backend", backend, "--no-report"
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert [o for o, _ in _agent_outputs(project)] == ["pass"], done.stdout + done.stderr


def _need_docker() -> None:
    from harness.errors import SandboxUnavailableError
    from harness.sandbox.docker import DEFAULT_IMAGE, connect, find_image

    try:
        client = connect(timeout=30)
    except SandboxUnavailableError as exc:
        if os.environ.get("HARNESS_REQUIRE_DOCKER") == "1":
            pytest.fail(f"no Docker engine: {exc}")
        pytest.skip(f"no Docker engine ({exc})")
    try:
        if find_image(client, DEFAULT_IMAGE) is None:
            pytest.skip(f"{DEFAULT_IMAGE} missing; run ci/docker-up.sh")
    finally:
        client.close()
