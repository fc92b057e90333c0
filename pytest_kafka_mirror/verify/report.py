"""MirrorReport: what the verifier found, as data, JSON, and assertions with readable diffs.

A report is plain data (dataclasses of ints, floats, strings and lists), so it can be
written next to the run, loaded back later, compared against a baseline, and asserted on
without Spark.  The assertion methods raise :class:`MirrorMismatchError` whose message is
a complete diff a person can act on: totals first, then per lane the missing sequence
ranges, then a table of example records.

Figures (see ``verify/job.py`` for how they are computed):

expected
    records the source acknowledged (manifest ``acked`` ranges).
received / distinct
    identified records on the target (metadata intact), and distinct sequence numbers.
lost / unseen
    acknowledged records that never arrived.  *lost*: a record of the same lane with a
    higher sequence arrived (acknowledged or not), so the replicator moved past it;
    *unseen*: nothing higher arrived (tail not drained, or the whole lane lost).  Both
    break at-least-once delivery.
duplicated
    extra copies (received - distinct).
reordered
    records whose first copy arrived behind a higher sequence of their lane, in offset
    order of one target partition (later copies are duplicates, not reorders).
phantom, corrupted, headers_lost, foreign, lane_split
    records never acknowledged (rows, unknown producers included); bad payload checksum;
    metadata headers stripped; not our records at all; lanes seen in several target
    partitions.
metadata_damaged, damaged_unmatched, damage
    records of ours (every copy) whose metadata arrived damaged: some ``km.*`` headers
    missing or altered (re-encoded, truncated), or the key gone or rewritten.  Whatever
    identifies such a record is used, so it counts for delivery, duplicates and order like
    any other; ``damaged_unmatched`` of them lost part of their identity (producer, lane or
    sequence) and cannot be matched to a record sent.  ``damage``: per header name (or
    ``key``), how many records had it ``missing`` and ``altered``.  An extra header, or
    headers in another order, is not damage.
never_acked
    sequences the producer sent but the source never acknowledged (a failed or missing
    delivery report) that did not arrive either: not a replicator failure, so not counted
    as lost, but shown because a flaky source explains many a "loss".
aborted / aborted_arrived
    records the source took in transactions it then aborted (``produce/transactions.py``),
    and how many of them arrived: never expected, they count as phantoms when they do (a
    replicator whose source consumer reads ``read_uncommitted``, MirrorMaker 2's default,
    copies them as ordinary records).
latest_missing / compacted_away
    topics declared compacted (``cleanup.policy=compact``; ``MirrorRun(..., compacted=...)``,
    recorded in the manifests): each lane is a key, and the log cleaner may remove every
    record of it but the latest, on the source before the replicator reads it or on the
    target.  So a lane of such a topic is complete when its *latest* acknowledged record
    arrived: ``latest_missing`` counts the lanes whose latest record never did (a failure,
    like loss), ``compacted_away`` the older acknowledged records that did not arrive
    (informational; not lost or unseen, which stay 0 for these lanes).  Order, duplicates,
    phantoms and corruption are checked as for any lane: among what arrived, no lower
    sequence after a higher one in a target partition.  These lanes take no part in the
    three-log reconciliation (their source log is compacted as well).
lost_by_replicator / missing_in_source
    three-log reconciliation, only when the run also captured the *source* topics
    (``reconciled``): each acknowledged record that never arrived was either in the source
    log (the replicator lost it) or absent from it too (the source cluster lost an
    acknowledged write: not the replicator's fault).  The two add up to lost + unseen.

Latency is that of the first arrival of each acknowledged record; percentiles are exact
nearest-rank values (the value at rank ``ceil(q * count)``).  Records whose first copy
has no usable produce time (its ``km.t`` header damaged) are not in the figures: their
number is ``untimed``.  Records that never arrived have no latency: with any missing, the
figures are partial, of the records that arrived only, and ``summary()`` and a latency
failure say over how many of the acknowledged ones.
"""

from __future__ import annotations

import json
import math
import numbers
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..produce.records import compact_ranges  # re-exported: the ranges every message shows

if TYPE_CHECKING:
    from pytest_kafka_mirror.verify._recovery import Recovery

__all__ = [
    "REPORT_VERSION",
    "TOTAL_FIELDS",
    "LaneStats",
    "LatencyStats",
    "MirrorMismatchError",
    "MirrorReport",
    "MissingRange",
    "compact_ranges",
    "format_ranges",
    "format_table",
]

REPORT_VERSION = 1

#: Report totals, in the order messages and summaries show them.
TOTAL_FIELDS = (
    "expected", "received", "distinct", "lost", "unseen", "duplicated", "reordered",
    "phantom", "corrupted", "headers_lost", "metadata_damaged", "foreign", "lane_split",
    "never_acked", "lost_by_replicator", "missing_in_source", "aborted_arrived", "latest_missing",
    "compacted_away",
)  # fmt: skip

#: Messages stay readable whatever the size of the failure: at most this many lanes,
#: ranges per lane and example rows are printed, the rest is counted.
MAX_LANES_SHOWN = 20
MAX_RANGES_SHOWN = 20
MAX_EXAMPLES_SHOWN = 10


class MirrorMismatchError(AssertionError):
    """The mirrored data does not match what the source acknowledged.

    An ``AssertionError`` so pytest reports it as a test failure, not an error.
    """


#: Kinds of assertion limits: what each accepts, for :func:`check_limits`.
COUNT, DURATION, LATENCY = "count", "duration", "latency"
_ACCEPTED = {
    COUNT: "a whole number >= 0",
    DURATION: "a number of seconds >= 0",
    LATENCY: "a number of milliseconds > 0",
}


def check_limits(method: str, kind: str, **limits: Any) -> None:
    """Raise ValueError naming the argument unless each of ``limits`` is None (no limit)
    or a limit of ``kind``: checked when an assertion is called, so a typo such as
    ``p99_ms=-1`` fails there and then, not as a breach found after the run."""
    __tracebackhide__ = True
    for name, value in limits.items():
        if value is None:
            continue
        if kind == COUNT:
            ok = isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 0
        else:
            ok = (isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
                  and (value > 0 if kind == LATENCY else value >= 0))
        if not ok:
            raise ValueError(f"{method}({name}={value!r}): {name} must be {_ACCEPTED[kind]}, or None for no limit")


