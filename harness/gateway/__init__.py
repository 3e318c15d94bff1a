"""The model gateway: how an agent reaches its model under the harness's control.

The agent in the sandbox sees ``OPENAI_BASE_URL`` (the sealed view's one relayed endpoint)
and a per-trial token, never the real key. The gateway forwards each chat-completions call
to the release's upstream with the key, enforces the case's turn and token budgets from the
upstream's own usage, records every request and response (the transcript), and turns
upstream faults into ``infra_error``. Model replay serves a recorded run's responses instead.
Under ``--executor dask`` workers reach the same gateway over an authenticated link.
"""

from harness.gateway._gateway import (
    Gateway,
    RecordedCall,
    Session,
    account,
    active_gateway,
    check_accounts,
    check_keys,
    phase_error,
    request_key,
)
from harness.gateway._http import CHAT_PATH
from harness.gateway._link import (
    LinkAddress,
    LinkScope,
    RemoteSession,
    link_host,
    session_label,
)
from harness.gateway._upstream import UpstreamFault

__all__ = [
    "CHAT_PATH",
    "Gateway",
    "LinkAddress",
    "LinkScope",
    "RecordedCall",
    "RemoteSession",
    "Session",
    "UpstreamFault",
    "account",
    "active_gateway",
    "check_accounts",
    "check_keys",
    "link_host",
    "phase_error",
    "request_key",
    "session_label",
]
