"""The upstream side of the gateway: forward one call, bounded, retried, metered.

Faults of the provider are never the agent's: a refused connection, a 5xx or a 429 after
the bounded retries, no answer within the release's bound, an answer that stops arriving
for a whole bound, a response that is not the wire format, a stream cut short, a missing
``usage``, or another model than the pinned one all raise :class:`UpstreamFault` (an
``InfraError``). Retries and backoff are urllib3's ``Retry``; the shared concurrency and
rate limit live here, one per upstream.

The response bound tells the provider's fault from the agent's by progress. An upstream
that sent nothing (no status line within the bound, or only keep-alives: SSE comments,
whitespace), or that stopped sending for a whole bound, failed: :class:`UpstreamFault`.
An upstream that answered in time and was still sending when the bound ran out was
serving a completion longer than the release allows (a huge ``max_tokens``, a stream that
goes on): the call is cut and :class:`ResponseTooLong` raised, which the gateway settles
as the agent's fail.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import urllib3
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.exceptions import MaxRetryError, ReadTimeoutError

from harness.errors import InfraError
from harness.project import Upstream

__all__ = [
    "RESPONSE_BYTES",
    "Answer",
    "CutAnswer",
    "Lease",
    "Leases",
    "ResponseTooLarge",
    "ResponseTooLong",
    "UpstreamClient",
    "UpstreamFault",
    "Usage",
    "call_bound",
    "meter",
]

RESPONSE_BYTES = 32 << 20
"""Most bytes of one answer the gateway reads and keeps: a success answer past it is cut
(:class:`ResponseTooLarge`, the agent's overspending), an error answer past it is the
provider's fault. A chat completion is kilobytes; one of 85 MB (many choices, long
log-probabilities) filled the store and blocked the gate."""
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_AGENT_STATUS = frozenset({400, 413, 422})
"""Upstream refusals of the agent's own request (passed back to it, not infrastructure)."""


