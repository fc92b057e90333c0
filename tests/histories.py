"""Random mirror histories with injected anomalies, for the oracle-vs-Spark property tests.

A :class:`History` is what a producer sent and the source acknowledged, what the source
log holds, and what arrived on the target in which order: drops, tail cuts, duplicates,
local reorders, lanes split over partitions, corrupted payloads, phantoms (never sent,
or sent and not acknowledged), unknown producers, headerless and foreign records, clock
skew, damaged metadata (a lane whose records lost km.t, records whose key is gone or
rewritten, records of ours that lost km.s and match nothing).  Histories are frozen and hashable, and each is written under its own topic and
producer names (``c<N>.``), so many share one run directory, and one Spark job, without
seeing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from hypothesis import strategies as st

from tests.synthetic import SyntheticRun

__all__ = ["Arrival", "History", "LaneHistory", "histories", "reductions", "size", "write_histories"]

TOPICS = ("a", "b")
PRODUCERS = ("p1", "p2", "ghost")  # "ghost" lanes are in no manifest
PARTITIONS = 3


@dataclass(frozen=True)
class Arrival:
    """One record on the target: ``lane`` indexes History.lanes; -1 foreign, -2 headerless,
    -4 ours with km.s gone (``seq`` picks the topic and lane, as for -2)."""

    lane: int
    seq: int
    partition: int
    latency_ms: int = 1
    corrupt: bool = False
    damage: str | None = None  # the capture's damage text (identity intact)


@dataclass(frozen=True)
class LaneHistory:
    topic: str
    producer: str
    lane: int
    partition: int
    sent: int
    unacked: frozenset[int]  # of range(sent)
    failed: frozenset[int]  # of unacked: delivery reported failed (the rest: no report)
    source_lost: frozenset[int]  # acked seqs the source log lacks
    kind: str = "headers"
    timed: bool = True  # False: every record arrives without km.t (no produce time)

    @property
    def in_manifest(self) -> bool:
        return self.producer != "ghost"

    @property
    def acked(self) -> list[int]:
        return [s for s in range(self.sent) if s not in self.unacked]

    def __repr__(self) -> str:
        acked = f"{self.sent} sent" + (f", unacked {sorted(self.unacked)}" if self.unacked else "")
        acked += f", failed {sorted(self.failed)}" if self.failed else ""
        acked += f", source lost {sorted(self.source_lost)}" if self.source_lost else ""
        untimed = "" if self.timed else " untimed"
        return f"<{self.topic}/{self.producer}/lane {self.lane} p{self.partition} {self.kind}{untimed}: {acked}>"


@dataclass(frozen=True)
class History:
    lanes: tuple[LaneHistory, ...]
    arrivals: tuple[Arrival, ...]  # in arrival order

    def __repr__(self) -> str:
        lines = ["History("] + [f"  lane {i}: {lane!r}" for i, lane in enumerate(self.lanes)]
        lines.append("  arrivals (lane:seq@partition, *corrupt, ~latency ms): " + " ".join(
            ({-1: "foreign", -2: "headerless", -4: "unmatched"}.get(a.lane) or f"{a.lane}:{a.seq}")
            + f"@{a.partition}" + ("*" if a.corrupt else "") + (f"~{a.latency_ms}" if a.latency_ms != 1 else "")
            + (f"[{a.damage}]" if a.damage else "")
            for a in self.arrivals
        ))
        return "\n".join(lines) + ")"


def size(h: History) -> int:
    """How big a history is, for shrinking: everything a reduction can take away."""
    return 10 * len(h.lanes) + sum(
        3 + (a.corrupt) + (a.latency_ms != 1) + (a.lane >= 0 and a.partition != h.lanes[a.lane].partition)
        + (a.damage is not None) for a in h.arrivals
    ) + sum(lane.sent + len(lane.unacked) + len(lane.failed) + len(lane.source_lost) + (lane.kind != "headers")
            + (not lane.timed) for lane in h.lanes)


def reductions(h: History) -> list[History]:
    """Every history one step smaller than ``h``, the biggest steps first.

    Steps: drop a lane (with its arrivals), drop a run of arrivals (halves, quarters, ...
    single ones, as delta debugging does), simplify one arrival (no corruption, latency 1,
    the lane's own partition), shrink a lane (one fewer sent, one element fewer in a set,
    the headers format).
    """
    out: list[History] = []
    for i in range(len(h.lanes)):
        lanes = h.lanes[:i] + h.lanes[i + 1:]
        arrivals = tuple(replace(a, lane=a.lane - (a.lane > i)) for a in h.arrivals if a.lane != i)
        out.append(History(lanes, arrivals))
    n = len(h.arrivals)
    k = n // 2
    while k >= 1:
        out += [History(h.lanes, h.arrivals[:j] + h.arrivals[j + k:]) for j in range(0, n - k + 1, k)]
        k //= 2
    for j, a in enumerate(h.arrivals):
        simpler = [replace(a, corrupt=False), replace(a, latency_ms=1), replace(a, damage=None)]
        if a.lane >= 0:
            simpler.append(replace(a, partition=h.lanes[a.lane].partition))
        out += [History(h.lanes, h.arrivals[:j] + (b,) + h.arrivals[j + 1:]) for b in simpler if b != a]
    for i, lane in enumerate(h.lanes):
        smaller = [replace(lane, kind="headers"), replace(lane, timed=True)]
        if lane.sent:
            cut = lane.sent - 1
            smaller.append(replace(lane, sent=cut, unacked=frozenset(s for s in lane.unacked if s < cut),
                                   failed=frozenset(s for s in lane.failed if s < cut),
                                   source_lost=frozenset(s for s in lane.source_lost if s < cut)))
        for name in ("unacked", "failed", "source_lost"):
            for seq in getattr(lane, name):
                change = {name: getattr(lane, name) - {seq}}
                if name == "unacked":
                    change["failed"] = lane.failed - {seq}
                smaller.append(replace(lane, **change))
        out += [History(h.lanes[:i] + (b,) + h.lanes[i + 1:], h.arrivals) for b in smaller if b != lane]
    return sorted(out, key=size)


@st.composite
def _lane(draw: Any, topic: str, producer: str, lane: int) -> tuple[LaneHistory, list[Arrival]]:
    """One lane and its arrivals in order (``Arrival.lane`` filled in by the caller)."""
    sent = draw(st.integers(0, 24))
    seqs = range(sent)
    unacked = draw(st.frozensets(st.sampled_from(seqs), max_size=4)) if sent else frozenset()
    failed = draw(st.frozensets(st.sampled_from(sorted(unacked)))) if unacked else frozenset()
    acked = [s for s in seqs if s not in unacked]
    source_lost = draw(st.frozensets(st.sampled_from(acked), max_size=3)) if acked else frozenset()
    partition = draw(st.integers(0, PARTITIONS - 1))
    kind = draw(st.sampled_from(["headers", "body"]))
    # Damage that leaves the identity whole: km.t gone from the whole lane (a tie of two
    # copies' arrival times would otherwise leave "the first copy's produce time" open),
    # the key gone or rewritten on single records (headers format: km.l names the lane).
    timed = kind == "body" or draw(st.booleans()) or draw(st.booleans())
    h = LaneHistory(topic, producer, lane, partition, sent, unacked, failed, source_lost, kind=kind, timed=timed)

    # What the replicator delivers: every sent seq and a few never sent, minus drops and
    # a cut tail, plus duplicates and local reorders.
    out = list(range(sent + draw(st.integers(0, 2))))
    if out:
        dropped = draw(st.frozensets(st.sampled_from(out), max_size=5))
        out = [s for s in out if s not in dropped]
    out = out[: len(out) - draw(st.integers(0, 3))] if out else out
    for seq, at in draw(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 40)), max_size=4)):
        if out:
            out.insert(at % (len(out) + 1), out[seq % len(out)])
    for i, j in draw(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=3)):
        if out:  # a record moved elsewhere: a reorder, however far
            out.insert(j % len(out), out.pop(i % len(out)))
    # A lane split: from some arrival on, the lane lands in another partition.
    split_at = draw(st.one_of(st.none(), st.integers(0, 20)))
    other = draw(st.integers(0, PARTITIONS - 1))
    corrupt = draw(st.frozensets(st.integers(0, 15), max_size=4))
    latencies = draw(st.lists(st.integers(-3, 60), min_size=len(out), max_size=len(out)))
    damaged = draw(st.frozensets(st.integers(0, 15), max_size=3)) if kind == "headers" else frozenset()
    damage = draw(st.sampled_from(["key=missing", "key=altered", "km.l=missing"]))
    arrivals = [
        Arrival(-3, seq, other if split_at is not None and i >= split_at else partition, latencies[i], i in corrupt,
                damage if i in damaged else None)
        for i, seq in enumerate(out)
    ]
    return h, arrivals


@st.composite
def histories(draw: Any) -> History:
    keys = draw(st.lists(st.tuples(st.sampled_from(TOPICS), st.sampled_from(PRODUCERS), st.integers(0, 2)),
                         min_size=1, max_size=4, unique=True))
    lanes: list[LaneHistory] = []
    streams: list[list[Arrival]] = []
    for i, (topic, producer, lane) in enumerate(keys):
        h, arrivals = draw(_lane(topic, producer, lane))
        lanes.append(h)
        streams.append([replace(a, lane=i) for a in arrivals])
    extras = draw(st.lists(st.tuples(st.sampled_from([-1, -2, -4]), st.integers(0, 2),
                                     st.integers(0, PARTITIONS - 1)), max_size=2))
    streams += [[Arrival(kind, lane, partition)] for kind, lane, partition in extras]
    # Interleave the lanes' streams (each keeps its own order) by drawn stream choices.
    order: list[Arrival] = []
    while any(streams):
        live = [s for s in streams if s]
        order.append(live[draw(st.integers(0, len(live) - 1))].pop(0))
    return History(tuple(lanes), tuple(order))


def write_histories(run: SyntheticRun, cases: list[History], *, source_log: bool) -> list[str]:
    """Add every history to ``run`` under its own names (and its source log when
    ``source_log``); returns each one's name prefix."""
    run.source_log = source_log
    # A run needs a manifest, and a history may have none (only "ghost" lanes).
    run.lane("anchor", pid="anchor", lane=0)
    prefixes = []
    for n, case in enumerate(cases):
        prefix = f"c{n}."
        prefixes.append(prefix)
        built = []
        for h in case.lanes:
            topic, pid = prefix + h.topic, prefix + h.producer
            lane = run.lane(topic, pid=pid, lane=h.lane, partition=h.partition, acked=h.acked, failed=sorted(h.failed),
                            sent=h.sent, in_manifest=h.in_manifest)
            if source_log and h.in_manifest:
                lane.in_source([s for s in range(h.sent) if s not in h.source_lost])
            built.append(lane)
        for a in case.arrivals:
            if a.lane == -1:
                run.foreign(prefix + TOPICS[a.seq % len(TOPICS)], partition=a.partition)
            elif a.lane == -2:
                run.headerless(prefix + TOPICS[a.seq % len(TOPICS)], lane=a.seq, partition=a.partition)
            elif a.lane == -4:
                run.lane(prefix + TOPICS[a.seq % len(TOPICS)], pid=prefix + "p1", lane=a.seq,
                         in_manifest=False).unmatched(partition=a.partition)
            else:
                lane = case.lanes[a.lane]
                built[a.lane].deliver([a.seq], partition=a.partition, latency_ms=a.latency_ms,
                                      checksum_ok=not a.corrupt, kind=lane.kind, damage=a.damage, timed=lane.timed)
    return prefixes
