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

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from harness.errors import ConfigError, InfraError
from harness.executors import execute_spec
from harness.gateway import LinkAddress
from harness.trial.execute import TrialOutput
from harness.trial.spec import TrialSpec

__all__ = ["DaskExecutor"]


class DaskExecutor:
    """Run trials on a Dask cluster (a new local one, or the scheduler at ``scheduler``)."""

    def __init__(
        self, scheduler: str | None = None, jobs: int | None = None, link: LinkAddress | None = None
    ) -> None:
        self._link = link
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError:  # pragma: no cover - depends on the installation
            raise ConfigError(
                "--executor dask needs the `distributed` package: pip install 'dask[distributed]'",
                field="--executor",
            ) from None
        self._cluster: Any = None
        try:
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
                    silence_logs=40,
                )
                self._client: Any = Client(self._cluster)
            else:
                self._client = Client(scheduler, timeout=30)
        except OSError as exc:
            raise InfraError(
                f"cannot reach Dask scheduler {scheduler}: {exc}", reason="dask"
            ) from None

    @property
    def client(self) -> Any:
        """The ``distributed.Client`` in use."""
        return self._client

    def run(self, specs: Sequence[TrialSpec]) -> Iterator[TrialOutput]:
        """Submit every spec; yield outputs as workers finish them."""
        from dask.distributed import as_completed

        if self._link is not None:
            specs = [
                replace(s, gateway_link=self._link) if s.release.upstream is not None else s
                for s in specs
            ]
        futures = self._client.map(execute_spec, list(specs), pure=False)
        try:
            for fut in as_completed(futures):
                yield fut.result()
        finally:
            for fut in futures:
                fut.cancel()

    def close(self) -> None:
        """Close the client and any cluster this executor started."""
        self._client.close()
        if self._cluster is not None:
            self._cluster.close()
