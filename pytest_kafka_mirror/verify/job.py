"""The verification job: manifests + capture segments -> :class:`MirrorReport`.

Runs are large (10M+ records), so everything row-level stays in Spark and only aggregates
and a bounded number of example rows reach the driver.  The job is shaped to need few
Spark actions and few shuffles, and each query is one SQL text (``_sql.Queries``):

1. ``firsts``: one row per distinct (topic, producer, lane, seq) received: copy count,
   corrupt copies, first arrival, whether its first copy arrived behind a higher seq of
   its target partition, and the acknowledged range it falls in (a broadcast range join:
   manifests are ranges, and tiny).  All of it over a single shuffle by lane.  Cached
   (a small capture's as a local checkpoint, in a classic session); every later step
   reads this cache.  A capture under ``_ONE_ROUND_ROWS`` is read into one partition: no
   shuffle at all, and its first round of queries is one Spark action of one task.
2. One aggregate per acknowledged range (count, min, max seq) gives expected, received,
   distinct, duplicated, phantom, corrupted, reordered *and* the exact lost / unseen
   counts: a range whose distinct count equals ``max - min + 1`` has no hole inside, so
   its missing seqs are the edges, computed on the driver.  Only ranges with holes inside
   go through the gaps window (one more action, skipped in a clean run; a capture under
   ``_ONE_ROUND_ROWS`` has the window run over every range in the first round instead).
   This avoids exploding every acknowledged seq and joining it against the capture, which
   would shuffle the run twice over.
3. Lanes seen in several target partitions get their exact partition list (only then).
4. Latency: exact nearest-rank percentiles and the histogram from bucket counts, in one
   or two small aggregates (``verify/_latency.py``; one, of a bucket per value, for a
   capture under ``_ONE_ROUND_ROWS``).
5. Record kinds (headerless, foreign) and damaged metadata (per header name, missing or
   altered; how many lost their identity with it): one scan of a few columns of the capture.
6. Examples, only for anomalies that occurred: the first ``examples`` rows per anomaly,
   which Spark runs as top-Ks without sorting everything (one scan of the cache for the
   anomalies of distinct records, one of the capture for both record kinds and the damaged).  Each names
   a target partition and offset: of the record itself, or for missing records of the
   highest sequence of their lane that arrived.
7. Three-log reconciliation, only when the run captured the source topics too
   (``RUN_DIR/source``): step 2 again over the union of target and source seqs, whose
   holes are the acknowledged records the source log lacks as well.  One shuffle of the
   source log and one or two small actions.

Sequences the producer sent but the source never acknowledged are ranges of the same
broadcast table (flagged unacknowledged), so counting those that never arrived costs
nothing extra: their records, when they arrive, are phantoms.

A lane of a topic the manifests list as compacted is a key: of its acknowledged records
only the latest must arrive, and step 2 already tells whether it did (it ends the lane's
last acknowledged range).  Its other missing records are counted as compacted away, and
neither listed nor looked for in the gaps window (``_Job._latest_per_key``).

``pytest_kafka_mirror.verify.oracle`` computes the same report in plain Python; the tests
check that the two agree exactly on generated histories.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial, reduce
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_kafka_mirror.rundir import (
    CAPTURE_DIR,
    CAPTURE_SCHEMA_FIELDS,
    DEFAULT_BOUNDS,
    REPORT_FILE,
    SOURCE_DIR,
    load_capture_status,
    load_discovery,
    load_engine,
    load_manifests,
    load_scenario_figures,
)
from pytest_kafka_mirror.verify._capacity import flow_query
from pytest_kafka_mirror.verify._sql import Queries
from pytest_kafka_mirror.verify._timeline import apply_timeline, timeline_query
from pytest_kafka_mirror.verify.segments import capture_segments, segment_rows
from pytest_kafka_mirror.verify.report import LaneStats, LatencyStats, MirrorReport, MissingRange

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["DEFAULT_BOUNDS", "LaneMeta", "RecordKinds", "add_untimed", "manifest_lanes", "phantom_reason",
           "record_kinds", "verify_run"]

log = logging.getLogger(__name__)

_KEY = ("topic", "producer_id", "lane")
_KEY_SQL = ", ".join(_KEY)
#: Seq buckets of the range join: 2**16 seqs, so a 10M-record range is ~150 table rows.
_BUCKET_BITS = 16
#: Copies listed per duplicated example.
_MAX_COPIES_SHOWN = 5
_IDENTIFIED_KINDS = ("headers", "body")
#: Records of ours identified (producer, lane and seq known; the rest of their metadata may
#: be damaged: records.decode), as SQL.
_IDENTIFIED = (f"kind IN ({', '.join(repr(kind) for kind in _IDENTIFIED_KINDS)}) AND producer_id IS NOT NULL "
               "AND lane IS NOT NULL AND seq IS NOT NULL")
_SPARK_TYPES = {"string": "string", "int32": "int", "int64": "bigint", "bool": "boolean"}
#: Report totals that are sums over lanes.
_LANE_TOTALS = ("expected", "received", "distinct", "lost", "unseen", "duplicated", "reordered", "phantom",
                "corrupted", "never_acked", "lost_by_replicator", "missing_in_source", "aborted_arrived",
                "latest_missing", "compacted_away")

LaneKey = tuple[str, str, int]


@dataclass
class LaneMeta:
    """One lane as the manifests describe it (ranges merged, sorted)."""

    target_topic: str | None
    partition: int
    sent: int = 0
    acked: list[tuple[int, int]] = field(default_factory=list)
    failed: list[tuple[int, int]] = field(default_factory=list)
    #: taken by the source in transactions it then aborted (a subset of :attr:`unacked`)
    aborted: list[tuple[int, int]] = field(default_factory=list)
    #: a lane of a compacted topic (``Manifest.compacted``): a key, only its latest record must arrive
    compacted: bool = False

    @property
    def aborted_count(self) -> int:
        return sum(b - a + 1 for a, b in self.aborted)

    @property
    def latest(self) -> int | None:
        """The latest acknowledged sequence (None when the source acknowledged none)."""
        return self.acked[-1][1] if self.acked else None

    @property
    def unacked(self) -> list[tuple[int, int]]:
        """Sequences ``0 .. sent-1`` the source did not acknowledge (failed, unreported or aborted)."""
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


def _cut(ranges: Sequence[tuple[int, int]], at: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """``ranges`` (sorted, disjoint) split at the boundaries of ``at``: each piece lies
    wholly inside one range of ``at`` or wholly outside all of them."""
    out: list[tuple[int, int]] = []
    for a, b in ranges:
        for x, y in at:
            if y < a or x > b:
                continue
            if x > a:
                out.append((a, x - 1))
            out.append((max(a, x), min(b, y)))
            a = min(b, y) + 1
        if a <= b:
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
            meta.aborted = _merge([*meta.aborted, *lm.aborted])
            meta.compacted = meta.compacted or lm.topic in m.compacted
    return lanes, topics


def _read_capture(spark: SparkSession, capture_dir: Path) -> DataFrame:
    """The capture segments, or an empty frame of the same schema when there are none."""
    schema = ", ".join(f"`{name}` {_SPARK_TYPES[t]}" for name, t in CAPTURE_SCHEMA_FIELDS)
    # List files ourselves: a directory read would also pick up half-written temp files,
    # and fails outright on an empty directory.
    files = [segment.spark_path for segment in capture_segments(capture_dir)]  # here, or in the run store
    if not files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*files)


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
    size = capture_rows(run)
    if spark is None:
        from pytest_kafka_mirror.verify.connect import LARGE_CAPTURE_RECORDS
        from pytest_kafka_mirror.verify.spark import get_spark

        spark = get_spark(master, large=size >= LARGE_CAPTURE_RECORDS)  # the rows just counted: no second read
    with _job_conf(spark, size):
        job = _Job(spark, run, lanes_meta, topics, examples=max(examples, 0), max_ranges=max(max_ranges, 0),
                   large=size >= _SMALL_CAPTURE_ROWS, one_round=size < _ONE_ROUND_ROWS)
        try:
            report = job.run(bounds)
        except BaseException:
            _quietly(job.release)
            raise
        job.release()
    report.discovery = load_discovery(run)
    report.engine = load_engine(run)
    report.scenario = load_scenario_figures(run)
    if write_report:
        report.write(run / REPORT_FILE)
    return report


#: Captures of fewer rows than this run without code generation, whole-stage or per
#: expression: compiling the generated Java of a dozen small queries, then having the JIT
#: compile it, costs more than it saves (about 1 s per verification of a 10k-record run
#: each).  The job's sizes are rows (the segments' Parquet footers), not bytes: since the
#: capture delta-encodes its growing integer columns a record takes under a byte of
#: Parquet (a 1.9M-record capture of the backlog drain is 1.1 MB), and these thresholds,
#: set in bytes at some 20 B a record (4 MB, 1 MB, 32 MB), took such a capture for a small
#: one: no code generation and one shuffle partition, 47-60 s to verify it.
_SMALL_CAPTURE_ROWS = 200_000
#: Captures of fewer rows than this have their gaps and exact latency values counted in
#: the first round of queries (see _Job.run), not in a second one: for them that is a few
#: thousand rows more, where a round costs a few tenths of a second (a warm 10k-record run,
#: the median of five: 2.08 / 1.80 / 1.79 -> 1.44 / 1.71 / 1.50 s, three process pairs
#: alternating).  They are also read into one partition (see _Job._store), and that round
#: is one Spark action.
_ONE_ROUND_ROWS = 50_000
#: Captures of up to this many rows are cached uncompressed: building and reading the
#: in-memory columns without compression is about a quarter faster, and costs some 130 MB
#: per million records.  Larger runs keep the compressed cache, which spills less.
_PLAIN_CACHE_ROWS = 2_000_000


def capture_rows(run: Path) -> int:
    """The rows of the run's capture segments, from their Parquet footers (wherever they are)."""
    return sum(segment_rows(segment) for segment in capture_segments(run / CAPTURE_DIR))


