"""Reports and stored runs built directly (no Kafka, no Spark) for storage and comparison tests.

Figures are stated, not measured, so the expected output of a comparison is exact.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_kafka_mirror.config import resolve_settings
from pytest_kafka_mirror.report.compare import failover_figures, figures
from pytest_kafka_mirror.report.storage import FAILOVER, TestResult, build_run
from pytest_kafka_mirror.verify import LatencyStats, MirrorReport
from pytest_kafka_mirror.verify.failover import FailoverEntry, FailoverReport

__all__ = ["FIXED", "sample_failover_report", "sample_failover_result", "sample_report", "sample_result",
           "sample_run"]

#: Everything about where and when a run happened, fixed so documents are reproducible.
FIXED: dict[str, Any] = {
    "now": datetime(2025, 3, 14, 9, 26, 53, tzinfo=timezone.utc),
    "machine_info": {"machine_id": "Linux-CPython-3.11-64bit", "node": "ci-7", "system": "Linux", "release": "6.1.0",
                     "machine": "x86_64", "python_implementation": "CPython", "python_version": "3.11.7",
                     "cpu_count": 2},
    "commit_info": {"id": "0123456789abcdef0123456789abcdef01234567", "dirty": False, "branch": "main",
                    "time": "2025-03-14T09:00:00+00:00", "project": "mirrors"},
    "plugin": {"pytest-kafka-mirror": "0.1.0", "pytest": "8.3.0", "pytest-xdist": "3.6.0", "pyspark": "3.5.1",
               "confluent-kafka": "2.5.0", "pyarrow": "16.0.0"},
}


def sample_report(*, expected: int = 1000, lost: int = 0, unseen: int = 0, duplicated: int = 0, foreign: int = 0,
                  p50: float | None = 10.0, p99: float | None = 20.0, rate: float | None = 500.0,
                  copy_rate: float | None = None, copy_lower_bound: bool = False) -> MirrorReport:
    """A report with the given figures; the rate comes from one producer of one topic, which
    is also the offered rate of its capacity; ``copy_rate`` None: the replicator kept up."""
    arrived = expected - lost - unseen
    latency = LatencyStats() if p50 is None else LatencyStats(
        count=arrived, min_ms=1.0, mean_ms=p50 + 1, p50_ms=p50, p90_ms=(p50 + (p99 or p50)) / 2, p99_ms=p99,
        p999_ms=(p99 or p50) * 1.5, max_ms=(p99 or p50) * 2, histogram=[0, arrived, 0],
    )
    producers = [] if rate is None else [{
        "producer_id": "p1", "topics": ["orders"], "format": "headers", "message_size": 200, "rate": rate,
        "started_us": 1_741_944_000_000_000, "produce_seconds": expected / rate, "sent": expected, "acked": expected,
        "failed": 0, "achieved_rate_per_topic": rate, "max_behind_schedule": 1,
    }]
    return MirrorReport(
        run_dir="/runs/1", expected=expected, received=arrived + duplicated, distinct=arrived, lost=lost,
        unseen=unseen, duplicated=duplicated, foreign=foreign, latency=latency, histogram_bounds_ms=[5.0, 50.0],
        timeline=[{"t": 1_741_944_000, "sent": expected, "received": arrived, "arrived": arrived,
                   "p50_ms": p50, "p99_ms": p99}],
        producers=producers,
        capacity={"all": {"copy_rate": copy_rate, "copy_rate_mb": None if copy_rate is None else copy_rate * 200 / 1e6,
                          "backlog_max": 0 if copy_rate is None else expected // 2, "caught_up_s": 0.05,
                          "window": None, "offered_rate": rate, "lower_bound": copy_lower_bound,
                          "why": "no backlog" if copy_rate is None else
                          "a producer was behind its offered rate" if copy_lower_bound else ""},
                  "topics": {}, "steps": [], "max_sustainable_rate": None, "max_sustainable_why": "no steps"},
    )


def sample_result(nodeid: str, report: MirrorReport, index: int = 0, **params: Any) -> TestResult:
    return TestResult(
        key=TestResult.key_of(nodeid, index), nodeid=nodeid, index=index, params=params, outcome="passed",
        figures=figures(report), report=report.to_dict(),
        report_path=f"/reports/{nodeid.replace('/', '.')}.json",
        plots={k: f"/reports/{nodeid.replace('/', '.')}.{k}.svg" for k in ("latency", "histogram", "rate")},
    )


def sample_failover_report(*, partitions: int = 2, rereads: int = 0, skipped: int = 0, untranslatable: int = 0,
                           delay_s: float | None = 1.5, heartbeat_lag_ms: int | None = 850,
                           not_run: dict[str, str] | None = None, left_out: dict[str, str] | None = None
                           ) -> FailoverReport:
    """A failover check of one witness group that committed 100 on each of ``partitions``
    partitions, translated both ways (checkpoint, synced).  Partition 0 re-reads
    ``rereads`` and skips ``skipped`` records; the checkpoints of the first
    ``untranslatable`` partitions have no translation, which MM2's sync store could not give.
    ``not_run`` / ``left_out``: parts not checked (a part of the translations not run leaves
    no entry of it)."""
    entries = []
    for p in range(partitions):
        for via in ("checkpoint", "synced"):
            none = via == "checkpoint" and p < untranslatable
            translated = None if none else 100 - (rereads if p == 0 else 0) + (skipped if p == 0 else 0)
            entries.append(FailoverEntry(
                group="km-gw0-test_fo-1a2b3c-end", witness="end", topic="orders", target_topic="source.orders",
                partition=p, via=via, committed=100, committed_at=1_741_944_000.0, consumed_last="p1/lane 0 seq 99",
                translated=translated, translated_upstream=100 if via == "checkpoint" and not none else None,
                resume_at=200 if none else translated, end_of_log=200, exact=100,
                skipped=skipped if p == 0 and not none else 0, rereads=rereads if p == 0 and not none else 0,
                records_behind=(100 if none else 0) if via == "checkpoint" else None,
                seconds_behind=0.0 if via == "checkpoint" else None,
                max_delay_s=delay_s if via == "checkpoint" else None, offset_syncs=3,
                untranslatable="MM2's offset-sync store holds no sync at or before upstream 100" if none else None,
            ))
    gone = {"checkpoint": "checkpoints", "synced": "synced offsets"}
    entries = [e for e in entries if gone[e.via] not in {**(not_run or {}), **(left_out or {})}]
    heartbeats = {"topic": "source.heartbeats", "count": 8, "lag_ms": heartbeat_lag_ms, "max_gap_ms": 1000}
    return FailoverReport(run_dir="/runs/1", read_at=1_741_944_010.0, waited_s=2.0, reset="latest",
                          settings={"offset_lag_max": 100}, entries=entries, heartbeats=heartbeats,
                          not_run=dict(not_run or {}), left_out=dict(left_out or {}))


def sample_failover_result(nodeid: str, report: FailoverReport, index: int = 0, **params: Any) -> TestResult:
    stem = nodeid.replace("/", ".") + (f"-{index}" if index else "")
    return TestResult(
        key=TestResult.key_of(nodeid, index, FAILOVER), nodeid=nodeid, index=index, kind=FAILOVER, params=params,
        outcome="passed", figures=failover_figures(report), report=report.to_dict(),
        report_path=f"/reports/{stem}-failover.json",
    )


def sample_run(*results: TestResult, commit: str | None = None, dirty: bool = False) -> dict[str, Any]:
    commit_info = dict(FIXED["commit_info"], dirty=dirty, **({"id": commit} if commit else {}))
    settings = resolve_settings({}, lambda key: None, {}, rootdir=Path("/r"))
    return build_run(results, settings=settings.stored(), metadata={"replicator_version": "mm2 3.7.0"}, now=FIXED["now"],
                     machine_info=FIXED["machine_info"], commit_info=commit_info, plugin=FIXED["plugin"])
