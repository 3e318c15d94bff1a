"""An agent in a real sandbox reaching the gateway through the one endpoint relay.

The agent (a python script inside the sandbox) tries every refusal through the relay and
hunts for the real key in its environment, /proc and the files it can read; the trial runs
under a real gateway forwarding to the scripted upstream on loopback.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import secrets
import textwrap
from collections.abc import Iterator

import pytest
from scripted_upstream import MODEL, Script, ScriptedUpstream

from harness.cases.model import Limits
from harness.gateway import Gateway
from harness.project import AgentSpec, Price, Upstream
from harness.store.records import Outcome
from harness.trial.execute import run_trial

pytestmark = pytest.mark.integration

AGENT = textwrap.dedent(
    """\
    import base64, json, os, socket, sys
    url = os.environ["HARNESS_ENDPOINT"]
    host, port = url[len("http://"):].split(":")
    tok, model = os.environ["OPENAI_API_KEY"], os.environ["HARNESS_MODEL"]
    other, ended, marker = sys.argv[1], sys.argv[2], base64.b64decode(sys.argv[3])

    def raw(data):
        s = socket.create_connection((host, int(port)), timeout=30)
        s.sendall(data)
        buf = b""
        while True:
            c = s.recv(65536)
            if not c:
                break
            buf += c
        s.close()
        return int(buf.split(b" ", 2)[1])

    def req(target="/v1/chat/completions", host_h=None, token=tok, method="POST", mdl=model):
        body = json.dumps({"model": mdl, "messages": [{"role": "user", "content": "hi"}]})
        head = (f"{method} {target} HTTP/1.1\\r\\nHost: {host_h or host + ':' + port}\\r\\n"
                f"Authorization: Bearer {token}\\r\\nContent-Length: {len(body)}\\r\\n"
                "Connection: close\\r\\n\\r\\n")
        return raw(head.encode() + body.encode())

    out = {
        "ok": req(),
        "path": req("/v1/models"),
        "host": req(host_h="api.openai.com"),
        "absolute": req("http://api.openai.com/v1/chat/completions"),
        "connect": raw(b"CONNECT api.openai.com:443 HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n"),
        "model": req(mdl="gpt-4o"),
        "other_token": req(token=other),
        "ended_token": req(token=ended),
        "base_url": os.environ.get("OPENAI_BASE_URL"),
    }
    found = [k for k, v in os.environ.items() if marker in v.encode()]
    for pid in os.listdir("/proc"):
        for name in ("environ", "cmdline"):
            try:
                if marker in open(f"/proc/{pid}/{name}", "rb").read():
                    found.append(f"/proc/{pid}/{name}")
            except OSError:
                pass
    roots = [os.getcwd(), os.environ.get("HOME", "/"), "/tmp", "/run", "/etc", "/opt",
             os.path.dirname(os.environ["HARNESS_RESULT"])]
    scanned = 0
    for root in roots:
        for d, _, files in os.walk(root):
            for f in files:
                p = os.path.join(d, f)
                try:
                    with open(p, "rb") as fh:
                        if marker in fh.read(4 << 20):
                            found.append(p)
                    scanned += 1
                except OSError:
                    pass
    out["found"], out["scanned"] = found, scanned
    print(json.dumps(out))
    """
)


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream(Script(["ls"])) as up:
        yield up


def test_refusals_through_the_relay_and_no_key_in_the_sandbox(
    make_case, make_spec, upstream, sandbox, backend_name
) -> None:
    key = "sk-relaysecret-" + secrets.token_hex(16)
    marker = base64.b64encode(key[:20].encode()).decode()
    spec_up = Upstream(
        base_url=upstream.base_url,
        model=MODEL,
        key_env="RELAY_KEY",
        price=Price(input_per_mtok=1.0, output_per_mtok=1.0),
        retries=0,
        trial_concurrency=1,  # three phases open at once (two here, the trial's)
    )
    gw = Gateway(keys={"RELAY_KEY": key})
    with gw.serving():
        other = gw.open_session("other-trial", spec_up, Limits())
        ended = gw.open_session("ended-trial", spec_up, Limits())
        ended.close()
        spec = make_spec(make_case())
        release = spec.release.model_copy(
            update={
                "upstream": spec_up,
                "agent": AgentSpec(
                    command=("python3", "-c", AGENT, other.token, ended.token, marker)
                ),
            }
        )
        out = run_trial(dataclasses.replace(spec, release=release, backend=backend_name), sandbox)
        other.close()
    attempt = out.record.attempts[0]
    assert attempt.agent is not None, out.record.verdict.reason
    stdout = out.blobs[attempt.agent.stdout_blob or ""]
    assert stdout.strip(), out.blobs[attempt.agent.stderr_blob or ""].decode()
    seen = json.loads(stdout)
    assert seen["ok"] == 200
    assert seen["base_url"].endswith("/v1") and seen["base_url"].startswith("http://127.0.0.1:")
    refused = {k: seen[k] for k in ("path", "host", "absolute", "connect", "model")}
    assert refused == {"path": 404, "host": 403, "absolute": 400, "connect": 405, "model": 400}
    assert (seen["other_token"], seen["ended_token"]) == (401, 401)
    assert seen["found"] == [] and seen["scanned"] > 0
    assert len(upstream.served) == 1  # only the one valid call reached the upstream
    assert upstream.served[0].authorization == f"Bearer {key}"
    model = attempt.model
    assert model is not None and model.turns == 1
    refusals = sorted(c.refused for c in model.calls if c.refused)
    assert refusals == ["model"]  # wire refusals never reach a session; the model one does
    assert all(key.encode() not in b for b in out.blobs.values())
    assert key not in out.record.model_dump_json()
    assert out.record.verdict.outcome in (Outcome.FAIL, Outcome.PASS)