def large_capture(run_dir: str | os.PathLike[str]) -> bool:
    """Whether the run's capture holds :data:`~.connect.LARGE_CAPTURE_RECORDS` records or
    more: its verification wants a driver with the C2 compiler (``connect.QUICK_JIT``).
    The capture status counts them; without a count there (a capture of someone else's, an
    unreadable status), the footers of its segments do."""
    from .connect import LARGE_CAPTURE_RECORDS

    records = load_capture_status(run_dir).get("records")
    if not isinstance(records, int):
        records = capture_rows(Path(run_dir))
    return records >= LARGE_CAPTURE_RECORDS


@contextmanager
def _job_conf(spark: SparkSession, size: int) -> Iterator[None]:
    """Session settings for one verification of a capture of ``size`` rows, restored
    afterwards.

    In local mode adaptive query execution only costs: its partition coalescing and skew
    handling have nothing to do with one shuffle partition per core, and it re-plans the
    query after every stage and runs each stage as a Spark job of its own.  Small captures
    also skip code generation (see ``_SMALL_CAPTURE_ROWS``) and, in local
    mode, shuffle into one partition: task overhead, not rows, is their cost.  Set through
    ``spark.conf``, which works over Spark Connect too.
    """
    wanted: dict[str, str] = {}
    try:
        master = str(spark.conf.get("spark.master", "") or "")
    except Exception:  # noqa: BLE001 - a Connect server may not expose it: then keep its settings
        master = ""
    if master.startswith("local"):
        wanted["spark.sql.adaptive.enabled"] = "false"
    if size <= _PLAIN_CACHE_ROWS:
        wanted["spark.sql.inMemoryColumnarStorage.compressed"] = "false"
    if size < _SMALL_CAPTURE_ROWS:
        wanted["spark.sql.codegen.wholeStage"] = "false"
        # ... nor Java code for single expressions: generated classes are new to the JIT
        # in every verification, the interpreted evaluators stay compiled from one to the
        # next (a warm 10k-record run: 2.2-2.4 -> 1.3-1.6 s, tasks' CPU halved).
        wanted["spark.sql.codegen.factoryMode"] = "NO_CODEGEN"
        if master.startswith("local"):
            # A dozen small aggregates run at once: one task each keeps both cores busy.
            wanted["spark.sql.shuffle.partitions"] = "1"
    else:
        # See _Job._firsts: its aggregates read records sorted by their keys.
        wanted["spark.sql.execution.replaceHashWithSortAgg"] = "true"
    before = {key: spark.conf.get(key, None) for key in wanted}
    for key, value in wanted.items():
        spark.conf.set(key, value)

    def restore() -> None:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)

    try:
        yield
    except BaseException:
        _quietly(restore)
        raise
    restore()


def _quietly(cleanup: Callable[[], Any]) -> None:
    """A cleanup run while an error is raised (a Ctrl-C among them), whose own error must
    not take the first one's place: after a KeyboardInterrupt inside a py4j call py4j shuts
    that connection, and the next call can fail with "Answer from Java side is empty" (a
    Ctrl-C mid-verification then ended the session as a failed test, not as interrupted)."""
    try:
        cleanup()
    except Exception as exc:  # noqa: BLE001 - the error being raised is the one that counts
        log.debug("kafka-mirror: a cleanup after an error failed too: %s", exc)


