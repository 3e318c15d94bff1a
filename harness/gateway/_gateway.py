"""The model gateway: one per run, in the coordinating process; one session per agent phase.

A session listens on its own unix socket (the sealed view's one endpoint, relayed into the
agent phase) and accepts only its own bearer token, issued when the phase starts and
revoked when it ends. It checks each call (model name, budget), forwards it to the
release's upstream with the real key (or serves it from a recorded run), meters the
upstream's usage and keeps the transcript. Faults and overspending are noted in the
session; the trial turns them into verdicts when the phase ends. A completion still
arriving when the upstream's ``response_seconds`` ran out is cut and counts as
overspending: the agent asked for more than the release allows one call.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness._safefs import loads_json
from harness.cases.model import Limits
from harness.digest import digest_bytes, digest_json
from harness.errors import ConfigError, InfraError
from harness.gateway._http import ENDED as _ENDED
from harness.gateway._http import Call, Endpoint, Reply, refusal
from harness.gateway._reserve import (
    Grant,
    grant,
    refused_fields,
    refused_parts,
    request_bounds,
    union_seconds,
)
from harness.gateway._upstream import (
    RESPONSE_BYTES,
    Answer,
    CutAnswer,
    Lease,
    Leases,
    ResponseTooLarge,
    ResponseTooLong,
    UpstreamClient,
    UpstreamFault,
    Usage,
    call_bound,
    meter,
)
from harness.project import Upstream
from harness.store.records import ModelCall, ModelUsage

if TYPE_CHECKING:
    from harness.gateway._link import LinkAddress, LinkScope, LinkServer

__all__ = [
    "Gateway",
    "RecordedCall",
    "Session",
    "account",
    "active_gateway",
    "check_accounts",
    "check_keys",
    "phase_error",
    "request_key",
]

_ACTIVE: list[Gateway] = []
_BUDGET = 403
"""Status of a call refused for budget: not 429, which clients retry with backoff."""
_CUT = ResponseTooLong.code
"""Error code of a call cut at the upstream's response bound (the agent's overspending)."""
_TOO_LARGE = ResponseTooLarge.code
"""Error code of a call whose answer was over :data:`RESPONSE_BYTES` (the agent's)."""
PHASE_RESPONSE_BYTES = 128 << 20
"""Most bytes of answers one agent phase keeps (each answer at most
:data:`~harness.gateway._upstream.RESPONSE_BYTES`): the call after the phase reached it is
not forwarded and settles the trial as the agent's ``budget_exceeded``."""
REFUSED_CALLS = 64
"""Most refused calls one agent phase may make: the next settles the trial as the agent's
``budget_exceeded`` and is not stored (a refused call costs no turn and no token, so
without this bound an agent could make the harness keep any number of bodies)."""
REFUSED_BYTES = 32 << 20
"""Most bytes of refused request bodies kept per agent phase (as :data:`REFUSED_CALLS`)."""
CALL_BYTES = 128 << 20
"""Most bytes of request bodies one agent phase may send upstream (each is kept for the
record): the call past it is not forwarded or kept and settles the trial as the agent's
``budget_exceeded``. Calls the upstream answers with an error cost a turn but no token, so
without it the turn limit alone bounded what the harness holds (turns × the body limit)."""


def active_gateway() -> Gateway | None:
    """Return the gateway serving in this process (set by :meth:`Gateway.serving`), if any."""
    return _ACTIVE[-1] if _ACTIVE else None


def check_keys(upstreams: Mapping[str, Upstream], env: Mapping[str, str] | None = None) -> None:
    """Refuse to start when a release's key variable is unset (before the first trial).

    Raises:
        ConfigError: names the release and the variable.
    """
    env = os.environ if env is None else env
    for release, up in sorted(upstreams.items()):
        if not env.get(up.key_env):
            raise ConfigError(
                f"environment variable {up.key_env} (the upstream's API key) is not set",
                file="harness.yaml",
                field=f"releases.{release}.upstream.key_env",
            )


def account(upstream: Upstream) -> tuple[str, str]:
    """Return the provider account an upstream calls: its API root and its key's variable.

    Upstreams of one account share its limits, whatever else differs (price, bounds).
    """
    return upstream.base_url.rstrip("/"), upstream.key_env


def _limits(upstream: Upstream) -> tuple[int, float | None, int]:
    return upstream.concurrency, upstream.requests_per_minute, upstream.trial_share


def check_accounts(upstreams: Mapping[str, Upstream]) -> None:
    """Refuse a run whose releases call one provider account under different limits.

    The account's ``concurrency`` and ``requests_per_minute`` are one, leased to every
    trial that calls it (two clients of one account once put two calls in flight under a
    stated ``concurrency: 1``); the trials' lease (``trial_concurrency``) must be the same
    for both arms to be measured alike.

    Raises:
        ConfigError: names the second release and the field that differs.
    """
    seen: dict[tuple[str, str], tuple[str, Upstream]] = {}
    for release, up in sorted(upstreams.items()):
        first = seen.setdefault(account(up), (release, up))
        if _limits(first[1]) == _limits(up):
            continue
        for name in ("concurrency", "requests_per_minute", "trial_concurrency"):
            a, b = getattr(first[1], name), getattr(up, name)
            if a != b:
                raise ConfigError(
                    f"calls the same provider account as release {first[0]!r} "
                    f"({up.base_url}, key {up.key_env}) with {name} {b!r}, not {a!r}: the "
                    "account's limits are one, state the same in both",
                    file="harness.yaml",
                    field=f"releases.{release}.upstream.{name}",
                )


def request_key(body: bytes) -> str:
    """Replay key of a request: the digest of its canonical JSON content."""
    try:
        return digest_json(loads_json(body))
    except ValueError:
        return digest_bytes(body)


class _PhaseEnded(Exception):
    """The phase ended before a call that waited for an upstream slot was sent."""


def _within(usage: Usage, g: Grant, *, replayed: bool) -> None:
    """Refuse a completion longer than the ``max_tokens`` × ``n`` the upstream was sent.

    Raises:
        UpstreamFault: the upstream ignored the bound (the reservation cannot hold then).
    """
    cap = g.completion_cap
    if cap is not None and not replayed and usage.output_tokens > cap:
        raise UpstreamFault(
            f"upstream served {usage.output_tokens} completion tokens, over the "
            f"max_tokens × n = {cap} it was sent"
        )


@dataclass(frozen=True)
class RecordedCall:
    """A call of a recorded run, served again in model replay."""

    request_key: str
    response: bytes
    status: int
    stream: bool
    refused: str | None = None
    """Why the gateway refused or failed the call when it was recorded (``ModelCall.refused``)."""


@dataclass
class _Meter:
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    waits: list[tuple[float, float]] = field(default_factory=list)
    """Monotonic (start, end) of each upstream wait: the phase's wait is their union."""
    reserved: int = 0
    """Tokens held by the calls in flight (their maximum cost, see :mod:`._reserve`)."""
    in_flight: int = 0
    closed: bool = False
    answered: str | None = None
    fault: str | None = None
    budget: str | None = None
    tokens_over: bool = False
    """The budget spent is ``limits.tokens``: the reason names the final charged total."""
    refused: int = 0
    refused_bytes: int = 0
    call_bytes: int = 0
    """Bytes of the request bodies forwarded (and kept) in this phase."""
    response_bytes: int = 0
    """Bytes of the answers kept in this phase."""
    calls: list[ModelCall] = field(default_factory=list)


class Session:
    """The gateway of one agent phase: its socket, its token, its meter and transcript."""

    def __init__(
        self,
        gateway: Gateway,
        label: str,
        upstream: Upstream,
        limits: Limits,
        *,
        replay: list[RecordedCall] | None,
        replayed_from: str | None,
        tcp: bool,
        listen: bool = True,
    ) -> None:
        self.label = label
        self.upstream = upstream
        self.limits = limits
        self.token = "hgw-" + secrets.token_urlsafe(24)
        self._gw = gateway
        self._replay = replay
        self._replayed_from = replayed_from
        self._meter = _Meter()
        self._lock = threading.Lock()
        self._settled_cv = threading.Condition(self._lock)
        self.settled = threading.Event()
        """Set once the gateway has decided the trial (a fault, a budget): the phase may stop."""
        self.blobs: dict[str, bytes] = {}
        self.socket_path = os.path.join(gateway.socket_dir, secrets.token_hex(6) + ".sock")
        self._endpoints = [Endpoint(self.handle, unix_path=self.socket_path)] if listen else []
        self.url: str | None = None
        """``http://127.0.0.1:<port>`` when opened with ``tcp=True`` (tests, benchmarks)."""
        if tcp:
            self._endpoints.append(Endpoint(self.handle, unix_path=None))
            self.url = self._endpoints[-1].url
        self._lease: Lease | None = None
        if replay is None:
            # The phase's own upstream slots, taken before its agent starts (see Leases),
            # and last: nothing after it can fail and leave them held.
            with contextlib.suppress(UpstreamFault):  # no key: its first call says so
                self._lease = gateway.client(upstream).leases.take()

    # -- the calls ------------------------------------------------------------------------
    def handle(self, call: Call) -> Reply:
        """Answer one call that passed the wire checks."""
        if not hmac.compare_digest(call.token.encode(), self.token.encode()):
            return refusal(401, self._gw.token_problem(call.token), "token")
        try:
            doc = loads_json(call.body)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            return self._refused(call, 400, "the body is not a JSON object", "format")
        if doc.get("model") != self.upstream.model:
            return self._refused(
                call,
                400,
                f"model {doc.get('model')!r} refused: this trial may use {self.upstream.model}",
                "model",
            )
        unknown = refused_fields(doc)
        if unknown:
            return self._refused(
                call,
                400,
                f"request field(s) {', '.join(map(repr, unknown))} refused: the gateway "
                "forwards only the chat-completions fields it meters (a provider's own "
                "fields, such as n_predict, can override max_tokens); see docs/gateway.md",
                "field",
            )
        parts = refused_parts(doc)
        if parts:
            return self._refused(
                call,
                400,
                f"message content part(s) {', '.join(map(repr, parts))} refused: the gateway "
                "forwards text and image_url parts, whose cost it can bound before the call "
                "(a file part's PDF costs tokens its bytes do not bound); see docs/gateway.md",
                "field",
            )
        bounds = request_bounds(doc)
        if isinstance(bounds, str):
            return self._refused(call, 400, bounds, "format")
        with self._lock:
            while True:
                problem = self._before_call()
                if problem is not None:
                    status, message, code = problem
                    return self._refused(call, status, message, code, locked=True)
                m = self._meter
                g = grant(
                    doc,
                    body_bytes=len(call.body),
                    limit=self.limits.tokens,
                    used=m.input_tokens + m.output_tokens,
                    reserved=m.reserved,
                    in_flight=m.in_flight,
                )
                if g is not None:
                    break
                self._settled_cv.wait()  # a call in flight settles and returns its reservation
            if m.call_bytes + len(call.body) > CALL_BYTES:
                why = self._over(
                    f"{m.call_bytes + len(call.body)} bytes of requests: the limit is "
                    f"{CALL_BYTES} bytes of request bodies per phase"
                )
                return refusal(_BUDGET, f"budget exceeded: {why}", "request_bytes")
            if m.response_bytes >= PHASE_RESPONSE_BYTES:
                why = self._over(
                    f"{m.response_bytes} bytes of answers: the limit is "
                    f"{PHASE_RESPONSE_BYTES} bytes of answers per phase"
                )
                return refusal(_BUDGET, f"budget exceeded: {why}", _TOO_LARGE)
            m.call_bytes += len(call.body)
            m.turns += 1
            m.reserved += g.tokens
            m.in_flight += 1
            turn = m.turns
        try:
            return self._forward(call, g, turn)
        finally:
            with self._lock:
                self._meter.reserved -= g.tokens
                self._meter.in_flight -= 1
                self._settled_cv.notify_all()

    def _forward(self, call: Call, g: Grant, turn: int) -> Reply:
        try:
            answer = self._answer(call.body, g.doc, turn)
        except UpstreamFault as fault:
            with self._lock:
                self._fault(str(fault))
            return self._refused(call, 502, f"upstream fault: {fault}", "upstream", turn=turn)
        except _PhaseEnded:
            # Never sent: not a turn (turns count forwarded calls).
            with self._lock:
                self._meter.turns -= 1
            return self._refused(call, 401, _ENDED, "token")
        except CutAnswer as cut:
            return self._cut(call, cut, turn)
        return self._metered(call, answer, turn, g)

    def _cut(self, call: Call, cut: CutAnswer, turn: int) -> Reply:
        """Settle a call cut (response bound, byte bound) as the agent's overspending.

        What arrived is kept in the transcript; its tokens are not metered (a provider's
        usage comes with the end of its answer), the call's reservation bounded them.
        """
        end = time.monotonic()
        with self._lock:
            why = self._over(f"turn {turn}: {cut}")
            self._meter.waits.append((end - cut.wait_s, end))
        answer = Answer(status=_BUDGET, body=cut.body, stream=cut.stream, wait_s=cut.wait_s)
        self._record(call, turn, _BUDGET, answer, Usage(0, 0), cut.code)
        return refusal(_BUDGET, f"budget exceeded: {why}", cut.code)

    def _fault(self, message: str) -> None:
        """Note the phase's first upstream fault (lock held): the trial is settled."""
        self._meter.fault = self._meter.fault or message
        self.settled.set()

    def _over(self, message: str) -> str:
        """Note the phase's overspent budget (lock held): the trial is settled."""
        self._meter.budget = self._meter.budget or message
        self.settled.set()
        return self._meter.budget

    def _over_tokens(self) -> str:
        """Note the phase's spent token budget (lock held): the trial is settled."""
        m = self._meter
        if m.budget is None:
            m.tokens_over = True
        return self._over(
            f"{m.input_tokens + m.output_tokens} tokens used: the limit is {self.limits.tokens}"
        )

    def _before_call(self) -> tuple[int, str, str] | None:
        m, lim = self._meter, self.limits
        if m.closed:
            return 401, _ENDED, "token"
        if m.fault is not None:
            return 502, f"upstream fault earlier in this phase: {m.fault}", "upstream"
        if m.budget is not None:
            return _BUDGET, f"budget exceeded: {m.budget}", "budget"
        if lim.turns is not None and m.turns >= lim.turns:
            why = self._over(f"turn {m.turns + 1} refused: the limit is {lim.turns} turns")
            return _BUDGET, f"budget exceeded: {why}", "budget"
        used = m.input_tokens + m.output_tokens
        if lim.tokens is not None and used >= lim.tokens:
            why = self._over_tokens()
            return _BUDGET, f"budget exceeded: {why}", "budget"
        return None

    def _answer(self, body: bytes, doc: dict[str, Any], turn: int) -> Answer:
        if self._replay is None:
            client = self._gw.client(self.upstream)
            if self._lease is None:  # its key was set after the phase opened
                raise UpstreamFault("the phase holds no upstream slots")
            return client.call(doc, before_send=self._still_open, lease=self._lease)
        key = request_key(body)
        if turn > len(self._replay) or self._replay[turn - 1].request_key != key:
            raise UpstreamFault(
                f"trajectory diverged at turn {turn}: the request differs from the recorded "
                f"run's ({self._replayed_from})"
            )
        rec = self._replay[turn - 1]
        if rec.refused == _CUT:  # cut again, so the replayed trial settles as it did
            bound = self.upstream.response_seconds
            raise ResponseTooLong(bound, rec.response, stream=rec.stream, wait_s=0.0)
        if rec.refused == _TOO_LARGE:
            raise ResponseTooLarge(RESPONSE_BYTES, rec.response, stream=rec.stream, wait_s=0.0)
        return Answer(status=rec.status, body=rec.response, stream=rec.stream, wait_s=0.0)

    def _still_open(self) -> None:
        """Refuse to send a call whose phase ended while it waited for a slot (not paid)."""
        with self._lock:
            if self._meter.closed:
                raise _PhaseEnded

    def _metered(self, call: Call, answer: Answer, turn: int, g: Grant) -> Reply:
        usage = Usage(0, 0)
        end = time.monotonic()
        if answer.status < 300:
            try:
                answered, usage = meter(
                    answer.body, stream=answer.stream, pinned=self.upstream.model
                )
                if not self._overspends(usage):  # over budget: the agent's, whatever served it
                    _within(usage, g, replayed=self._replay is not None)
            except UpstreamFault as fault:
                with self._lock:
                    self._fault(str(fault))
                    self._meter.input_tokens += usage.input_tokens
                    self._meter.output_tokens += usage.output_tokens
                    self._meter.waits.append((end - answer.wait_s, end))
                self._record(call, turn, 502, answer, usage, "upstream")
                return refusal(502, f"upstream fault: {fault}", "upstream")
            with self._lock:
                self._meter.answered = answered
        with self._lock:
            m = self._meter
            m.input_tokens += usage.input_tokens
            m.output_tokens += usage.output_tokens
            m.waits.append((end - answer.wait_s, end))
            used = m.input_tokens + m.output_tokens
            over = self.limits.tokens is not None and used > self.limits.tokens
            if over:
                self._over_tokens()
        if over:
            self._record(call, turn, _BUDGET, answer, usage, "budget")
            return refusal(_BUDGET, f"budget exceeded: {self._meter.budget}", "budget")
        self._record(call, turn, answer.status, answer, usage, None)
        ctype = "text/event-stream" if answer.stream else "application/json"
        return Reply(status=answer.status, body=answer.body, content_type=ctype)

    def _overspends(self, usage: Usage) -> bool:
        """Whether charging ``usage`` takes the phase over its token budget."""
        lim = self.limits.tokens
        if lim is None:
            return False
        with self._lock:
            used = self._meter.input_tokens + self._meter.output_tokens
        return used + usage.input_tokens + usage.output_tokens > lim

    def _put(self, data: bytes) -> str:
        d = digest_bytes(data)
        self.blobs[d] = data
        return d

    def _record(
        self,
        call: Call,
        turn: int,
        status: int,
        answer: Answer | None,
        usage: Usage,
        refused: str | None,
    ) -> None:
        rec = ModelCall(
            turn=turn,
            request_blob=self._put(call.body),
            response_blob=self._put(answer.body) if answer is not None else None,
            status=status,
            stream=answer.stream if answer is not None else False,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            upstream_wait_s=round(answer.wait_s, 6) if answer is not None else 0.0,
            refused=refused,
        )
        with self._lock:
            self._meter.calls.append(rec)
            self._meter.response_bytes += len(answer.body) if answer is not None else 0

    def _refused(
        self,
        call: Call,
        status: int,
        message: str,
        code: str,
        *,
        turn: int = 0,
        locked: bool = False,
    ) -> Reply:
        if not locked:
            with self._lock:
                return self._refused(call, status, message, code, turn=turn, locked=True)
        m = self._meter
        m.refused += 1
        m.refused_bytes += len(call.body)
        if m.refused > REFUSED_CALLS or m.refused_bytes > REFUSED_BYTES:
            # Past the bound: the trial is settled as the agent's, the body is not kept.
            why = self._over(
                f"{m.refused} refused calls ({m.refused_bytes} bytes): the limit is "
                f"{REFUSED_CALLS} refused calls or {REFUSED_BYTES} bytes of them per phase"
            )
            return refusal(_BUDGET, f"budget exceeded: {why}", "refused_calls")
        m.calls.append(
            ModelCall(turn=turn, request_blob=self._put(call.body), status=status, refused=code)
        )
        return refusal(status, message, code)

    # -- the end of the phase ---------------------------------------------------------------
    def usage(self) -> ModelUsage:
        """Return what was measured so far (the record of the phase once it is closed)."""
        price = self.upstream.price
        with self._lock:
            m = self._meter
            cost = (
                m.input_tokens * price.input_per_mtok + m.output_tokens * price.output_per_mtok
            ) / 1e6
            return ModelUsage(
                upstream=self.upstream.base_url,
                model=self.upstream.model,
                answered_model=m.answered,
                turns=m.turns,
                input_tokens=m.input_tokens,
                output_tokens=m.output_tokens,
                cost=round(cost, 9),
                upstream_wait_s=round(union_seconds(m.waits), 6),
                calls=tuple(sorted(m.calls, key=lambda c: (c.turn == 0, c.turn))),
                fault=m.fault,
                budget=(
                    f"{m.input_tokens + m.output_tokens} tokens used: the limit is "
                    f"{self.limits.tokens}"
                    if m.tokens_over
                    else m.budget
                ),
                replayed_from=self._replayed_from,
            )

    def close(self) -> ModelUsage:
        """End the phase: refuse what comes next, charge what was sent, return the record.

        A call arriving now, or still waiting for an upstream slot, is refused and never
        forwarded. A call already sent upstream is paid for: close waits for it (bounded by
        the upstream's own time bounds) so that it is charged and in the transcript.
        """
        with self._lock:
            self._meter.closed = True
            self._settled_cv.notify_all()
            if self._lease is not None:  # calls waiting for a slot or the rate give up
                self._lease.ended.set()
        self._gw.revoke(self)
        for ep in self._endpoints:
            ep.close()
        bound = call_bound(self.upstream) + 30.0
        with self._lock:
            if not self._settled_cv.wait_for(lambda: self._meter.in_flight == 0, bound):
                self._fault(f"calls still in flight {bound:g}s after the agent phase ended")
            lease, self._lease = self._lease, None
        if lease is not None:
            self._gw.client(self.upstream).leases.give_back(lease)
        return self.usage()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Gateway:
    """The run's model gateway: upstream clients (shared limits), sessions, tokens."""

    def __init__(
        self,
        *,
        keys: Mapping[str, str] | None = None,
        replay_only: bool = False,
        replay_arms: Collection[str] = (),
    ) -> None:
        self.replay_only = replay_only
        """Model replay: every session is served from recorded calls, never the upstream."""
        self.replay_arms = frozenset(replay_arms)
        """Arms (label prefixes) served only from recorded calls; the others call upstream."""
        self._keys = keys  # None: read the host environment when a client is first needed
        self.socket_dir = tempfile.mkdtemp(prefix="hgw-")
        os.chmod(self.socket_dir, 0o700)
        self._clients: dict[str, UpstreamClient] = {}
        self._leases: dict[tuple[tuple[str, str], tuple[int, float | None, int]], Leases] = {}
        self._live: dict[str, str] = {}
        self._revoked: set[str] = set()
        self._lock = threading.Lock()
        self._replays: dict[str, tuple[str, list[RecordedCall]]] = {}
        self._link: LinkServer | None = None

    @property
    def link(self) -> LinkAddress | None:
        """Where Dask workers reach this gateway (set by :meth:`serve_link`)."""
        return self._link.address if self._link is not None else None

    def serve_link(self, scope: LinkScope, host: str) -> LinkAddress:
        """Also serve the sessions of ``scope``'s trials to Dask workers, on ``host``.

        Raises:
            InfraError: the link cannot listen on ``host``.
        """
        from harness.gateway._link import LinkServer

        if self._link is None:
            self._link = LinkServer(self, scope, host)
        return self._link.address

    def client(self, upstream: Upstream) -> UpstreamClient:
        """Return the one client (and so the one concurrency/rate limit) of ``upstream``.

        Raises:
            UpstreamFault: the key variable of ``upstream`` is not set.
        """
        ident = digest_json(upstream.model_dump(mode="json"))
        with self._lock:
            client = self._clients.get(ident)
            if client is None:
                key = (os.environ if self._keys is None else self._keys).get(upstream.key_env)
                if not key:
                    raise UpstreamFault(f"environment variable {upstream.key_env} is not set")
                # One account's upstreams (say, two arms' releases differing only in price)
                # share its slots and rate (check_accounts made their limits the same).
                shared = (account(upstream), _limits(upstream))
                leases = self._leases.get(shared)
                client = self._clients[ident] = UpstreamClient(upstream, key, leases)
                self._leases[shared] = client.leases
            return client

    def add_replay(self, label: str, calls: list[RecordedCall], source: str) -> None:
        """Serve the session labelled ``label`` from ``calls`` instead of the upstream."""
        with self._lock:
            self._replays[label] = (source, calls)

    def open_session(
        self,
        label: str,
        upstream: Upstream,
        limits: Limits,
        *,
        tcp: bool = False,
        listen: bool = True,
    ) -> Session:
        """Open the gateway of one agent phase: a fresh socket and token.

        ``listen=False``: no socket here (a Dask worker listens and forwards over the link).
        """
        with self._lock:
            replay = self._replays.get(label)
        if replay is None and (self.replay_only or label.split("--")[0] in self.replay_arms):
            replay = ("no recorded calls for this trial", [])
        session = Session(
            self,
            label,
            upstream,
            limits,
            replay=replay[1] if replay is not None else None,
            replayed_from=replay[0] if replay is not None else None,
            tcp=tcp,
            listen=listen,
        )
        with self._lock:
            self._live[session.token] = label
        return session

    def revoke(self, session: Session) -> None:
        """End ``session``'s token: later calls with it are refused everywhere."""
        with self._lock:
            self._live.pop(session.token, None)
            self._revoked.add(session.token)

    def token_problem(self, token: str) -> str:
        """Why ``token`` is refused by a session it does not belong to."""
        with self._lock:
            if token in self._revoked:
                return _ENDED
            if token in self._live:
                return "token refused: it belongs to another trial"
        return "missing or unknown bearer token"

    def close(self) -> None:
        """Stop the link, close upstream connections and remove the socket folder."""
        if self._link is not None:
            self._link.close()
            self._link = None
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            c.close()
        shutil.rmtree(self.socket_dir, ignore_errors=True)

    @contextmanager
    def serving(self) -> Iterator[Gateway]:
        """Make this the process's active gateway (what trials open sessions on)."""
        _ACTIVE.append(self)
        try:
            yield self
        finally:
            _ACTIVE.remove(self)
            self.close()


def phase_error(usage: ModelUsage) -> InfraError | None:
    """Return the infrastructure error of a phase whose upstream failed, if it did."""
    return InfraError(usage.fault, reason="upstream") if usage.fault else None
