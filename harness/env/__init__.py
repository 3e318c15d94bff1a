"""Built and pinned trial environments (see ``docs/environments.md``).

The declaration they are built from, :class:`~harness.cases.environment.Environment`, lives
with the configuration models.
"""

from harness.env.build import build_env, cache_root, find_interpreter
from harness.env.lock import read_lock
from harness.env.model import BuiltEnv, EnvIdentity, EnvSource

__all__ = [
    "BuiltEnv",
    "EnvIdentity",
    "EnvSource",
    "build_env",
    "cache_root",
    "find_interpreter",
    "read_lock",
]
