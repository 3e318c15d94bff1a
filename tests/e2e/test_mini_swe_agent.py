"""mini-swe-agent (PyPI, from the declared agent environment) through the model gateway.

The bundled example's ``mini-swe-agent`` release runs on a bundled case, driven by the
scripted upstream on loopback: a fixing script passes, a botching one fails, a turn budget
of 3 stops a 5-turn script, an upstream answering 500 is infra_error and blocks the run.
The first run builds the agent environment (82 distributions, about a minute, needs the
package index); later runs reuse the cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from scripted_upstream import MODEL, Script, ScriptedUpstream

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CASE = "join-minimal-quoting"
KEY = "sk-mini-real-key-0b7c66e1"
PATCH = (REPO / "cases" / CASE / "reference.patch").read_text()
FIX = ["ls", f"patch -p1 <<'PATCH_EOF'\n{PATCH}PATCH_EOF"]


def _written_fix(tmp_path: Path) -> list[str]:
    """The fix as files written by heredoc: the docker base image has no ``patch``."""
    repo = tmp_path / "fixed"
    shutil.copytree(REPO / "cases" / CASE / "repo", repo)
    subprocess.run(["patch", "-s", "-p1"], input=PATCH, text=True, cwd=repo, check=True)
    writes = [
        f"cat > {rel} <<'HARNESS_FIX_EOF'\n{(repo / rel).read_text()}HARNESS_FIX_EOF"
        for rel in ("fieldkit/records.py", "tests/test_records.py")
    ]
    return ["ls", "\n".join(writes)]


BOTCH = ["ls", "sed -i 's/return dialect.delimiter.join(out)/return \"\"/' fieldkit/records.py"]


def _project(tmp_path: Path, up: ScriptedUpstream, backend: str, turns: int = 0) -> Path:
    root = tmp_path / "example"
    root.mkdir()
    for name in ("harness.yaml", "policy.yaml"):
        shutil.copy2(REPO / name, root / name)
    for name in ("cases", "orchestration", "env", "examples/mini-swe-agent"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    text = (root / "harness.yaml").read_text()
    text = text.replace("http://127.0.0.1:8765/v1", up.base_url)
    (root / "harness.yaml").write_text(text.replace("backend: local", f"backend: {backend}"))
    if turns:  # a new version of the case with another turn budget
        case = root / "cases" / CASE / "case.yaml"
        text = case.read_text().replace("  turns: 30\n", f"  turns: {turns}\n")
        case.write_text(text.replace("version: 1\n", "version: 2\n", 1))
        done = _harness(root, "cases", "lock")
        assert done.returncode == 0, done.stderr
    return root


def _harness(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env["MINI_SWE_KEY"] = KEY
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=root, capture_output=True, text=True, env=env, timeout=1200, check=False,
    )  # fmt: skip


def _run(root: Path) -> tuple[subprocess.CompletedProcess[str], dict]:  # type: ignore[type-arg]
    done = _harness(root, "run", "--release", "mini-swe-agent", "--k", "1", "--case", CASE)
    shown = _harness(root, "show", "--json")
    assert shown.returncode == 0, done.stdout + done.stderr + shown.stderr
    (trial,) = json.loads(shown.stdout)["trials"]
    return done, trial


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream(Script(list(FIX))) as up:
        yield up


BOTH = pytest.mark.parametrize(  # docker fails, never skips, without an engine
    "any_backend", ["local", pytest.param("docker", marks=pytest.mark.docker)]
)
# The gateway judges budgets, faults and verdicts the same whichever backend runs the agent
# (its socket reaches both alike); one docker run (the passing fix, with its metered usage)
# shows mini-swe-agent works through it there. Each docker run builds a case image: the
# outcomes below run locally, which keeps CI's time.
LOCAL = pytest.mark.parametrize("any_backend", ["local"])


@BOTH
def test_fixing_script_passes_with_metered_usage(tmp_path, upstream, any_backend):
    backend = any_backend
    if backend == "docker":
        upstream.script.commands = _written_fix(tmp_path)
    root = _project(tmp_path, upstream, backend)
    done, trial = _run(root)
    assert trial["verdict"]["outcome"] == "pass", done.stdout + done.stderr + json.dumps(trial)
    shown = json.loads(_harness(root, "show", "--json").stdout)
    assert shown["release"]["backend"] == backend
    assert done.returncode == 0
    model = trial["attempts"][-1]["model"]
    served = upstream.served
    assert len(served) == 3 and model["turns"] == 3  # ls, patch, the finish command
    assert model["answered_model"] == MODEL
    assert model["input_tokens"] == sum(s.input_tokens for s in served)
    assert model["output_tokens"] == sum(s.output_tokens for s in served)
    # mini-swe-agent sent the whole history each turn, with the tool results of its bash.
    assert [m["role"] for m in upstream.requests[-1]["messages"]][-1] == "tool"
    assert all(s.authorization == f"Bearer {KEY}" for s in served)
    for folder in (root / ".harness", root / "reports"):
        leaks = [p for p in folder.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
        assert leaks == []


@LOCAL
def test_botching_script_fails(tmp_path, upstream, any_backend):
    upstream.script.commands = list(BOTCH)
    _, trial = _run(_project(tmp_path, upstream, any_backend))
    assert trial["verdict"]["outcome"] == "fail", json.dumps(trial["verdict"])
    assert trial["verdict"]["failure_type"] == "test_failure", json.dumps(trial["verdict"])


@LOCAL
def test_turn_budget_of_3_stops_a_5_turn_script(tmp_path, upstream, any_backend):
    upstream.script.commands = ["ls", "ls", "ls", "ls", *FIX]
    _, trial = _run(_project(tmp_path, upstream, any_backend, turns=3))
    verdict = trial["verdict"]
    assert (verdict["outcome"], verdict["failure_type"]) == ("fail", "budget_exceeded")
    assert len(upstream.served) == 3


@LOCAL
def test_upstream_500_is_infra_error_and_blocks(tmp_path, upstream, any_backend):
    upstream.script.fault = "500"
    done, trial = _run(_project(tmp_path, upstream, any_backend))
    assert trial["verdict"]["outcome"] == "infra_error", json.dumps(trial["verdict"])
    assert done.returncode == 4, done.stdout + done.stderr
