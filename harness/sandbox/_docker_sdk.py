"""The Docker SDK is an optional extra (``harness[docker]``): a clear error when it is absent.

The Docker modules import the SDK from here, so selecting the docker backend without the
extra is a usage error naming the install command, never an ``ImportError`` traceback.
"""

from __future__ import annotations

from harness.errors import ConfigError

try:
    import docker
    import docker.errors
    import docker.types
    import requests.exceptions
except ImportError:  # pragma: no cover - depends on the installation
    raise ConfigError(
        "the docker backend needs the Docker SDK: pip install 'harness[docker]'",
        field="backend",
    ) from None

__all__ = ["docker", "requests"]
