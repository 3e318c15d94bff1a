"""The gateway link: how trials on Dask workers reach the run's one gateway.

Under ``--executor dask`` the gateway stays in the coordinating process (so each upstream
keeps one client, one concurrency and one rate limit for the whole run) and also serves
this link: HTTP on TCP, every request authenticated by a per-run random secret (a bearer
compared in constant time). A worker opens a session for one agent phase by naming the
trial; the coordinator finds the release's upstream and the case's limits in its own plan,
never in what the worker sends. Each call the agent makes reaches the worker's own unix
socket (an :class:`~harness.gateway._http.Endpoint`, so every wire check still applies
there), is forwarded over the link to the coordinator's :class:`Session` (token, model,
budget, replay, upstream faults, transcript) and its reply comes back unchanged. Closing
the session returns the measurements and the transcript blobs to the worker, which puts
them into the trial's output: they reach the store through its single writer.

A link that fails (the coordinator unreachable, an answer that is not the session's) is
infrastructure: the agent gets a 502 and the trial ends ``infra_error``.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import ipaddress
import os
import secrets
import shutil
import socket
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import urllib3
from pydantic import Field, ValidationError
from urllib3.exceptions import HTTPError as Urllib3Error

from harness.cases.model import Limits
from harness.digest import digest_bytes
from harness.errors import ConfigError, InfraError
from harness.frozen import Frozen as _Frozen
from harness.gateway._http import (
    ENDED,
    Call,
    Endpoint,
    QuietServer,
    Reply,
    TimedHandler,
    read_body,
    refusal,
)
from harness.gateway._upstream import call_bound
from harness.project import Upstream
from harness.store.records import ModelUsage, TrialKey

if TYPE_CHECKING:
    from harness.gateway._gateway import Gateway, Session

__all__ = ["LinkAddress", "LinkScope", "RemoteSession", "link_host", "session_label"]

_PREFIX = "/link/v1/"
_MARK = "X-Harness-Gateway"
"""Set on every reply that is the session's own: anything else is a fault of the link."""
_AGENT_TOKEN = "X-Agent-Token"
LINK_REQUEST_SECONDS = 60.0
"""Most seconds a link connection may take to deliver a request, or stay idle between two
(:data:`~harness.gateway._http.REQUEST_SECONDS` on the agent's side); its connections are
bounded as every gateway server's (``PROCESS_CONNECTIONS``)."""
_SETTLED = "X-Harness-Settled"
"""On a call's reply once the session has decided the trial: the worker stops the phase."""


def session_label(key: TrialKey, attempt: int) -> str:
    """Return the gateway session label of one agent phase (also the model-replay key)."""
    return f"{key.arm.value}--{key.case_id}--v{key.case_version}--t{key.trial:03d}--a{attempt}"


def link_host(scheduler: str | None) -> str:
    """Return the local address workers reach the link on: the one routing to the scheduler.

    A ``LocalCluster`` (no scheduler) runs on this machine: loopback. Otherwise the
    address of this machine's interface towards the scheduler's host (the kernel's route
    choice, found by connecting a UDP socket, which sends nothing).

    Raises:
        ConfigError: the scheduler address has no host, or it does not resolve.
    """
    if scheduler is None:
        return "127.0.0.1"
    parts = urlsplit(scheduler if "://" in scheduler else f"tcp://{scheduler}")
    try:
        host, port = parts.hostname, parts.port or 8786
    except ValueError:
        host, port = None, 0
    if not host:
        raise ConfigError(f"no host in the scheduler address {scheduler!r}", field="--scheduler")
    try:
        family, _, _, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
        if ipaddress.ip_address(addr[0]).is_loopback:
            return "127.0.0.1" if family == socket.AF_INET else "::1"
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect(addr)
            return str(probe.getsockname()[0])
    except OSError as exc:
        raise ConfigError(
            f"cannot find the local address that routes to the scheduler {scheduler!r}: {exc}",
            field="--scheduler",
        ) from None