def raise_mismatch(head: Callable[[], str], problems: Sequence[str | None]) -> None:
    """Raise :class:`MirrorMismatchError` when any of ``problems`` is a message: the head
    line(s), then each problem (the assertions of the verifier and failover reports)."""
    __tracebackhide__ = True
    found = [p for p in problems if p]
    if found:
        raise MirrorMismatchError("\n\n".join([head(), *found]))


@dataclass
class MissingRange:
    """Inclusive range ``first..last`` of sequences: acknowledged ones that never arrived, or
    (kind ``"duplicated"``) ones that arrived more than once."""

    first: int
    last: int
    kind: str  # "lost" | "unseen", "source" (absent from the source log too), or "duplicated"

    @property
    def count(self) -> int:
        return self.last - self.first + 1

    def __str__(self) -> str:
        return str(self.first) if self.first == self.last else f"{self.first}-{self.last}"


@dataclass
class LaneStats:
    """Figures of one lane: (source topic, producer id, lane number).

    ``missing_ranges`` holds the first ranges in sequence order (the verifier caps how many
    it keeps); ``missing_range_count`` is the exact number of ranges.  The same holds for
    ``source_missing_ranges`` (kind ``"source"``): the acknowledged ranges absent from the
    source log as well, filled only when the run captured the source (``reconciled``), and
    for ``duplicate_ranges`` (kind ``"duplicated"``): the sequences that arrived more than
    once, so an exactly-once check names every duplicated range.
    """

    topic: str
    producer_id: str
    lane: int
    target_topic: str | None = None
    source_partition: int | None = None  # from the manifest; None for lanes nobody acknowledged
    partitions: list[int] = field(default_factory=list)  # target partitions the lane was seen in
    expected: int = 0
    received: int = 0
    distinct: int = 0
    lost: int = 0
    unseen: int = 0
    duplicated: int = 0
    reordered: int = 0
    phantom: int = 0
    corrupted: int = 0
    never_acked: int = 0
    lost_by_replicator: int = 0
    missing_in_source: int = 0
    aborted_arrived: int = 0
    #: a lane of a compacted topic: a key, whose latest acknowledged record (``latest_seq``)
    #: must arrive (``latest_missing`` 1 when it did not); ``compacted_away``: its older
    #: acknowledged records that did not arrive (not lost: compaction removes them).  Its
    #: lost / unseen are 0 and its missing ranges are not listed.
    compacted: bool = False
    latest_seq: int | None = None
    latest_missing: int = 0
    compacted_away: int = 0
    missing_ranges: list[MissingRange] = field(default_factory=list)
    missing_range_count: int = 0
    source_missing_ranges: list[MissingRange] = field(default_factory=list)
    source_missing_range_count: int = 0
    duplicate_ranges: list[MissingRange] = field(default_factory=list)
    duplicate_range_count: int = 0

    @property
    def name(self) -> str:
        return f"{self.topic}/{self.producer_id}/lane {self.lane}"

    @property
    def where(self) -> str:
        """Where to look on the target, for messages."""
        if len(self.partitions) == 1:
            return f"target partition {self.partitions[0]}"
        if self.partitions:
            return "target partitions " + ", ".join(map(str, self.partitions))
        if self.source_partition is not None:
            return f"source partition {self.source_partition}, nothing arrived"
        return "nothing arrived"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LaneStats:
        d = dict(d)
        for name in ("missing_ranges", "source_missing_ranges", "duplicate_ranges"):
            d[name] = [MissingRange(**r) for r in d.get(name, [])]
        return cls(**d)


@dataclass
class LatencyStats:
    """Replication latency in milliseconds of the first arrival of each acknowledged record.

    ``histogram`` counts records per bucket of the report's ``histogram_bounds_ms``
    (upper bounds, inclusive); its last entry counts records above the last bound.
    Figures are None when no record arrived.  ``untimed``: acknowledged records that
    arrived, but whose first copy had no usable produce time (not in the figures).
    """

    count: int = 0
    min_ms: float | None = None
    mean_ms: float | None = None
    p50_ms: float | None = None
    p90_ms: float | None = None
    p99_ms: float | None = None
    p999_ms: float | None = None
    max_ms: float | None = None
    histogram: list[int] = field(default_factory=list)
    untimed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LatencyStats:
        return cls(**d)


# -- pure formatting helpers (no Spark; unit-tested directly) ---------------------------


def format_ranges(ranges: Sequence[MissingRange | tuple[int, int]], total: int | None = None,
                  limit: int = MAX_RANGES_SHOWN) -> str:
    """``1200-1249, 1301, ... and 7 more ranges``: at most ``limit`` ranges, the rest counted.

    ``total`` is the exact number of ranges when ``ranges`` was already capped.
    """
    parts = [str(r) if isinstance(r, MissingRange) else str(MissingRange(r[0], r[1], "")) for r in ranges[:limit]]
    more = (len(ranges) if total is None else max(total, len(ranges))) - len(parts)
    if more > 0:
        parts.append(f"... and {more} more range{'s' if more != 1 else ''}")
    return ", ".join(parts)


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], limit: int = MAX_EXAMPLES_SHOWN,
                 total: int | None = None) -> str:
    """A left-aligned text table of ``rows`` (missing values blank), capped at ``limit`` rows.

    ``total`` is the number of rows there are when ``rows`` was already capped; the last
    line counts the rows not shown.
    """
    shown = [["" if r.get(c) is None else str(r.get(c)) for c in columns] for r in rows[:limit]]
    widths = [max([len(c)] + [len(row[i]) for row in shown]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in shown]
    more = max(len(rows), total or 0) - len(shown)
    if more > 0:
        lines.append(f"... and {more} more")
    return "\n".join("    " + line for line in lines)


_FIGURE_LABELS = {"p50_ms": "p50", "p90_ms": "p90", "p99_ms": "p99", "p999_ms": "p99.9", "max_ms": "max"}


#: the share of a latency limit a clock offset between the run's hosts may take
CLOCK_SHARE = 0.1


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}".rstrip("0").rstrip(".") + " ms"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _took(r: Recovery, limit: float) -> str:
    """How an episode that failed ``assert_recovers_within(limit)`` ended."""
    if r.seconds is not None:
        if not r.in_drain or r.production_end is None or r.recovered_time is None:
            return f"recovered after {r.seconds:g} s"
        return (f"recovered after {r.seconds:g} s, in the drain: the last record produced arrived by "
                f"{r.recovered_time - r.production_end:g} s after production ended")
    end = round(r.data_end - r.fault_time, 3) if r.data_end is not None else None
    text = "not recovered by the end of the data" + ("" if end is None else f", {end:g} s after the fault")
    if r.missing:
        text += f": {_plural(r.missing, 'record')} produced since never arrived"
    if end is not None and end < limit:
        text += f"; the data ends before the {limit:g} s limit, so it cannot show a recovery within it"
    return text


