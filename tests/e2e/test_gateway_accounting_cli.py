"""Attacks on the gateway's accounting, through the CLI with a real sandboxed agent and a
scripted upstream on loopback: a burst of concurrent calls against a token budget, calls in
flight when the phase ends, overlapping waits under a wall-clock limit, a settled trial that
would run on to its timeout, and hidden-file bits smuggled through correction feedback."""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scripted_upstream import MODEL, Script, ScriptedUpstream
from support import harness, make_project

pytestmark = pytest.mark.integration

KEY = "sk-e2e-accounting-3c9a7e"
DOCKER = pytest.param("docker", marks=pytest.mark.docker)

AGENT = textwrap.dedent(
    """\
    import json, os, sys, threading, time, urllib.error, urllib.request

    def ask(i, **kw):
        body = {"model": os.environ["HARNESS_MODEL"],
                "messages": [{"role": "user", "content": "go %d" % i}], **kw}
        req = urllib.request.Request(
            os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=json.dumps(body).encode(),
            headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                     "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except Exception as e:
            return repr(e)

    def together(n, **kw):
        ts = [threading.Thread(target=ask, args=(i,), kwargs=kw) for i in range(n)]
        for t in ts:
            t.start()
        return ts

    def fix():
        path = os.path.join(os.environ["HARNESS_WORKSPACE"], "calc.py")
        open(path, "w").write("def add(a, b):\\n    return a + b\\n")
        open(os.environ["HARNESS_RESULT"], "w").write('{"status": "submitted"}')

    mode = sys.argv[1]
    if mode == "settle":      # the second call settles the trial; then it would hang
        ask(0)
        ask(1)
        time.sleep(600)
    elif mode == "long":      # a streamed answer as long as the model can make; then it hangs
        ask(0, stream=True, max_tokens=100000)
        time.sleep(600)
    elif mode == "burst":     # 20 calls at once, 60 completion tokens each
        for t in together(20, max_tokens=60):
            t.join()
    elif mode == "inflight":  # three slow calls, and the agent is gone before any answer
        together(3)
        time.sleep(3)
        fix()
        os._exit(0)
    elif mode == "busy":      # one slow call, and 9 s of its own CPU time meanwhile
        ts = together(1)
        while time.process_time() < 9:  # CPU time, not wall: a busy machine only delays it
            pass
        for t in ts:
            t.join()
        fix()
    elif mode == "share" and os.environ["HARNESS_TRIAL"] == "0":  # keeps 3 calls queued 12 s
        t0 = time.monotonic()
        def hog(i):
            while time.monotonic() - t0 < 12:
                ask(i)
        for i in range(3):
            threading.Thread(target=hog, args=(i,), daemon=True).start()
        fix()
        time.sleep(12)
        os._exit(0)
    elif mode == "selfqueue":  # always a call of its own waiting for the one slot; no fix
        def loop(i):
            while True:
                ask(i)
        for i in range(3):
            threading.Thread(target=loop, args=(i,), daemon=True).start()
        time.sleep(600)
    elif mode == "share":     # trial 1: one call, then the fix
        time.sleep(1)
        ask(0)
        fix()
    elif mode == "overlap":   # three overlapping slow calls, then 12 s of its own work
        for t in together(3):
            t.join()
        time.sleep(12)
        fix()
    """
)


def _project(
    tmp_path: Path,
    up: ScriptedUpstream,
    mode: str,
    case_extra: str = "",
    response_seconds: float = 120,
    *,
    timeout: int = 90,
    concurrency: int = 20,
    infra_retries: int = 0,
) -> Path:
    root = make_project(tmp_path / "proj", n_cases=1)
    case = root / "cases" / "add-0" / "case.yaml"
    text = case.read_text().replace(
        "agent: {timeout_seconds: 30,", f"agent: {{timeout_seconds: {timeout},"
    )
    case.write_text(text + case_extra)
    (root / "hostile.py").write_text(AGENT)
    with (root / "harness.yaml").open("a") as fh:
        fh.write(
            f"""\
  hostile:
    agent: {{command: [python3, "{{agent}}/hostile.py", {mode}], files: [hostile.py]}}
    retry: {{infra_retries: {infra_retries}}}
    upstream:
      base_url: {up.base_url}
      model: {MODEL}
      key_env: HGW_ACC_KEY
      price: {{input_per_mtok: 1.0, output_per_mtok: 2.0}}
      retries: 0
      concurrency: {concurrency}
      response_seconds: {response_seconds:g}
"""
        )
    assert harness(root, "cases", "lock").returncode == 0
    return root