@dataclass(frozen=True)
class LinkAddress:
    """Where and how workers reach the coordinator's gateway (travels in each trial spec)."""

    url: str
    """``http://<host>:<port>`` of the link."""
    secret: str = field(repr=False)
    """The run's link secret (never stored, never shown to an agent)."""


@dataclass(frozen=True)
class LinkScope:
    """The trials the link may open sessions for, with what the coordinator knows of each."""

    trials: Mapping[tuple[str, str, str, int], tuple[Upstream, Limits]]
    """(arm, release, case id, case version) → the release's upstream and the case's limits."""

    def resolve(self, key: TrialKey) -> tuple[Upstream, Limits] | None:
        """Return the upstream and limits of ``key``'s trial, or ``None`` if not in the run."""
        return self.trials.get((key.arm.value, key.release, key.case_id, key.case_version))


_M = TypeVar("_M", bound=_Frozen)


class _Open(_Frozen):
    """A worker asks for the gateway session of one agent phase."""

    key: TrialKey
    """The trial (its release must have an upstream in this run)."""
    attempt: int = Field(ge=0)
    """The attempt of the trial the phase belongs to."""


class _Opened(_Frozen):
    """The coordinator's session, as the worker addresses it."""

    session: str
    """The session's id on the link (not the agent's token)."""
    token: str
    """The agent's bearer token for this phase."""


class _Closed(_Frozen):
    """A closed session's measurements and transcript."""

    usage: ModelUsage
    blobs: dict[str, str]
    """Transcript blobs: digest → base64 bytes."""


# ------------------------------------------------------------------------ coordinator side