#: Columns of the example tables, per anomaly.
#: Every row names where to look: target partition and offset of the record itself, or, for
#: records that never arrived, of the highest sequence of their lane that did
#: (``arrived_seq``: the proof that the lane moved past a lost range).
_EXAMPLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "lost": ("topic", "producer_id", "lane", "seq", "last_seq", "count", "arrived_seq", "partition", "offset"),
    "unseen": ("topic", "producer_id", "lane", "seq", "last_seq", "count", "arrived_seq", "partition", "offset"),
    "duplicated": ("topic", "producer_id", "lane", "seq", "copies", "partition", "offset", "at"),
    "reordered": ("topic", "producer_id", "lane", "seq", "after_seq", "partition", "offset"),
    "phantom": ("topic", "producer_id", "lane", "seq", "why", "copies", "partition", "offset"),
    "corrupted": ("topic", "producer_id", "lane", "seq", "partition", "offset"),
    "headers_lost": ("topic", "target_topic", "lane", "partition", "offset"),
    # what survived of the record's identity, and what was damaged
    "metadata_damaged": ("topic", "target_topic", "partition", "offset", "producer_id", "lane", "seq", "damage"),
    "foreign": ("target_topic", "partition", "offset", "evidence"),
    # one row per (split lane, target partition): the lane's first record there
    "lane_split": ("topic", "producer_id", "lane", "partition", "offset", "seq", "records"),
}

#: Example kinds whose rows are records counted one to one by the total of that name, so a
#: message can say how many rows it did not show.
_COUNTED_EXAMPLES = ("reordered", "corrupted", "headers_lost", "metadata_damaged", "foreign")


