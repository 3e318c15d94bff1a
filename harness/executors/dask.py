"""Scale-out executor: trials on a Dask cluster.

Specs are plain picklable data and :func:`harness.executors.execute_spec` returns the
record with its blobs, so workers never touch the store: the coordinator (this process)
remains the single writer. Without a scheduler address a ``LocalCluster`` of worker
processes is started on this machine; with one, the cluster's workers must have harness
installed and the case folders at the same paths (a shared checkout).

Trials that call a model reach the run's one gateway (in this process) over its link:
each such spec carries the link's address and secret (see :mod:`harness.gateway._link`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

from harness.errors import ConfigError, InfraError
from harness.executors import execute_spec
from harness.gateway import LinkAddress
from harness.trial.execute import TrialOutput
from harness.trial.spec import TrialSpec

__all__ = ["DaskExecutor"]

_PRELOAD = "harness.trial.execute"


def _installed(*modules: str) -> bool:
    """Tell whether each module can be found (without importing more than its parents)."""
    try:
        return all(importlib.util.find_spec(m) is not None for m in modules)
    except (ImportError, ValueError):  # a parent that is not a package, or blocked
        return False


def _missing() -> ConfigError:
    return ConfigError(
        "--executor dask needs the `distributed` package: pip install 'dask[distributed]'",
        field="--executor",
    )


class DaskExecutor:
    """Run trials on a Dask cluster (a new local one, or the scheduler at ``scheduler``).

    A local cluster starts on a thread of its own from the moment the executor is made,
    while the run plans and proves its cases, and its workers import the trial code as they
    start; :meth:`ready` waits for it. A remote scheduler is reached in :meth:`ready`.
    """

    def __init__(
        self, scheduler: str | None = None, jobs: int | None = None, link: LinkAddress | None = None
    ) -> None:
        self._link = link
        if not _installed("dask.distributed", "distributed"):
            raise _missing()
        self._cluster: Any = None
        self._client: Any = None
        self._scheduler, self._jobs = scheduler, jobs
        self._started: Future[None] = Future()
        self._closing = threading.Lock()
        if scheduler is None:  # a remote scheduler is reached when the run is ready for it
            threading.Thread(target=self._start, name="dask-start", daemon=True).start()

    def _start(self) -> None:
        scheduler, jobs = self._scheduler, self._jobs
        try:
            from dask.distributed import Client, LocalCluster

            if scheduler is None:
                self._cluster = LocalCluster(
                    n_workers=jobs or 2,
                    threads_per_worker=1,
                    processes=True,
                    # No dashboard; the scheduler's own HTTP server (health, metrics) on
                    # a free loopback port: its default, 8787 on every address, clashed with
                    # any other cluster on the machine.
                    dashboard_address="127.0.0.1:0",
                    scheduler_kwargs={"dashboard": False},
                    # Workers' own logs stay off the user's terminal, errors too: a
                    # worker that loses the scheduler while the cluster closes logs a
                    # traceback (a race inside distributed); what a trial came to returns
                    # through its future.
                    silence_logs=logging.CRITICAL,
                    # Each worker imports the trial code while the cluster starts.
                    preload=[_PRELOAD],
                )
                self._client = Client(self._cluster)
            else:
                self._client = Client(scheduler, timeout=30)
        except ImportError:
            self._started.set_exception(_missing())
        except OSError as exc:
            self._started.set_exception(
                InfraError(f"cannot reach Dask scheduler {scheduler}: {exc}", reason="dask")
            )
        except BaseException as exc:  # handed to whoever waits
            self._started.set_exception(exc)
        else:
            self._started.set_result(None)

    def ready(self, link: LinkAddress | None = None) -> None:
        """Wait for the cluster; ``link``: where workers reach the run's gateway.

        Raises:
            InfraError: the scheduler cannot be reached (reason ``dask``).
        """
        if self._scheduler is not None and not self._started.done():
            self._start()
        self._started.result()
        if link is not None:
            self._link = link

    @property
    def client(self) -> Any:
        """The ``distributed.Client`` in use (waits for the cluster)."""
        self.ready()
        return self._client

    def run(self, specs: Sequence[TrialSpec]) -> Iterator[TrialOutput]:
        """Submit every spec; yield outputs as workers finish them."""
        from dask.distributed import as_completed

        if self._link is not None:
            specs = [
                replace(s, gateway_link=self._link) if s.release.upstream is not None else s
                for s in specs
            ]
        self.ready()
        futures = self._client.map(execute_spec, list(specs), pure=False)
        try:
            for fut in as_completed(futures):
                yield fut.result()
        finally:
            for fut in futures:
                fut.cancel()

    def close(self) -> None:
        """Close the client and any cluster this executor started (once it has started).

        Safe to call again, from any thread: a later call returns when the first is done.
        """
        with self._closing:
            if self._scheduler is None:  # wait for the local cluster's start, whatever it came to
                with contextlib.suppress(BaseException):
                    self._started.exception()
            client, cluster, self._client, self._cluster = self._client, self._cluster, None, None
            if client is not None:
                client.close()
            if cluster is not None:
                cluster.close()