class UpstreamFault(InfraError):
    """The upstream failed (connection, status, time bound, format, usage, model)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, reason="upstream")


class CutAnswer(Exception):
    """A success answer the gateway cut: the agent asked for more than one call may bring.

    Its overspending, never the provider's fault: the trial is settled as the agent's
    ``budget_exceeded`` and what arrived is kept (never metered).
    """

    code = ""
    """The refusal code the agent sees and the transcript keeps."""

    def __init__(self, message: str, body: bytes, *, stream: bool, wait_s: float) -> None:
        super().__init__(message)
        self.body = body
        """What had arrived when the call was cut (a partial body: never metered)."""
        self.stream = stream
        self.wait_s = wait_s
        """Seconds from queueing the call to the cut."""


class ResponseTooLong(CutAnswer):
    """The upstream answered in time but was still sending when the response bound ran out.

    The completion the agent asked for takes longer than the release's
    ``response_seconds`` (not a fault of the provider, which was answering).
    """

    code = "response_seconds"

    def __init__(self, bound: float, body: bytes, *, stream: bool, wait_s: float) -> None:
        super().__init__(
            f"the completion was still arriving when the upstream's {bound:g}s response bound "
            "(response_seconds) ran out, and was cut: ask for a shorter completion "
            "(max_tokens)",
            body,
            stream=stream,
            wait_s=wait_s,
        )
        self.bound = bound


class ResponseTooLarge(CutAnswer):
    """A success answer grew past :data:`RESPONSE_BYTES` and was cut.

    The agent asked for more than the harness keeps of one answer (many choices, long
    log-probabilities).
    """

    code = "response_bytes"

    def __init__(self, limit: int, body: bytes, *, stream: bool, wait_s: float) -> None:
        super().__init__(
            f"the answer grew past {limit} bytes (RESPONSE_BYTES) and was cut: ask for less "
            "(n, max_tokens, logprobs)",
            body,
            stream=stream,
            wait_s=wait_s,
        )
        self.limit = limit


class _TooBig(Exception):
    """Raised inside :meth:`UpstreamClient._send`: a success answer past the byte bound."""

    def __init__(self, body: bytes) -> None:
        super().__init__()
        self.body = body


class _Cut(Exception):
    """Raised inside :meth:`UpstreamClient._send`: still answering past the bound."""

    def __init__(self, body: bytes) -> None:
        super().__init__()
        self.body = body


@dataclass(frozen=True)
class Usage:
    """Tokens the upstream says it served for one call."""

    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class Answer:
    """One upstream response, read whole."""

    status: int
    body: bytes
    stream: bool
    wait_s: float
    """Seconds from queueing the call to the last byte, retries and backoff included."""


def _usage(doc: Any) -> Usage | None:
    usage = doc.get("usage") if isinstance(doc, dict) else None
    if not isinstance(usage, dict):
        return None
    pt, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if isinstance(pt, int) and isinstance(ct, int) and _count(pt) and _count(ct):
        return Usage(input_tokens=pt, output_tokens=ct)
    return None


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _events(body: bytes) -> tuple[list[Any], bool]:
    """Return the JSON payloads of an SSE body and whether the ``[DONE]`` event closed it."""
    events: list[Any] = []
    done = False
    for raw in body.splitlines():
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            done = True
            continue
        events.append(json.loads(data))
    return events, done


def meter(body: bytes, *, stream: bool, pinned: str) -> tuple[str, Usage]:
    """Return the model id and usage of a successful completion (plain JSON or an SSE stream).

    Raises:
        UpstreamFault: not the wire format, a stream cut short, no usage, another model.
    """
    try:
        if stream:
            events, done = _events(body)
            if not done:
                raise UpstreamFault("upstream stream cut short (no [DONE] event)")
        else:
            events = [json.loads(body)]
    except (ValueError, UnicodeDecodeError) as exc:
        raise UpstreamFault(f"upstream answered something other than JSON: {exc}") from None
    models = {e.get("model") for e in events if isinstance(e, dict) and e.get("model")}
    usages = [u for u in map(_usage, events) if u is not None]
    if not usages:
        raise UpstreamFault("upstream response carries no usage: tokens cannot be metered")
    if models != {pinned}:
        answered = ", ".join(sorted(map(str, models))) or "no model id"
        raise UpstreamFault(f"upstream answered with {answered}, not the pinned model {pinned}")
    return pinned, usages[-1]


def _progress(body: bytes) -> bool:
    """Whether an answer so far holds any of the completion, not only keep-alives.

    Providers keep a slow answer's connection open with SSE comments (``: PROCESSING``)
    or, for a plain answer, whitespace before the JSON: an answer of nothing else when the
    bound runs out is the provider's silence, never a long completion of the agent's.
    """
    return any(line.strip() and not line.lstrip().startswith(b":") for line in body.splitlines())


def call_bound(spec: Upstream) -> float:
    """Longest a call already sent to ``spec`` can take: every try, its bound and backoff.

    A try is its connect (at most 10 s) and its answer: bytes until the bound, then one more
    wait of at most a bound for the byte that finds it over (cut) or for none (stalled).
    """
    return (spec.retries + 1) * (2 * spec.response_seconds + 10.0) + 8.0 * spec.retries


def _fault(exc: Urllib3Error, bound: float, *, answering: bool) -> UpstreamFault:
    """Translate a urllib3 failure (the one foreign exception boundary of the gateway).

    ``answering``: the status line had arrived (a read timeout then is a stalled answer).
    """
    cause = exc.reason if isinstance(exc, MaxRetryError) and exc.reason is not None else exc
    if isinstance(cause, ReadTimeoutError | TimeoutError):
        if answering:
            return UpstreamFault(f"upstream stopped sending mid-answer for the {bound:g}s bound")
        return UpstreamFault(f"upstream slower than the {bound:g}s bound")
    return UpstreamFault(f"upstream unreachable: {type(cause).__name__}: {cause}")


class _Rate:
    """At most ``per_minute`` call starts per minute, evenly spaced."""

    def __init__(self, per_minute: float | None) -> None:
        self._interval = 60.0 / per_minute if per_minute else 0.0
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self, cancel: threading.Event) -> bool:
        """Wait for this call's turn; False if ``cancel`` was set first (the turn is spent)."""
        if not self._interval:
            return True
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self._interval
        return not cancel.wait(max(0.0, start - now))

    def ready(self) -> None:
        """Wait until a call could start at once (without taking its turn)."""
        with self._lock:
            due = self._next
        time.sleep(max(0.0, due - time.monotonic()))


