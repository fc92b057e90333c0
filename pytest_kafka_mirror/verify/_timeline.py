"""Per-second figures of a run (the report's ``timeline``) and its producers' figures.

For each UTC second the timeline holds:

``sent``
    records the producers handed to the client in that second (the manifests'
    ``sent_per_second``, counted per batch by the producer);
``received``
    acknowledged records *produced* in that second that arrived (first copies);
``arrived``
    acknowledged records whose first copy *arrived* in that second;
``p50_ms`` / ``p99_ms``
    latency of the records produced in that second (None when none of them arrived);
``missing_so_far``
    records produced up to the end of that second that never arrived (cumulative
    ``sent - received``: loss shows as a step, an unseen tail as a rise at the end).

``sent`` against ``arrived`` shows a replicator falling behind and catching up; the
latency per produce second shows when a fault began to hurt and when it stopped.

Percentiles per second come from one small aggregate, not from sorting the records: the
records' latencies are counted per (second, logarithmic bucket of ratio 1.01), a window
over that table (a few hundred rows per second) finds the bucket holding the nearest rank
``ceil(q * n)`` of each second, and the figure is that bucket's smallest latency when the
rank is the bucket's first, else its largest.  So it is always a latency that occurred,
never below the exact nearest-rank value and at most 1% above it (exact when the bucket
holds a single value, which is usual below ~100 ms with millisecond clocks).  The
overall percentiles of the report stay exact (``_latency.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_kafka_mirror.rundir import Manifest, load_manifests
from pytest_kafka_mirror.verify._latency import fine_bucket

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from pytest_kafka_mirror.verify._sql import Queries
    from pytest_kafka_mirror.verify.report import MirrorReport

__all__ = ["TIMELINE_RATIO", "apply_timeline", "producer_figures", "timeline_query"]

#: Bucket ratio of the per-second percentiles: their figures are at most this much above exact.
TIMELINE_RATIO = 1.01
#: Percent ranks of the per-second percentiles, and their timeline keys.
_QUANTILES = (("p50_ms", 50), ("p99_ms", 99))
#: Seconds without records are filled with zeros (plots show outages as gaps to zero)
#: unless the timeline would span more than this (clock trouble: keep it sparse).
MAX_FILLED_SECONDS = 86_400


def apply_timeline(report: MirrorReport, rows: Mapping[str, Sequence[Mapping[str, Any]]], run_dir: Path) -> None:
    """Set the report's timeline figures from ``rows["timeline"]`` (of :func:`timeline_query`)
    and ``rows["topic_firsts"]`` (per source topic, when its first acknowledged record was
    produced and when the first one arrived, UTC epoch microseconds: the new-topic
    discovery time is their gap); the capacity figures from ``rows["flow"]`` (of
    ``_capacity.flow_query``), and the stall (``_stall.py``) from the timeline, the first
    arrivals and the flow's last ones."""
    from pytest_kafka_mirror.verify._capacity import capacity_figures
    from pytest_kafka_mirror.verify._stall import stall_figures

    manifests = load_manifests(run_dir)
    report.producers = producer_figures(manifests)
    report.timeline = _timeline(rows["timeline"], manifests)
    report.topic_firsts = {
        r["topic"]: {"first_produce_us": r["first_produce_us"], "first_arrival_us": r["first_arrival_us"]}
        for r in rows["topic_firsts"]
    }
    report.capacity = capacity_figures(rows["flow"], manifests, report.producers, report.timeline, report.capture)
    firsts = [f["first_arrival_us"] for f in report.topic_firsts.values() if f["first_arrival_us"] is not None]
    lasts = [r["last_arrival_us"] for r in rows["flow"] if r["kind"] == "ends" and r["last_arrival_us"] is not None]
    report.stall = stall_figures(report.timeline, manifests, first_arrival_us=min(firsts, default=None),
                                 last_arrival_us=max(lasts, default=None), unseen=report.unseen)


