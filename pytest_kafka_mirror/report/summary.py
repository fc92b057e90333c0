"""The summary of a session's results: the verified runs' table and the failover checks'.

The pytest layer's ``results.py`` prints them at the end of a session (on the xdist
controller, or the only process) and writes them into the stored run; ``RESULTS_ATTR`` and
``SPOOL_KEY`` name how results and live metrics travel from the workers to it.
"""

from __future__ import annotations

from typing import NamedTuple

from ..verify.report import format_table
from .compare import (
    FAILOVER_SUMMARY_COLUMNS,
    FAILOVER_SUMMARY_LEGEND,
    MEASURED_LEGEND,
    PARTIAL_LEGEND,
    SUMMARY_COLUMNS,
    SUMMARY_LEGEND,
    failover_summary_row,
    summary_row,
)
from .storage import FAILOVER, VERIFICATION, TestResult

__all__ = ["RESULTS_ATTR", "SESSION_FILE", "SPOOL_KEY", "SummaryTable", "render_summary", "summary_tables"]

#: Attribute of a TestReport that carries the verifications of its test (dicts, xdist-serialisable).
RESULTS_ATTR = "kafka_mirror_results"
#: workerinput key of the metrics spool directory.
SPOOL_KEY = "kafka_mirror_metrics_spool"
#: The current session as a stored-run document, always written to the report directory.
SESSION_FILE = "session.json"


class SummaryTable(NamedTuple):
    """One table of the summary: verified runs, or failover checks."""

    title: str
    rows: list[dict[str, str]]
    columns: tuple[str, ...]
    legend: str
    results: list[TestResult]


def summary_tables(results: list[TestResult]) -> list[SummaryTable]:
    """The verified runs' table, then the failover checks' (each only when it has a result)."""
    verified = [r for r in results if r.kind == VERIFICATION]
    checks = [r for r in results if r.kind == FAILOVER]
    tables = []
    if verified:
        rows = [summary_row(r.key, r.figures, r.report) for r in verified]
        columns, legend = SUMMARY_COLUMNS, SUMMARY_LEGEND
        if any(row["measured"] for row in rows):
            columns, legend = (*columns, "measured"), f"{legend}; {MEASURED_LEGEND}"
        if any(row["partial"] for row in rows):
            legend = f"{legend}; {PARTIAL_LEGEND}"
        tables.append(SummaryTable("verified runs", rows, columns, legend, verified))
    if checks:
        rows = [failover_summary_row(r.key, r.figures, r.report) for r in checks]
        tables.append(SummaryTable("failover checks", rows, FAILOVER_SUMMARY_COLUMNS, FAILOVER_SUMMARY_LEGEND, checks))
    return tables


def render_summary(results: list[TestResult]) -> list[tuple[str, str]]:
    """The summary's lines after its title: ``("-", title)`` for a separator before a
    further table, ``("", line)`` for a line."""
    lines: list[tuple[str, str]] = []
    for i, table in enumerate(summary_tables(results)):
        if i:
            lines.append(("-", f"kafka-mirror {table.title}"))
        lines.append(("", format_table(table.rows, table.columns, limit=len(table.rows))))
        lines.append(("", f"    {table.legend}"))
    return lines