class Lease:
    """The upstream slots one agent phase holds for itself while it is open.

    ``share`` slots and its lane's part of the rate limit: the phase's calls wait only
    behind its own, never behind another trial's.
    """

    def __init__(self, share: int, lane: int, rate: _Rate) -> None:
        self.share = share
        self.lane = lane
        self.slots = threading.BoundedSemaphore(share)
        self.rate = rate
        self.ended = threading.Event()
        """Set when the phase ends: calls still waiting for a slot or the rate give up."""

    def turn(self) -> bool:
        """Take a slot and wait for the rate; False (holding nothing) once the phase ended."""
        while not self.slots.acquire(timeout=0.05):
            if self.ended.is_set():
                return False
        if self.ended.is_set() or not self.rate.wait(self.ended):
            self.slots.release()
            return False
        return True


class Leases:
    """The run's ``concurrency`` slots, leased ``share`` at a time to open agent phases.

    A phase takes its lease when it opens, before its agent starts (waiting then is not the
    agent's time), and gives it back when it closes: trials running at once never share a
    slot, so what one trial does with the model endpoint cannot slow another's calls (a
    shared first-come semaphore let one trial starve another into its timeout; slots
    shared fairly still made a trial's speed depend on the others'). Leases are granted in
    the order phases asked for them.

    The rate limit is split into ``concurrency // share`` lanes, one per lease that can be
    open at once, each with ``share / concurrency`` of ``per_minute`` and a clock that
    outlives the leases holding it: a lease handed over does not restart its lane's spacing
    (the next phase would otherwise call at once after the last one's calls, over the
    provider's limit). A phase waits out its lane's spacing as part of taking the lease,
    before its agent's clock, so its first call is never held by an earlier phase's.
    """

    def __init__(self, concurrency: int, share: int, per_minute: float | None) -> None:
        self.concurrency = concurrency
        self.share = max(1, min(share, concurrency))
        lanes = concurrency // self.share
        part = per_minute * self.share / concurrency if per_minute else None
        self._rates = [_Rate(part) for _ in range(lanes)]
        self._idle = list(range(lanes))
        self._queue: list[object] = []
        self._cv = threading.Condition()

    def take(self) -> Lease:
        """Wait for a free lane, in turn, and its spacing; return it as a phase's lease."""
        turn = object()
        with self._cv:
            self._queue.append(turn)
            try:
                while self._queue[0] is not turn or not self._idle:
                    self._cv.wait()
            finally:
                self._queue.remove(turn)
                self._cv.notify_all()
            lane = self._idle.pop(0)
        lease = Lease(self.share, lane, self._rates[lane])
        lease.rate.ready()
        return lease

    def give_back(self, lease: Lease) -> None:
        """Return ``lease``'s lane (once its calls are over)."""
        with self._cv:
            self._idle.append(lease.lane)
            self._cv.notify_all()


class _Retry(urllib3.Retry):
    """urllib3's ``Retry`` with its backoff before the first retry as well.

    urllib3 retries the first failure at once, which a provider's rate limit refuses
    again: the waits are now ``backoff_factor`` × 1, 2, 4… up to ``backoff_max``.
    """

    def get_backoff_time(self) -> float:
        return max(self.backoff_factor, super().get_backoff_time())


