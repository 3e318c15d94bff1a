"""The one endpoint relay: how a backend lets a sandboxed command reach ``view.endpoint``.

The host unix socket is bound into the sandbox at :data:`ENDPOINT_SOCKET`; the command is
wrapped by :func:`relay_argv` so that :mod:`harness.sandbox._relay_main` (standard library
only, run by the system's ``/usr/bin/python3``) listens on ``127.0.0.1:``:data:`ENDPOINT_PORT`
inside the otherwise empty network namespace, forwards each connection to the socket and
execs the command with ``HARNESS_ENDPOINT`` set. Nothing else is reachable. The relay pipes
at most :data:`RELAY_CONNECTIONS` connections at once; the endpoint bounds its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources

__all__ = [
    "ENDPOINT_PORT",
    "ENDPOINT_SOCKET",
    "RELAY_CONNECTIONS",
    "RELAY_PYTHON",
    "endpoint_url",
    "relay_argv",
]

ENDPOINT_PORT = 18080
"""Fixed port of the relayed endpoint inside the sandbox."""
ENDPOINT_SOCKET = "/run/harness/endpoint.sock"
"""Where the host's endpoint socket appears inside the sandbox."""
RELAY_CONNECTIONS = 64
"""Most connections the relay pipes at once (the gateway serves as many per phase); the
next is closed at once. Its threads are the sandbox's, under the contract's pids."""
RELAY_PYTHON = "/usr/bin/python3"
"""The relay's interpreter: the minimal system's, never the harness's own."""


def endpoint_url(port: int = ENDPOINT_PORT) -> str:
    """``HARNESS_ENDPOINT`` as the command sees it."""
    return f"http://127.0.0.1:{port}"


def relay_argv(argv: Sequence[str]) -> list[str]:
    """Wrap ``argv`` so the relay is listening before the command starts."""
    source = resources.files("harness.sandbox").joinpath("_relay_main.py").read_text()
    return [
        RELAY_PYTHON,
        "-I",
        "-S",
        "-c",
        source,
        str(ENDPOINT_PORT),
        ENDPOINT_SOCKET,
        str(RELAY_CONNECTIONS),
        "--",
        *argv,
    ]
