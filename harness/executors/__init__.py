"""Executors run trial specs and hand finished records back to the single writer.

A trial spec is plain picklable data and :func:`harness.trial.execute.run_trial` returns the
record, so an executor only has to move specs out and outputs back: the local thread
pool (default) and a Dask cluster implement the same small interface.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from harness.gateway import LinkAddress
from harness.trial.execute import TrialOutput
from harness.trial.spec import TrialSpec

__all__ = ["Executor", "execute_spec"]


def execute_spec(spec: TrialSpec) -> TrialOutput:
    """Run one spec on the backend it names (used by every executor, locally or remotely)."""
    from harness.sandbox.registry import get_backend
    from harness.trial.execute import run_trial

    return run_trial(spec, get_backend(spec.backend))


class Executor(Protocol):
    """Runs trial specs; yields outputs as they finish, in any order.

    Made before the run is planned (a cluster starts while the run prepares); ``ready``
    is called once, before the run opens its record, and raises what starting raised.
    """

    def ready(self, link: LinkAddress | None = None) -> None:
        """Wait until workers can take trials; ``link``: where they reach the gateway."""
        ...

    def run(self, specs: Sequence[TrialSpec]) -> Iterator[TrialOutput]:
        """Run every spec; yield each output as soon as it is done."""
        ...

    def close(self) -> None:
        """Release workers."""
        ...