class _LinkHandler(TimedHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a worker's calls reuse one connection
    server_version = "harness-gateway-link"
    sys_version = ""
    server: _LinkHTTPServer

    def setup(self) -> None:
        super().setup()
        # Nagle plus the client's delayed ACK would add ~40 ms to every reply.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the stdlib's per-request stderr log."""

    def _send(self, reply: Reply, *, session: bool = False, close: bool = False) -> None:
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        if session:
            self.send_header(_MARK, "session")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if close:  # said, so the client does not reuse a connection about to be closed
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(reply.body)

    def _refuse(self, status: int, message: str, code: str) -> None:
        self._send(refusal(status, message, code), close=True)

    def do_POST(self) -> None:
        link = self.server.link
        body = read_body(self)  # read even when refused next (see read_body)
        self.server.disarm(self.connection)
        if isinstance(body, tuple):
            return self._refuse(*body)
        auth = self.headers.get("Authorization", "")
        if not hmac.compare_digest(auth.encode(), f"Bearer {link.address.secret}".encode()):
            return self._refuse(401, "gateway link: wrong or missing link secret", "link_auth")
        op, _, sid = self.path.removeprefix(_PREFIX).partition("/")
        if not self.path.startswith(_PREFIX):
            op = ""
        if op == "open" and not sid:
            return self._send(link.open(body))
        if op == "call":
            reply, ours = link.call(sid, self.headers.get(_AGENT_TOKEN, ""), body)
            return self._send(reply, session=ours)
        if op == "close":
            return self._send(link.close_session(sid))
        return self._refuse(404, f"gateway link: no operation at {self.path!r}", "path")

    def _not_post(self) -> None:
        self._refuse(405, f"gateway link: {self.command} refused, only POST", "method")

    do_GET = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _not_post
    do_CONNECT = do_TRACE = _not_post


class _LinkHTTPServer(QuietServer):
    # Bodies of up to MAX_BODY cross the network here, not a local socket: a longer bound.
    request_seconds = LINK_REQUEST_SECONDS

    def __init__(self, host: str, link: LinkServer) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.link = link
        super().__init__((host, 0), _LinkHandler)


class LinkServer:
    """The coordinator's end of the link: sessions of the run's gateway, opened by workers."""

    def __init__(self, gateway: Gateway, scope: LinkScope, host: str) -> None:
        self._gw = gateway
        self._scope = scope
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}
        try:
            self._server = _LinkHTTPServer(host, self)
        except OSError as exc:
            raise InfraError(
                f"cannot serve the gateway link for Dask workers on {host}: {exc}",
                reason="gateway_link",
            ) from None
        port = self._server.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        self.address = LinkAddress(url=f"http://{shown}:{port}", secret=secrets.token_urlsafe(32))
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="gateway-link",
            daemon=True,
        )
        self._thread.start()

    def open(self, body: bytes) -> Reply:
        """Open the session of the agent phase a worker names (the plan says what it gets)."""
        try:
            req = _Open.model_validate_json(body)
        except ValidationError as exc:
            return refusal(400, f"gateway link: bad open request: {exc.errors()[:1]}", "format")
        found = self._scope.resolve(req.key)
        if found is None:
            k = req.key
            return refusal(
                404,
                f"gateway link: no trial of release {k.release!r} ({k.arm.value}) on case "
                f"{k.case_id} v{k.case_version} calls a model in this run",
                "unknown_trial",
            )
        label = session_label(req.key, req.attempt)
        upstream, limits = found
        with self._lock:
            # A phase opened again supersedes the earlier session: Dask reruns the task of
            # a worker lost mid-trial elsewhere, and the lost one's token must not live on
            # (closed first: its upstream lease is the new session's to take).
            stale = [s for s, old in self._sessions.items() if old.label == label]
            superseded = [self._sessions.pop(s) for s in stale]
        for old in superseded:
            old.close()
        session = self._gw.open_session(label, upstream, limits, listen=False)
        sid = secrets.token_urlsafe(16)
        with self._lock:
            self._sessions[sid] = session
        opened = _Opened(session=sid, token=session.token)
        return Reply(status=200, body=opened.model_dump_json().encode())

    def call(self, sid: str, token: str, body: bytes) -> tuple[Reply, bool]:
        """Answer one agent call with the session's own reply (``True``: it is the session's)."""
        with self._lock:
            session = self._sessions.get(sid)
        if session is None:
            return refusal(404, "gateway link: no such open session", "session"), False
        reply = session.handle(Call(token=token, body=body))
        if session.settled.is_set():
            reply = replace(reply, headers={**reply.headers, _SETTLED: "1"})
        return reply, True

    def close_session(self, sid: str) -> Reply:
        """End a session: its measurements and transcript go back to the worker."""
        with self._lock:
            session = self._sessions.pop(sid, None)
        if session is None:
            return refusal(404, "gateway link: no such open session", "session")
        usage = session.close()
        blobs = {d: base64.b64encode(data).decode() for d, data in session.blobs.items()}
        return Reply(status=200, body=_Closed(usage=usage, blobs=blobs).model_dump_json().encode())

    def close(self) -> None:
        """Stop serving; end sessions whose worker never closed them (their tokens too)."""
        self._server.shutdown()
        self._server.server_close()
        self._server.drop_connections()
        self._thread.join(timeout=5)
        with self._lock:
            left, self._sessions = list(self._sessions.values()), {}
        for s in left:
            s.close()


# ---------------------------------------------------------------------------- worker side


def _link_error(message: str) -> InfraError:
    return InfraError(f"gateway link: {message}", reason="gateway_link")


def _parsed(model: type[_M], data: bytes) -> _M:
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        raise _link_error(f"the coordinator's answer is not a {model.__name__}: {exc}") from None