def _run(root: Path, backend: str = "local", *extra: str) -> tuple[Any, float]:
    trials, elapsed = _run_all(root, backend, *extra)
    (trial,) = trials
    return trial, elapsed


def _run_all(root: Path, backend: str = "local", *extra: str) -> tuple[list[Any], float]:
    t0 = time.monotonic()
    done = harness(
        root, "run", "--release", "hostile", "--k", "1", "--no-report", "--backend", backend,
        *extra, env={"HGW_ACC_KEY": KEY},
    )  # fmt: skip
    elapsed = time.monotonic() - t0
    # Dask itself may log to stderr; the harness's own tracebacks are checked without it.
    assert extra or "Traceback" not in done.stderr, done.stderr
    shown = harness(root, "show", "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)["trials"], elapsed


@pytest.fixture
def up() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream(Script(["ls"])) as server:
        yield server


def _served(up: ScriptedUpstream) -> tuple[int, int]:
    ok = [s for s in up.served if s.status == 200]
    return sum(s.input_tokens for s in ok), sum(s.output_tokens for s in ok)


@pytest.mark.parametrize("backend", ["local", DOCKER])
@pytest.mark.parametrize("cause", ["budget", "upstream_500"])
def test_a_settled_trial_stops_its_agent_within_seconds(tmp_path, up, backend, cause) -> None:
    """The agent would sleep 600 s under a 90 s timeout; the gateway decided at its 2nd call."""
    if cause == "upstream_500":
        up.script.faults = {0: "500"}
        extra = ""
    else:
        extra = "limits: {turns: 1}\n"
    root = _project(tmp_path, up, "settle", extra)
    trial, elapsed = _run(root, backend)
    verdict = trial["verdict"]
    if cause == "budget":
        assert (verdict["outcome"], verdict["failure_type"]) == ("fail", "budget_exceeded")
    else:
        assert verdict["outcome"] == "infra_error" and "answered 500" in verdict["reason"]
    agent = trial["attempts"][-1]["agent"]
    assert agent is not None and agent["duration_s"] < 15, agent["duration_s"]
    assert elapsed < 60, elapsed


@pytest.mark.parametrize(
    ("fault", "outcome"), [("trickle", "fail"), ("slow", "infra_error")], ids=["long", "silent"]
)
def test_a_completion_past_the_response_bound_is_the_agents_fail_silence_is_infra(
    tmp_path, up, fault, outcome
) -> None:
    """Under a 2 s bound the upstream streams for 6 s (answering: the agent asked for a
    completion that long) or sends nothing for 6 s (the provider's fault, or a non-streamed
    completion the agent asked to be that long: never tried again, though the release
    allows an infra retry, since a fresh try would re-roll the agent's own failure)."""
    up.script.fault, up.script.slow_seconds = fault, 6.0
    root = _project(tmp_path, up, "long", response_seconds=2, infra_retries=1)
    t0 = time.monotonic()
    done = harness(
        root, "run", "--release", "hostile", "--k", "1", "--no-report", env={"HGW_ACC_KEY": KEY}
    )
    elapsed = time.monotonic() - t0
    assert "Traceback" not in done.stderr, done.stderr
    shown = harness(root, "show", "--json")
    (trial,) = json.loads(shown.stdout)["trials"]
    verdict = trial["verdict"]
    assert verdict["outcome"] == outcome, verdict
    if outcome == "fail":
        assert verdict["failure_type"] == "budget_exceeded", verdict
        assert "2s response bound (response_seconds)" in verdict["reason"], verdict
        # The gate's verdict on a candidate that failed its one trial (was 4, blocked).
        assert done.returncode == 1 and "not one of the candidate's" in done.stdout, done
    else:
        assert "slower than the 2s bound" in verdict["reason"], verdict
        assert done.returncode == 4, (done.returncode, done.stderr)
    model = trial["attempts"][-1]["model"]
    assert len(model["calls"]) == 1 and len(up.served) == 1
    assert trial["attempts"][-1]["infra_retries"] == 0 and len(trial["attempts"]) == 1
    # Settled either way: the agent, which would sleep 600 s, is stopped at once.
    agent = trial["attempts"][-1]["agent"]
    assert agent is not None and agent["duration_s"] < 20, agent["duration_s"]
    assert elapsed < 90, elapsed


def test_a_settled_trial_on_a_dask_worker_stops_its_agent_within_seconds(tmp_path, up) -> None:
    """Over the gateway link the coordinator's decision rides on the refused call's reply."""
    root = _project(tmp_path, up, "settle", "limits: {turns: 1}\n")
    trial, _ = _run(root, "local", "--executor", "dask", "--jobs", "1")
    verdict = trial["verdict"]
    assert (verdict["outcome"], verdict["failure_type"]) == ("fail", "budget_exceeded")
    agent = trial["attempts"][-1]["agent"]
    assert agent is not None and agent["duration_s"] < 15, agent["duration_s"]


def test_a_burst_of_concurrent_calls_cannot_beat_the_token_budget(tmp_path, up) -> None:
    up.script.completion_tokens = 60
    root = _project(tmp_path, up, "burst", "limits: {tokens: 200}\n")
    trial, _ = _run(root)
    served_in, served_out = _served(up)
    assert served_out <= 200, (served_in, served_out)  # before: 20 x 60 = 1,200
    prompt = max(s.input_tokens for s in up.served)
    assert served_in + served_out <= 200 + prompt
    model = trial["attempts"][-1]["model"]
    assert (model["input_tokens"], model["output_tokens"]) == (served_in, served_out)
    assert trial["verdict"]["failure_type"] == "budget_exceeded"


def test_calls_in_flight_when_the_agent_exits_are_charged_and_recorded(tmp_path, up) -> None:
    up.script.fault, up.script.slow_seconds = "slow", 8.0
    root = _project(tmp_path, up, "inflight")
    trial, _ = _run(root)
    model = trial["attempts"][-1]["model"]
    assert len(up.served) == 3
    paid = [c for c in model["calls"] if c["status"] == 200]
    assert len(paid) == 3, model["calls"]  # before: the record held what had settled by then
    assert (model["input_tokens"], model["output_tokens"]) == _served(up)


def test_overlapping_waits_count_once_against_the_wall_clock_limit(tmp_path, up) -> None:
    """3 overlapping 8 s calls + 12 s of work under a 10 s limit: the agent worked 12 s+."""
    up.script.fault, up.script.slow_seconds = "slow", 8.0
    root = _project(tmp_path, up, "overlap", "limits: {wall_seconds: 10}\n")
    trial, _ = _run(root)
    model = trial["attempts"][-1]["model"]
    assert 8.0 <= model["upstream_wait_s"] < 14.0, model["upstream_wait_s"]
    verdict = trial["verdict"]
    assert (verdict["outcome"], verdict["failure_type"]) == ("fail", "timeout"), verdict


@pytest.mark.parametrize("executor", [(), ("--executor", "dask")], ids=["threads", "dask"])
def test_a_trial_keeping_calls_queued_cannot_starve_another_into_its_timeout(
    tmp_path, up, executor
) -> None:
    """The red team's way to fail the re-executed baseline: under ``--jobs 2`` and one
    slot, trial 0 keeps three slow calls queued for 12 s; trial 1 (timeout 8 s) must not
    wait for them on its clock: its agent starts once it holds the slot of its own."""
    up.script.fault, up.script.slow_seconds = "slow", 2.0
    root = _project(tmp_path, up, "share", timeout=8, concurrency=1)
    trials, _ = _run_all(root, "local", "--k", "2", "--jobs", "2", *executor)
    (second,) = [t for t in trials if t["key"]["trial"] == 1]
    verdict = second["verdict"]
    assert verdict["outcome"] == "pass", verdict
    attempt = second["attempts"][-1]
    assert attempt["model"]["turns"] == 1 and attempt["agent"]["duration_s"] < 7.0, attempt


def test_calls_queued_behind_the_agents_own_are_its_time_never_infra(tmp_path, up) -> None:
    """On its one slot, an agent keeping three calls queued waits behind its own: its
    timeout, at the time the case allows (the hard bound, never stretched by the waits)."""
    up.script.fault, up.script.slow_seconds = "slow", 1.0
    root = _project(tmp_path, up, "selfqueue", timeout=4, concurrency=1)
    trial, _ = _run(root)
    verdict = trial["verdict"]
    assert (verdict["outcome"], verdict["failure_type"]) == ("fail", "timeout"), verdict
    attempt = trial["attempts"][-1]
    assert attempt["model"]["turns"] >= 3 and attempt["agent"]["duration_s"] < 6.5, attempt


def test_work_done_while_a_call_is_pending_counts_against_the_wall_clock_limit(
    tmp_path, up
) -> None:
    """An 8 s call hides no work: 9 s of CPU burned meanwhile is over a 5 s limit."""
    up.script.fault, up.script.slow_seconds = "slow", 8.0
    root = _project(tmp_path, up, "busy", "limits: {wall_seconds: 5}\n")
    trial, _ = _run(root)
    verdict = trial["verdict"]
    assert (verdict["outcome"], verdict["failure_type"]) == ("fail", "timeout"), verdict


LEAKER = textwrap.dedent(
    """\
    import json, os
    ws = os.environ["HARNESS_WORKSPACE"]
    fb = os.environ.get("HARNESS_FEEDBACK")
    if fb is None:
        # Attempt 1: candidate code that, run by the hidden verifier, exits with a byte of
        # the hidden file as its status.
        open(os.path.join(ws, "calc.py"), "w").write(
            "import os\\nos._exit(open('verify_hidden.py', 'rb').read()[7])\\n")
    else:
        open(os.path.join(ws, "seen.json"), "w").write(open(fb).read())
    open(os.environ["HARNESS_RESULT"], "w").write('{"status": "submitted"}')
    """
)


def test_feedback_does_not_carry_the_hidden_verifiers_exit_status(tmp_path) -> None:
    root = make_project(tmp_path / "proj", n_cases=1)
    (root / "leaker.py").write_text(LEAKER)
    with (root / "harness.yaml").open("a") as fh:
        fh.write(
            "  leaker:\n"
            '    agent: {command: [python3, "{agent}/leaker.py"], files: [leaker.py]}\n'
            "    retry: {max_attempts: 2, infra_retries: 0, stop_on_identical_failure: false}\n"
        )
    assert harness(root, "cases", "lock").returncode == 0
    secret = (root / "cases" / "add-0" / "hidden" / "verify_hidden.py").read_bytes()[7]
    done = harness(root, "run", "--release", "leaker", "--k", "1", "--no-report")
    assert "Traceback" not in done.stderr, done.stderr
    (trial,) = json.loads(harness(root, "show", "--json").stdout)["trials"]
    first, second = trial["attempts"]
    assert first["verifier"]["exit_code"] == secret  # the attack reached the verifier
    digest = second["feedback_blob"].split(":")[-1]
    (blob,) = [p for p in (root / ".harness").rglob(digest + "*") if p.is_file()]
    package = json.loads(blob.read_bytes())
    assert package["verdict"] == "fail"
    assert "verifier" not in package and package["failure_type"] is None, package
    # Nor a host path: the record is named relative to the store.
    assert str(root) not in blob.read_text() and package["record"].startswith("runs/"), package
