"""A scripted model upstream: a real HTTP server on loopback speaking the OpenAI wire format.

It answers ``POST /v1/chat/completions`` with a scripted sequence of tool-call completions
the way mini-swe-agent expects them (one ``bash`` tool call with JSON arguments
``{"command": ...}``, ``finish_reason: "tool_calls"``, usage present), plain or streamed
(SSE, with the final usage chunk when ``stream_options.include_usage`` is set). The step it
serves is the number of assistant messages already in the request's history, so concurrent
conversations each get their own place in the script and a replayed request gets the same
answer. Fault modes: ``500``, ``429``, ``slow``, ``no_usage``, ``other_model``, ``cut``,
``trickle`` and ``stall`` (see :attr:`Script.fault`).

Run standalone (examples use it this way)::

    python tests/scripted_upstream.py --script script.json [--port 8765] [--model NAME]

where ``script.json`` is a JSON list of shell commands.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from harness.gateway._http import QuietServer

MODEL = "scripted-model-1"
FINISH = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


@dataclass
class Served:
    """One answer the upstream gave (tests compare the record with these)."""

    step: int
    status: int
    stream: bool
    input_tokens: int
    output_tokens: int
    authorization: str


@dataclass
class Script:
    """What to answer: commands by step, and faults (all requests or by step)."""

    commands: list[str]
    model: str = MODEL
    fault: str | None = None
    """Fault for every request: 500, 429, slow, no_usage, other_model, cut, trickle, stall,
    keepalive.

    ``slow``: nothing at all for ``slow_seconds``, then the answer. ``trickle``: the status
    line at once, then the answer arriving in small pieces over ``slow_seconds`` (a long
    completion: extra content deltas when streamed). ``stall``: the status line and the
    first piece at once, then nothing for ``slow_seconds``, then the rest. ``keepalive``:
    the status line at once, then only keep-alives (SSE comments, or whitespace before a
    plain answer's JSON) every ``trickle_every`` for ``slow_seconds``, then the answer."""
    faults: dict[int, str] = field(default_factory=dict)
    """Fault by step (0-based)."""
    slow_seconds: float = 3.0
    trickle_every: float = 0.25
    """Seconds between the pieces of a ``trickle`` answer."""
    hooks: dict[int, Callable[[], None]] = field(default_factory=dict)
    """Called before answering a step (0-based), e.g. to break something mid-trajectory."""
    gather: int = 0
    """Hold the first requests until this many are in flight at once (or ``gather_seconds``
    passed), so a test of a concurrency limit does not depend on trials' timing."""
    gather_seconds: float = 10.0
    completion_tokens: int | None = None
    """Tokens each choice would generate (default: from the command); like a real provider,
    the answer is cut at the request's ``max_tokens`` and there are ``n`` choices."""
    obey_max_tokens: bool = True
    """``False``: an upstream that ignores ``max_tokens`` (a fault the gateway must catch)."""
    overrides: tuple[str, ...] = ()
    """Fields of the provider's own that win over ``max_tokens`` when sent (llama.cpp's
    ``n_predict``): the completion is as long as they say."""
    pad_bytes: int = 0
    """Bytes of ``logprobs`` padding in each plain answer (an answer as large as asked)."""
    image_tokens: int = 0
    """Prompt tokens each ``image_url`` part costs (a vision model's image price)."""


def usage_for(messages: Any, command: str) -> tuple[int, int]:
    """Deterministic token counts of one answer (tests recompute them)."""
    return 7 + len(json.dumps(messages)) // 16, 5 + len(command) // 4


def _message(step: int, command: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": f"step {step + 1}",
        "tool_calls": [
            {
                "id": f"call_{step}",
                "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": command})},
            }
        ],
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # stream chunks leave at once, as a real provider's do
    server: ScriptedUpstream

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _json(self, status: int, doc: Any) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        up = self.server
        with up.lock:
            up.arrivals.append(time.monotonic())
            up.inflight += 1
            up.max_inflight = max(up.max_inflight, up.inflight)
            if up.script.gather and not up.gathered:
                up.arrived.notify_all()
                up.arrived.wait_for(
                    lambda: up.inflight >= up.script.gather, timeout=up.script.gather_seconds
                )
                up.gathered = True
                up.arrived.notify_all()
        try:
            self._answer(up)
        finally:
            with up.lock:
                up.inflight -= 1

    def _answer(self, up: ScriptedUpstream) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != "/v1/chat/completions":
            return self._json(404, {"error": {"message": "not found"}})
        req = json.loads(body)
        messages = req.get("messages", [])
        step = sum(1 for m in messages if m.get("role") == "assistant")
        script = up.script
        fault = script.faults.get(step, script.fault)
        hook = script.hooks.get(step)
        if hook is not None:
            hook()
        stream = bool(req.get("stream"))
        cmds = script.commands
        command = cmds[step] if step < len(cmds) else FINISH
        pt, ct = usage_for(messages, command)
        pt += script.image_tokens * sum(
            1
            for m in messages
            if isinstance(m.get("content"), list)
            for part in m["content"]
            if part.get("type") == "image_url"
        )
        if script.completion_tokens is not None:
            ct = script.completion_tokens
        cap = req.get("max_tokens") or req.get("max_completion_tokens")
        if script.obey_max_tokens and isinstance(cap, int):
            ct = min(ct, cap)
        for name in script.overrides:
            if isinstance(req.get(name), int):
                ct = req[name]
        ct *= req.get("n") or 1
        with up.lock:
            up.requests.append(req)
            up.served.append(
                Served(step, 200, stream, pt, ct, self.headers.get("Authorization", ""))
            )
        if fault in ("500", "429"):
            up.served[-1].status = int(fault)
            return self._json(int(fault), {"error": {"message": f"scripted {fault}"}})
        if fault == "slow":
            time.sleep(script.slow_seconds)
        model = "another-model" if fault == "other_model" else script.model
        usage = {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}
        created = 1_700_000_000 + step
        if not stream:
            doc: dict[str, Any] = {
                "id": f"chatcmpl-{step}",
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [
                    {"index": 0, "message": _message(step, command), "finish_reason": "tool_calls"}
                ],
            }
            if fault != "no_usage":
                doc["usage"] = usage
            if script.pad_bytes:  # long log-probabilities
                doc["choices"][0]["logprobs"] = {"content": "x" * script.pad_bytes}
            if fault in ("trickle", "stall", "keepalive"):
                return self._paced(json.dumps(doc).encode(), fault, script)
            return self._json(200, doc)
        return self._stream(step, command, model, created, usage, req, fault)

    def _paced(self, body: bytes, fault: str, script: Script) -> None:
        """A plain answer whose body arrives in pieces (``trickle``) or stops (``stall``)."""
        if fault == "keepalive":  # whitespace before the JSON, as OpenRouter sends
            n = max(2, round(script.slow_seconds / script.trickle_every))
            body = b"\n" * n + body
            pieces, pause = [b"\n"] * n + [body[n:]], script.trickle_every
        elif fault == "stall":
            pieces, pause = [body[:1], body[1:]], script.slow_seconds
        else:
            n = max(2, round(script.slow_seconds / script.trickle_every))
            size = -(-len(body) // n)
            pieces = [body[i : i + size] for i in range(0, len(body), size)]
            pause = script.trickle_every
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        for i, piece in enumerate(pieces):
            if i:
                time.sleep(pause)
            self.wfile.write(piece)
            self.wfile.flush()

    def _stream(
        self,
        step: int,
        command: str,
        model: str,
        created: int,
        usage: dict[str, int],
        req: dict[str, Any],
        fault: str | None,
    ) -> None:
        base = {"id": f"chatcmpl-{step}", "object": "chat.completion.chunk", "created": created}
        args = json.dumps({"command": command})
        half = len(args) // 2
        call0 = {
            "index": 0,
            "id": f"call_{step}",
            "type": "function",
            "function": {"name": "bash", "arguments": args[:half]},
        }
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": f"step {step + 1}"}]
        if fault == "trickle":  # a long completion: one more delta every trickle_every
            pieces = round(self.server.script.slow_seconds / self.server.script.trickle_every)
            deltas += [{"content": "."} for _ in range(pieces)]
        deltas += [
            {"tool_calls": [call0]},
            {"tool_calls": [{"index": 0, "function": {"arguments": args[half:]}}]},
        ]
        events = [
            dict(base, model=model, choices=[{"index": 0, "delta": d, "finish_reason": None}])
            for d in deltas
        ]
        events.append(
            dict(
                base,
                model=model,
                choices=[{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
            )
        )
        opts = req.get("stream_options") or {}
        if opts.get("include_usage") and fault != "no_usage":
            events.append(dict(base, model=model, choices=[], usage=usage))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        lines = [f"data: {json.dumps(e)}\n\n".encode() for e in events]
        if fault != "cut":
            lines.append(b"data: [DONE]\n\n")
        script = self.server.script
        if fault == "keepalive":  # SSE comments before the first event
            n = max(2, round(script.slow_seconds / script.trickle_every))
            lines[:0] = [b": PROCESSING\n\n"] * n
        for i, line in enumerate(lines):
            self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
            self.wfile.flush()
            if fault == "trickle" or (fault == "keepalive" and line.startswith(b":")):
                time.sleep(script.trickle_every)
            elif fault == "stall" and i == 0:
                time.sleep(script.slow_seconds)
        self.wfile.write(b"0\r\n\r\n")


class ScriptedUpstream(QuietServer):
    """The scripted upstream on ``127.0.0.1:<port>``, served by a daemon thread.

    A client that hangs up mid-reply (a trial stopped while its call was answered) is dropped
    quietly: a traceback printed from this thread would land in whichever test runs next.
    """

    block_on_close = True

    def __init__(self, script: Script, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.script = script
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        self.gathered = False
        self.requests: list[dict[str, Any]] = []
        self.served: list[Served] = []
        self.inflight = 0
        self.max_inflight = 0
        self.arrivals: list[float] = []
        """When each request arrived (``time.monotonic()``), in order."""
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI-style API root, ``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.server_port}/v1"

    def start(self) -> ScriptedUpstream:
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def __enter__(self) -> ScriptedUpstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--script", required=True, help="JSON list of shell commands")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--fault", default=None)
    args = parser.parse_args(argv)
    with open(args.script) as fh:
        commands = json.load(fh)
    server = ScriptedUpstream(Script(commands, model=args.model, fault=args.fault), args.port)
    print(server.base_url, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.server_close()


if __name__ == "__main__":
    main()
