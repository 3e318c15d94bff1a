"""Trials that call a model under ``--executor dask``: the CLI, a real LocalCluster, the
scripted upstream on loopback, and the run's one gateway reached over its link."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from scripted_upstream import MODEL, Script, ScriptedUpstream
from support import harness, make_project

pytestmark = [pytest.mark.integration, pytest.mark.slow]

AGENT_SRC = Path(__file__).resolve().parent.parent / "agents" / "tool_agent.py"
PROBER = Path(__file__).resolve().parent.parent / "attacks" / "link_prober.py"
KEY = "sk-dask-real-key-91c3e5a7d2"
FIX = ["cat calc.py", "sed -i 's/a - b/a + b/' calc.py"]


def _project(
    tmp_path: Path,
    up: ScriptedUpstream,
    *,
    concurrency: int,
    limits: str = "",
    agent: Path = AGENT_SRC,
    host_network: bool = False,
) -> Path:
    root = make_project(tmp_path / "proj", n_cases=1)
    case = root / "cases" / "add-0" / "case.yaml"
    # Room for calls queued behind the shared limit (the contract's timeout is a hard bound).
    text = case.read_text().replace("agent: {timeout_seconds: 30,", "agent: {timeout_seconds: 120,")
    assert "timeout_seconds: 120" in text
    case.write_text(text + limits)
    if host_network:
        case.write_text(case.read_text().replace("disk_mb: 64}", "disk_mb: 64, network: host}", 1))
    shutil.copy(agent, root / "tool_agent.py")
    path = root / "harness.yaml"
    path.write_text(
        path.read_text()
        + f"""\
  tool:
    agent: {{command: [python3, "{{agent}}/tool_agent.py"], files: [tool_agent.py]}}
    retry: {{infra_retries: 0}}
    upstream:
      base_url: {up.base_url}
      model: {MODEL}
      key_env: HGW_DASK_KEY
      price: {{input_per_mtok: 3.0, output_per_mtok: 15.0}}
      retries: 1
      concurrency: {concurrency}
      trial_concurrency: 1
"""
    )
    assert harness(root, "cases", "lock").returncode == 0
    return root


def _dask_run(
    root: Path, k: int, jobs: int, *extra: str, clean: bool = True
) -> tuple[int, list[dict]]:  # type: ignore[type-arg]
    done = harness(
        root, "run", "--release", "tool", "--k", str(k), "--executor", "dask",
        "--jobs", str(jobs), *extra,
    )  # fmt: skip
    assert not clean or "Traceback" not in done.stderr, done.stderr
    shown = harness(root, "show", "--json")
    assert shown.returncode == 0, done.stdout + done.stderr + shown.stderr
    return done.returncode, json.loads(shown.stdout)["trials"]


@pytest.fixture
def slow_up() -> Iterator[ScriptedUpstream]:
    """Each answer takes 1.5 s and the first calls wait (up to 6 s) until two are in flight:
    two trials' calls overlap unless a limit serializes them (with one slot the second
    trial's phase opens only once the first has closed: the wait runs out)."""
    script = Script(list(FIX), fault="slow", slow_seconds=1.5, gather=2, gather_seconds=6)
    with ScriptedUpstream(script) as up:
        yield up


@pytest.mark.parametrize("concurrency", [2, 1])
def test_dask_workers_share_the_upstreams_limit_and_the_store_gets_everything(
    tmp_path, monkeypatch, slow_up, concurrency
):
    monkeypatch.setenv("HGW_DASK_KEY", KEY)
    root = _project(tmp_path, slow_up, concurrency=concurrency)
    code, trials = _dask_run(root, 2, 2)
    assert code == 0, trials
    assert [t["verdict"]["outcome"] for t in trials] == ["pass", "pass"]
    # One limit for the whole run, whichever worker process the trial ran in.
    assert slow_up.max_inflight == concurrency
    served = slow_up.served
    assert len(served) == 6 and all(s.authorization == f"Bearer {KEY}" for s in served)
    models = [t["attempts"][-1]["model"] for t in trials]
    assert sum(m["turns"] for m in models) == 6
    assert sum(m["input_tokens"] for m in models) == sum(s.input_tokens for s in served)
    assert sum(m["output_tokens"] for m in models) == sum(s.output_tokens for s in served)
    blobs = root / ".harness" / "blobs"
    for m in models:  # the transcripts came back to the single writer of the store
        for call in m["calls"]:
            for blob in (call["request_blob"], call["response_blob"]):
                assert list(blobs.rglob(blob.split(":")[-1] + "*")), blob
    for folder in (root / ".harness", root / "reports"):
        files = [p for p in folder.rglob("*") if p.is_file()]
        assert files and [p for p in files if KEY.encode() in p.read_bytes()] == []


