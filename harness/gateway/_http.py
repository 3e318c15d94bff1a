"""The gateway's HTTP surface: a stdlib threading server on a unix socket (and loopback TCP).

Only the wire is handled here: the request line, the Host header, the method, the path and
the body are checked before anything reaches the session logic, which receives a parsed
:class:`Call` and returns a :class:`Reply`. Every refusal is a JSON error in the OpenAI
shape (``{"error": {"message", "type", "code"}}``) so agents report it legibly.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import socketserver
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

__all__ = ["CHAT_PATH", "Call", "Endpoint", "Reply", "read_body", "refusal"]

CHAT_PATH = "/v1/chat/completions"
MAX_BODY = 16 << 20
"""Largest request body accepted (a long history of a coding agent fits many times)."""
HELD_BYTES = 64 << 20
"""Most bytes of request bodies one endpoint (an agent phase's socket) holds at once: a
body is held from the moment it is read until its reply is sent. A request that would go
over it is read and dropped, and answered 429 (clients retry that): many concurrent
connections cannot make the gateway hold their bodies without bound."""
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass(frozen=True)
class Call:
    """One request that passed the wire checks: the bearer token and the raw JSON body."""

    token: str
    body: bytes


@dataclass(frozen=True)
class Reply:
    """What the gateway answers: status, content type, body bytes."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: Mapping[str, str] = field(default_factory=dict)


def refusal(status: int, message: str, code: str) -> Reply:
    """Build a JSON error reply in the OpenAI error shape."""
    doc = {"error": {"message": message, "type": "harness_gateway", "code": code}}
    return Reply(status=status, body=json.dumps(doc).encode())


def read_body(handler: BaseHTTPRequestHandler) -> bytes | tuple[int, str, str]:
    """Read a request's body by its Content-Length, at most :data:`MAX_BODY` bytes.

    Returns the body, or the refusal (status, message, code) when the length is missing,
    malformed or too large. A body is read even when the request is refused next: closing
    on unread bytes resets the connection, and the client may lose the refusal.
    """
    try:
        length = int(handler.headers.get("Content-Length", ""))
    except ValueError:
        return 411, "a Content-Length is required", "length"
    if not 0 <= length <= MAX_BODY:
        return 413, f"request body over {MAX_BODY} bytes", "size"
    return handler.rfile.read(length)


def _host_ok(host: str | None) -> bool:
    """Accept only a loopback Host header: the agent asked for the gateway, not a third party."""
    if not host:
        return False
    try:
        parts = urlsplit(f"//{host}")
        _ = parts.port  # raises on a malformed port
    except ValueError:
        return False
    return parts.hostname in _LOOPBACK_HOSTS


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: an agent's calls reuse one connection
    server_version = "harness-gateway"
    sys_version = ""
    server: _Server

    def setup(self) -> None:
        """Send small writes at once on TCP (headers and body are separate writes)."""
        super().setup()
        if self.connection.family != socket.AF_UNIX:
            # Nagle plus the client's delayed ACK would add ~40 ms to every reply.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the stdlib's per-request stderr log (the transcript is the log)."""

    def _send(self, reply: Reply) -> None:
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)

    def _refuse(self, status: int, message: str, code: str) -> None:
        # Said, so the client does not reuse a connection about to be closed.
        self._send(replace(refusal(status, message, code), headers={"Connection": "close"}))

    def _dispatch(self) -> None:
        if self.command == "CONNECT":
            return self._refuse(405, "CONNECT is refused: the gateway is not a proxy", "connect")
        if not self.path.startswith("/"):
            return self._refuse(
                400, "absolute-URI request refused: the gateway is not a proxy", "absolute_uri"
            )
        if not _host_ok(self.headers.get("Host")):
            return self._refuse(
                403, f"host {self.headers.get('Host')!r} refused: only the gateway", "host"
            )
        if self.path != CHAT_PATH:
            return self._refuse(404, f"path {self.path!r} refused: only {CHAT_PATH}", "path")
        if self.command != "POST":
            return self._refuse(405, f"{self.command} refused: only POST", "method")
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._refuse(411, "a Content-Length is required", "length")
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            length = 0  # read_body refuses it
        if not self.server.hold(length):
            _drain(self, length)
            return self._refuse(
                429,
                f"requests in flight on this gateway hold over {HELD_BYTES} bytes: retry later",
                "held_bytes",
            )
        try:
            body = read_body(self)
            if isinstance(body, tuple):
                return self._refuse(*body)
            auth = self.headers.get("Authorization", "")
            token = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
            self._send(self.server.endpoint(Call(token=token, body=body)))
        finally:
            self.server.release(length)
        return None

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _dispatch
    do_CONNECT = do_TRACE = _dispatch


def _drain(handler: BaseHTTPRequestHandler, length: int) -> None:
    """Read and drop a body (at most :data:`MAX_BODY`) so the refusal reaches the client."""
    left = min(max(length, 0), MAX_BODY)
    while left > 0:
        chunk = handler.rfile.read(min(left, 1 << 16))
        if not chunk:
            return
        left -= len(chunk)


class QuietServer(ThreadingHTTPServer):
    """A threading server whose clients may hang up mid-reply: that is quietly dropped."""

    daemon_threads = True
    block_on_close = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Drop a client that went away (its phase ended) quietly; report anything else."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Server(QuietServer):
    # socketserver's default backlog of 5 makes a burst of concurrent calls fail to connect
    # (EAGAIN on a unix socket) before the gateway sees them.
    request_queue_size = 128

    def __init__(
        self, address: Any, endpoint: Callable[[Call], Reply], family: socket.AddressFamily
    ) -> None:
        self.address_family = family
        self.endpoint = endpoint
        self._held = 0
        self._held_lock = threading.Lock()
        super().__init__(address, _Handler)

    def hold(self, length: int) -> bool:
        """Count a body of ``length`` bytes as held, unless that goes over :data:`HELD_BYTES`."""
        length = min(max(length, 0), MAX_BODY)
        with self._held_lock:
            if self._held + length > HELD_BYTES:
                return False
            self._held += length
            return True

    def release(self, length: int) -> None:
        """Forget a body counted by :meth:`hold` (its reply was sent)."""
        with self._held_lock:
            self._held -= min(max(length, 0), MAX_BODY)

    def server_bind(self) -> None:
        """Bind without HTTPServer's host/port lookup, which a unix socket path lacks."""
        socketserver.TCPServer.server_bind(self)
        self.server_name = "gateway"
        self.server_port = self.server_address[1] if self.address_family != socket.AF_UNIX else 0


class Endpoint:
    """One listening socket (unix path, or loopback TCP) served by a daemon thread."""

    def __init__(self, endpoint: Callable[[Call], Reply], *, unix_path: str | None) -> None:
        if unix_path is not None:
            self._server = _Server(unix_path, endpoint, socket.AF_UNIX)
            # Sandboxed commands run unprivileged and connect through a bind of this one
            # node; the folder holding it is 0700, so no other host user reaches it.
            os.chmod(unix_path, 0o666)
        else:
            self._server = _Server(("127.0.0.1", 0), endpoint, socket.AF_INET)
        self.unix_path = unix_path
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="gateway-endpoint",
            daemon=True,
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` for a TCP endpoint."""
        return f"http://127.0.0.1:{self._server.server_port}"

    def close(self) -> None:
        """Stop serving, close the socket and remove its path."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        if self.unix_path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.unix_path)
