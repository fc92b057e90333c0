"""The verification job: manifests + capture segments -> :class:`MirrorReport`.

Runs are large (10M+ records), so everything row-level stays in Spark and only aggregates
and a bounded number of example rows reach the driver.  The job is shaped to need few
Spark actions and few shuffles:

1. ``firsts``: one row per distinct (topic, producer, lane, seq) received: copy count,
   corrupt copies, first arrival, whether its first copy arrived behind a higher seq of
   its target partition, and the acknowledged range it falls in (a broadcast range join:
   manifests are ranges, and tiny).  All of it over a single shuffle by lane.  Cached;
   every later step reads this cache.
2. One aggregate per acknowledged range (count, min, max seq) gives expected, received,
   distinct, duplicated, phantom, corrupted, reordered *and* the exact lost / unseen
   counts: a range whose distinct count equals ``max - min + 1`` has no hole inside, so
   its missing seqs are the edges, computed on the driver.  Only ranges with holes inside
   go through the gaps-and-islands window (one more action, skipped in a clean run).  This
   avoids exploding every acknowledged seq and joining it against the capture, which
   would shuffle the run twice over.
3. Lanes seen in several target partitions get their exact partition list (only then).
4. Latency: exact nearest-rank percentiles and the histogram from bucket counts, in one
   or two small aggregates (``verify/_latency.py``).
5. Record kinds (headerless, foreign): a scan of one column of the capture.
6. Examples, only for anomalies that occurred: ``orderBy().limit()`` per anomaly, which
   Spark runs as a top-K without sorting everything.  Each names a target partition and
   offset: of the record itself, or for missing records of the highest sequence of their
   lane that arrived.
7. Three-log reconciliation, only when the run captured the source topics too
   (``RUN_DIR/source``): step 2 again over the union of target and source seqs, whose
   holes are the acknowledged records the source log lacks as well.  One shuffle of the
   source log and one or two small actions.

Sequences the producer sent but the source never acknowledged are ranges of the same
broadcast table (flagged unacknowledged), so counting those that never arrived costs
nothing extra: their records, when they arrive, are phantoms.

``pytest_kafka_mirror.verify.oracle`` computes the same report in plain Python; the tests
check that the two agree exactly on generated histories.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_kafka_mirror.rundir import (
    CAPTURE_DIR,
    CAPTURE_SCHEMA_FIELDS,
    CAPTURE_STATUS,
    DEFAULT_BOUNDS,
    REPORT_FILE,
    SOURCE_DIR,
    load_discovery,
    load_manifests,
)
from pytest_kafka_mirror.verify._timeline import add_timeline
from pytest_kafka_mirror.verify.report import LaneStats, LatencyStats, MirrorReport, MissingRange

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["DEFAULT_BOUNDS", "LaneMeta", "manifest_lanes", "phantom_reason", "read_status", "verify_run"]


_KEY = ("topic", "producer_id", "lane")
#: Seq buckets of the range join: 2**16 seqs, so a 10M-record range is ~150 table rows.
_BUCKET_BITS = 16
#: Copies listed per duplicated example.
_MAX_COPIES_SHOWN = 5
_IDENTIFIED_KINDS = ("headers", "body")
_SPARK_TYPES = {"string": "string", "int32": "int", "int64": "bigint", "bool": "boolean"}
#: Report totals that are sums over lanes.
_LANE_TOTALS = ("expected", "received", "distinct", "lost", "unseen", "duplicated", "reordered", "phantom",
                "corrupted", "never_acked", "lost_by_replicator", "missing_in_source")

LaneKey = tuple[str, str, int]


@dataclass
class LaneMeta:
    """One lane as the manifests describe it (ranges merged, sorted)."""

    target_topic: str | None
    partition: int
    sent: int = 0
    acked: list[tuple[int, int]] = field(default_factory=list)
    failed: list[tuple[int, int]] = field(default_factory=list)

    @property
    def unacked(self) -> list[tuple[int, int]]:
        """Sequences ``0 .. sent-1`` the source did not acknowledge (failed or unreported)."""
        out: list[tuple[int, int]] = []
        nxt = 0
        for a, b in self.acked:
            if a > nxt:
                out.append((nxt, min(a, self.sent) - 1))
            nxt = max(nxt, b + 1)
            if nxt >= self.sent:
                break
        if nxt < self.sent:
            out.append((nxt, self.sent - 1))
        return [(a, b) for a, b in out if a <= b]


def _merge(ranges: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    """Sort and merge overlapping or adjacent inclusive ranges.

    Merging adjacent ranges matters: missing seqs are reported per acked range, and two
    touching ranges would otherwise split one hole in two.
    """
    out: list[tuple[int, int]] = []
    for a, b in sorted((int(r[0]), int(r[1])) for r in ranges if r[0] <= r[1]):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def manifest_lanes(run_dir: Path) -> tuple[dict[LaneKey, LaneMeta], dict[str, str]]:
    manifests = load_manifests(run_dir)
    if not manifests:
        raise FileNotFoundError(
            f"no manifest-*.json in run directory {run_dir}: the verifier compares the capture against what "
            f"the source acknowledged, which MirrorProducer writes there when it finishes. Run the producer "
            f"with this run directory first."
        )
    topics: dict[str, str] = {}
    lanes: dict[LaneKey, LaneMeta] = {}
    for m in manifests:
        topics.update(m.topics)
        for lm in m.lanes:
            key = (lm.topic, m.producer_id, lm.lane)
            meta = lanes.setdefault(key, LaneMeta(m.topics.get(lm.topic), lm.partition))
            meta.sent = max(meta.sent, lm.sent)
            meta.acked = _merge([*meta.acked, *lm.acked])
            meta.failed = _merge([*meta.failed, *lm.failed])
    return lanes, topics


def _read_capture(spark: SparkSession, capture_dir: Path) -> DataFrame:
    """The capture segments, or an empty frame of the same schema when there are none."""
    schema = ", ".join(f"`{name}` {_SPARK_TYPES[t]}" for name, t in CAPTURE_SCHEMA_FIELDS)
    # List files ourselves: a directory read would also pick up half-written temp files,
    # and fails outright on an empty directory.
    files = sorted(str(p) for p in capture_dir.rglob("*.parquet")) if capture_dir.is_dir() else []
    if not files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*files)


def read_status(run_dir: Path) -> dict[str, Any]:
    path = run_dir / CAPTURE_STATUS
    if not path.is_file():
        return {}
    try:
        status = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return {"error": f"unreadable {CAPTURE_STATUS}: {exc}"}
    return status if isinstance(status, dict) else {"status": status}


def verify_run(
    run_dir: str | os.PathLike[str],
    *,
    spark: SparkSession | None = None,
    master: str = "local[2]",
    examples: int = 20,
    histogram_bounds_ms: Sequence[float] = DEFAULT_BOUNDS,
    max_ranges: int = 100,
    write_report: bool = True,
) -> MirrorReport:
    """Verify one run directory and return its :class:`MirrorReport`.

    ``spark`` defaults to :func:`get_spark(master) <pytest_kafka_mirror.verify.get_spark>`.
    ``examples`` caps the example rows kept per anomaly, ``max_ranges`` the missing
    ranges kept per lane (counts stay exact).  The report is also written to
    ``RUN_DIR/report.json`` unless ``write_report`` is false.
    """
    run = Path(run_dir)
    if not run.is_dir():
        raise FileNotFoundError(f"run directory {run} does not exist")
    bounds = sorted(float(b) for b in histogram_bounds_ms if float(b) != float("inf"))
    lanes_meta, topics = manifest_lanes(run)
    if spark is None:
        from pytest_kafka_mirror.verify.session import get_spark

        spark = get_spark(master)
    job = _Job(spark, run, lanes_meta, topics, examples=max(examples, 0), max_ranges=max(max_ranges, 0))
    try:
        report = job.run(bounds)
        add_timeline(report, job.firsts, run)  # per-second figures and producers (verify/_timeline.py)
    finally:
        job.release()
    report.capture = read_status(run)
    report.discovery = load_discovery(run)
    if write_report:
        report.write(run / REPORT_FILE)
    return report


class _Job:
    """State of one verification: the cached frames and the lane table being filled."""

    def __init__(self, spark: SparkSession, run: Path, lanes_meta: dict[LaneKey, LaneMeta], topics: dict[str, str],
                 *, examples: int, max_ranges: int) -> None:

        self.spark = spark
        self.run_dir = run
        self.meta = lanes_meta
        self.topics = topics
        self.examples = examples
        self.max_ranges = max_ranges
        self.stats: dict[LaneKey, LaneStats] = {}
        for key, meta in lanes_meta.items():
            self._lane(key).expected = sum(b - a + 1 for a, b in meta.acked)

        # Range ids index self.ranges: the acknowledged ranges of every lane, then the sent
        # but unacknowledged ones.  Ranges of one lane are disjoint; acked ones not adjacent.
        self.ranges: list[tuple[LaneKey, int, int, bool]] = [
            (key, a, b, True) for key, meta in sorted(lanes_meta.items()) for a, b in meta.acked
        ] + [(key, a, b, False) for key, meta in sorted(lanes_meta.items()) for a, b in meta.unacked]
        # The range join probes a hash table by (lane, seq bucket): a lane whose acked seqs
        # are split into thousands of ranges (many delivery failures) then costs each record
        # one or two range checks, not thousands.
        self.ranges_df = spark.createDataFrame(
            [
                (i, k[0], k[1], k[2], bucket, a, b, acked)
                for i, (k, a, b, acked) in enumerate(self.ranges)
                for bucket in range(a >> _BUCKET_BITS, (b >> _BUCKET_BITS) + 1)
            ],
            "range_id bigint, r_topic string, r_producer string, r_lane int, r_bucket bigint, r_a bigint, r_b bigint, "
            "acked boolean",
        )

        cols = ["topic", "target_topic", "partition", "offset", "kind", "producer_id", "lane", "seq",
                "produce_ts_us", "arrival_ts_us", "checksum_ok", "evidence"]
        # The capture itself is not cached: a clean run scans it twice (records, kinds),
        # each time reading only the columns needed, which is cheaper than caching every
        # column of a 10M-row run in driver memory.
        self.cap = _read_capture(spark, run / CAPTURE_DIR).select(*cols)
        self.ident = _identified(self.cap)
        self.firsts = self._firsts().persist()
        self.split_rows: list[dict[str, Any]] = []
        self.union: DataFrame | None = None

    def _in_ranges(self, frame: DataFrame, how: str) -> DataFrame:
        """``frame`` (lane key + seq) joined with the range containing each seq (broadcast)."""
        from pyspark.sql import functions as F

        on = (
            (F.col("topic") == F.col("r_topic")) & (F.col("producer_id") == F.col("r_producer"))
            & (F.col("lane") == F.col("r_lane")) & (F.shiftright("seq", _BUCKET_BITS) == F.col("r_bucket"))
            & F.col("seq").between(F.col("r_a"), F.col("r_b"))
        )
        return frame.join(F.broadcast(self.ranges_df), on, how).drop(
            "r_topic", "r_producer", "r_lane", "r_bucket", "r_a", "r_b")

    def _firsts(self) -> DataFrame:
        """One row per distinct received record, with everything the figures need.

        A single shuffle, by lane: deduplicating per (lane, target partition), the
        reordering window over each partition, and deduplicating per lane all run inside
        that partitioning, instead of one shuffle by record for the dedup and another by
        partition for the window.  Only primitive aggregates: a struct min would turn a
        hash aggregate into a sort aggregate.
        """
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        part = [*_KEY, "partition"]
        per_partition = self.ident.repartition(*_KEY).groupBy(*part, "seq").agg(
            F.min("offset").alias("offset"),
            F.count(F.lit(1)).alias("n"),
            F.count(F.when(F.col("checksum_ok") == F.lit(False), 1)).alias("bad"),
            F.min("arrival_ts_us").alias("arrival_ts_us"),
            F.min_by("produce_ts_us", "arrival_ts_us").alias("produce_ts_us"),
        )
        # Reordered: the first copy of a seq arrived after a higher seq of its lane, in the
        # same target partition (order across partitions is not defined in Kafka).
        earlier = Window.partitionBy(*part).orderBy("offset").rowsBetween(Window.unboundedPreceding, -1)
        flagged = per_partition.withColumn("after_seq", F.max("seq").over(earlier))
        late = F.coalesce(F.col("seq") < F.col("after_seq"), F.lit(False))
        firsts = flagged.groupBy(*_KEY, "seq").agg(
            F.sum("n").alias("n"),
            F.sum("bad").alias("bad"),
            F.min("arrival_ts_us").alias("arrival_ts_us"),
            F.min_by("produce_ts_us", "arrival_ts_us").alias("produce_ts_us"),
            F.count(F.when(late, 1)).alias("reordered"),
            F.min("partition").alias("pmin"),
            F.max("partition").alias("pmax"),
            # Where the reordering was seen, for the examples.
            F.min(F.when(late, F.col("partition"))).alias("r_partition"),
            F.min_by(F.when(late, F.col("offset")), F.when(late, F.col("partition"))).alias("r_offset"),
            F.min_by(F.when(late, F.col("after_seq")), F.when(late, F.col("partition"))).alias("after_seq"),
        )
        return self._in_ranges(firsts, "left").withColumn("acked", F.coalesce(F.col("acked"), F.lit(False)))

    def release(self) -> None:
        self.firsts.unpersist()
        if self.union is not None:
            self.union.unpersist()

    def _lane(self, key: LaneKey) -> LaneStats:
        stats = self.stats.get(key)
        if stats is None:
            meta = self.meta.get(key)
            stats = self.stats[key] = LaneStats(
                topic=key[0], producer_id=key[1], lane=key[2],
                target_topic=meta.target_topic if meta else self.topics.get(key[0]),
                source_partition=meta.partition if meta else None,
            )
        return stats

    def run(self, bounds: list[float]) -> MirrorReport:
        lane_max = self._counts_and_missing()
        reconciled = (self.run_dir / SOURCE_DIR).is_dir()
        if reconciled:
            self._reconcile()
        self._split_partitions()
        latency, by_topic = self._latency(bounds)
        kinds = {row["kind"]: row["count"] for row in self.cap.groupBy("kind").count().collect()}

        lanes = [self.stats[k] for k in sorted(self.stats)]
        report = MirrorReport(
            run_dir=str(self.run_dir),
            headers_lost=kinds.get("headerless", 0),
            foreign=kinds.get("foreign", 0),
            lane_split=sum(1 for s in lanes if len(s.partitions) > 1),
            reconciled=reconciled,
            lanes=lanes,
            latency=latency,
            latency_by_topic=by_topic,
            histogram_bounds_ms=bounds,
        )
        for name in _LANE_TOTALS:
            setattr(report, name, sum(getattr(s, name) for s in lanes))
        if self.examples:
            report.examples = self._examples(report, lane_max)
        return report

    # -- 2. counts and missing ranges ----------------------------------------------------

    def _counts_and_missing(self) -> dict[LaneKey, int]:
        """Fill the lane counts and missing ranges; return the highest seq received per lane."""
        from pyspark.sql import functions as F

        rows = self.firsts.groupBy(*_KEY, "range_id").agg(
            F.count(F.lit(1)).alias("distinct"), F.sum("n").alias("received"), F.sum("bad").alias("bad"),
            F.min("seq").alias("lo"), F.max("seq").alias("hi"), F.sum("reordered").alias("reordered"),
            F.min("pmin").alias("pmin"), F.max("pmax").alias("pmax"),
        ).collect()
        lane_max: dict[LaneKey, int] = {}
        seen: dict[int, tuple[int, int, int]] = {}
        for row in rows:
            key: LaneKey = (row["topic"], row["producer_id"], row["lane"])
            stats = self._lane(key)
            stats.distinct += row["distinct"]
            stats.received += row["received"]
            stats.duplicated += row["received"] - row["distinct"]
            stats.corrupted += row["bad"]
            stats.reordered += row["reordered"]
            stats.partitions = sorted({*stats.partitions, row["pmin"], row["pmax"]})
            rid = row["range_id"]
            if rid is None or not self.ranges[rid][3]:
                stats.phantom += row["received"]
            if rid is not None:
                seen[rid] = (row["lo"], row["hi"], row["distinct"])
            lane_max[key] = max(lane_max.get(key, row["hi"]), row["hi"])

        for rid, (key, a, b, acked) in enumerate(self.ranges):
            if not acked:
                got = seen.get(rid)
                self._lane(key).never_acked += b - a + 1 - (got[2] if got else 0)

        def tail_kind(key: LaneKey, last: int) -> str:
            # A hole is "lost" when something later in the lane arrived, else "unseen".  The
            # lane max is a received seq, so no hole straddles it.
            top = lane_max.get(key)
            return "lost" if top is not None and top > last else "unseen"

        found, n_ranges, per_kind = self._missing(seen, self.firsts, tail_kind, "lost")
        for key, ranges in found.items():
            stats = self._lane(key)
            stats.lost, stats.unseen = per_kind[key]["lost"], per_kind[key]["unseen"]
            stats.missing_ranges = ranges[: self.max_ranges]
            stats.missing_range_count = n_ranges[key]
        return lane_max

    def _missing(
        self, seen: dict[int, tuple[int, int, int]], frame: DataFrame, tail_kind: Callable[[LaneKey, int], str],
        inner_kind: str,
    ) -> tuple[dict[LaneKey, list[MissingRange]], dict[LaneKey, int], dict[LaneKey, dict[str, int]]]:
        """Missing seqs of every acknowledged range, given (lo, hi, distinct) of the seqs of
        ``frame`` (columns ``range_id``, ``seq``; distinct) that fall in each range.

        Returns per lane the missing ranges (every edge, the first gaps inside each range;
        sorted), the exact number of missing ranges, and the exact missing count per kind:
        the gaps inside a range hold ``hi - lo + 1 - distinct`` seqs whatever the listing cap.
        """
        found: dict[LaneKey, list[MissingRange]] = defaultdict(list)
        n_ranges: dict[LaneKey, int] = defaultdict(int)
        per_kind: dict[LaneKey, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        holed: dict[int, int] = {}

        def add(key: LaneKey, r: MissingRange) -> None:
            found[key].append(r)
            n_ranges[key] += 1
            per_kind[key][r.kind] += r.count

        for rid, (key, a, b, acked) in enumerate(self.ranges):
            if not acked:
                continue
            got = seen.get(rid)
            if got is None:
                add(key, MissingRange(a, b, tail_kind(key, b)))
                continue
            lo, hi, distinct = got
            if lo > a:
                add(key, MissingRange(a, lo - 1, inner_kind))
            if hi < b:
                add(key, MissingRange(hi + 1, b, tail_kind(key, b)))
            inside = hi - lo + 1 - distinct
            if inside:
                holed[rid] = inside
                per_kind[key][inner_kind] += inside
        for rid, (n_gaps, gaps) in self._holes(holed, frame).items():
            key = self.ranges[rid][0]
            found[key] += [MissingRange(a, b, inner_kind) for a, b in gaps]
            n_ranges[key] += n_gaps
        for ranges in found.values():
            ranges.sort(key=lambda r: r.first)
        return found, n_ranges, per_kind

    def _holes(self, holed: dict[int, int], frame: DataFrame) -> dict[int, tuple[int, list[tuple[int, int]]]]:
        """Gaps inside ranges (gaps-and-islands): range id -> (gap count, first gaps)."""
        if not holed:
            return {}
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        ids = self.spark.createDataFrame([(rid,) for rid in holed], "range_id bigint")
        rows = frame.join(F.broadcast(ids), "range_id", "left_semi").select("range_id", "seq")
        # Consecutive seqs share seq - row_number: each group is an island of received seqs.
        by_seq = Window.partitionBy("range_id").orderBy("seq")
        islands = rows.withColumn("grp", F.col("seq") - F.row_number().over(by_seq)).groupBy("range_id", "grp").agg(
            F.min("seq").alias("lo"), F.max("seq").alias("hi")
        )
        by_lo = Window.partitionBy("range_id").orderBy("lo")
        gaps = islands.select(
            "range_id",
            (F.lag("hi").over(by_lo) + 1).alias("a"),
            (F.col("lo") - 1).alias("b"),
            # Island k (1-based) is preceded by gap k-1: its rank among the gaps, for the cap.
            (F.row_number().over(by_lo) - 1).alias("k"),
        ).filter(F.col("k") >= 1)
        result = gaps.groupBy("range_id").agg(
            F.count(F.lit(1)).alias("gaps"),
            F.collect_list(F.when(F.col("k") <= self.max_ranges, F.struct("a", "b"))).alias("first"),
        ).collect()
        return {r["range_id"]: (r["gaps"], sorted((g["a"], g["b"]) for g in r["first"])) for r in result}
    # -- 3. lanes split over partitions ------------------------------------------------------

    def _split_partitions(self) -> None:
        """Exact partition lists of the lanes seen in several (min != max); usually none.

        Also keeps, per (split lane, partition), its first record there, for the examples.
        """
        split = [key for key, stats in self.stats.items() if len(stats.partitions) > 1]
        if not split:
            return
        from pyspark.sql import functions as F

        keys = self.spark.createDataFrame(split, "topic string, producer_id string, lane int")
        rows = self.ident.join(F.broadcast(keys), list(_KEY), "left_semi").groupBy(*_KEY, "partition").agg(
            F.min("offset").alias("offset"), F.min_by("seq", "offset").alias("seq"),
            F.count(F.lit(1)).alias("records"),
        ).collect()
        found: dict[LaneKey, set[int]] = defaultdict(set)
        for row in rows:
            found[(row["topic"], row["producer_id"], row["lane"])].add(row["partition"])
        for key, parts in found.items():
            self.stats[key].partitions = sorted(parts)
        self.split_rows = sorted(
            (row.asDict() for row in rows), key=lambda r: (r["topic"], r["producer_id"], r["lane"], r["partition"]))

    # -- 4. latency ------------------------------------------------------------------------

    def _latency(self, bounds: list[float]) -> tuple[LatencyStats, dict[str, LatencyStats]]:
        from pyspark.sql import functions as F

        from pytest_kafka_mirror.verify._latency import latency_stats

        frame = self.firsts.filter(F.col("acked")).select(
            "topic", (F.col("arrival_ts_us") - F.col("produce_ts_us")).alias("lat_us")
        ).filter(F.col("lat_us").isNotNull())
        return latency_stats(frame, bounds)

    # -- 6. examples -----------------------------------------------------------------------

    def _examples(self, report: MirrorReport, lane_max: dict[LaneKey, int]) -> dict[str, list[dict[str, Any]]]:
        from pyspark.sql import functions as F

        ex: dict[str, list[dict[str, Any]]] = {}
        for kind in ("lost", "unseen"):
            picked = [(s, r) for s in report.lanes for r in s.missing_ranges if r.kind == kind][: self.examples]
            if picked:
                ex[kind] = [
                    {"topic": s.topic, "producer_id": s.producer_id, "lane": s.lane, "seq": r.first,
                     "last_seq": r.last, "count": r.count,
                     "arrived_seq": lane_max.get((s.topic, s.producer_id, s.lane))}
                    for s, r in picked
                ]
        order = [*_KEY, "seq"]
        queries: dict[str, DataFrame] = {}
        # Duplicates and phantoms come from the deduplicated frame; where their copies
        # landed is looked up afterwards for just these keys (see _locate).
        if report.duplicated:
            queries["duplicated"] = self.firsts.filter(F.col("n") > 1).orderBy(*order).select(
                *order, F.col("n").alias("copies"))
        if report.phantom:
            queries["phantom"] = self.firsts.filter(~F.col("acked")).orderBy(*order).select(
                *order, F.col("n").alias("copies"))
        if report.corrupted:
            queries["corrupted"] = self.ident.filter(F.col("checksum_ok") == F.lit(False)).orderBy(
                *order, "partition", "offset").select(*order, "partition", "offset")
        if report.reordered:
            queries["reordered"] = self.firsts.filter(F.col("reordered") > 0).orderBy(
                *_KEY, "r_partition", "r_offset").select(
                *order, "after_seq", F.col("r_partition").alias("partition"), F.col("r_offset").alias("offset"))
        if report.headers_lost:
            queries["headers_lost"] = self.cap.filter(F.col("kind") == "headerless").orderBy(
                "topic", "lane", "partition", "offset").select("topic", "target_topic", "lane", "partition", "offset")
        if report.foreign:
            queries["foreign"] = self.cap.filter(F.col("kind") == "foreign").orderBy(
                "target_topic", "partition", "offset").select("target_topic", "partition", "offset", "evidence")
        for name, query in queries.items():
            # orderBy + limit at the top of a plan runs as a top-K, not a full sort.
            ex[name] = [row.asDict() for row in query.limit(self.examples).collect()]
        if self.split_rows:
            ex["lane_split"] = self.split_rows[: self.examples]

        # One lookup for every record whose location the examples name.
        wanted = [(r["topic"], r["producer_id"], r["lane"], r["seq"]) for n in ("duplicated", "phantom")
                  for r in ex.get(n, [])]
        wanted += [(r["topic"], r["producer_id"], r["lane"], r["arrived_seq"]) for n in ("lost", "unseen")
                   for r in ex.get(n, []) if r["arrived_seq"] is not None]
        located = self._locate(wanted)
        for name in ("lost", "unseen"):
            for row in ex.get(name, []):
                copies = located.get((row["topic"], row["producer_id"], row["lane"], row["arrived_seq"]), [])
                row["partition"], row["offset"] = copies[0] if copies else (None, None)
        for name in ("duplicated", "phantom"):
            for row in ex.get(name, []):
                copies = located.get((row["topic"], row["producer_id"], row["lane"], row["seq"]), [])
                row["partition"], row["offset"] = copies[0] if copies else (None, None)
                if name == "duplicated":
                    row["at"] = ", ".join(f"{p}:{o}" for p, o in copies[:_MAX_COPIES_SHOWN]) + (
                        ", ..." if len(copies) > _MAX_COPIES_SHOWN else "")
                else:
                    row["why"] = phantom_reason(self.meta, (row["topic"], row["producer_id"], row["lane"]), row["seq"])
        return ex

    def _locate(self, keys: list[tuple[str, str, int, int]]) -> dict[tuple[str, str, int, int], list[tuple[int, int]]]:
        """(partition, offset) of the first copies of the given records, in arrival order.

        Ties in arrival time (the capture stamps a whole batch at once) are broken by
        partition and offset, so the answer is deterministic.  At most
        ``_MAX_COPIES_SHOWN + 1`` copies per record: enough to show that there are more.
        """
        if not keys:
            return {}
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        wanted = self.spark.createDataFrame(sorted(set(keys)), "topic string, producer_id string, lane int, seq bigint")
        by_arrival = Window.partitionBy(*_KEY, "seq").orderBy("arrival_ts_us", "partition", "offset")
        found = (
            self.ident.join(F.broadcast(wanted), [*_KEY, "seq"], "left_semi")
            .select(*_KEY, "seq", "partition", "offset", F.row_number().over(by_arrival).alias("k"))
            .filter(F.col("k") <= _MAX_COPIES_SHOWN + 1)
            .collect()
        )
        out: dict[tuple[str, str, int, int], list[tuple[int, int]]] = defaultdict(list)
        for r in sorted(found, key=lambda r: r["k"]):
            out[(r["topic"], r["producer_id"], r["lane"], r["seq"])].append((r["partition"], r["offset"]))
        return out

    # -- 7. three-log reconciliation -----------------------------------------------------------

    def _reconcile(self) -> None:
        """Split every lane's missing records into lost by the replicator and missing in the source.

        The acknowledged seqs absent from the target *and* from the source log are the holes
        of (target ∪ source) within the acknowledged ranges: the same range arithmetic as
        step 2 over that union.  The rest of the missing records were in the source log.
        """
        from pyspark.sql import functions as F

        source = _identified(_read_capture(self.spark, self.run_dir / SOURCE_DIR / CAPTURE_DIR)).select(*_KEY, "seq")
        both = self.firsts.filter(F.col("acked")).select(*_KEY, "seq").unionByName(source).distinct()
        self.union = self._in_ranges(both, "inner").filter(F.col("acked")).select("range_id", "seq").persist()
        rows = self.union.groupBy("range_id").agg(
            F.count(F.lit(1)).alias("distinct"), F.min("seq").alias("lo"), F.max("seq").alias("hi")).collect()
        seen = {r["range_id"]: (r["lo"], r["hi"], r["distinct"]) for r in rows}
        found, n_ranges, per_kind = self._missing(seen, self.union, lambda key, last: "source", "source")
        for key, stats in self.stats.items():
            gone = per_kind[key]["source"] if key in per_kind else 0
            stats.missing_in_source = gone
            stats.lost_by_replicator = stats.lost + stats.unseen - gone
            stats.source_missing_ranges = found.get(key, [])[: self.max_ranges]
            stats.source_missing_range_count = n_ranges.get(key, 0)


def _identified(capture: DataFrame) -> DataFrame:
    """Records of ours with their metadata intact (producer, lane and seq known)."""
    from pyspark.sql import functions as F

    return capture.filter(
        F.col("kind").isin(*_IDENTIFIED_KINDS)
        & F.col("producer_id").isNotNull() & F.col("lane").isNotNull() & F.col("seq").isNotNull()
    )


def phantom_reason(meta: dict[LaneKey, LaneMeta], key: LaneKey, seq: int) -> str:
    """Why a received record counts as phantom, from the manifests (for examples only)."""
    lane = meta.get(key)
    if lane is None:
        if not any(k[1] == key[1] for k in meta):
            return "unknown producer"
        if not any(k[0] == key[0] for k in meta):
            return "unknown topic"
        return "unknown lane"
    if any(a <= seq <= b for a, b in lane.failed):
        return "delivery failed"
    if seq < 0 or seq >= lane.sent:
        return "never sent"
    return "not acknowledged"