def test_budget_and_upstream_500_under_dask_are_judged_as_locally(tmp_path, monkeypatch):
    monkeypatch.setenv("HGW_DASK_KEY", KEY)
    with ScriptedUpstream(Script(["ls", "ls", "ls", "ls", *FIX])) as up:
        root = _project(tmp_path, up, concurrency=2, limits="limits: {turns: 3}\n")
        # Dask itself logs the prober's garbage sent to its own ports: not clean stderr.
        _, trials = _dask_run(root, 1, 1, "--no-report", clean=False)
        verdict = trials[0]["verdict"]
        assert (verdict["outcome"], verdict["failure_type"]) == ("fail", "budget_exceeded")
        assert len(up.served) == 3 and trials[0]["attempts"][-1]["model"]["turns"] == 3
        up.script.fault = "500"
        code, trials = _dask_run(root, 1, 1, "--no-report", "--fresh")
        assert code == 4  # blocked
        verdict = trials[0]["verdict"]
        assert verdict["outcome"] == "infra_error" and "answered 500" in verdict["reason"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def scheduler() -> Iterator[str]:
    """A Dask scheduler and two single-thread worker processes, started apart from the run."""
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    dask = [sys.executable, "-m", "dask"]
    procs = [
        subprocess.Popen(
            [*dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ),
    ]  # fmt: skip
    procs.append(
        subprocess.Popen(
            [*dask, "worker", addr, "--nworkers", "2", "--nthreads", "1", "--no-dashboard"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
    )  # fmt: skip
    try:
        from dask.distributed import Client

        with Client(addr, timeout=60) as client:
            client.wait_for_workers(2, timeout=60)
        yield addr
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(timeout=30)


def test_a_cluster_named_by_scheduler_reaches_the_gateway_and_shares_its_limit(
    tmp_path, monkeypatch, slow_up, scheduler
):
    monkeypatch.setenv("HGW_DASK_KEY", KEY)
    root = _project(tmp_path, slow_up, concurrency=1)
    code, trials = _dask_run(root, 2, 2, "--scheduler", scheduler, "--no-report")
    assert code == 0 and [t["verdict"]["outcome"] for t in trials] == ["pass", "pass"], trials
    assert slow_up.max_inflight == 1 and len(slow_up.served) == 6


def test_an_agent_on_the_host_network_cannot_use_the_gateway_link(tmp_path, monkeypatch):
    """Attack: with ``network: host`` the agent can see and call the link's port; without
    the run's link secret (its own gateway token is not it) every open is refused."""
    monkeypatch.setenv("HGW_DASK_KEY", KEY)
    with ScriptedUpstream(Script(list(FIX))) as up:
        root = _project(tmp_path, up, concurrency=2, agent=PROBER, host_network=True)
        # Dask itself logs the prober's garbage sent to its own ports: not clean stderr.
        _, trials = _dask_run(root, 1, 1, "--no-report", clean=False)
        assert up.served == []  # the prober never reached the model
    agent = trials[0]["attempts"][-1]["agent"]
    blob = agent["stdout_blob"].split(":")[-1]
    out = (root / ".harness" / "blobs" / "sha256" / blob[:2] / blob).read_text()
    line = next(ln for ln in out.splitlines() if ln.startswith("LINK-PROBE "))
    found = json.loads(line.removeprefix("LINK-PROBE "))
    assert found, f"the prober did not find the link: {out}"  # else this proves nothing
    assert all(statuses == [401, 401] for statuses in found.values()), found


@pytest.mark.docker
def test_dask_workers_reach_the_gateway_on_the_docker_backend(tmp_path, monkeypatch, slow_up):
    monkeypatch.setenv("HGW_DASK_KEY", KEY)
    root = _project(tmp_path, slow_up, concurrency=1)
    code, trials = _dask_run(root, 2, 2, "--backend", "docker", "--no-report")
    assert {t["backend"] for t in trials} == {"docker"}
    assert code == 0 and [t["verdict"]["outcome"] for t in trials] == ["pass", "pass"], trials
    assert slow_up.max_inflight == 1 and len(slow_up.served) == 6
    models = [t["attempts"][-1]["model"] for t in trials]
    assert sum(m["input_tokens"] for m in models) == sum(s.input_tokens for s in slow_up.served)
