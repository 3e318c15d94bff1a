"""Backends by name. Each process builds one instance per backend and reuses it."""

from __future__ import annotations

import threading

from harness.errors import ConfigError
from harness.sandbox.base import Sandbox

__all__ = ["BACKENDS", "get_backend"]

BACKENDS = ("local", "docker")
_instances: dict[str, Sandbox] = {}
_lock = threading.Lock()


def get_backend(name: str) -> Sandbox:
    """Return the (cached) sandbox backend called ``name``.

    Raises:
        ConfigError: unknown backend name.
        SandboxUnavailableError: the backend cannot start (e.g. no Docker engine).
    """
    with _lock:
        if name not in _instances:
            if name == "local":
                from harness.sandbox.local import LocalSandbox

                _instances[name] = LocalSandbox()
            elif name == "docker":
                from harness.sandbox.docker import DockerSandbox

                _instances[name] = DockerSandbox()
            else:
                raise ConfigError(
                    f"unknown backend {name!r}; expected one of: {', '.join(BACKENDS)}",
                    field="backend",
                )
        return _instances[name]