def producer_figures(manifests: Sequence[Manifest]) -> list[dict[str, Any]]:
    out = []
    for m in manifests:
        st = m.stats
        out.append({
            "producer_id": m.producer_id,
            "topics": sorted(m.topics),
            "format": m.format,
            "message_size": m.message_size,
            "rate": m.rate,
            "started_us": m.started_us,
            "produce_seconds": st.get("produce_seconds"),
            "sent": st.get("sent", sum(lane.sent for lane in m.lanes)),
            "acked": st.get("acked", sum(lane.acked_count for lane in m.lanes)),
            "failed": st.get("failed"),
            "achieved_rate_per_topic": st.get("achieved_rate_per_topic"),
            "max_behind_schedule": st.get("max_behind_schedule"),
            # what the records' timestamps are ("due": schedule times, so latency includes the
            # producer's own delay, reported apart as its schedule slip p50 / p99 / max)
            "timestamps": st.get("timestamps"),
            "schedule_slip_ms": st.get("schedule_slip_ms"),
        })
    return out


def timeline_query(query: Queries, firsts: DataFrame) -> DataFrame:
    """The rows ``rows["timeline"]`` of :func:`apply_timeline`: per produce second the
    buckets holding its percentile ranks; per arrival second its count.

    ``firsts`` is the verification job's frame of distinct received records (``acked``
    false for records nobody acknowledged, ``produce_ts_us``, ``arrival_ts_us``).
    """
    # ceil(total * pct / 100) in integers: floating point would misplace exact ranks.
    ranks = ", ".join(f"(total * {pct} + 99) div 100 AS {name}" for name, pct in _QUANTILES)
    holds = " OR ".join(f"(cum - n < {name} AND cum >= {name})" for name, _ in _QUANTILES)
    none = ", ".join(f"NULL AS {name}" for name, _ in _QUANTILES)
    acked = "(SELECT * FROM {firsts} WHERE acked AND arrival_ts_us IS NOT NULL AND produce_ts_us IS NOT NULL)"
    return query(f"""
        SELECT *, 'produced' AS kind FROM (
            SELECT *, {ranks} FROM (
                SELECT *, sum(n) OVER (PARTITION BY t ORDER BY b
                                       ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS cum,
                       sum(n) OVER (PARTITION BY t) AS total
                FROM (
                    SELECT t, b, count(1) AS n, min(lat) AS lo, max(lat) AS hi FROM (
                        SELECT t, lat, {fine_bucket("lat", TIMELINE_RATIO)} AS b FROM (
                            SELECT produce_ts_us div 1000000 AS t, arrival_ts_us - produce_ts_us AS lat FROM {acked}))
                    GROUP BY t, b)))
        WHERE {holds}
        UNION ALL
        SELECT arrival_ts_us div 1000000 AS t, NULL AS b, NULL AS n, NULL AS lo, NULL AS hi, NULL AS cum,
               count(1) AS total, {none}, 'arrived' AS kind
        FROM {acked} GROUP BY arrival_ts_us div 1000000""", firsts=firsts)


def _timeline(rows: Sequence[Mapping[str, Any]], manifests: Sequence[Manifest]) -> list[dict[str, Any]]:
    seconds: dict[int, dict[str, Any]] = {}

    def second(t: int) -> dict[str, Any]:
        entry = seconds.get(t)
        if entry is None:
            entry = seconds[t] = {"t": t, "sent": 0, "received": 0, "arrived": 0, "p50_ms": None, "p99_ms": None}
        return entry

    for row in rows:
        entry = second(int(row["t"]))
        if row["kind"] == "arrived":
            entry["arrived"] = int(row["total"])
            continue
        entry["received"] = int(row["total"])
        first = row["cum"] - row["n"] + 1
        for name, _ in _QUANTILES:
            rank = row[name]
            if first <= rank <= row["cum"]:
                entry[name] = (row["lo"] if rank == first else row["hi"]) / 1000.0
    return complete_timeline(seconds, manifests, second)


def complete_timeline(seconds: dict[int, dict[str, Any]], manifests: Sequence[Manifest],
                      second: Callable[[int], dict[str, Any]]) -> list[dict[str, Any]]:
    """Add the producers' ``sent`` counts, fill the seconds without records, add
    ``missing_so_far``: the part of the timeline that is input, not computation (shared
    with the oracle).  ``second(t)`` returns the entry of second ``t``, creating it."""
    from pytest_kafka_mirror.verify._recovery import with_missing_so_far

    for m in manifests:
        for t, n in m.stats.get("sent_per_second", []):
            second(int(t))["sent"] += int(n)
    if seconds and max(seconds) - min(seconds) <= MAX_FILLED_SECONDS:
        for t in range(min(seconds), max(seconds) + 1):
            second(t)
    return with_missing_so_far([seconds[t] for t in sorted(seconds)])
