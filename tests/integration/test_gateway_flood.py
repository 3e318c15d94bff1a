"""An agent floods the gateway's socket with stalled connections (an outside red team's win).

The agent fixes the case, then forks children that open thousands of connections to the
in-sandbox endpoint socket, each sending half a request head, hold them, and exit; the
phase then runs out its own wall clock. Through the real gateway and a real sandbox: the
trial ends within its timeout plus a margin, the harness's threads stay bounded (one per
served connection, at most ``ENDPOINT_CONNECTIONS``) and the verdict is the trial's own.
"""

from __future__ import annotations

import dataclasses
import textwrap
import threading
import time
from collections.abc import Iterator

import pytest

from harness.gateway import Gateway
from harness.gateway._http import ENDPOINT_CONNECTIONS
from harness.project import AgentSpec, Price, Upstream
from harness.store.records import Outcome
from harness.trial.execute import run_trial

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TIMEOUT = 8.0
"""The agent phase's timeout: the flood holds its connections past it."""

FLOOD = textwrap.dedent(
    """\
    import os, resource, socket, sys, time
    with open("pkg/mod.py", "w") as f:
        f.write("def answer():\\n    return 42\\n")
    with open(os.environ["HARNESS_RESULT"], "w") as f:
        f.write('{"status": "submitted"}')
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    kids = []
    for k in range(4):
        pid = os.fork()
        if pid == 0:
            held = []
            for i in range(1500):
                try:
                    s = socket.socket(socket.AF_UNIX)
                    s.connect("/run/harness/endpoint.sock")
                    s.send(b"POST /v1/chat/completions HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n")
                    held.append(s)
                except OSError:
                    pass
            print("child", k, "opened", len(held), flush=True)
            time.sleep(60)
            os._exit(0)
        kids.append(pid)
    for pid in kids:
        os.waitpid(pid, 0)
    """
)


class _ThreadPeak:
    """Samples this process's thread count (the kernel's, not only Python's) while running."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    @staticmethod
    def now() -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, self.now())

    def __enter__(self) -> _ThreadPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def spec_up() -> Iterator[Upstream]:
    yield Upstream(
        base_url="http://127.0.0.1:9/v1",  # never called: no request completes
        model="m",
        key_env="FLOOD_KEY",
        price=Price(input_per_mtok=1.0, output_per_mtok=1.0),
        retries=0,
    )


def test_a_connection_flood_ends_as_the_trials_own_within_its_timeout(
    make_case, make_spec, sandbox, backend_name, spec_up
) -> None:
    extra = f"contract: {{agent: {{timeout_seconds: {TIMEOUT}, pids: 64}}}}\n"
    spec = make_spec(make_case(extra))
    release = spec.release.model_copy(
        update={"upstream": spec_up, "agent": AgentSpec(command=("python3", "-c", FLOOD))}
    )
    spec = dataclasses.replace(spec, release=release, backend=backend_name)
    gw = Gateway(keys={"FLOOD_KEY": "sk-flood"})
    with gw.serving(), _ThreadPeak() as threads:
        before = threads.now()
        start = time.monotonic()
        out = run_trial(spec, sandbox)
        took = time.monotonic() - start
    attempt = out.record.attempts[0]
    assert attempt.agent is not None, out.record.verdict.reason
    opened = out.blobs[attempt.agent.stdout_blob or ""].decode()
    assert opened.count("opened") == 4, opened  # the flood ran
    assert attempt.agent.termination.value == "wall_clock"
    # The flood costs a served connection's thread each, at most the bound, plus the
    # trial's own few (sandbox, watchers) — not one per connection opened.
    assert threads.peak - before <= ENDPOINT_CONNECTIONS + 16, (threads.peak, before)
    assert took < TIMEOUT + 40, took  # main's code took 154 s
    assert out.record.verdict.outcome in (Outcome.PASS, Outcome.FAIL)
    deadline = time.monotonic() + 20  # every connection's thread has returned
    while _ThreadPeak.now() > before + 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _ThreadPeak.now() <= before + 4