class UpstreamClient:
    """Calls one upstream with its key; its concurrency and rate limit leased to phases.

    ``leases``: the account's, when other upstreams of the run call the same account
    (see :func:`harness.gateway.account`); by default its own.
    """

    def __init__(self, spec: Upstream, key: str, leases: Leases | None = None) -> None:
        self.spec = spec
        self._key = key
        self._url = spec.base_url.rstrip("/") + "/chat/completions"
        retries = _Retry(
            total=spec.retries,
            connect=spec.retries,
            read=0,  # the call may have reached the model: never resend it after a read error
            other=0,
            status=spec.retries,
            redirect=0,
            status_forcelist=_RETRY_STATUS,
            allowed_methods=None,  # POST included: a 429/5xx/refused call was not served
            backoff_factor=0.5,
            backoff_max=8.0,
            respect_retry_after_header=False,  # keep the retry time bounded by our numbers
            raise_on_status=False,
        )
        self._pool = urllib3.PoolManager(
            num_pools=2, maxsize=spec.concurrency, block=False, retries=retries
        )
        self.leases = leases or Leases(spec.concurrency, spec.trial_share, spec.requests_per_minute)

    def call(
        self,
        doc: dict[str, Any],
        before_send: Callable[[], None] | None = None,
        *,
        lease: Lease,
    ) -> Answer:
        """Forward one chat-completions request; return the whole response.

        ``before_send`` runs once the call holds a slot of the phase's ``lease``, right
        before it is sent: an exception it raises propagates and nothing is sent.

        The response bound runs from the moment the call is sent (after its slot and the
        rate limit, which the phase's own other calls decide).

        Raises:
            UpstreamFault: refused connection, 5xx/429 after retries, no answer within the
                bound or an answer stalled for a whole bound, or an authentication/not-found
                status (the release's key or URL is wrong).
            ResponseTooLong: a success answer still arriving when the bound ran out (cut).
        """
        stream = doc.get("stream") is True
        if stream:
            # Usage of a stream arrives only in a final chunk, and only when asked for.
            opts = doc.get("stream_options")
            doc = dict(doc, stream_options={**(opts if isinstance(opts, dict) else {})})
            doc["stream_options"]["include_usage"] = True
        body = json.dumps(doc).encode()
        bound = self.spec.response_seconds
        t0 = time.monotonic()
        if not lease.turn():
            if before_send is not None:
                before_send()  # says why (the phase ended)
            raise UpstreamFault("the phase ended before the call could be sent")
        try:
            if before_send is not None:
                before_send()
            try:
                status, data = self._send(body, bound)
            except _Cut as cut:
                wait = time.monotonic() - t0
                raise ResponseTooLong(bound, cut.body, stream=stream, wait_s=wait) from None
            except _TooBig as big:
                wait = time.monotonic() - t0
                raise ResponseTooLarge(
                    RESPONSE_BYTES, big.body, stream=stream, wait_s=wait
                ) from None
        finally:
            lease.slots.release()
        wait = time.monotonic() - t0
        if status in _RETRY_STATUS:
            raise UpstreamFault(f"upstream answered {status} after {self.spec.retries} retries")
        if status >= 300 and status not in _AGENT_STATUS:
            raise UpstreamFault(f"upstream answered {status}: {data[:200]!r}")
        return Answer(status=status, body=data, stream=stream and status < 300, wait_s=wait)

    def _send(self, body: bytes, bound: float) -> tuple[int, bytes]:
        headers = {
            "Authorization": f"Bearer {self._key}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        # The read timeout bounds each wait for a byte; the total is checked as bytes arrive.
        timeout = urllib3.Timeout(connect=min(10.0, bound), read=bound)
        sent = time.monotonic()
        answering = False
        try:
            resp = self._pool.request(
                "POST",
                self._url,
                body=body,
                headers=headers,
                timeout=timeout,
                preload_content=False,
            )
            if time.monotonic() - sent > bound:  # the status line came too late
                resp.close()
                raise UpstreamFault(f"upstream slower than the {bound:g}s bound")
            answering = True
            chunks: list[bytes] = []
            size = 0
            # read1: whatever has arrived, so the bound is checked as the answer flows.
            while chunk := resp.read1(1 << 16):
                chunks.append(chunk)
                size += len(chunk)
                if size > RESPONSE_BYTES:
                    resp.close()
                    if resp.status < 300:
                        raise _TooBig(b"".join(chunks)[:RESPONSE_BYTES])
                    raise UpstreamFault(f"upstream error answer over {RESPONSE_BYTES} bytes")
                if time.monotonic() - sent > bound:
                    resp.close()
                    if resp.status < 300 and _progress(b"".join(chunks)):
                        raise _Cut(b"".join(chunks))
                    raise UpstreamFault(f"upstream slower than the {bound:g}s bound")
            resp.release_conn()
        except Urllib3Error as exc:
            raise _fault(exc, bound, answering=answering) from None
        return resp.status, b"".join(chunks)

    def close(self) -> None:
        """Close pooled connections."""
        self._pool.clear()
