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
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "CHAT_PATH",
    "ENDPOINT_CONNECTIONS",
    "ENDPOINT_OWN_CONNECTIONS",
    "PROCESS_CONNECTIONS",
    "REQUEST_SECONDS",
    "Call",
    "Endpoint",
    "QuietServer",
    "Reply",
    "read_body",
    "refusal",
]

CHAT_PATH = "/v1/chat/completions"
MAX_BODY = 16 << 20
"""Largest request body accepted (a long history of a coding agent fits many times)."""
HELD_BYTES = 64 << 20
"""Most bytes of request bodies one endpoint (an agent phase's socket) holds at once: a
body is held from the moment it is read until its reply is sent. A request that would go
over it is read and dropped, and answered 429 (clients retry that): many concurrent
connections cannot make the gateway hold their bodies without bound."""
ENDPOINT_CONNECTIONS = 64
"""Most connections one endpoint (an agent phase's socket) serves at once, each on its own
thread. The next is answered 503 ``connections`` and closed by the accepting thread itself,
without a thread of its own: an agent opening thousands of connections costs the harness
no more than this many threads (an outside red team's 32,000 reached 19,600 threads and
hung the run)."""
PROCESS_CONNECTIONS = 1024
"""Most connections all the gateway's servers of one process (the run's coordinating
process, or one Dask worker) serve at once: the backstop of :data:`ENDPOINT_CONNECTIONS`
when many phases flood together (16 flooding phases reach it)."""
ENDPOINT_OWN_CONNECTIONS = 4
"""Connections every server (an agent phase's socket) is served whatever the process's
total: only those beyond it count against :data:`PROCESS_CONNECTIONS`, so phases flooding
the process's bound cannot turn away another phase's few calls (sixteen flooding trials
once took all 1,024 and a seventeenth trial's one call was answered 503)."""
REQUEST_SECONDS = 10.0
"""Most seconds a connection may take to deliver a complete request (its head and body)
once it is ready for one (accepted, or its previous reply sent): a connection that stalls,
or stays idle between calls, longer is shut down and its thread returns."""
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


ENDED = "token refused: its agent phase has ended"
"""Why a call for a phase that has ended is refused (401, code ``token``)."""


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


class TimedHandler(BaseHTTPRequestHandler):
    """A handler whose every request must arrive within its server's ``request_seconds``."""

    server: QuietServer

    def handle_one_request(self) -> None:
        """Arm the connection's deadline for the next request, then serve it."""
        self.server.arm(self.connection)
        super().handle_one_request()


class _Handler(TimedHandler):
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
            self.server.disarm(self.connection)  # the request is in: the call may take long
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


class _Slots:
    """A count of connections served at once, up to a bound (shared by servers)."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self._used = 0
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Count one more connection, unless that goes over the bound."""
        with self._lock:
            if self._used >= self.bound:
                return False
            self._used += 1
            return True

    def give(self) -> None:
        """Forget a connection counted by :meth:`take`."""
        with self._lock:
            self._used -= 1


_PROCESS_SLOTS = _Slots(PROCESS_CONNECTIONS)
_TURNED_AWAY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s"
)


def _turn_away(conn: socket.socket, bound: int) -> None:
    """Say why a connection over the bound is closed, if its buffer takes it (never waits)."""
    body = refusal(
        503,
        f"too many connections to the gateway at once (at most {bound}): retry later",
        "connections",
    ).body
    with contextlib.suppress(OSError):
        conn.send(_TURNED_AWAY % (len(body), body), socket.MSG_DONTWAIT)


class QuietServer(ThreadingHTTPServer):
    """A threading server with bounded connections, each held only while it delivers.

    At most ``max_connections`` connections (and, beyond each server's first
    :data:`ENDPOINT_OWN_CONNECTIONS`, :data:`PROCESS_CONNECTIONS` over all the servers of the
    process) are served at once, one thread each; the accepting thread
    answers the next 503 and closes it without starting one. Under a
    :class:`TimedHandler`, a connection must deliver each request within
    ``request_seconds`` (the handler arms the deadline and disarms it once the request is
    read); the accepting thread shuts down one that does not, so its thread returns.
    :meth:`drop_connections` shuts them all down. Clients hanging up mid-reply are dropped
    quietly.
    """

    daemon_threads = True
    block_on_close = False
    max_connections = PROCESS_CONNECTIONS
    request_seconds = REQUEST_SECONDS

    def __init__(self, address: Any, handler: Any) -> None:
        self._conns: dict[Any, float | None] = {}
        """Connection served → monotonic deadline of the request it waits for (or none)."""
        self._pooled: set[Any] = set()
        """The connections served that count against the process's bound."""
        self._conns_lock = threading.Lock()
        self._swept = 0.0
        super().__init__(address, handler)

    def verify_request(self, request: Any, client_address: Any) -> bool:
        """Serve a new connection only within the bounds (the accepting thread answers it)."""
        with self._conns_lock:
            ok = len(self._conns) < self.max_connections
            if ok and len(self._conns) - len(self._pooled) >= ENDPOINT_OWN_CONNECTIONS:
                ok = _PROCESS_SLOTS.take()
                if ok:
                    self._pooled.add(request)
            if ok:
                self._conns[request] = None  # a TimedHandler arms it when it starts
        if not ok:
            _turn_away(request, self.max_connections)
        return ok

    def shutdown_request(self, request: Any) -> None:
        """Close a connection and free its place (whether it was served or turned away)."""
        with self._conns_lock:
            self._conns.pop(request, None)
            pooled = request in self._pooled
            self._pooled.discard(request)
        if pooled:
            _PROCESS_SLOTS.give()
        super().shutdown_request(request)

    def arm(self, conn: Any) -> None:
        """Start the deadline of the request ``conn`` is about to deliver."""
        with self._conns_lock:
            if conn in self._conns:
                self._conns[conn] = time.monotonic() + self.request_seconds

    def disarm(self, conn: Any) -> None:
        """Stop the deadline of ``conn``: its request was read, answering it may take long."""
        with self._conns_lock:
            if conn in self._conns:
                self._conns[conn] = None

    def service_actions(self) -> None:
        """Shut down the connections past their deadline (the serving loop calls this)."""
        now = time.monotonic()
        if now - self._swept < 0.1:
            return
        self._swept = now
        with self._conns_lock:
            late = [c for c, due in self._conns.items() if due is not None and due <= now]
            for conn in late:
                self._conns[conn] = None  # shut down once; its thread frees the place
        for conn in late:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def drop_connections(self) -> None:
        """Shut down every connection served: their threads return."""
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Drop a client that went away (its phase ended) quietly; report anything else."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Server(QuietServer):
    # socketserver's default backlog of 5 makes a burst of concurrent calls fail to connect
    # (EAGAIN on a unix socket) before the gateway sees them.
    request_queue_size = 128
    max_connections = ENDPOINT_CONNECTIONS

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
        """Stop serving, close the socket, remove its path and shut down every connection.

        The connections' threads return at once (a call already sent upstream runs on to
        its end; its reply goes nowhere); nothing waits for them here.
        """
        self._server.shutdown()
        self._server.server_close()
        self._server.drop_connections()
        self._thread.join(timeout=5)
        if self.unix_path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.unix_path)
