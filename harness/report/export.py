"""``harness export``: a run's trials or cases as a flat table (CSV, or Parquet with pyarrow).

A row per trial (``trials``) or per case and arm (``cases``), with plain columns a
notebook or a spreadsheet reads directly. CSV uses the standard library; Parquet needs
the optional ``pyarrow`` package (``pip install 'harness[parquet]'``) and says so when it
is missing. No DataFrame library is involved: the rows are built once and written.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from harness.errors import ConfigError
from harness.report.data import ReportData
from harness.store.records import RunRecord

__all__ = [
    "CASE_COLUMNS",
    "TRIAL_COLUMNS",
    "case_rows",
    "table_bytes",
    "trial_rows",
    "write_table",
]

Table = Literal["trials", "cases"]
TableFormat = Literal["csv", "parquet"]

TRIAL_COLUMNS = (
    "run_id",
    "arm",
    "release",
    "case_id",
    "case_version",
    "trial",
    "outcome",
    "failure_type",
    "reason",
    "attempts",
    "stop_reason",
    "candidate_digest",
    "agent_seconds",
    "verifier_seconds",
    "claim_status",
    "claimed_success",
    "started_at",
    "finished_at",
)
CASE_COLUMNS = (
    "run_id",
    "arm",
    "case_id",
    "k",
    "trials",
    "judged",
    "passes",
    "fails",
    "infra_errors",
    "evaluator_errors",
    "pass_rate",
    "pass_hat_k",
    "pass_at_k",
    "label",
    "critical",
    "regression",
    "broken",
    "named_by",
)


def trial_rows(run_id: str, records: Sequence[RunRecord]) -> list[dict[str, Any]]:
    """Return a row per trial (every attempt's time summed; the last attempt's claim)."""
    rows = []
    for r in sorted(records, key=lambda r: (r.key.arm.value, r.key.case_id, r.key.trial)):
        last = r.attempts[-1]
        rows.append(
            {
                "run_id": run_id,
                "arm": r.key.arm.value,
                "release": r.key.release,
                "case_id": r.key.case_id,
                "case_version": r.key.case_version,
                "trial": r.key.trial,
                "outcome": r.outcome.value,
                "failure_type": r.verdict.failure_type.value if r.verdict.failure_type else None,
                "reason": r.verdict.reason,
                "attempts": len(r.attempts),
                "stop_reason": r.stop_reason,
                "candidate_digest": last.candidate_digest,
                "agent_seconds": sum(a.agent.duration_s for a in r.tries() if a.agent),
                "verifier_seconds": sum(a.verifier.duration_s for a in r.tries() if a.verifier),
                "claim_status": last.claim.status if last.claim else None,
                "claimed_success": last.claim.claimed_success if last.claim else None,
                "started_at": r.started_at.isoformat(),
                "finished_at": r.finished_at.isoformat(),
            }
        )
    return rows


def case_rows(data: ReportData) -> list[dict[str, Any]]:
    """Return a row per scored case and arm (candidate, re-executed or stored baseline)."""
    rows = []
    for c in data.cases:
        for arm, ac in (("candidate", c.candidate), ("baseline", c.baseline)):
            if ac is None:
                continue
            s = ac.summary
            rows.append(
                {
                    "run_id": data.run_id,
                    "arm": arm
                    if arm == "candidate" or c.baseline_source != "stored"
                    else "baseline (stored)",
                    "case_id": c.case_id,
                    "k": s.k,
                    "trials": s.trials,
                    "judged": s.n,
                    "passes": s.passes,
                    "fails": s.fails,
                    "infra_errors": s.infra_errors,
                    "evaluator_errors": s.evaluator_errors,
                    "pass_rate": s.pass_rate,
                    "pass_hat_k": s.pass_hat_k,
                    "pass_at_k": s.pass_at_k,
                    "label": s.label,
                    "critical": c.critical,
                    "regression": c.regression,
                    "broken": c.broken,
                    "named_by": " ".join(c.named_by),
                }
            )
    return rows


def _csv(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> bytes:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue().encode("utf-8")


def _parquet(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> bytes:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError(
            "parquet export needs the pyarrow package: pip install 'harness[parquet]' "
            "(or use --format csv)",
            field="--format",
        ) from None
    table = pa.Table.from_pylist(list(rows)) if rows else pa.table({c: [] for c in columns})
    sink = pa.BufferOutputStream()
    pq.write_table(table.select(list(columns)), sink)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def table_bytes(rows: Sequence[dict[str, Any]], columns: Sequence[str], fmt: TableFormat) -> bytes:
    """Return ``rows`` as CSV or Parquet bytes (Parquet needs pyarrow: a ConfigError)."""
    return _csv(rows, columns) if fmt == "csv" else _parquet(rows, columns)


def write_table(
    rows: Sequence[dict[str, Any]], columns: Sequence[str], fmt: TableFormat, path: Path
) -> Path:
    """Write ``rows`` as CSV or Parquet to ``path`` (atomically).

    Raises:
        ConfigError: Parquet without pyarrow, or the file cannot be written (names it).
    """
    from harness.report.folder import write_file

    return write_file(path, table_bytes(rows, columns, fmt), "--output")
