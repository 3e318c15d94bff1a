"""The default executor: a pool of threads on this machine.

Trials spend their time waiting on sandboxed processes, so threads give real
parallelism here; each worker calls :func:`harness.executors.execute_spec`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from harness.executors import execute_spec
from harness.gateway import LinkAddress
from harness.trial.execute import TrialOutput
from harness.trial.spec import TrialSpec

__all__ = ["LocalExecutor"]


class LocalExecutor:
    """Run trials on ``jobs`` threads (default: the core count)."""

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = jobs or os.cpu_count() or 1
        self._pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="trial")

    def ready(self, link: LinkAddress | None = None) -> None:
        """Threads are ready at once; trials in this process reach the gateway directly."""

    def run(self, specs: Sequence[TrialSpec]) -> Iterator[TrialOutput]:
        """Submit at most ``2 * jobs`` specs at a time; yield outputs as they finish."""
        pending: set[Future[TrialOutput]] = set()
        queue = list(reversed(specs))
        try:
            while queue or pending:
                while queue and len(pending) < 2 * self.jobs:
                    pending.add(self._pool.submit(execute_spec, queue.pop()))
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield fut.result()
        finally:
            for fut in pending:
                fut.cancel()

    def close(self) -> None:
        """Stop the pool (running trials finish; queued ones are dropped); safe to repeat."""
        self._pool.shutdown(wait=True, cancel_futures=True)