@dataclass
class MirrorReport:
    """Everything the verifier found in one run directory."""

    run_dir: str
    expected: int = 0
    received: int = 0
    distinct: int = 0
    lost: int = 0
    unseen: int = 0
    duplicated: int = 0
    reordered: int = 0
    phantom: int = 0
    corrupted: int = 0
    headers_lost: int = 0
    metadata_damaged: int = 0
    foreign: int = 0
    lane_split: int = 0
    never_acked: int = 0
    lost_by_replicator: int = 0
    missing_in_source: int = 0
    #: of ``phantom``, the records of transactions the source aborted
    aborted_arrived: int = 0
    #: lanes (keys) of compacted topics whose latest acknowledged record never arrived
    latest_missing: int = 0
    #: older acknowledged records of compacted topics' lanes that did not arrive (informational)
    compacted_away: int = 0
    #: records the source took in transactions it then aborted (never expected)
    aborted: int = 0
    #: of ``metadata_damaged``, the records whose producer, lane or sequence was lost with it
    damaged_unmatched: int = 0
    #: header name (``km.p``, ``km.l``, ``km.s``, ``km.t``) or ``key`` -> {"missing": n,
    #: "altered": n}: what the damaged records lacked (a record may count under several)
    damage: dict[str, dict[str, int]] = field(default_factory=dict)
    #: the run also captured the source topics: the loss figures are reconciled against them
    reconciled: bool = False
    lanes: list[LaneStats] = field(default_factory=list)
    latency: LatencyStats = field(default_factory=LatencyStats)
    latency_by_topic: dict[str, LatencyStats] = field(default_factory=dict)
    histogram_bounds_ms: list[float] = field(default_factory=list)
    #: anomaly name (keys of ``_EXAMPLE_COLUMNS``) -> up to N example rows
    examples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: contents of capture-status.json, {} when the capture wrote none
    capture: dict[str, Any] = field(default_factory=dict)
    #: one entry per second (see ``verify/_timeline.py``): ``t`` (UTC epoch second), ``sent``
    #: (handed to the client in that second), ``received`` (acknowledged records produced in
    #: that second that arrived), ``arrived`` (first arrivals in that second), ``p50_ms`` /
    #: ``p99_ms`` (latency of the records produced in that second, None when none arrived)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    #: faults applied during the run (``faults.Marker.to_dict()``), in time order:
    #: ``time`` (UTC epoch seconds), ``label``, ``kind`` (outage | heal | ...), ``t`` (seconds
    #: after production start), ``error`` when the fault could not be applied
    markers: list[dict[str, Any]] = field(default_factory=list)
    #: one entry per producer of the run: id, topics, requested rate, sent / acked / failed,
    #: produce seconds and achieved rate per topic, and for a throttled producer its
    #: ``schedule_slip_ms`` (p50 / p99 / max: how late it handed records to the client; the
    #: records carry their due time, so latency already includes it) (from the manifests' stats)
    producers: list[dict[str, Any]] = field(default_factory=list)
    #: per source topic: ``first_produce_us`` / ``first_arrival_us`` of its acknowledged
    #: records (UTC epoch microseconds), for the new-topic discovery time
    topic_firsts: dict[str, dict[str, int]] = field(default_factory=dict)
    #: per source topic, the replicator's discovery of it and what readiness cost the run
    #: (``rundir.load_discovery``): ``discovery_s`` (topic created -> a warm-up record of
    #: every partition on the target), ``created_us``, ``ready_us``, ``provisioned``
    #: ("session" | "test"), ``warmup_s`` (this run's readiness round), ``rounds``, ``sent``
    discovery: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: what the replicator said about itself when records were missing (``run.py``):
    #: ``spec``, ``health`` (it exited, a FAILED task: '' when healthy) and ``status``
    #: (MirrorMaker 2: its connectors and tasks); and, for a replicator the plugin
    #: configures, ``settings``: feature -> the settings behind it in effect, quoted by the
    #: failure of that feature (``replicators/settings.py``)
    replicator: dict[str, Any] = field(default_factory=dict)
    #: figures the scenario measured itself (``MirrorRun.record_figure``, ``scenario.json``):
    #: name -> ``{"value", "note"}``, e.g. ``upgrade_resume_s``
    scenario: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: what the replicator can carry (``verify/_capacity.py``): ``all`` and per source topic
    #: (``topics``) ``copy_rate`` (records/s while it had a backlog; None with ``why`` when it
    #: never had one), ``copy_rate_mb``, ``backlog_max``, ``caught_up_s``, ``window``,
    #: ``offered_rate``, ``lower_bound`` and ``why``; for a stepped rate profile ``steps`` and
    #: ``max_sustainable_rate`` (with ``max_sustainable_why``, ``slo_p99_ms``)
    capacity: dict[str, Any] = field(default_factory=dict)
    #: arrivals stopped while the source went on acknowledging (``verify/_stall.py``), None
    #: when they did not: ``last_arrival_us``, ``at_s`` (seconds from the production start),
    #: ``production_end_us``, ``quiet_s`` (from the last arrival to the production end),
    #: ``gap_s`` (the typical gap between arrivals), ``threshold_s`` (the quiet it takes),
    #: ``acked_after`` (records acknowledged from the last arrival's second on that never arrived)
    stall: dict[str, Any] | None = None
    #: where the producers and captures ran (``rundir.load_engine``, ``engine.json``): ``engine``
    #: (local | spark), ``tasks`` (spark: each child's host, executor, pid, exit code and clock
    #: offset) and ``clock``: the largest offset of a task's clock to the driver's
    #: (``max_offset_ms``, ``uncertainty_ms``, ``task``, ``host``; 0 on one host), which every
    #: latency carries; a latency limit smaller than ten times it cannot be judged
    engine: dict[str, Any] = field(default_factory=dict)
    version: int = REPORT_VERSION

    # -- data ------------------------------------------------------------------------

    @property
    def totals(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in TOTAL_FIELDS}

    @property
    def histogram(self) -> list[tuple[float, int]]:
        """``(upper bound ms, count)`` pairs of the overall latency histogram; the last bound is +inf."""
        bounds = [*self.histogram_bounds_ms, float("inf")]
        # strict=False: a report of a run where nothing arrived may have no histogram at all.
        return list(zip(bounds, self.latency.histogram, strict=False))

    def lane(self, topic: str, producer_id: str, lane: int) -> LaneStats:
        """The stats of one lane; KeyError names the lanes that exist."""
        for stats in self.lanes:
            if (stats.topic, stats.producer_id, stats.lane) == (topic, producer_id, lane):
                return stats
        raise KeyError(f"no lane {topic}/{producer_id}/lane {lane} in the report; lanes: "
                       + ", ".join(s.name for s in self.lanes[:MAX_LANES_SHOWN]))

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["lanes"] = [lane.to_dict() for lane in self.lanes]
        d["latency"] = self.latency.to_dict()
        d["latency_by_topic"] = {t: s.to_dict() for t, s in self.latency_by_topic.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MirrorReport:
        d = dict(d)
        if d.get("version", REPORT_VERSION) != REPORT_VERSION:
            raise ValueError(f"unsupported report version {d.get('version')!r} (expected {REPORT_VERSION})")
        d["lanes"] = [LaneStats.from_dict(x) for x in d.get("lanes", [])]
        d["latency"] = LatencyStats.from_dict(d.get("latency", {}))
        d["latency_by_topic"] = {t: LatencyStats.from_dict(x) for t, x in d.get("latency_by_topic", {}).items()}
        return cls(**d)

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the report as JSON (atomically: readers never see half a file)."""
        from pytest_kafka_mirror.rundir import write_json_atomic

        p = Path(path)
        write_json_atomic(p, self.to_dict())
        return p

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> MirrorReport:
        """Load a report written by :meth:`write`; a run directory means its ``report.json``."""
        from pytest_kafka_mirror.rundir import REPORT_FILE

        p = Path(path)
        if p.is_dir():
            p = p / REPORT_FILE
        return cls.from_dict(json.loads(p.read_text()))

    # -- figures over time (verify/_recovery.py) -------------------------------------------

    @property
    def production_start(self) -> float | None:
        """When the first producer of the run started its schedule (UTC epoch seconds)."""
        starts = [p["started_us"] for p in self.producers if p.get("started_us")]
        return min(starts) / 1e6 if starts else None

    def recovery(self, p99_ms: float, *, after: float | None = None) -> list[Recovery]:
        """How the mirror came back from each fault (markers of kind ``outage``), or from
        ``after`` seconds past the production start (e.g. the end of a burst).

        Recovered = from that second on, p99 latency within ``p99_ms`` and every record
        produced arrived, through the end of production; when production ended first, at
        the end of the second the last record produced arrived in (the drain, by arrival
        time), and not at all when some never arrived (see ``verify/_recovery.py``).
        """
        from pytest_kafka_mirror.verify._recovery import recoveries

        since = None
        if after is not None:
            start = self.production_start
            if start is None:
                raise ValueError("recovery(after=...) needs the producers' start time, and the report has none")
            since = start + after
        return recoveries(self.timeline, self.markers, p99_ms, since=since,
                          label=None if after is None else f"{after:g} s after the start")

    def assert_recovers_within(self, seconds: float, *, p99_ms: float, after: float | None = None) -> None:
        """Every fault episode recovered (see :meth:`recovery`) within ``seconds``, followed
        through the drain: a recovery after production ended counts by arrival time, and an
        episode the data ends without recovering from fails, saying whether the data
        reached the limit."""
        __tracebackhide__ = True
        check_limits("assert_recovers_within", DURATION, seconds=seconds, after=after)
        check_limits("assert_recovers_within", LATENCY, p99_ms=p99_ms)
        episodes = self.recovery(p99_ms, after=after)
        if not episodes:
            raise MirrorMismatchError(
                "assert_recovers_within: nothing to recover from: no fault marker of kind 'outage' in the report "
                "(schedule faults with mirror_producer(..., faults=[at(...)]) or give after=SECONDS)"
            )
        bad = [r for r in episodes if r.seconds is None or r.seconds > seconds]
        if not bad:
            return
        start = self.production_start or 0.0
        lines = [f"no recovery within {seconds:g} s (p99 <= {_ms(p99_ms)} and every record produced arrived; "
                 "after production ended: every record produced arrived):"]
        for r in bad:
            when = f"{r.fault_time - start:.2f} s" if start else f"{r.fault_time:.3f}"
            lines.append(f"  {r.label} at {when}: {_took(r, seconds)}; peak p99 {_ms(r.peak_p99_ms)}, "
                         f"backlog {r.backlog} records")
        lines.append("  per second (t from production start: sent, received, arrived, p99):")
        shown = [e for e in self.timeline if any(e["t"] + 1 > r.fault_time for r in bad)]
        for e in shown[:MAX_EXAMPLES_SHOWN * 3]:
            t = e["t"] - start if start else e["t"]
            lines.append(f"    {t:6.0f} s: {e.get('sent', 0)}, {e.get('received', 0)}, {e.get('arrived', 0)}, "
                         f"{_ms(e.get('p99_ms'))}")
        if len(shown) > MAX_EXAMPLES_SHOWN * 3:
            lines.append(f"    ... and {len(shown) - MAX_EXAMPLES_SHOWN * 3} more seconds")
        raise MirrorMismatchError("\n".join(lines))

    def catch_up_rate(self) -> float | None:
        """Peak arrivals per second after the first fault was healed (after the first fault,
        when nothing healed it): how fast the replicator drains a backlog.  None without
        faults."""
        episodes = self.recovery(float("inf"))
        return episodes[0].catch_up_rate if episodes else None

    @property
    def discovery_s(self) -> float | None:
        """The longest discovery time over the run's topics (see :meth:`discovery_seconds`);
        None when no topic's creation time is known."""
        values = [d["discovery_s"] for d in self.discovery.values() if d.get("discovery_s") is not None]
        return max(values) if values else None

    def discovery_seconds(self, topic: str) -> float | None:
        """The replicator's discovery time of ``topic``: from its creation until a warm-up
        record of every partition arrived on the target (the run's readiness round, or the
        session's for a topic provisioned at its start).  For a topic produced without
        readiness (``wait_for_target=False``): from the first record produced until the
        first one arrived.  None when neither is known."""
        from pytest_kafka_mirror.verify._recovery import discovery_seconds

        ready = self.discovery.get(topic)
        if ready is not None and ready.get("discovery_s") is not None:
            return float(ready["discovery_s"])
        firsts = self.topic_firsts.get(topic)
        if firsts is None:
            if topic not in {lane.topic for lane in self.lanes}:
                raise KeyError(f"no topic {topic!r} in the report; topics: {sorted({lane.topic for lane in self.lanes})}")
            return None
        return discovery_seconds(firsts.get("first_arrival_us"), firsts.get("first_produce_us"))

    def summary(self) -> str:
        """One line: every total, then p50 / p99 latency.  The three-log figures
        (``lost_by_replicator``, ``missing_in_source``) say "not measured" when the run did
        not capture the source (they are 0 then, which would read as a verdict)."""
        unmeasured = () if self.reconciled else ("lost_by_replicator", "missing_in_source")
        totals = ", ".join(f"{name.replace('_', ' ')} {'not measured' if name in unmeasured else value}"
                           for name, value in self.totals.items())
        return f"{totals}; latency p50 {_ms(self.latency.p50_ms)}, p99 {_ms(self.latency.p99_ms)}{self._partial()}"

    def _partial(self) -> str:
        """`` (partial: over 1,848 of 8,000 acknowledged records)`` when records never arrived
        (their latency is unknown, so the figures are of the others only), else ''."""
        if not self.lost + self.unseen:
            return ""
        return f" (partial: over {self.latency.count:,} of {self.expected:,} acknowledged records)"

    def _partial_note(self) -> str:
        """``, partial: 6,152 of the 8,000 acknowledged never arrived``, for the figures' line."""
        missing = self.lost + self.unseen
        if not missing:
            return ""
        return f", partial: {missing:,} of the {self.expected:,} acknowledged never arrived and have no latency"

    def _stall_line(self) -> str:
        """The stall (``verify/_stall.py``) as a line of a message's head; '' without one."""
        if not self.stall:
            return ""
        from pytest_kafka_mirror.verify._stall import stall_text

        return "\n" + stall_text(self.stall, self.replicator)

    # -- assertions --------------------------------------------------------------------

    def assert_no_loss(self, *, allow_source_loss: bool = False) -> None:
        """Every acknowledged record arrived at least once (lost + unseen == 0); of a
        compacted topic, the latest record of every lane (latest_missing == 0).

        ``allow_source_loss=True`` (needs a run that captured the source topics) excuses the
        records the source cluster itself lost: only ``lost_by_replicator`` must be 0, e.g.
        in a scenario that kills a source broker on purpose.
        """
        __tracebackhide__ = True
        self._raise([self._check_something(), self._check_loss(allow_source_loss), self._check_latest()])

    def assert_in_order(self, max_reordered: int = 0) -> None:
        """At most ``max_reordered`` records arrived behind a higher sequence of their lane."""
        __tracebackhide__ = True
        check_limits("assert_in_order", COUNT, max_reordered=max_reordered)
        self._raise([self._check_something(), self._check_order(max_reordered)])

    def assert_no_duplicates(self, max_duplicated: int = 0) -> None:
        """At most ``max_duplicated`` extra copies arrived (exactly-once when 0)."""
        __tracebackhide__ = True
        check_limits("assert_no_duplicates", COUNT, max_duplicated=max_duplicated)
        self._raise([self._check_something(), self._check_duplicates(max_duplicated)])

    def assert_exactly_once(self) -> None:
        """Every acknowledged record arrived exactly once: nothing lost, no extra copy.  A
        failure names each lane's missing and duplicated sequence ranges."""
        __tracebackhide__ = True
        self._raise([self._check_something(), self._check_loss(False), self._check_latest(), self._check_duplicates(0)])

    def assert_no_phantoms(self) -> None:
        """Nothing arrived that the source did not acknowledge."""
        __tracebackhide__ = True
        self._raise([self._check_phantoms()])

    def assert_no_corruption(self) -> None:
        """Every payload arrived with a valid checksum."""
        __tracebackhide__ = True
        self._raise([self._check_corruption()])

    def assert_headers_intact(self) -> None:
        """No record lost its metadata headers on the way."""
        __tracebackhide__ = True
        self._raise([self._check_headers()])

    def assert_metadata_intact(self) -> None:
        """Every record of ours arrived with its metadata as the producer wrote it (no
        ``km.*`` header missing or altered, the key unchanged); extra headers are fine."""
        __tracebackhide__ = True
        self._raise([self._check_damage()])

    def assert_no_foreign(self) -> None:
        """The target topics hold nothing but our records."""
        __tracebackhide__ = True
        self._raise([self._check_foreign()])

    def assert_no_lane_split(self) -> None:
        """Every lane arrived in a single target partition (per-key ordering kept)."""
        __tracebackhide__ = True
        self._raise([self._check_lane_split()])

    def assert_latency(self, *, p50_ms: float | None = None, p90_ms: float | None = None,
                       p99_ms: float | None = None, p999_ms: float | None = None,
                       max_ms: float | None = None) -> None:
        """Each given latency figure (ms, first arrival of each record) is at most its limit."""
        __tracebackhide__ = True
        limits = {"p50_ms": p50_ms, "p90_ms": p90_ms, "p99_ms": p99_ms, "p999_ms": p999_ms, "max_ms": max_ms}
        check_limits("assert_latency", LATENCY, **limits)
        self._raise([], latency=limits)

    def assert_ok(self, *, allow_duplicates: bool = False, max_reordered: int = 0, allow_phantoms: bool = False,
                  allow_headers_lost: bool = False, allow_metadata_damage: bool = False, allow_foreign: bool = False,
                  allow_lane_split: bool = False,
                  allow_source_loss: bool = False, p50_ms: float | None = None, p90_ms: float | None = None,
                  p99_ms: float | None = None, p999_ms: float | None = None, max_ms: float | None = None) -> None:
        """Check everything at once and report every failure together.

        Loss and corruption always fail; the ``allow_*`` toggles state a scenario's
        tolerance explicitly (e.g. ``allow_duplicates=True`` for at-least-once mirroring;
        ``allow_source_loss=True``: see :meth:`assert_no_loss`).
        """
        __tracebackhide__ = True
        check_limits("assert_ok", COUNT, max_reordered=max_reordered)
        limits = {"p50_ms": p50_ms, "p90_ms": p90_ms, "p99_ms": p99_ms, "p999_ms": p999_ms, "max_ms": max_ms}
        check_limits("assert_ok", LATENCY, **limits)
        checks = [self._check_something(), self._check_loss(allow_source_loss), self._check_latest(),
                  self._check_corruption()]
        if not allow_duplicates:
            checks.append(self._check_duplicates(0))
        checks.append(self._check_order(max_reordered))
        if not allow_phantoms:
            checks.append(self._check_phantoms())
        if not allow_headers_lost:
            checks.append(self._check_headers())
        if not allow_metadata_damage:
            checks.append(self._check_damage())
        if not allow_foreign:
            checks.append(self._check_foreign())
        if not allow_lane_split:
            checks.append(self._check_lane_split())
        self._raise(checks, latency=limits)

    # -- message building ----------------------------------------------------------------

    def _raise(self, problems: Sequence[str | None], latency: dict[str, float | None] | None = None) -> None:
        """Raise when any of ``problems`` (or a ``latency`` limit) failed.  When only latency
        limits failed, the breach heads the message ("mirror mismatch ... expected 1200,
        received 1200" would point at the records); the totals follow on the next line."""
        __tracebackhide__ = True
        breaches = self._latency_breaches(latency or {})
        if breaches and not any(problems):
            raise_mismatch(lambda: self._latency_head(breaches), [self._check_latency(breaches)])
        raise_mismatch(self._head, [*problems, self._check_latency(breaches)])

    def _head(self) -> str:
        """The totals; when records arrived with their metadata damaged or gone, what
        arrived heads the message instead (a loss that follows may be that damage)."""
        arrived = self._arrived_damaged()
        if arrived:
            head = f"mirror mismatch in {self.run_dir}: {arrived}\nrecords: {self._totals_line()}"
        else:
            head = f"mirror mismatch in {self.run_dir}: {self._totals_line()}"
        return head + self._stall_line() + self._capture_lines()

    def _capture_lines(self) -> str:
        """How the capture ended, and its consumer's restarts (``capture/watchdog.py``): a
        stall of the instrument's own, whose records arrived late by it."""
        reason = self.capture.get("reason")
        lines = f"\ncapture ended: {reason}" if reason else ""
        restarts = self.capture.get("consumer_restarts") or []
        if restarts:
            first = restarts[0]
            at = datetime.fromtimestamp(first["at"], timezone.utc).strftime("%H:%M:%S")
            lines += (f"\ncapture restarted its consumer {_plural(len(restarts), 'time')}, the records it had not "
                      f"read arriving late by it (first at {at} UTC: {first['why']})")
        return lines

    def _arrived_damaged(self) -> str:
        """What arrived damaged, as one sentence ('' when nothing did)."""
        parts = []
        if self.metadata_damaged:
            part = (f"{_plural(self.metadata_damaged, 'record')} of ours arrived with damaged metadata "
                    f"({self._damage_text()})")
            if self.damaged_unmatched:
                part += (f", {self.damaged_unmatched} of them too damaged to match to a record sent "
                         f"(the records they carry count as missing below)")
            else:
                part += ", each still identified"
            parts.append(part)
        if self.headers_lost:
            parts.append(f"{_plural(self.headers_lost, 'record')} of ours arrived without any km.* header")
        return "; ".join(parts)

    def _damage_text(self) -> str:
        """``km.t missing on 5000, key altered on 12``."""
        return ", ".join(f"{name} {how} on {count}" for name, hows in sorted(self.damage.items())
                         for how, count in sorted(hows.items()) if count)

    def _latency_head(self, breaches: list[tuple[str, str]]) -> str:
        head = f"latency over the limit in {self.run_dir}: {'; '.join(short for short, _ in breaches)}"
        return head + f"\nrecords: {self._totals_line()}" + self._stall_line() + self._capture_lines()

    def _totals_line(self) -> str:
        rest = [f"{name.replace('_', ' ')} {getattr(self, name)}" for name in TOTAL_FIELDS[3:] if getattr(self, name)]
        line = f"expected {self.expected}, received {self.received} ({self.distinct} distinct)"
        return line + (": " + ", ".join(rest) if rest else "")

    def _lane_lines(self, pick: Callable[[LaneStats], bool], describe: Callable[[LaneStats], str]) -> list[str]:
        """One line per lane for which ``pick(lane)`` is true, capped at MAX_LANES_SHOWN."""
        chosen = [lane for lane in self.lanes if pick(lane)]
        lines = [f"  {lane.name} ({lane.where}): {describe(lane)}" for lane in chosen[:MAX_LANES_SHOWN]]
        if len(chosen) > MAX_LANES_SHOWN:
            lines.append(f"  ... and {len(chosen) - MAX_LANES_SHOWN} more lanes")
        return lines

    def _examples(self, anomaly: str) -> list[str]:
        rows = self.examples.get(anomaly) or []
        if not rows:
            return []
        shown = min(len(rows), MAX_EXAMPLES_SHOWN)
        if anomaly in ("lost", "unseen"):
            # Rows are ranges, as many as the examples limit took; the records they hold are counted.
            records = getattr(self, anomaly)
            head = f"  examples ({anomaly}: {_plural(shown, 'range')} shown, {_plural(records, 'record')} {anomaly} in all)"
            return [head + ":", format_table(rows, _EXAMPLE_COLUMNS[anomaly])]
        total = getattr(self, anomaly) if anomaly in _COUNTED_EXAMPLES else len(rows)
        head = f"  examples ({anomaly}" + (f", {shown} of {total}" if total > shown else "") + "):"
        return [head, format_table(rows, _EXAMPLE_COLUMNS[anomaly], total=total)]

    def _check_something(self) -> str | None:
        """A verification that saw nothing to check fails: no record acknowledged by the source."""
        if self.expected:
            return None
        return ("nothing to verify: the source acknowledged no record of this run (0 expected), so delivery, order "
                "and latency were not checked; a verification that saw nothing to check fails")

    def _check_loss(self, allow_source_loss: bool = False) -> str | None:
        if allow_source_loss and not self.reconciled:
            raise ValueError(
                "allow_source_loss=True needs the source log to tell replicator loss from source loss, "
                "and this run did not capture the source topics: produce with capture_source=True "
                "(mirror_producer(..., capture_source=True) or MirrorRun(..., capture_source=True))"
            )
        missing = self.lost_by_replicator if allow_source_loss else self.lost + self.unseen
        if missing == 0:
            return None

        def describe(lane: LaneStats) -> str:
            parts = []
            for kind in ("lost", "unseen"):
                ranges = [r for r in lane.missing_ranges if r.kind == kind]
                if getattr(lane, kind):
                    # Ranges are capped per lane; when the cap cut this kind off, say how many.
                    text = format_ranges(ranges) if ranges else "ranges beyond the stored ones"
                    parts.append(f"{kind} {text}")
            shown = len(lane.missing_ranges)
            if lane.missing_range_count > shown:
                parts.append(f"... and {lane.missing_range_count - shown} more ranges")
            if lane.missing_in_source:
                parts.append("of these missing in the source "
                             + format_ranges(lane.source_missing_ranges, lane.source_missing_range_count))
            return "; ".join(parts)

        total = self.lost + self.unseen
        lines = [
            (
                f"at-least-once violated: {total} of {self.expected} acknowledged records never "
                f"arrived (lost {self.lost}: a later record of the lane arrived; unseen {self.unseen}: nothing later "
                f"arrived, the tail was not drained or the lane is gone)"
            )
        ]
        if self.reconciled:
            lines.append(
                f"  source log: {self.lost_by_replicator} lost by the replicator (in the source log, absent on the "
                f"target), {self.missing_in_source} missing in the source (acknowledged, yet absent from the source "
                f"log: the source cluster lost {'it' if self.missing_in_source == 1 else 'them'})"
                + (" -- tolerated (allow_source_loss=True)" if allow_source_loss else "")
            )
        if self.never_acked:
            lines.append(f"  not counted: {_plural(self.never_acked, 'record')} sent but never acknowledged by the "
                         f"source did not arrive either")
        lines += self._lane_lines(
            lambda s: (s.lost_by_replicator if allow_source_loss else s.lost + s.unseen) > 0, describe)
        lines += self._examples("lost") + self._examples("unseen")
        said = self.replicator.get("health") or self.replicator.get("status")
        if said and not self.stall:  # else the stall's line in the head quotes it
            lines.append(f"  the replicator ({self.replicator.get('spec', '?')}) says: {said}")
        if not self.reconciled:
            lines.append("  Hint: capture the source too (capture_source=True) to tell replicator loss from source loss.")
        return "\n".join(lines)

    def _check_latest(self) -> str | None:
        if self.latest_missing == 0:
            return None
        keys = sum(1 for s in self.lanes if s.latest_seq is not None)
        lines = [
            (
                f"latest value missing: {self.latest_missing} of {keys} lanes (keys) of compacted topics never "
                f"received their latest acknowledged record (older records of a key may be compacted away, the "
                f"latest must arrive)"
            ),
            *self._lane_lines(lambda s: s.latest_missing > 0,
                              lambda s: f"latest seq {s.latest_seq} never arrived ({s.distinct} distinct of "
                                        f"{s.expected} acknowledged arrived)"),
        ]
        return "\n".join(lines)

    def _check_order(self, max_reordered: int) -> str | None:
        if self.reordered <= max_reordered:
            return None
        lines = [
            (
                f"out of order: {_plural(self.reordered, 'record')} arrived behind a higher sequence of their lane "
                f"in the same target partition (allowed {max_reordered})"
            ),
            *self._lane_lines(lambda s: s.reordered > 0, lambda s: f"{s.reordered} reordered"),
        ]
        return "\n".join(lines + self._examples("reordered"))

    def _check_duplicates(self, max_duplicated: int) -> str | None:
        if self.duplicated <= max_duplicated:
            return None
        lines = [
            (
                f"duplicates: {self.duplicated} extra {'copy' if self.duplicated == 1 else 'copies'} arrived "
                f"(allowed {max_duplicated})"
            ),
            *self._lane_lines(lambda s: s.duplicated > 0, lambda s: f"{s.duplicated} duplicated"
                              + (f": seqs {format_ranges(s.duplicate_ranges, s.duplicate_range_count)}"
                                 if s.duplicate_ranges else "")),
        ]
        lines += self._settings_lines("duplicates", "whether it copies exactly once, and how often it commits its "
                                      "source position (after a crash it repeats what it copied since)")
        return "\n".join(lines + self._examples("duplicated"))

    def _check_phantoms(self) -> str | None:
        if self.phantom == 0:
            return None
        lines = [
            f"phantoms: {_plural(self.phantom, 'record')} arrived that the source never acknowledged",
            *self._lane_lines(
                lambda s: s.phantom > 0,
                lambda s: f"{s.phantom} phantom" + ("" if s.expected else " (no such lane in any manifest)")
                + (f", {s.aborted_arrived} of aborted transactions" if s.aborted_arrived else ""),
            ),
        ]
        if self.aborted_arrived:
            lines.insert(1, f"  {self.aborted_arrived} of them from transactions the source aborted ({self.aborted} "
                            "aborted in all): the replicator read the source read_uncommitted (MirrorMaker 2's "
                            "default; set source.consumer.isolation.level=read_committed)")
            lines[2:2] = self._settings_lines("transactions", "the isolation level of its source consumer")
        return "\n".join(lines + self._examples("phantom"))

    def _check_corruption(self) -> str | None:
        if self.corrupted == 0:
            return None
        lines = [
            f"corruption: {_plural(self.corrupted, 'record')} arrived with a bad payload checksum",
            *self._lane_lines(lambda s: s.corrupted > 0, lambda s: f"{s.corrupted} corrupted"),
        ]
        return "\n".join(lines + self._examples("corrupted"))

    def _check_headers(self) -> str | None:
        if self.headers_lost == 0:
            return None
        return "\n".join([
            (
                f"headers lost: {_plural(self.headers_lost, 'record')} arrived without their km.* headers "
                f"(the replicator dropped record headers; use the body format, or assert_ok(allow_headers_lost=True))"
            ),
            *self._settings_lines("headers", "its header converter and transforms"),
            *self._examples("headers_lost"),
        ])

    def _check_damage(self) -> str | None:
        if self.metadata_damaged == 0:
            return None
        lines = [(
            f"metadata damaged: {_plural(self.metadata_damaged, 'record')} of ours arrived with metadata other than "
            f"the producer wrote ({self._damage_text()}): a transform, header converter or the replicator removed "
            f"or rewrote it (assert_ok(allow_metadata_damage=True) tolerates it)"
        )]
        if self.damaged_unmatched:
            lines.append(f"  {self.damaged_unmatched} of them lost their producer id, lane or sequence with it: they "
                         f"cannot be matched to a record sent, so the records they carry count as missing")
        else:
            lines.append("  every one was identified and counts for delivery, duplicates and order")
        if self.latency.untimed:
            lines.append(f"  {_plural(self.latency.untimed, 'record')} had no usable produce time (km.t): "
                         f"not in the latency figures")
        lines += self._settings_lines("headers", "its header converter and transforms")
        return "\n".join(lines + self._examples("metadata_damaged"))

    def _settings_lines(self, feature: str, what: str) -> list[str]:
        """The settings behind ``feature`` as the replicator applied them (a replicator the
        plugin configures), or what to check in one it does not; nothing without a replicator."""
        spec = self.replicator.get("spec")
        if not spec:
            return []
        quoted = (self.replicator.get("settings") or {}).get(feature)
        if quoted:
            return [f"  the replicator's settings behind it ({spec}): {quoted}"]
        return [f"  the plugin does not configure {spec}: check {what}"]

    def _check_foreign(self) -> str | None:
        if self.foreign == 0:
            return None
        return "\n".join([
            (
                f"foreign records: {_plural(self.foreign, 'record')} on the target topics "
                f"{'is' if self.foreign == 1 else 'are'} not ours "
                f"(mangled beyond recognition, or written by something else)"
            ),
            *self._examples("foreign"),
        ])

    def _check_lane_split(self) -> str | None:
        if self.lane_split == 0:
            return None
        lines = [
            (
                f"lanes split: {_plural(self.lane_split, 'lane')} arrived in more than one target partition "
                f"(the replicator re-partitioned; per-key order is not kept)"
            ),
            *self._lane_lines(lambda s: len(s.partitions) > 1, lambda s: "split"),
        ]
        return "\n".join(lines + self._examples("lane_split"))

    def _latency_breaches(self, limits: dict[str, float | None]) -> list[tuple[str, str]]:
        """``(short, full)`` description of each latency limit the run breached; first, when a
        limit is given, a clock offset between the run's hosts over a tenth of the smallest
        limit (its latencies compare two clocks that far apart: not judged)."""
        breaches = []
        given = [limit for limit in limits.values() if limit is not None]
        clock = self.engine.get("clock") or {}
        off = abs(float(clock.get("max_offset_ms") or 0.0)) + float(clock.get("uncertainty_ms") or 0.0)
        if given and off > CLOCK_SHARE * min(given):
            full = (f"latency not judged: the clock of {clock.get('task')} on {clock.get('host')} is "
                    f"{float(clock.get('max_offset_ms') or 0.0):.1f} ms (± {float(clock.get('uncertainty_ms') or 0.0):.1f}"
                    f" ms) off the driver's, more than {CLOCK_SHARE:.0%} of the limit {_ms(min(given))}: producer and "
                    "capture timestamps from clocks that far apart give no latency to compare (synchronise the hosts' "
                    "clocks: NTP / chrony)")
            breaches.append((f"clock offset {float(clock.get('max_offset_ms') or 0.0):.1f} ms", full))
        for name, limit in limits.items():
            if limit is None:
                continue
            figure = _FIGURE_LABELS[name]
            value = getattr(self.latency, name)
            if value is None:
                what = "no record arrived"
                if self.latency.untimed:  # they did, without a produce time
                    what = f"no record with a produce time arrived ({self.latency.untimed} without one)"
                full = f"latency {figure}: {what}, limit {_ms(limit)}"
                breaches.append((f"{figure}: {what} (limit {_ms(limit)})", full))
            elif value > limit:
                by_topic = ", ".join(
                    f"{topic} {_ms(getattr(stats, name))}" for topic, stats in sorted(self.latency_by_topic.items())
                )
                full = (f"latency {figure} {_ms(value)} exceeds the limit {_ms(limit)}"
                        + (f" (by topic: {by_topic})" if by_topic else ""))
                breaches.append((f"{figure} {_ms(value)} (limit {_ms(limit)})", full))
        return breaches

    def _check_latency(self, breaches: list[tuple[str, str]]) -> str | None:
        failures = [full for _, full in breaches]
        if not failures:
            return None
        lat = self.latency
        untimed = f" ({lat.untimed} more without a produce time)" if lat.untimed else ""
        figures = (
            f"  over {lat.count} records{untimed}{self._partial_note()}: min {_ms(lat.min_ms)}, mean {_ms(lat.mean_ms)}, p50 {_ms(lat.p50_ms)}, "
            f"p90 {_ms(lat.p90_ms)}, p99 {_ms(lat.p99_ms)}, p99.9 {_ms(lat.p999_ms)}, max {_ms(lat.max_ms)}"
            + self.clock_note()
        )
        return "\n".join([*failures, figures])

    def clock_note(self) -> str:
        """`` (± 0.4 ms clock offset)``: the bound every latency of a run on several hosts'
        clocks carries (the spark engine's tasks, ``engine.clock``); '' on one host's clock."""
        if self.engine.get("engine") != "spark":
            return ""
        clock = self.engine.get("clock") or {}
        bound = abs(float(clock.get("max_offset_ms") or 0.0)) + float(clock.get("uncertainty_ms") or 0.0)
        return f" (± {bound:.1f} ms clock offset)"