def _reason(resp: urllib3.BaseHTTPResponse) -> str:
    try:
        return str(resp.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP {resp.status}"


class RemoteSession:
    """A worker's gateway session: a local unix socket whose calls go over the link.

    The same surface as :class:`Session` for the trial: ``socket_path``, ``token``,
    ``upstream``, ``blobs`` and ``close() -> ModelUsage``.
    """

    def __init__(self, link: LinkAddress, key: TrialKey, attempt: int, upstream: Upstream) -> None:
        """Open the coordinator's session of this agent phase and listen for the agent.

        Raises:
            InfraError: the coordinator is unreachable or refuses the session.
        """
        self.upstream = upstream
        self.blobs: dict[str, bytes] = {}
        self.settled = threading.Event()
        """Set once the coordinator's session has decided the trial (see :class:`Session`)."""
        self._auth = f"Bearer {link.secret}"
        self._fault: str | None = None
        self._closing = False
        retries = urllib3.Retry(
            total=3, connect=3, read=0, other=0, status=0, redirect=0, backoff_factor=0.2
        )  # a refused connection never reached the coordinator: safe to resend
        self._pool = urllib3.connection_from_url(link.url, maxsize=4, block=False, retries=retries)
        self._url = link.url
        req = _Open(key=key, attempt=attempt)
        # No read bound: the coordinator answers once the phase's upstream lease is free,
        # which the run's other phases decide (each bounded by its own timeout).
        opened = _parsed(_Opened, self._post("open", req.model_dump_json().encode(), read=None))
        self._sid = opened.session
        self.token = opened.token
        self._dir = tempfile.mkdtemp(prefix="hgw-")
        os.chmod(self._dir, 0o700)
        self.socket_path = os.path.join(self._dir, "gateway.sock")
        self._endpoint = Endpoint(self.handle, unix_path=self.socket_path)

    def _post(self, op: str, body: bytes, read: float | None = 120.0) -> bytes:
        try:
            resp = self._pool.urlopen(
                "POST",
                _PREFIX + op,
                body=body,
                headers={"Authorization": self._auth, "Content-Type": "application/json"},
                timeout=urllib3.Timeout(connect=10.0, read=read),
            )
        except Urllib3Error as exc:
            raise _link_error(f"the coordinator at {self._url} is unreachable: {exc}") from None
        if resp.status != 200:
            raise _link_error(f"the coordinator refused {op!r}: {_reason(resp)}")
        return resp.data

    def handle(self, call: Call) -> Reply:
        """Forward one call that passed the wire checks here; return the session's reply."""
        if self._fault is not None:
            return refusal(502, f"{self._fault} earlier in this phase", "link")
        try:
            # No read bound here: the coordinator bounds the upstream (response_seconds,
            # retries) and the agent phase's own timeout bounds the whole.
            resp = self._pool.urlopen(
                "POST",
                f"{_PREFIX}call/{self._sid}",
                body=call.body,
                headers={"Authorization": self._auth, _AGENT_TOKEN: call.token},
                timeout=urllib3.Timeout(connect=10.0, read=None),
            )
        except Urllib3Error as exc:
            return self._broken(f"the coordinator at {self._url} is unreachable: {exc}")
        if resp.headers.get(_MARK) != "session":
            return self._broken(f"the coordinator did not answer the call: {_reason(resp)}")
        if resp.headers.get(_SETTLED) == "1":
            self.settled.set()
        ctype = resp.headers.get("Content-Type", "application/json")
        return Reply(status=resp.status, body=resp.data, content_type=ctype)

    def _broken(self, message: str) -> Reply:
        if self._closing:
            # A call still on its way when the phase ended (the coordinator's session is
            # gone): refused as the ended phase's, never a fault of the link. An agent that
            # spent its budget with calls queued must stay the agent's fail (a red team
            # turned it into infra this way).
            return refusal(401, ENDED, "token")
        self._fault = self._fault or f"gateway link: {message}"
        self.settled.set()
        return refusal(502, self._fault, "link")

    def close(self) -> ModelUsage:
        """Stop listening, close the coordinator's session, take its measurements and blobs.

        Raises:
            InfraError: the coordinator is unreachable, or a blob does not match its digest.
        """
        self._closing = True
        self._endpoint.close()
        shutil.rmtree(self._dir, ignore_errors=True)
        try:
            # The coordinator charges calls already sent upstream before it answers.
            wait = call_bound(self.upstream) + 60.0
            closed = _parsed(_Closed, self._post(f"close/{self._sid}", b"", read=wait))
        finally:
            self._pool.close()
        for digest, text in closed.blobs.items():
            data = base64.b64decode(text)
            if digest_bytes(data) != digest:
                raise _link_error(f"transcript blob {digest[:19]} arrived altered")
            self.blobs[digest] = data
        usage = closed.usage
        if self._fault is not None and usage.fault is None:
            usage = usage.model_copy(update={"fault": self._fault})
        return usage

    def __enter__(self) -> RemoteSession:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(InfraError):
            self.close()
