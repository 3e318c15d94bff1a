"""The token reservation of one call, and the union of upstream waits (pure, no I/O).

A call is forwarded only once its *maximum* cost is reserved against the phase's token
budget, under the session's lock, so concurrent calls cannot each pass a check made before
any of them was metered. The maximum cost is a bound on the prompt (the request body's size
in bytes: a byte-level tokenizer never makes more tokens than bytes of text, and the JSON
keys of each message outweigh a chat template's special tokens; plus :data:`IMAGE_TOKENS`
per image part, whose cost its bytes do not bound) plus the completion
(``max_tokens`` × ``n``, which the gateway writes into the forwarded body, clamped to what
remains). After the call the reservation is released and the upstream's own usage is
charged. A request without ``max_tokens`` gets one only when what remains is at most
:data:`SAFE_MAX_TOKENS` per choice; otherwise it is forwarded as sent, alone, holding
everything that remains (providers refuse a ``max_tokens`` over their model's maximum
output, which the gateway does not know).

When the bound does not fit in what remains:

* other calls of the phase are in flight: the call waits for them to settle (their unused
  reservations come back), it is not refused;
* none is: the call is forwarded alone with its completion clamped to everything that
  remains and nothing else may start until it settles. Its prompt is the one cost that
  cannot be known before it is served (no tokenizer for an arbitrary model); if the
  upstream's usage then exceeds the budget, the response is withheld and the trial ends
  ``budget_exceeded``. This keeps a legitimate agent near its budget from being refused on
  a pessimistic bound, and limits any overshoot to one lone call's prompt.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FORWARDED_FIELDS",
    "FORWARDED_PARTS",
    "IMAGE_TOKENS",
    "SAFE_MAX_TOKENS",
    "WAIT",
    "Grant",
    "grant",
    "image_parts",
    "refused_fields",
    "refused_parts",
    "request_bounds",
    "union_seconds",
]

_LIMIT_FIELDS = ("max_tokens", "max_completion_tokens")
FORWARDED_FIELDS = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "n",
        "stream",
        "stream_options",
        "temperature",
        "top_p",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "seed",
        "user",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "functions",
        "function_call",
        "response_format",
        "reasoning_effort",
    }
)
"""The request fields the gateway forwards: OpenAI chat-completions fields whose cost is
bounded by what it reserves and meters. Every other field is refused (deny by default):
providers read fields of their own that override ``max_tokens`` (llama.cpp ``n_predict``,
Ollama ``num_predict``, ``max_new_tokens``, vLLM ``min_tokens``…) or are billed apart
(``service_tier``, ``audio``, ``web_search_options``, ``store``)."""
IMAGE_TOKENS = 1600
"""Prompt tokens reserved per image part (``image_url``) on top of the body's bytes: an
image costs tokens its URL's bytes do not bound. OpenAI's gpt-4o/gpt-4.1 high detail costs
at most 1,445, Anthropic's largest image about 1,600, Gemini 258 (models priced with
multiplied image tokens, such as gpt-4o-mini, cost more: their overshoot is still caught
when the call settles)."""
SAFE_MAX_TOKENS = 4096
"""Largest ``max_tokens`` the gateway writes into a request that had none: every chat
model accepts it (a provider refuses a value over its model's maximum output)."""


@dataclass(frozen=True)
class Grant:
    """What one admitted call may cost: its reservation and the body to forward."""

    tokens: int
    """Tokens reserved until the call settles (0 without a token budget)."""
    completion_cap: int | None
    """Most completion tokens the upstream may serve for it (``None``: no budget)."""
    doc: dict[str, Any]
    """The request to forward, ``max_tokens``/``n`` clamped to the reservation."""


WAIT = None
""":func:`grant`'s answer when the call must wait for the phase's calls in flight."""


def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def refused_fields(doc: dict[str, Any]) -> list[str]:
    """Return the request's fields the gateway does not forward (sorted), if any."""
    return sorted(k for k in doc if k not in FORWARDED_FIELDS)


FORWARDED_PARTS = frozenset({"text", "image_url", "refusal"})
"""The message content part types the gateway forwards: text and refusals, which the
body's bytes bound, and images, which reserve :data:`IMAGE_TOKENS` each. Every other type
is refused (deny by default): a ``file`` part's PDF is billed as its extracted text plus an
image of every page, tens of thousands of tokens from a few kilobytes, and audio by its
length; neither is bounded by anything the gateway can count before the call."""


def refused_parts(doc: dict[str, Any]) -> list[str]:
    """Return the content part types of the request's messages the gateway does not forward.

    A part that is not an object with a string ``type`` is named by its JSON type.
    """
    messages = doc.get("messages")
    out: set[str] = set()
    for m in messages if isinstance(messages, list) else ():
        content = m.get("content") if isinstance(m, dict) else None
        for part in content if isinstance(content, list) else ():
            kind = part.get("type") if isinstance(part, dict) else None
            if not isinstance(kind, str):
                out.add(f"<{type(part).__name__} without a type>")
            elif kind not in FORWARDED_PARTS:
                out.add(kind)
    return sorted(out)


def image_parts(doc: dict[str, Any]) -> int:
    """Count the image parts of the request's messages (each reserves :data:`IMAGE_TOKENS`)."""
    messages = doc.get("messages")
    count = 0
    for m in messages if isinstance(messages, list) else ():
        content = m.get("content") if isinstance(m, dict) else None
        for part in content if isinstance(content, list) else ():
            if isinstance(part, dict) and part.get("type") == "image_url":
                count += 1
    return count


def request_bounds(doc: dict[str, Any]) -> tuple[int, int | None] | str:
    """Return ``(n, max_tokens)`` the agent asked for, or why the request is malformed.

    Both must be positive integers when present (an upstream that coerces ``"5"`` or
    ``5.0`` would serve what no check saw); ``stream`` must be a boolean and
    ``stream_options`` an object, for the same reason. ``max_tokens`` is the smaller of
    ``max_tokens`` and ``max_completion_tokens``.
    """
    stream = doc.get("stream")
    if stream is not None and not isinstance(stream, bool):
        # A lenient server streams on 1 or "true": the gateway would wait for JSON.
        return f"stream must be true or false, not {stream!r}"
    opts = doc.get("stream_options")
    if opts is not None and not isinstance(opts, dict):
        return f"stream_options must be an object, not {opts!r}"
    n = doc.get("n", 1)
    if n is None:
        n = 1
    if not _positive_int(n):
        return f"n must be a positive integer, not {n!r}"
    caps: list[int] = []
    for name in _LIMIT_FIELDS:
        v = doc.get(name)
        if v is None:
            continue
        if not _positive_int(v):
            return f"{name} must be a positive integer, not {v!r}"
        caps.append(v)
    return n, min(caps) if caps else None


def grant(
    doc: dict[str, Any],
    *,
    body_bytes: int,
    limit: int | None,
    used: int,
    reserved: int,
    in_flight: int,
) -> Grant | None:
    """Reserve one call's maximum cost, or return :data:`WAIT`.

    ``used`` is what settled calls cost, ``reserved`` what calls in flight hold. The caller
    has checked that the budget is not spent (``used < limit``) and holds the lock.
    """
    bounds = request_bounds(doc)
    assert not isinstance(bounds, str), "request_bounds() is checked before grant()"
    n, asked = bounds
    if limit is None:
        return Grant(tokens=0, completion_cap=None, doc=doc)
    remaining = limit - used - reserved
    prompt = body_bytes + IMAGE_TOKENS * image_parts(doc)
    fits = prompt + n <= remaining  # the prompt's bound and a token per choice
    if fits:
        per = (remaining - prompt) // n
    elif in_flight:
        return WAIT
    else:  # alone: everything left is reserved (nothing else starts until it settles)
        n = min(n, remaining)
        per = remaining // n
    if asked is not None:
        per = min(per, asked)
    elif per > SAFE_MAX_TOKENS:
        # The agent set no bound and the budget allows more than every model accepts as
        # max_tokens (a provider refuses one over its model's maximum): the call is left
        # as sent and runs alone, holding everything that remains.
        if in_flight:
            return WAIT
        return Grant(tokens=remaining, completion_cap=None, doc=doc)
    tokens = prompt + per * n if fits else remaining
    return Grant(tokens=tokens, completion_cap=per * n, doc=_clamped(doc, per, n))


def _clamped(doc: dict[str, Any], per: int, n: int) -> dict[str, Any]:
    out = dict(doc)
    present = [name for name in _LIMIT_FIELDS if out.get(name) is not None]
    # A request naming neither gets max_tokens, the field every compatible server reads.
    for name in present or ["max_tokens"]:
        out[name] = per
    if n != doc.get("n", 1) or "n" in doc:
        out["n"] = n
    return out


def union_seconds(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of ``(start, end)`` intervals: overlapping waits count once."""
    total = 0.0
    end = float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total
