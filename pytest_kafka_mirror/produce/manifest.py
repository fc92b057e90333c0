"""What a producer keeps while it sends, and what its manifest then says.

**Acknowledgements.**  The manifest holds, per topic, producer id and lane, the sequences
the source acknowledged: what the verifier expects on the target, so a record the source
never confirmed is never counted as lost by the replicator.  The client reports failures
only (``delivery.report.only.error``): a successful delivery costs no Python call, and
after the final flush every record that was neither reported failed nor left in the queue
was acknowledged.  Records still queued when the flush times out are purged, and their
purge reports make them *unreported* (neither acknowledged nor failed).

- :class:`_Topic`: the send state of one topic (lane routing, failures, unreported records)
  and its lanes' :class:`~pytest_kafka_mirror.rundir.LaneManifest`.
- :class:`_Seconds`: records per UTC second of their timestamp (``stats["sent_per_second"]``).
- :func:`live_counts`: the ``on_counts`` figures while producing; :func:`run_stats`: the
  manifest's lanes and ``stats`` once the client is flushed.

The :class:`~pytest_kafka_mirror.rundir.Manifest` itself is written by the run
(``run.py``), next to the other producers' manifests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..rundir import LaneManifest
from .records import HDR_LANE, RecordEncoder

if TYPE_CHECKING:
    from .lag import _LagWatch
    from .profile import TopicLanes
    from .slip import SlipHistogram

__all__ = ["live_counts", "run_stats"]


def _merge(ranges: list[list[int]]) -> list[list[int]]:
    """Sort and merge inclusive ranges."""
    out: list[list[int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def _ranges(seqs: Sequence[int]) -> list[list[int]]:
    """Inclusive ranges of a sorted list of distinct ints."""
    out: list[list[int]] = []
    for s in seqs:
        if out and s == out[-1][1] + 1:
            out[-1][1] = s
        else:
            out.append([s, s])
    return out


def _complement(sent: int, holes: Sequence[int]) -> list[list[int]]:
    """Ranges of ``0 .. sent-1`` without the sorted distinct ``holes``."""
    out: list[list[int]] = []
    nxt = 0
    for h in holes:
        if h > nxt:
            out.append([nxt, h - 1])
        nxt = h + 1
    if nxt < sent:
        out.append([nxt, sent - 1])
    return out


class _Topic:
    """Send state of one topic: lane routing, precomputed key / header parts, failures."""

    __slots__ = ("acked_shown", "failed", "keys", "lane_headers", "lane_parts", "lanes", "name", "parts", "sent",
                 "unreported")

    def __init__(self, t: TopicLanes, enc: RecordEncoder) -> None:
        self.name = t.topic
        self.lanes = t.lanes or 1
        self.keys = [enc.key(lane) for lane in range(self.lanes)]
        self.parts = [lane % t.partitions for lane in range(self.lanes)]
        self.lane_headers = [(HDR_LANE, h) for h in enc.lane_headers()] if enc.fmt == "headers" else []
        #: (lane, key, partition, km.l header or None) per lane: what the send loop reads of a lane
        self.lane_parts = [(lane, self.keys[lane], self.parts[lane], self.lane_headers[lane] if self.lane_headers
                            else None) for lane in range(self.lanes)]
        self.sent = 0  # records handed to the client; record k is seq k // lanes of lane k % lanes
        self.failed: dict[int, str] = {}  # record index -> error name (delivery failed)
        self.unreported: set[int] = set()  # record index: purged after the flush timed out
        self.acked_shown = 0  # live counts never decrease

    def on_delivery(self, k: int, err: Any, msg: Any) -> None:
        """Delivery report of record ``k`` (only failures are reported, see the module docstring)."""
        if err is None:
            return
        name = err.name() if hasattr(err, "name") else str(err)
        if name.startswith("_PURGE"):
            self.unreported.add(k)
        else:
            self.failed[k] = name

    def lane_manifests(self) -> list[LaneManifest]:
        out = []
        for lane in range(self.lanes):
            sent = (self.sent - lane + self.lanes - 1) // self.lanes if self.sent > lane else 0
            failed = sorted(k // self.lanes for k in self.failed if k % self.lanes == lane)
            holes = sorted({*failed, *(k // self.lanes for k in self.unreported if k % self.lanes == lane)})
            out.append(LaneManifest(self.name, lane, self.parts[lane], sent=sent,
                                    acked=_complement(sent, holes), failed=_ranges(failed)))
        return out


class _Seconds:
    """Records per UTC second of their own timestamp (``stats["sent_per_second"]``).

    The verifier groups arrivals by that same timestamp, so "sent" and "received" of a
    second compare exactly (recovery figures rely on it).  The send loop keeps the current
    second in locals and touches the dictionary only when a record falls outside it.
    """

    __slots__ = ("counts", "end", "n", "start")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.start, self.end, self.n = 0, 0, 0

    def switch(self, ts_us: int) -> None:
        """Close the current second and open the one of ``ts_us``."""
        if self.n:
            sec = self.start // 1_000_000
            self.counts[sec] = self.counts.get(sec, 0) + self.n
        self.start = ts_us - ts_us % 1_000_000
        self.end, self.n = self.start + 1_000_000, 0

    def pairs(self) -> list[list[int]]:
        self.switch(0)
        self.start = self.end = 0
        return sorted([s, n] for s, n in self.counts.items())


def live_counts(state: Sequence[_Topic], in_flight: int, span: float, sent_then: Sequence[int],
                final: bool) -> dict[str, dict[str, float]]:
    """``{topic: {"sent", "acked", "failed", "rate"}}`` for ``on_counts``: acknowledged is
    sent - failed - in flight (the client's queue, ``in_flight``, shared out between topics
    by records sent), never decreasing; ``rate``: records sent per second since ``sent_then``,
    ``span`` seconds ago (0 once the producer is done, ``final``)."""
    total = sum(t.sent for t in state) or 1
    counts: dict[str, dict[str, float]] = {}
    for i, t in enumerate(state):
        failed = len(t.failed) + len(t.unreported)
        acked = t.sent - failed - (in_flight * t.sent + total - 1) // total
        t.acked_shown = max(t.acked_shown, acked)
        counts[t.name] = {
            "sent": t.sent,
            "acked": t.acked_shown,
            "failed": len(t.failed),
            "rate": 0.0 if final else round((t.sent - sent_then[i]) / span, 3),
        }
    return counts


def run_stats(
    state: Sequence[_Topic],
    *,
    throttled: bool,
    unflushed: int,
    produce_seconds: float,
    behind_max: int,
    lag_watch: _LagWatch,
    warned: bool,
    warmup_seconds: float | None,
    seconds: _Seconds,
    slip: SlipHistogram,
) -> tuple[list[LaneManifest], dict[str, Any]]:
    """The manifest's lanes and ``stats`` of a finished run (the client flushed)."""
    errors: dict[str, int] = {}
    lane_manifests: list[LaneManifest] = []
    for t in state:
        for name in t.failed.values():
            errors[name] = errors.get(name, 0) + 1
        lane_manifests += t.lane_manifests()
    total_sent = sum(t.sent for t in state)
    stats: dict[str, Any] = {
        "sent": total_sent,
        "acked": sum(m.acked_count for m in lane_manifests),
        "failed": sum(len(t.failed) for t in state),
        "unreported": unflushed,
        "errors": errors,
        "produce_seconds": round(produce_seconds, 6),
        "achieved_rate_per_topic": round(total_sent / len(state) / produce_seconds, 3) if produce_seconds > 0 else None,
        "max_behind_schedule": behind_max if throttled else None,
        # seconds: the largest lag, and the longest stretch it stayed above LAG_LIMIT_S
        "max_lag_s": round(max(lag_watch.max_lag, 0.0), 3) if throttled else None,
        "lag_over_limit_s": round(lag_watch.longest_above, 3) if throttled else None,
        # [second of the schedule, largest lag (s)] of the seconds it was behind by more than LAG_LIMIT_S
        "behind_s": [[s, round(lag, 3)] for s, lag in sorted(lag_watch.behind.items())] if throttled else None,
        "rate_warning": warned,
        "warmup_seconds": warmup_seconds,
        "sent_per_second": seconds.pairs(),
        # Timestamps are due times (throttled) or hand-over times (unthrottled).
        "timestamps": "due" if throttled else "sent",
        "schedule_slip_ms": slip.to_stats(),
    }
    return lane_manifests, stats