class _Job:
    """State of one verification: the cached frames and the lane table being filled."""

    def __init__(self, spark: SparkSession, run: Path, lanes_meta: dict[LaneKey, LaneMeta], topics: dict[str, str],
                 *, examples: int, max_ranges: int, large: bool = False, one_round: bool = False) -> None:

        self.spark = spark
        self.run_dir = run
        self.meta = lanes_meta
        self.topics = topics
        self.examples = examples
        self.max_ranges = max_ranges
        self.large = large
        self.one_round = one_round
        self.stats: dict[LaneKey, LaneStats] = {}
        for key, meta in lanes_meta.items():
            self._lane(key).expected = sum(b - a + 1 for a, b in meta.acked)

        # Range ids index self.ranges: the acknowledged ranges of every lane, then the sent
        # but unacknowledged ones.  Ranges of one lane are disjoint; acked ones not adjacent.
        # Unacknowledged ranges are cut at the aborted ones (``aborted_ids``): a record of
        # an aborted transaction that arrives is a phantom *and* counts as aborted_arrived.
        self.ranges: list[tuple[LaneKey, int, int, bool]] = [
            (key, a, b, True) for key, meta in sorted(lanes_meta.items()) for a, b in meta.acked
        ] + [(key, a, b, False) for key, meta in sorted(lanes_meta.items()) for a, b in _cut(meta.unacked, meta.aborted)]
        self.aborted_ids = {i for i, (key, a, b, acked) in enumerate(self.ranges)
                            if not acked and any(x <= a and b <= y for x, y in self.meta[key].aborted)}
        #: lanes of compacted topics -> the id of their last acknowledged range (the latest record's)
        self.latest_ids = {key: i for i, (key, a, b, acked) in enumerate(self.ranges)
                           if acked and self.meta[key].compacted}
        # The range join probes a hash table by (lane, seq bucket): a lane whose acked seqs
        # are split into thousands of ranges (many delivery failures) then costs each record
        # one or two range checks, not thousands.
        self.ranges_df = _local_frame(
            spark,
            [
                (i, k[0], k[1], k[2], bucket, a, b, acked)
                for i, (k, a, b, acked) in enumerate(self.ranges)
                for bucket in range(a >> _BUCKET_BITS, (b >> _BUCKET_BITS) + 1)
            ],
            "range_id bigint, r_topic string, r_producer string, r_lane int, r_bucket bigint, r_a bigint, r_b bigint, "
            "acked boolean",
        )

        self.query = Queries(spark)
        try:
            self._store(run)
        except BaseException:  # a job that never started leaves no view behind
            _quietly(self.query.close)
            raise
        self.split_rows: list[dict[str, Any]] = []
        self.union: DataFrame | None = None

    def _store(self, run: Path) -> None:
        """Set up the capture's columns and the first copies, and start building them."""
        cols = ("topic, target_topic, `partition`, `offset`, kind, producer_id, lane, seq, produce_ts_us, "
                "arrival_ts_us, checksum_ok, evidence, damage")
        # A small capture is read into one partition (a coalesce: no shuffle).  Every frame
        # built on it is then one partition that any grouping is already clustered by: the
        # job has no shuffle at all, and the first round's union is one task
        # (``_collect(one_action=True)``): 5 Spark jobs where there were 11.  Warm 10k-record
        # runs, the median of five, six process pairs alternating: 1.36 / 1.45 / 1.32 / 1.41 /
        # 1.48 / 1.37 -> 1.17 / 1.29 / 1.26 / 1.57 / 1.31 / 1.38 s; JVM CPU per run 2.56 ->
        # 2.26 s (means).
        coalesce = "/*+ COALESCE(1) */" if self.one_round else ""
        cap = self.query(f"SELECT {coalesce} {cols} FROM {{capture}}",
                         capture=_read_capture(self.spark, run / CAPTURE_DIR))
        # In a classic session a small capture's columns and first copies are local
        # checkpoints, stored by the first action that reads them.  The queries after it
        # then scan stored rows: they neither open every segment file again (the Parquet
        # reader copies the Hadoop configuration for each file) nor plan the whole job below
        # ``firsts`` again.  Warm 10k-record runs, the median of five: 2.07 -> 1.91 s for the
        # first copies (the mean of seven process pairs alternating), then 1.97 -> 1.73 s for
        # the capture (three pairs).  A large capture is scanned by each query that reads it
        # instead (records, kinds, examples; each only the columns it needs), and its first
        # copies are an in-memory columnar cache, compressed and spilling less.  So are a
        # Spark Connect server's, which drops a checkpoint only when the client's frame is
        # garbage collected.
        self.checkpoint = not self.large and hasattr(cap, "_jdf")
        self.cap = cap.localCheckpoint(eager=False) if self.checkpoint else cap
        firsts = self._firsts()
        self.firsts = firsts.localCheckpoint(eager=False) if self.checkpoint else firsts.persist()
        # Built by an action of its own: when the first query that reads the cache builds
        # it, the other queries of that action wait for its blocks while holding task slots.
        # It runs while the driver builds and plans the first round's queries (see _collect).
        self.cached = _Background(self.firsts.count, "kafka-mirror-verify-cache")

    def _in_ranges(self, relation: DataFrame | str, how: str, acked: str = "r.acked",
                   **frames: DataFrame) -> DataFrame:
        """``relation`` (lane key + seq: a frame, or SQL text over ``frames``) joined with the
        range containing each seq (broadcast): its columns, ``range_id`` and ``acked`` (the
        SQL expression ``acked`` of ``r``)."""
        return self.query(f"""
            SELECT /*+ BROADCAST(r) */ f.*, r.range_id, {acked} AS acked FROM {{relation}} f {how} JOIN {{ranges}} r
            ON f.topic = r.r_topic AND f.producer_id = r.r_producer AND f.lane = r.r_lane
               AND shiftright(f.seq, {_BUCKET_BITS}) = r.r_bucket AND f.seq BETWEEN r.r_a AND r.r_b""",
                          relation=relation, ranges=self.ranges_df, **frames)

    def _firsts(self) -> DataFrame:
        """One row per distinct received record, with everything the figures need.

        A single shuffle, by lane (none for a capture read into one partition): the
        reordering window over each target partition, then deduplicating per (lane, target
        partition) and per lane, all inside that partitioning.  The window runs over the
        records themselves: at the first copy of a seq in a partition, the highest seq
        before it is the same whether the copies before were deduplicated or not, and once
        a copy is behind a higher seq every later copy in that partition is too, so "its
        first copy is late" is "all its copies are late".

        Large captures sort the windowed records by (lane, seq) and aggregate them as they
        stream by (``_job_conf`` turns hash aggregates over sorted input into sort
        aggregates): a hash table of 10M distinct seqs spills and sorts anyway, twice.  A
        10M-record run: 40-46 -> 35-36 s (alternating, one JVM).  Small captures keep the hash
        aggregates, a tenth of a second faster there.  Only primitive aggregates: a struct
        min would turn a hash aggregate into a sort aggregate.
        """
        key = _KEY_SQL
        late = "coalesce(seq < after_seq, false)"
        # Reordered: the first copy of a seq arrived after a higher seq of its lane, in the
        # same target partition (order across partitions is not defined in Kafka).
        records = f"""
            SELECT *, max(seq) OVER (PARTITION BY {key}, `partition` ORDER BY `offset`
                                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS after_seq
            FROM (SELECT * FROM {{cap}} WHERE {_IDENTIFIED} {"" if self.one_round else f"DISTRIBUTE BY {key}"})
            {f"SORT BY {key}, seq, `partition`, `offset`" if self.large else ""}"""
        per_partition = f"""
            SELECT {key}, seq, `partition`, min(`offset`) AS `offset`, count(1) AS n,
                   count(CASE WHEN checksum_ok = false THEN 1 END) AS bad, min(arrival_ts_us) AS arrival_ts_us,
                   min_by(produce_ts_us, arrival_ts_us) AS produce_ts_us, bool_and({late}) AS late,
                   min_by(after_seq, `offset`) AS after_seq
            FROM ({records}) GROUP BY {key}, seq, `partition`"""
        firsts = f"""(
            SELECT {key}, seq, sum(n) AS n, sum(bad) AS bad, min(arrival_ts_us) AS arrival_ts_us,
                   min_by(produce_ts_us, arrival_ts_us) AS produce_ts_us,
                   count(CASE WHEN late THEN 1 END) AS reordered, min(`partition`) AS pmin, max(`partition`) AS pmax,
                   -- where the reordering was seen, for the examples
                   min(CASE WHEN late THEN `partition` END) AS r_partition,
                   min_by(CASE WHEN late THEN `offset` END, CASE WHEN late THEN `partition` END) AS r_offset,
                   min_by(CASE WHEN late THEN after_seq END, CASE WHEN late THEN `partition` END) AS after_seq
            FROM ({per_partition}) GROUP BY {key}, seq)"""
        return self._in_ranges(firsts, "LEFT", acked="coalesce(r.acked, false)", cap=self.cap)

    def release(self) -> None:
        if self.cached.running():  # an error or Ctrl-C before the first round waited for it
            _cancel_jobs(self.spark)
        self.cached.wait(raise_error=False)
        if self.checkpoint:
            _release_checkpoint(self.firsts)
            _release_checkpoint(self.cap)
        else:
            self.firsts.unpersist()
        if self.union is not None:
            self.union.unpersist()
        self.query.close()

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
        """Two rounds of concurrent Spark actions, then the rare extras.

        1. Every small aggregate of the cached ``firsts`` and of the capture at once
           (:func:`_collect`): per range counts, latency buckets, the timeline, record
           kinds and the top-K candidates of every example, all reading the cache (built
           before, by an action of its own).
        2. What depends on those rows: the gaps inside ranges with holes, the latency
           values of the buckets a percentile falls inside, and the locations of the example
           records in the capture.

        A small capture (``one_round``) has its gaps (in every range) and latencies (one
        bucket per value) counted in the first round: its second one is only for the
        examples' locations, and a clean run has none.
        """
        from pytest_kafka_mirror.verify._latency import LatencyPlan

        latency = LatencyPlan(self.query, self._LATENCIES, bounds, exact=self.one_round, firsts=self.firsts)
        first = _collect({
            "ranges": self._range_query(), "latency": latency.buckets_query(),
            "kinds": self.query(f"SELECT kind, damage, {_IDENTIFIED} AS identified, count(1) AS count FROM {{cap}} "
                                "GROUP BY kind, damage, identified", cap=self.cap),
            "timeline": timeline_query(self.query, self.firsts),
            "flow": flow_query(self.query, self.firsts),
            **(self._candidate_queries() if self.examples else {}),
            **({"holes": self._holes_query(None, self.firsts)} if self.one_round else {}),
            **({"duplicates": self._duplicates_query()} if self.max_ranges > 0 else {}),
        }, self.spark, after=self.cached.wait, one_action=self.one_round)
        kinds = record_kinds(first["kinds"])
        first["topic_firsts"] = self._topic_firsts(first["ranges"])
        if self.examples:
            first.update(_split_candidates(first.pop("candidates")))
            first.update(_split_kind_examples(first.pop("kind_examples")))
        lane_max, missing = self._counts(first["ranges"])
        second: dict[str, DataFrame | None] = {
            "holes": None if self.one_round else self._holes_query(missing.holed, self.firsts),
            "values": latency.values_query(first["latency"]),
            "located": self._locate_query(first, missing, lane_max) if self.examples else None,
        }
        rows = _collect({name: query for name, query in second.items() if query is not None}, self.spark)
        if self.one_round:  # the first round's holes are of every range: keep those of ``missing.holed``
            holed = set(missing.holed)
            holes = [row for row in first["holes"] if row["range_id"] in holed]
        else:
            holes = rows.get("holes", [])
        self._fill_missing(missing, holes)
        self._fill_duplicates(first.get("duplicates", []))
        reconciled = (self.run_dir / SOURCE_DIR).is_dir()
        if reconciled:
            self._reconcile()
        self._split_partitions()
        overall, by_topic = latency.finish(rows.get("values", []))
        add_untimed(overall, by_topic, self._untimed(first["ranges"]), len(bounds))

        lanes = [self.stats[k] for k in sorted(self.stats)]
        report = MirrorReport(
            run_dir=str(self.run_dir),
            headers_lost=kinds.counts.get("headerless", 0),
            foreign=kinds.counts.get("foreign", 0),
            metadata_damaged=kinds.damaged,
            damaged_unmatched=kinds.unmatched,
            damage=kinds.damage,
            lane_split=sum(1 for s in lanes if len(s.partitions) > 1),
            aborted=sum(meta.aborted_count for meta in self.meta.values()),
            reconciled=reconciled,
            lanes=lanes,
            latency=overall,
            latency_by_topic=by_topic,
            histogram_bounds_ms=bounds,
            capture=load_capture_status(self.run_dir),
        )
        for name in _LANE_TOTALS:
            setattr(report, name, sum(getattr(s, name) for s in lanes))
        if self.examples:
            report.examples = self._examples(report, lane_max, first, rows.get("located", []))
        apply_timeline(report, first, self.run_dir)
        return report

    # -- 2. counts and missing ranges ----------------------------------------------------

    def _range_query(self) -> DataFrame:
        return self.query(f"""
            SELECT {_KEY_SQL}, range_id, count(1) AS `distinct`, sum(n) AS received, sum(bad) AS bad,
                   min(seq) AS lo, max(seq) AS hi, sum(reordered) AS reordered, min(pmin) AS pmin, max(pmax) AS pmax,
                   min(produce_ts_us) AS first_produce_us,
                   min(CASE WHEN produce_ts_us IS NOT NULL THEN arrival_ts_us END) AS first_arrival_us,
                   count(CASE WHEN produce_ts_us IS NULL THEN 1 END) AS untimed
            FROM {{firsts}} GROUP BY {_KEY_SQL}, range_id""", firsts=self.firsts)

    def _acked(self, rid: int | None) -> bool:
        """Whether range id ``rid`` (None: in no range) is an acknowledged range."""
        return rid is not None and self.ranges[rid][3]

    def _untimed(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
        """Per source topic, the acknowledged records that arrived without a usable produce
        time (their first copy's), from the rows of :meth:`_range_query`."""
        out: dict[str, int] = defaultdict(int)
        for row in rows:
            if row["untimed"] and self._acked(row["range_id"]):
                out[row["topic"]] += row["untimed"]
        return out

    def _topic_firsts(self, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Per source topic, the first produce and arrival times of its acknowledged records
        (what ``apply_timeline`` takes), from the rows of :meth:`_range_query`.  Records
        without a produce time are left out of both (a topic with only those has none)."""
        firsts: dict[str, dict[str, Any]] = {}
        for row in rows:
            if not self._acked(row["range_id"]) or row["first_produce_us"] is None:
                continue
            entry = firsts.setdefault(row["topic"], {"topic": row["topic"], "first_produce_us": None,
                                                     "first_arrival_us": None})
            for name in ("first_produce_us", "first_arrival_us"):
                if row[name] is not None:
                    entry[name] = row[name] if entry[name] is None else min(entry[name], row[name])
        return list(firsts.values())

    def _counts(self, rows: Sequence[Mapping[str, Any]]) -> tuple[dict[LaneKey, int], _Missing]:
        """Fill the lane counts from the rows of :meth:`_range_query`; return the highest seq
        received per lane and the missing ranges but those inside ranges (see _fill_missing)."""
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
            if not self._acked(rid):
                stats.phantom += row["received"]
                if rid in self.aborted_ids:
                    stats.aborted_arrived += row["received"]
            if rid is not None:
                seen[rid] = (row["lo"], row["hi"], row["distinct"])
            lane_max[key] = max(lane_max.get(key, row["hi"]), row["hi"])

        for rid, (key, a, b, acked) in enumerate(self.ranges):
            if not acked and rid not in self.aborted_ids:
                got = seen.get(rid)
                self._lane(key).never_acked += b - a + 1 - (got[2] if got else 0)

        def tail_kind(key: LaneKey, last: int) -> str:
            # A hole is "lost" when something later in the lane arrived, else "unseen".  The
            # lane max is a received seq, so no hole straddles it.
            top = lane_max.get(key)
            return "lost" if top is not None and top > last else "unseen"

        missing = self._missing(seen, tail_kind, "lost")
        for key, kinds in missing.per_kind.items():
            stats = self._lane(key)
            stats.lost, stats.unseen = kinds["lost"], kinds["unseen"]
        self._latest_per_key(seen, missing)
        return lane_max, missing

    def _latest_per_key(self, seen: Mapping[int, tuple[int, int, int]], missing: _Missing) -> None:
        """Lanes of compacted topics: only the latest acknowledged record of each must arrive
        (``latest_missing``); the older ones that did not are ``compacted_away``, not lost.
        The latest record ends its lane's last acknowledged range: it arrived when that
        range's highest seq received is it.  Their missing ranges are not listed (nor their
        gaps looked for)."""
        for key, meta in self.meta.items():
            if not meta.compacted:
                continue
            stats = self._lane(key)
            stats.compacted, stats.latest_seq = True, meta.latest
            got = seen.get(self.latest_ids[key]) if key in self.latest_ids else None
            stats.latest_missing = int(meta.latest is not None and (got is None or got[1] != meta.latest))
            stats.compacted_away = stats.lost + stats.unseen - stats.latest_missing
            stats.lost = stats.unseen = 0
            missing.found.pop(key, None)
            missing.n_ranges.pop(key, None)
            missing.per_kind.pop(key, None)
        missing.holed = [rid for rid in missing.holed if not self.meta[self.ranges[rid][0]].compacted]

    def _fill_missing(self, missing: _Missing, hole_rows: Sequence[Mapping[str, Any]]) -> None:
        """Add the gaps inside ranges (rows of :meth:`_holes_query`) and list every lane's missing ranges."""
        found, n_ranges = missing.add_holes(self.ranges, hole_rows)
        for key, ranges in found.items():
            stats = self._lane(key)
            stats.missing_ranges = ranges[: self.max_ranges]
            stats.missing_range_count = n_ranges[key]

    def _duplicates_query(self) -> DataFrame:
        """The ranges of seqs that arrived more than once, per lane (the first
        ``max_ranges`` and how many there are).  In the first round, run whether or not there
        are any (as the example candidates): in a clean run a scan of the cache that finds nothing."""
        return self.query(f"""
            SELECT {_KEY_SQL}, first, last, total FROM (
                SELECT *, row_number() OVER (PARTITION BY {_KEY_SQL} ORDER BY first) AS rank,
                       count(1) OVER (PARTITION BY {_KEY_SQL}) AS total
                FROM (SELECT {_KEY_SQL}, min(seq) AS first, max(seq) AS last FROM (
                          SELECT {_KEY_SQL}, seq,
                                 seq - row_number() OVER (PARTITION BY {_KEY_SQL} ORDER BY seq) AS island
                          FROM {{firsts}} WHERE n > 1)
                      GROUP BY {_KEY_SQL}, island)
            ) WHERE rank <= {self.max_ranges}""", firsts=self.firsts)

    def _fill_duplicates(self, rows: Sequence[Mapping[str, Any]]) -> None:
        for row in sorted(rows, key=lambda r: (*(r[k] for k in _KEY), r["first"])):
            stats = self._lane((row["topic"], row["producer_id"], row["lane"]))
            stats.duplicate_ranges.append(MissingRange(row["first"], row["last"], "duplicated"))
            stats.duplicate_range_count = row["total"]

    def _missing(self, seen: dict[int, tuple[int, int, int]], tail_kind: Callable[[LaneKey, int], str],
                 inner_kind: str) -> _Missing:
        """Missing seqs of every acknowledged range, given (lo, hi, distinct) of the seqs
        received that fall in each range: every edge, and the exact missing count per kind
        (the gaps inside a range hold ``hi - lo + 1 - distinct`` seqs whatever the listing
        cap).  The ranges with holes inside are listed in ``holed`` for :meth:`_holes_query`.
        """
        out = _Missing(inner_kind)
        for rid, (key, a, b, acked) in enumerate(self.ranges):
            if not acked:
                continue
            got = seen.get(rid)
            if got is None:
                out.add(key, MissingRange(a, b, tail_kind(key, b)))
                continue
            lo, hi, distinct = got
            if lo > a:
                out.add(key, MissingRange(a, lo - 1, inner_kind))
            if hi < b:
                out.add(key, MissingRange(hi + 1, b, tail_kind(key, b)))
            inside = hi - lo + 1 - distinct
            if inside:
                out.holed.append(rid)
                out.per_kind[key][inner_kind] += inside
        return out

    def _holes_query(self, holed: list[int] | None, frame: DataFrame) -> DataFrame | None:
        """Gaps inside ranges: per range id the gap count and the first ``max_ranges`` gaps
        (of the ranges ``holed``, or of every range: None)."""
        if holed is not None and not holed:
            return None
        ids = _local_table(self.spark, [(rid,) for rid in holed], "range_id bigint") if holed else None
        records = "{frame}" if ids is None else (
            "(SELECT /*+ BROADCAST(i) */ f.* FROM {frame} f LEFT SEMI JOIN {ids} i ON f.range_id = i.range_id)")
        # A range is in one lane: the window runs over lanes ordered by seq, which is how a
        # large capture's ``firsts`` is partitioned and sorted (no shuffle, no sort then).
        lane = ", ".join(c for c in _KEY if c in frame.columns) or "range_id"
        # ``frame`` holds each seq once: a gap follows every seq more than one above the one
        # before it in its range; each gap's rank in its range is for the listing cap.
        return self.query(f"""
            SELECT range_id, count(1) AS gaps,
                   collect_list(CASE WHEN k <= {self.max_ranges} THEN struct(a, b) END) AS `first`
            FROM (
                SELECT *, row_number() OVER (PARTITION BY range_id ORDER BY a) AS k FROM (
                    SELECT range_id, lag(seq) OVER w + 1 AS a, seq - 1 AS b, lag(range_id) OVER w AS before
                    FROM {records}
                    WINDOW w AS (PARTITION BY {lane} ORDER BY seq)
                ) WHERE a <= b AND before = range_id
            ) GROUP BY range_id""", frame=frame, **({} if ids is None else {"ids": ids}))

    # -- 3. lanes split over partitions ------------------------------------------------------

    def _split_partitions(self) -> None:
        """Exact partition lists of the lanes seen in several (min != max); usually none.

        Also keeps, per (split lane, partition), its first record there, for the examples.
        """
        split = [key for key, stats in self.stats.items() if len(stats.partitions) > 1]
        if not split:
            return
        from pyspark.sql import functions as F

        keys = _local_frame(self.spark, split, "topic string, producer_id string, lane int")
        records = _identified(self.cap).join(F.broadcast(keys), list(_KEY), "left_semi")
        rows = records.groupBy(*_KEY, "partition").agg(
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

    #: Latencies of the acknowledged records that arrived, over ``{firsts}``.
    _LATENCIES = ("(SELECT topic, arrival_ts_us - produce_ts_us AS lat_us FROM {firsts} "
                  "WHERE acked AND arrival_ts_us IS NOT NULL AND produce_ts_us IS NOT NULL)")

    # -- 6. examples -----------------------------------------------------------------------

    def _candidate_queries(self) -> dict[str, DataFrame]:
        """Top-K example candidates of every anomaly, run whether or not it occurred: in a
        clean run each is a scan that finds nothing, cheaper than another Spark action.

        The anomalies of the deduplicated frame share one scan of the cache: each row is
        tagged with the anomalies it shows and the first ``examples`` of each tag are kept
        by ``row_number() <= n``, which Spark runs as a top-K per tag before its shuffle
        (a window group limit), not as a sort of every anomalous row.
        (:func:`_split_candidates` gives each anomaly its rows.)  The capture's headerless and
        foreign records share one scan the same way, tagged by kind
        (:func:`_split_kind_examples`).
        """
        n = self.examples
        # The first seqs with a corrupt copy: their corrupt copies are the first examples.
        tags = {"duplicated": "n > 1", "phantom": "NOT acked", "corrupt_seqs": "bad > 0", "reordered": "reordered > 0"}
        tag = "explode(array(" + ", ".join(f"CASE WHEN {cond} THEN '{name}' END" for name, cond in tags.items()) + "))"
        # Reorderings in order of where they were seen; the rest by lane and seq.
        reordered = "CASE WHEN tag = 'reordered' THEN {} END"
        by_tag = ", ".join([*_KEY, reordered.format("r_partition"), reordered.format("r_offset"), "seq"])
        # Duplicates and phantoms come from the deduplicated frame; where their copies
        # landed is looked up afterwards for just these keys (see _locate_query).
        candidates = f"""
            SELECT * FROM (
                SELECT *, row_number() OVER (PARTITION BY tag ORDER BY {by_tag}) AS k FROM (
                    SELECT {_KEY_SQL}, seq, n, after_seq, r_partition, r_offset, {tag} AS tag
                    FROM {{firsts}} WHERE {" OR ".join(f"({cond})" for cond in tags.values())}
                ) WHERE tag IS NOT NULL
            ) WHERE k <= {n}"""
        kind_examples = f"""
            SELECT * FROM (
                SELECT *, row_number() OVER (PARTITION BY tag ORDER BY
                           CASE WHEN tag = 'headerless' THEN topic ELSE target_topic END,
                           CASE WHEN tag = 'headerless' THEN lane END, `partition`, `offset`) AS k
                FROM (SELECT CASE WHEN damage IS NOT NULL THEN 'damaged' ELSE kind END AS tag, topic, target_topic,
                             producer_id, lane, seq, `partition`, `offset`, evidence, damage
                      FROM {{cap}} WHERE kind IN ('headerless', 'foreign') OR damage IS NOT NULL)
            ) WHERE k <= {n}"""
        return {"candidates": self.query(candidates, firsts=self.firsts),
                "kind_examples": self.query(kind_examples, cap=self.cap)}

    def _locate_query(self, first: Mapping[str, Sequence[Mapping[str, Any]]], missing: _Missing,
                      lane_max: dict[LaneKey, int]) -> DataFrame | None:
        """One capture scan for every record the examples name: the first copies (in
        arrival order; ties broken by partition and offset, so the answer is deterministic;
        at most ``_MAX_COPIES_SHOWN + 1``: enough to show that there are more) of the
        duplicated and phantom candidates and of the highest seq that arrived in a lane
        with missing records, and the corrupt copies of the corrupt candidates."""
        wanted = {(r["topic"], r["producer_id"], r["lane"], r["seq"]): (True, False)
                  for name in ("duplicated", "phantom") for r in first.get(name, [])}
        # Every lane with missing records: which of them the examples show is known only once
        # the gaps inside ranges are listed (a lane's listing is capped at max_ranges, and
        # its lost gaps come before its unseen tail), after this query.
        lanes = sorted(k for k, c in missing.per_kind.items() if (c["lost"] or c["unseen"]) and k in lane_max)
        wanted.update({(*key, lane_max[key]): (True, False) for key in lanes})
        for r in first.get("corrupt_seqs", []):
            loc = wanted.get((r["topic"], r["producer_id"], r["lane"], r["seq"]), (False, False))[0]
            wanted[(r["topic"], r["producer_id"], r["lane"], r["seq"])] = (loc, True)
        if not wanted:
            return None
        table = _local_table(
            self.spark,
            [(*k, loc, bad) for k, (loc, bad) in sorted(wanted.items())],
            "topic string, producer_id string, lane int, seq bigint, w_loc boolean, w_bad boolean")
        record = ", ".join(f"r.{c}" for c in (*_KEY, "seq"))
        return self.query(f"""
            SELECT * FROM (
                SELECT /*+ BROADCAST(w) */ {record}, r.`partition`, r.`offset`, w.w_loc, w.w_bad,
                       r.checksum_ok = false AS corrupt,
                       row_number() OVER (PARTITION BY {record}
                                          ORDER BY r.arrival_ts_us, r.`partition`, r.`offset`) AS k,
                       row_number() OVER (PARTITION BY {record}, r.checksum_ok = false
                                          ORDER BY r.`partition`, r.`offset`) AS kb
                FROM (SELECT * FROM {{cap}} WHERE {_IDENTIFIED}) r JOIN {{wanted}} w
                ON r.topic = w.topic AND r.producer_id = w.producer_id AND r.lane = w.lane AND r.seq = w.seq
            ) WHERE (w_loc AND k <= {_MAX_COPIES_SHOWN + 1}) OR (w_bad AND corrupt AND kb <= {self.examples})""",
                          cap=self.cap, wanted=table)

    def _examples(self, report: MirrorReport, lane_max: dict[LaneKey, int],
                  first: Mapping[str, Sequence[Mapping[str, Any]]],
                  located_rows: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
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
        located: dict[tuple[str, str, int, int], list[tuple[int, int]]] = defaultdict(list)
        corrupt: list[dict[str, Any]] = []
        for r in sorted(located_rows, key=lambda r: r["k"]):
            if r["w_loc"] and r["k"] <= _MAX_COPIES_SHOWN + 1:
                located[(r["topic"], r["producer_id"], r["lane"], r["seq"])].append((r["partition"], r["offset"]))
            if r["w_bad"] and r["corrupt"]:
                corrupt.append({k: r[k] for k in ("topic", "producer_id", "lane", "seq", "partition", "offset")})
        sort_key = lambda r: tuple(r[k] for k in (*_KEY, "seq", "partition", "offset"))
        found = {
            "duplicated": report.duplicated, "phantom": report.phantom, "corrupted": report.corrupted,
            "reordered": report.reordered, "headers_lost": report.headers_lost, "foreign": report.foreign,
            "metadata_damaged": report.metadata_damaged,
        }
        candidates = {**first, "corrupted": sorted(corrupt, key=sort_key)[: self.examples]}
        for name, count in found.items():
            if count:
                ex[name] = [dict(row) for row in candidates.get(name, [])]
        if self.split_rows:
            ex["lane_split"] = self.split_rows[: self.examples]
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

    # -- 7. three-log reconciliation -----------------------------------------------------------

    def _reconcile(self) -> None:
        """Split every lane's missing records into lost by the replicator and missing in the
        source (but for lanes of compacted topics, whose figures stay 0).

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
        missing = self._missing(seen, lambda key, last: "source", "source")
        # Lanes of compacted topics are not reconciled: their source log is compacted too.
        missing.holed = [rid for rid in missing.holed if not self.meta[self.ranges[rid][0]].compacted]
        holes = self._holes_query(missing.holed, self.union)
        found, n_ranges = missing.add_holes(self.ranges, holes.collect() if holes is not None else [])
        per_kind = missing.per_kind
        for key, stats in self.stats.items():
            if stats.compacted:
                continue
            gone = per_kind[key]["source"] if key in per_kind else 0
            stats.missing_in_source = gone
            stats.lost_by_replicator = stats.lost + stats.unseen - gone
            stats.source_missing_ranges = found.get(key, [])[: self.max_ranges]
            stats.source_missing_range_count = n_ranges.get(key, 0)


class _Missing:
    """Missing ranges of acknowledged ranges, being found: per lane the ranges listed, their
    exact number, and the exact missing count per kind; the ranges with holes inside."""

    def __init__(self, inner_kind: str) -> None:
        self.inner_kind = inner_kind
        self.found: dict[LaneKey, list[MissingRange]] = defaultdict(list)
        self.n_ranges: dict[LaneKey, int] = defaultdict(int)
        self.per_kind: dict[LaneKey, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.holed: list[int] = []

    def add(self, key: LaneKey, r: MissingRange) -> None:
        self.found[key].append(r)
        self.n_ranges[key] += 1
        self.per_kind[key][r.kind] += r.count

    def add_holes(self, ranges: Sequence[tuple[LaneKey, int, int, bool]], rows: Sequence[Any],
                  ) -> tuple[dict[LaneKey, list[MissingRange]], dict[LaneKey, int]]:
        """Add the gaps inside ranges (rows of ``_Job._holes_query``); return the listed
        ranges per lane (sorted) and their exact number."""
        for row in rows:
            key = ranges[row["range_id"]][0]
            gaps = sorted((g["a"], g["b"]) for g in row["first"])
            self.found[key] += [MissingRange(a, b, self.inner_kind) for a, b in gaps]
            self.n_ranges[key] += row["gaps"]
        for listed in self.found.values():
            listed.sort(key=lambda r: r.first)
        return self.found, self.n_ranges


#: Rows up to which a small table of the job is an inline ``VALUES`` list (see _local_frame).
_INLINE_ROWS = 2000


def _local_frame(spark: SparkSession, rows: Sequence[Sequence[Any]], schema: str) -> DataFrame:
    """A small table of the driver's as a frame (``schema``: ``"name type, ..."``, no commas in types).

    ``createDataFrame`` of a list makes an RDD in classic Spark, and broadcasting it for a
    join costs a Spark job of its own (about 0.1 s each); an inline ``VALUES`` list is a
    local relation, broadcast without one.  Strings, ints and booleans only.
    """
    values = _values(rows, schema)
    return spark.sql(values) if values is not None else spark.createDataFrame(list(rows), schema)


def _local_table(spark: SparkSession, rows: Sequence[Sequence[Any]], schema: str) -> DataFrame | str:
    """The same table for a query of :class:`~._sql.Queries`: its ``VALUES`` list as SQL
    text (no view to create), else a frame."""
    values = _values(rows, schema)
    if values is None:
        return spark.createDataFrame(list(rows), schema)
    return "(" + values.replace("{", "{{").replace("}", "}}") + ")"  # literal braces of a format string


def _values(rows: Sequence[Sequence[Any]], schema: str) -> str | None:
    """``rows`` as a query of an inline ``VALUES`` list; None when there are none or more
    than ``_INLINE_ROWS``."""
    if not rows or len(rows) > _INLINE_ROWS:
        return None

    def literal(v: Any) -> str:
        if v is None:
            return "NULL"
        if isinstance(v, bool):
            return "TRUE" if v else "FALSE"
        if isinstance(v, int):
            return str(v)
        return "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'"

    fields = [f.strip().split() for f in schema.split(",")]
    values = ", ".join("(" + ", ".join(literal(v) for v in row) + ")" for row in rows)
    columns = ", ".join(f"c{i}" for i in range(len(fields)))
    select = ", ".join(f"CAST(c{i} AS {t}) AS `{name}`" for i, (name, t) in enumerate(fields))
    return f"SELECT {select} FROM VALUES {values} AS t({columns})"


#: A query's rows as JSON (column ``v``): every query gives plain dicts whatever its shape,
#: through py4j and Spark Connect alike.  SQL text, added by ``selectExpr``: each Column
#: call would be a py4j round trip of the driver's.
_AS_JSON = "to_json(struct(*), map('ignoreNullFields', 'false')) AS v"


def _collect(queries: Mapping[str, DataFrame], spark: SparkSession | None = None,
             after: Callable[[], object] | None = None, *, one_action: bool = False,
             ) -> dict[str, list[dict[str, Any]]]:
    """Run small queries at once: their rows by query name, as dicts.

    Each query is a Spark action of its own, run from a thread of its own: Spark runs the
    jobs of concurrent actions side by side, so a dozen small aggregates keep both cores
    of a local master busy, and each task carries its own query's plan only.  (One action
    over the union of every query made each task deserialize every query's plan: 1M rows
    took 7.97 s that way against 6.77 s, in one JVM alternating.)  Each thread plans its
    query first, then waits for ``after`` (the cache being built), then runs it: a dozen
    plans cost a small run's driver a few tenths of a second, spent while the cache builds.
    An interrupt (Ctrl-C) while they run cancels their Spark jobs (``spark``) and is raised.

    ``one_action``: the queries are the branches of one union instead, tagged by name, and
    run as one action.  For queries over one-partition frames (a small capture's, see
    ``_Job._store``) Spark keeps the union in one partition too: one task and one job,
    where each query would cost a job, a plan and a task of its own.
    """

    def run(build: Callable[[], DataFrame]) -> list[Any]:
        frame = build()
        _plan(frame)
        if after is not None:
            after()
        return frame.collect()

    def union() -> DataFrame:
        tagged = [query.selectExpr(f"'{name}' AS q", _AS_JSON) for name, query in queries.items()]
        return reduce(lambda a, b: a.unionAll(b), tagged)

    one_action = one_action and bool(queries)
    if one_action:
        builds = {"all": union}
    else:
        builds = {name: partial(query.selectExpr, _AS_JSON) for name, query in queries.items()}
    started = {name: _Background(partial(run, build), f"kafka-mirror-verify-{name}") for name, build in builds.items()}
    try:
        for action in started.values():
            action.wait(raise_error=False)
    except BaseException:
        _cancel_jobs(spark)
        raise
    results = {name: action.wait() for name, action in started.items()}  # the first error, in query order
    if one_action:
        rows: dict[str, list[dict[str, Any]]] = {name: [] for name in queries}
        for row in results["all"]:
            rows[row["q"]].append(json.loads(row["v"]))
        return rows
    return {name: [json.loads(row["v"]) for row in found] for name, found in results.items()}


def _plan(frame: DataFrame) -> None:
    """Have classic Spark plan ``frame`` now; its action reuses the plan.  (Over Spark
    Connect the server plans when it runs the query: nothing to do.)"""
    jdf = getattr(frame, "_jdf", None)
    if jdf is not None:
        jdf.queryExecution().executedPlan()


class _Background:
    """``action()`` run by a daemon thread from now on; :meth:`wait` joins it and gives its
    result (or raises its error)."""

    def __init__(self, action: Callable[[], Any], name: str) -> None:
        self._result: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(action,), name=name, daemon=True)
        self._thread.start()

    def _run(self, action: Callable[[], Any]) -> None:
        try:
            self._result = action()
        except BaseException as exc:  # noqa: BLE001 - raised by wait()
            self._error = exc

    def running(self) -> bool:
        return self._thread.is_alive()

    def wait(self, raise_error: bool = True) -> Any:
        """Wait until the action ended; return its result, or raise its error (``raise_error``)."""
        while self._thread.is_alive():
            self._thread.join(0.1)  # a bare join() would hold off Ctrl-C until the action ends
        if raise_error and self._error is not None:
            raise self._error
        return self._result


def _release_checkpoint(frame: DataFrame) -> None:
    """Drop the stored rows of a (classic) local checkpoint now."""
    frame._jdf.queryExecution().logical().rdd().unpersist(False)


def _cancel_jobs(spark: SparkSession | None) -> None:
    """Cancel the Spark jobs of this session's running queries (best effort)."""
    if spark is None:
        return
    try:
        spark.sparkContext.cancelAllJobs()  # classic
    except Exception:  # noqa: BLE001 - a Spark Connect session has no SparkContext
        try:
            spark.interruptAll()
        except Exception:  # noqa: BLE001 - nothing more to do: the interrupt is raised anyway
            pass


#: The columns each example candidate keeps, by anomaly (see _Job._candidate_queries).
_CANDIDATE_COLUMNS = {
    "duplicated": {"copies": "n"}, "phantom": {"copies": "n"}, "corrupt_seqs": {},
    "reordered": {"after_seq": "after_seq", "partition": "r_partition", "offset": "r_offset"},
}


def _split_candidates(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The rows of the tagged candidate query as one list per anomaly, in example order."""
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in _CANDIDATE_COLUMNS}
    for row in sorted(rows, key=lambda r: r["k"]):
        extra = _CANDIDATE_COLUMNS[row["tag"]]
        out[row["tag"]].append({**{k: row[k] for k in (*_KEY, "seq")}, **{k: row[c] for k, c in extra.items()}})
    return out


#: The columns each record-kind example keeps, by report key and tag (see _candidate_queries).
_KIND_EXAMPLES = {"headers_lost": ("headerless", ("topic", "target_topic", "lane", "partition", "offset")),
                  "foreign": ("foreign", ("target_topic", "partition", "offset", "evidence")),
                  "metadata_damaged": ("damaged", ("topic", "target_topic", "partition", "offset", "producer_id",
                                                   "lane", "seq", "damage"))}


def _split_kind_examples(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The rows of the tagged record-kind query as one list per report key, in example order."""
    ordered = sorted(rows, key=lambda r: r["k"])
    return {name: [{c: row[c] for c in columns} for row in ordered if row["tag"] == tag]
            for name, (tag, columns) in _KIND_EXAMPLES.items()}


@dataclass
class RecordKinds:
    """Records of the capture by kind, and those of ours whose metadata was damaged."""

    counts: dict[str, int] = field(default_factory=dict)  # kind -> records
    damaged: int = 0
    unmatched: int = 0  # damaged, and not identified
    damage: dict[str, dict[str, int]] = field(default_factory=dict)  # name -> how -> records


def record_kinds(rows: Sequence[Mapping[str, Any]]) -> RecordKinds:
    """Rows of (kind, damage, identified, count) as :class:`RecordKinds` (the oracle passes
    one row per record)."""
    from pytest_kafka_mirror.produce.records import damage_names

    out = RecordKinds()
    for row in rows:
        n = row["count"]
        out.counts[row["kind"]] = out.counts.get(row["kind"], 0) + n
        if row["damage"] is None:
            continue
        out.damaged += n
        out.unmatched += 0 if row["identified"] else n
        for name, how in damage_names(row["damage"]):
            hows = out.damage.setdefault(name, {"missing": 0, "altered": 0})
            hows[how] = hows.get(how, 0) + n
    return out


def add_untimed(overall: LatencyStats, by_topic: dict[str, LatencyStats], untimed: Mapping[str, int],
                buckets: int) -> None:
    """Count the records without a produce time in the latency figures (a topic with only
    those gets figures of its own: none, and the count)."""
    for topic, n in untimed.items():
        if not n:
            continue
        stats = by_topic.get(topic)
        if stats is None:
            stats = by_topic[topic] = LatencyStats(histogram=[0] * (buckets + 1))
        stats.untimed += n
        overall.untimed += n


def _identified(capture: DataFrame) -> DataFrame:
    """Records of ours identified (producer, lane and seq known)."""
    return capture.filter(_IDENTIFIED)


def phantom_reason(meta: dict[LaneKey, LaneMeta], key: LaneKey, seq: int) -> str:
    """Why a received record counts as phantom, from the manifests (for examples only)."""
    lane = meta.get(key)
    if lane is None:
        if not any(k[1] == key[1] for k in meta):
            return "unknown producer"
        if not any(k[0] == key[0] for k in meta):
            return "unknown topic"
        return "unknown lane"
    if any(a <= seq <= b for a, b in lane.aborted):
        return "aborted transaction"
    if any(a <= seq <= b for a, b in lane.failed):
        return "delivery failed"
    if seq < 0 or seq >= lane.sent:
        return "never sent"
    return "not acknowledged"
