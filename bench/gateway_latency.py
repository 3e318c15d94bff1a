"""The gateway's added latency per model call, side by side with calling the upstream directly.

The upstream is the scripted OpenAI server on loopback (tests/scripted_upstream.py). The
same request is sent N times, interleaved, over a kept-alive connection: directly to the
upstream, to the gateway session's unix socket (what the sandbox relay forwards to), and to
its loopback TCP listener. The gateway adds: wire checks, token check, budget bookkeeping,
the upstream call through urllib3's pool, metering and the transcript blobs.

``--via-link`` adds the path of a trial on a Dask worker: the worker's own unix socket, then
the gateway link (loopback TCP, link secret) to the coordinator's session.

    PYTHONPATH=$PWD python3 bench/gateway_latency.py [--n 300] [--stream] [--via-link]
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from scripted_upstream import MODEL, Script, ScriptedUpstream

from harness.cases.model import Limits
from harness.gateway import Gateway, LinkScope, RemoteSession
from harness.project import Price, Upstream
from harness.store.records import Arm, TrialKey


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("127.0.0.1", 80, timeout=30)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self._path)


def _timed(conn: http.client.HTTPConnection, body: bytes, token: str) -> float:
    t0 = time.perf_counter()
    conn.request(
        "POST",
        "/v1/chat/completions",
        body,
        {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 200, resp.status
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--stream", action="store_true")
    ap.add_argument("--via-link", action="store_true", help="add the Dask worker's path")
    args = ap.parse_args()
    doc = {"model": MODEL, "messages": [{"role": "user", "content": "fix the bug " * 50}]}
    if args.stream:
        doc["stream"] = True
        doc["stream_options"] = {"include_usage": True}
    body = json.dumps(doc).encode()
    with ScriptedUpstream(Script(["ls"])) as up:
        spec = Upstream(
            base_url=up.base_url,
            model=MODEL,
            key_env="K",
            price=Price(input_per_mtok=1, output_per_mtok=1),
        )
        gw = Gateway(keys={"K": "sk-bench"})
        with gw.serving():
            session = gw.open_session("bench", spec, Limits(), tcp=True)
            direct = http.client.HTTPConnection("127.0.0.1", up.server_port, timeout=30)
            assert session.url is not None
            via_tcp = http.client.HTTPConnection(session.url.removeprefix("http://"), timeout=30)
            via_unix = UnixHTTPConnection(session.socket_path)
            conns = {"direct": direct, "gateway-unix": via_unix, "gateway-tcp": via_tcp}
            tokens = dict.fromkeys(conns, session.token)
            remote = None
            if args.via_link:
                key = TrialKey(arm=Arm.CANDIDATE, release="r", case_id="c", case_version=1, trial=0)
                scope = LinkScope(trials={("candidate", "r", "c", 1): (spec, Limits())})
                link = gw.serve_link(scope, "127.0.0.1")
                remote = RemoteSession(link, key, 1, spec)
                conns["link-unix"] = UnixHTTPConnection(remote.socket_path)
                tokens["link-unix"] = remote.token
            times: dict[str, list[float]] = {name: [] for name in conns}
            for i in range(args.n + 20):
                for name, conn in conns.items():
                    dt = _timed(conn, body, tokens[name])
                    if i >= 20:  # warm-up: connections, pools, imports
                        times[name].append(dt)
            session.close()
            if remote is not None:
                remote.close()
    base = statistics.median(times["direct"])
    print(f"{args.n} calls each, {'streamed' if args.stream else 'plain'}, interleaved")
    print(f"{'path':14} {'median ms':>10} {'p95 ms':>8} {'added median ms':>16}")
    for name, ts in times.items():
        ts.sort()
        med, p95 = statistics.median(ts), ts[int(0.95 * len(ts)) - 1]
        print(f"{name:14} {med * 1e3:10.2f} {p95 * 1e3:8.2f} {(med - base) * 1e3:16.2f}")


if __name__ == "__main__":
    main()
