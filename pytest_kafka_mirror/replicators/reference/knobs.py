"""Fault knobs of the reference mirror: which faults, and what they do to each record.

The reference mirror is the instrument that proves the verifier catches every anomaly, so
its faults must be exact and repeatable:

* every decision about a record is a pure function of ``(seed, knob, topic, producer,
  lane, seq)`` — a hash, not a random generator's call order — so how the consumer
  batches records never changes which ones are dropped, duplicated or corrupted;
* the mirror keeps a **ledger** of what it did (per topic and knob: the producer, lane and
  sequence numbers affected), so a test asserts the verifier's counts against what was
  injected rather than against an estimate of a rate.

Knobs apply to records of ours only (the capture's ``headers`` / ``body`` kinds); anything
else passes through untouched.  A record goes through these stages, in order:

1. ``lose_producers``: every record of those producer ids is dropped (a whole producer lost);
2. ``drop`` (a rate) and ``drop_seqs`` (``(lane, first, last)`` ranges): dropped;
3. ``corrupt``: one payload byte flipped (the payload CRC no longer matches);
4. ``strip_headers``: the ``km.*`` metadata headers removed (headers format only); then
   the metadata damage a Connect transform or converter does, to the records
   ``damage_rate`` picks (all by default): ``strip_header`` (names) removes those headers,
   ``rewrite_header`` (names) re-encodes their values as text (a JSON string: ``"…"``),
   ``drop_key`` removes the key, ``add_header`` (a name) prepends a header of that name (an
   extra header: harmless, the record stays intact);
5. ``split`` (a rate) and ``split_lanes`` (``(lane, from_seq)``): sent to the next target
   partition instead of its own, so its lane arrives in two partitions;
6. ``duplicate``: sent twice; ``replay`` (``(lane, first, last)``): once ``last`` was sent,
   ``first..last`` are sent again, as a replicator restarted from an old offset would;
7. ``reorder``: windows of that many consecutive source offsets per partition are sent in
   a seeded shuffled order (a window still open after ``reorder_flush_ms`` of silence is
   sent as it is);
8. ``stop_tail``: the last K records of each lane are held back for good (a replicator
   that stopped before the tail);
9. ``delay_ms`` + ``jitter_ms``: each record waits that long (jitter: a seeded fraction of
   ``jitter_ms``), keeping partition order: latency, not reordering.

Checkpoint knobs (:data:`CHECKPOINT_KNOBS`) leave the records alone and act on the
consumer-group offsets the mirror translates (``_checkpoints.py``), and through them on
the offsets it syncs to the target: ``translate_ahead=N`` translates N offsets too far
(a failing-over consumer skips records), ``checkpoint_rewind=N`` emits checkpoints N
offsets lower, past MM2's guard against rewinding (once, when set), and
``stop_checkpoints_after=SECONDS`` stops checkpointing the topic that long after the knob
took effect (heartbeats go on: the stale-checkpoint bug).

Everything here is pure Python (no Kafka client), unit-tested without a broker.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ...produce.records import HDR_PRODUCER, Kind, compact_ranges, decode

__all__ = ["ADDED_HEADER_VALUE", "CHECKPOINT_KNOBS", "DAMAGE_KNOBS", "LEDGER_KNOBS", "FaultEngine", "FaultLedger", "Knobs", "Ledger", "MirrorRecord",
           "ledger_dump", "parse_knobs", "resolve", "unit"]

#: Ledger entries, in pipeline order ("stop_tail" lists the records held back right now).
LEDGER_KNOBS = ("lose_producer", "drop", "corrupt", "strip_headers", "strip_header", "rewrite_header", "drop_key",
                "add_header", "split", "duplicate", "replay", "reorder", "stop_tail", "delay")
#: The metadata damage knobs (stage 4), in the order they act on a record.
DAMAGE_KNOBS = ("strip_header", "rewrite_header", "drop_key", "add_header")
#: The value of the header ``add_header`` adds.
ADDED_HEADER_VALUE = b"added-by-the-mirror"

_RANGE_KNOBS = ("drop_seqs", "replay")
#: Knobs of the offset translation, not of the records: a topic with only these stays on
#: the mirror's fast path (and keeps its offset syncs and commits).
CHECKPOINT_KNOBS = ("translate_ahead", "checkpoint_rewind", "stop_checkpoints_after")


@dataclass(frozen=True)
class Knobs:
    """The faults the reference mirror injects into one topic (all off by default).

    Rates are fractions of records (0..1) decided per record by a seeded hash; ``seed``
    changes which records a rate picks.  Lanes are the producer's lanes (any producer).
    """

    seed: int = 0
    drop: float = 0.0
    drop_seqs: tuple[tuple[int, int, int], ...] = ()
    duplicate: float = 0.0
    replay: tuple[tuple[int, int, int], ...] = ()
    reorder: int = 0
    reorder_flush_ms: float = 200.0
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    corrupt: float = 0.0
    strip_headers: float = 0.0
    strip_header: tuple[str, ...] = ()
    rewrite_header: tuple[str, ...] = ()
    drop_key: bool = False
    add_header: str = ""
    damage_rate: float = 1.0
    split: float = 0.0
    split_lanes: tuple[tuple[int, int], ...] = ()
    stop_tail: int = 0
    lose_producers: tuple[str, ...] = ()
    translate_ahead: int = 0
    checkpoint_rewind: int = 0
    stop_checkpoints_after: float | None = None

    def __post_init__(self) -> None:
        def bad(name: str, value: Any, want: str) -> ValueError:
            return ValueError(f"fault knob {name}={value!r}: {want}")

        for name in ("drop", "duplicate", "corrupt", "strip_headers", "split", "damage_rate"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise bad(name, value, "must be a rate between 0 and 1")
        for name in ("reorder", "stop_tail", "translate_ahead", "checkpoint_rewind"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise bad(name, value, "must be a whole number >= 0")
        for name in ("delay_ms", "jitter_ms", "reorder_flush_ms"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0:
                raise bad(name, value, "must be a number of milliseconds >= 0")
        after = self.stop_checkpoints_after
        if after is not None and (not isinstance(after, (int, float)) or after < 0):
            raise bad("stop_checkpoints_after", after, "must be a number of seconds >= 0")
        # Lists from JSON become tuples, so Knobs stay hashable and comparable.
        for name in _RANGE_KNOBS:
            ranges = tuple(tuple(int(x) for x in r) for r in getattr(self, name))
            if any(len(r) != 3 or r[1] > r[2] for r in ranges):
                raise bad(name, getattr(self, name), "must be (lane, first, last) ranges with first <= last")
            object.__setattr__(self, name, ranges)
        split = tuple(tuple(int(x) for x in r) for r in self.split_lanes)
        if any(len(r) != 2 for r in split):
            raise bad("split_lanes", self.split_lanes, "must be (lane, from_seq) pairs")
        object.__setattr__(self, "split_lanes", split)
        object.__setattr__(self, "lose_producers", tuple(str(p) for p in self.lose_producers))
        for name in ("strip_header", "rewrite_header"):
            value = getattr(self, name)
            names = (value,) if isinstance(value, str) else tuple(value)
            if not all(isinstance(n, str) and n for n in names):
                raise bad(name, value, "must be header names, e.g. km.t (several: km.t/km.s)")
            object.__setattr__(self, name, names)
        if not isinstance(self.drop_key, bool):
            raise bad("drop_key", self.drop_key, "must be true or false")
        if not isinstance(self.add_header, str):
            raise bad("add_header", self.add_header, "must be a header name")

    @property
    def active(self) -> bool:
        """Whether any record fault is on (a topic without any is mirrored on the fast path)."""
        return any(getattr(self, f.name) != f.default for f in fields(self)
                   if f.name not in ("seed", "reorder_flush_ms", *CHECKPOINT_KNOBS))

    @property
    def checkpoint_faults(self) -> bool:
        """Whether any checkpoint knob is on."""
        return any(getattr(self, name) != getattr(Knobs, name) for name in CHECKPOINT_KNOBS)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v != getattr(Knobs, k, None)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Knobs:
        unknown = set(d) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown fault knobs {sorted(unknown)}; known: {', '.join(f.name for f in fields(cls))}")
        return cls(**d)

    def __str__(self) -> str:
        return ",".join(f"{k}={_format_value(v)}" for k, v in self.to_dict().items()) or "none"


def _format_value(v: Any) -> str:
    if isinstance(v, tuple):
        return "/".join(":".join(str(x) for x in item) if isinstance(item, tuple) else str(item) for item in v)
    return str(v)


def parse_knobs(text: str) -> Knobs:
    """``drop=0.01,seed=3,drop_seqs=0:10:19/1:5:5,lose_producers=pA/pB`` -> :class:`Knobs`.

    The form of ``--kafka-mirror-replicator reference:KNOBS``: ``name=value`` pairs joined by
    commas; list values joined by ``/``, the numbers of one range by ``:``.
    """
    kinds = {f.name: f.type for f in fields(Knobs)}
    values: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, raw = part.partition("=")
        name = name.strip()
        if not sep or name not in kinds:
            raise ValueError(f"fault knob {part!r} is not NAME=VALUE with NAME one of: {', '.join(kinds)}")
        raw = raw.strip()
        try:
            if name in (*_RANGE_KNOBS, "split_lanes"):
                values[name] = tuple(tuple(int(x) for x in item.split(":")) for item in raw.split("/") if item)
            elif name in ("lose_producers", "strip_header", "rewrite_header"):
                values[name] = tuple(p for p in raw.split("/") if p)
            elif name == "add_header":
                values[name] = raw
            elif name == "drop_key":
                values[name] = _boolean(raw)
            elif name in ("seed", "reorder", "stop_tail", "translate_ahead", "checkpoint_rewind"):
                values[name] = int(raw)
            else:
                values[name] = float(raw)
        except ValueError:
            raise ValueError(f"fault knob {part!r}: {raw!r} is not a valid value") from None
    return Knobs(**values)


def _boolean(raw: str) -> bool:
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(raw)


def unit(seed: int, knob: str, *parts: object) -> float:
    """A number in [0, 1) fixed by its arguments: the seeded coin of every per-record decision."""
    digest = hashlib.blake2b("|".join(map(str, (seed, knob, *parts))).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


@dataclass
class MirrorRecord:
    """One record on its way through the mirror (what the reference mirror produces)."""

    topic: str
    partition: int  # source partition, then the target partition
    offset: int  # source offset
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] | None
    timestamp: int | None = None
    producer_id: str | None = None  # set for records of ours
    lane: int | None = None
    seq: int | None = None

    @classmethod
    def decoded(cls, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None,
                headers: list[tuple[str, bytes]] | None, timestamp: int | None = None) -> MirrorRecord:
        rec = cls(topic, partition, offset, key, value, headers, timestamp)
        try:
            d = decode(key, value, headers)
        except Exception:
            return rec
        if d.kind in (Kind.HEADERS, Kind.BODY) and None not in (d.producer_id, d.lane, d.seq):
            rec.producer_id, rec.lane, rec.seq = d.producer_id, d.lane, d.seq
        return rec

    @property
    def ours(self) -> bool:
        return self.seq is not None

    @property
    def lane_key(self) -> tuple[str, int]:
        return (self.producer_id or "", -1 if self.lane is None else self.lane)


@dataclass
class Ledger:
    """What one topic's engine did: knob -> (producer, lane) -> seqs, in the order done."""

    seqs: dict[str, dict[tuple[str, int], list[int]]] = field(default_factory=lambda: defaultdict(
        lambda: defaultdict(list)))

    def add(self, knob: str, rec: MirrorRecord) -> None:
        if rec.ours:
            self.seqs[knob][rec.lane_key].append(rec.seq)  # type: ignore[arg-type]

    def discard_held(self, engine: FaultEngine) -> None:
        """An engine is replaced: the tail it held back is never sent, for good."""
        for key, seqs in engine.held().items():
            self.seqs["stop_tail"][key] += seqs


class FaultEngine:
    """Applies one topic's :class:`Knobs` to its records, stage by stage (module docstring).

    ``feed(record, now)`` takes a consumed record and ``tick(now)`` advances time (``now``
    in seconds, monotonic); both return the records to produce now, in order.
    ``release()`` returns whatever is still buffered for sending (delay and reorder
    buffers); the held-back tail is never sent.
    """

    def __init__(self, topic: str, knobs: Knobs, partitions: int, ledger: Ledger | None = None) -> None:
        self.topic = topic
        self.knobs = knobs
        self.partitions = max(partitions, 1)
        self.ledger = ledger or Ledger()
        self._replay_buf: dict[tuple[str, int, int], list[MirrorRecord]] = defaultdict(list)  # (pid, lane, range#)
        self._replayed: set[tuple[str, int, int]] = set()
        self._window: dict[int, tuple[int, list[MirrorRecord]]] = {}  # source partition -> (window#, records)
        self._window_touched: dict[int, float] = {}
        self._reorder_top: dict[tuple[str, int, int], int] = {}  # (pid, lane, target partition) -> max seq sent
        self._reorder_sent: dict[tuple[str, int, int], set[int]] = defaultdict(set)
        self._held: dict[tuple[str, int], deque[MirrorRecord]] = defaultdict(deque)
        self._delayed: dict[int, deque[tuple[float, MirrorRecord]]] = defaultdict(deque)

    # -- per-record decisions (pure) -------------------------------------------------------

    def _coin(self, knob: str, rec: MirrorRecord) -> float:
        return unit(self.knobs.seed, knob, self.topic, rec.producer_id, rec.lane, rec.seq)

    def _dropped(self, rec: MirrorRecord) -> str | None:
        k = self.knobs
        if rec.producer_id in k.lose_producers:
            return "lose_producer"
        if any(lane == rec.lane and a <= rec.seq <= b for lane, a, b in k.drop_seqs):  # type: ignore[operator]
            return "drop"
        if k.drop and self._coin("drop", rec) < k.drop:
            return "drop"
        return None

    def _alter(self, rec: MirrorRecord) -> None:
        """Corrupt, strip headers, damage metadata, split: changes to the record itself."""
        k = self.knobs
        if k.corrupt and rec.value and self._coin("corrupt", rec) < k.corrupt:
            rec.value = rec.value[:-1] + bytes([rec.value[-1] ^ 0x01])
            self.ledger.add("corrupt", rec)
        if k.strip_headers and rec.headers and any(h == HDR_PRODUCER for h, _ in rec.headers) and (
                self._coin("strip_headers", rec) < k.strip_headers):
            rec.headers = [(h, v) for h, v in rec.headers if not h.startswith("km.")] or None
            self.ledger.add("strip_headers", rec)
        if k.damage_rate and any(getattr(k, name) for name in DAMAGE_KNOBS) and (
                k.damage_rate >= 1.0 or self._coin("damage", rec) < k.damage_rate):
            self._damage(rec)
        if self.partitions > 1 and (
            any(lane == rec.lane and rec.seq >= start for lane, start in k.split_lanes)  # type: ignore[operator]
            or (k.split and self._coin("split", rec) < k.split)
        ):
            rec.partition = (rec.partition + 1) % self.partitions
            self.ledger.add("split", rec)

    def _damage(self, rec: MirrorRecord) -> None:
        """The metadata damage knobs on one record; each is in the ledger when it changed
        something (a body-format record has no header to strip or rewrite)."""
        k = self.knobs
        headers = list(rec.headers or [])
        if k.strip_header and any(h in k.strip_header for h, _ in headers):
            headers = [(h, v) for h, v in headers if h not in k.strip_header]
            self.ledger.add("strip_header", rec)
        if k.rewrite_header and any(h in k.rewrite_header for h, _ in headers):
            headers = [(h, b'"%s"' % v if h in k.rewrite_header and v is not None else v) for h, v in headers]
            self.ledger.add("rewrite_header", rec)
        if k.add_header:
            headers.insert(0, (k.add_header, ADDED_HEADER_VALUE))
            self.ledger.add("add_header", rec)
        rec.headers = headers or None
        if k.drop_key and rec.key is not None:
            rec.key = None
            self.ledger.add("drop_key", rec)

    def _copies(self, rec: MirrorRecord) -> list[MirrorRecord]:
        """The record, a duplicate of it, and the replayed ranges it completes."""
        k = self.knobs
        out = [rec]
        if k.duplicate and self._coin("duplicate", rec) < k.duplicate:
            out.append(replace(rec))
            self.ledger.add("duplicate", rec)
        pid, lane = rec.lane_key
        for i, (r_lane, a, b) in enumerate(k.replay):
            key = (pid, lane, i)
            if r_lane != lane or key in self._replayed:
                continue
            if a <= rec.seq <= b:  # type: ignore[operator]
                self._replay_buf[key].append(replace(rec))
            if rec.seq >= b:  # type: ignore[operator]
                self._replayed.add(key)
                again = self._replay_buf.pop(key, [])
                for r in again:
                    self.ledger.add("replay", r)
                out += again
        return out

    # -- buffering stages ----------------------------------------------------------------

    def feed(self, rec: MirrorRecord, now: float) -> list[MirrorRecord]:
        source_partition = rec.partition
        if rec.ours:
            gone = self._dropped(rec)
            if gone:
                self.ledger.add(gone, rec)
                return self.tick(now)
            self._alter(rec)
            batch = self._copies(rec)
        else:
            batch = [rec]
        if self.knobs.reorder > 1:
            batch = self._reorder(source_partition, rec.offset, batch, now)
        return self._after_reorder(batch, now) + self.tick(now)

    def _reorder(self, partition: int, offset: int, batch: list[MirrorRecord], now: float) -> list[MirrorRecord]:
        """Hold records until their offset window is complete, then send it shuffled."""
        size = self.knobs.reorder
        window = offset // size
        out: list[MirrorRecord] = []
        current = self._window.get(partition)
        if current is not None and current[0] != window:
            out += self._shuffle(partition)
        self._window.setdefault(partition, (window, []))[1].extend(batch)
        self._window_touched[partition] = now
        if offset % size == size - 1:  # the window's last offset: nothing more can join it
            out += self._shuffle(partition)
        return out

    def _shuffle(self, partition: int) -> list[MirrorRecord]:
        _, records = self._window.pop(partition, (0, []))
        # Stable sort by a seeded key of the source offset: copies of one record stay together.
        records.sort(key=lambda r: unit(self.knobs.seed, "reorder", self.topic, partition, r.offset))
        for r in records:
            if r.seq is None:
                continue
            key = (*r.lane_key, r.partition)
            sent = self._reorder_sent[key]
            if r.seq in sent:
                continue
            top = self._reorder_top.get(key)
            if top is not None and r.seq < top:
                self.ledger.add("reorder", r)
            sent.add(r.seq)
            self._reorder_top[key] = r.seq if top is None else max(top, r.seq)
        return records

    def _after_reorder(self, batch: Iterable[MirrorRecord], now: float) -> list[MirrorRecord]:
        """Tail hold-back, then the delay queue."""
        k = self.knobs
        out: list[MirrorRecord] = []
        for rec in batch:
            if k.stop_tail and rec.ours:
                held = self._held[rec.lane_key]
                held.append(rec)
                if len(held) <= k.stop_tail:
                    continue
                rec = held.popleft()
            if k.delay_ms or k.jitter_ms:
                wait = k.delay_ms + (k.jitter_ms * self._coin("jitter", rec) if rec.ours else 0.0)
                queue = self._delayed[rec.partition]
                due = now + wait / 1000.0
                if queue:
                    due = max(due, queue[-1][0])  # keep partition order: latency, not reordering
                queue.append((due, rec))
                self.ledger.add("delay", rec)
            else:
                out.append(rec)
        return out

    def tick(self, now: float) -> list[MirrorRecord]:
        out: list[MirrorRecord] = []
        flush = self.knobs.reorder_flush_ms / 1000.0
        for partition in [p for p, t in self._window_touched.items() if now - t >= flush and p in self._window]:
            out += self._after_reorder(self._shuffle(partition), now)
        for queue in self._delayed.values():
            while queue and queue[0][0] <= now:
                out.append(queue.popleft()[1])
        return out

    def release(self) -> list[MirrorRecord]:
        """Everything buffered for sending (reorder windows, delay queues), in order; the
        held-back tail stays held."""
        out: list[MirrorRecord] = []
        for partition in list(self._window):
            out += self._after_reorder(self._shuffle(partition), float("-inf"))
        for queue in self._delayed.values():
            out += [rec for _, rec in queue]
            queue.clear()
        return out

    def held(self) -> dict[tuple[str, int], list[int]]:
        """Seqs held back by ``stop_tail`` right now, per (producer, lane)."""
        return {key: [r.seq for r in q if r.seq is not None] for key, q in self._held.items() if q}


# -- the ledger file ------------------------------------------------------------------------


def ledger_dump(engines: Mapping[str, tuple[Knobs, Ledger, FaultEngine | None]], generation: int) -> dict[str, Any]:
    """The JSON form of every topic's ledger (see :class:`FaultLedger`)."""
    topics: dict[str, Any] = {}
    for topic, (knobs, ledger, engine) in sorted(engines.items()):
        entries: dict[str, dict[tuple[str, int], list[int]]] = {k: dict(v) for k, v in ledger.seqs.items()}
        if engine is not None:
            held = entries.setdefault("stop_tail", {})
            for key, seqs in engine.held().items():
                held[key] = [*held.get(key, []), *seqs]
        topics[topic] = {
            "knobs": knobs.to_dict(),
            "injected": {
                knob: {
                    "count": sum(len(v) for v in by_lane.values()),
                    "lanes": {f"{pid}/{lane}": compact_ranges(v) for (pid, lane), v in sorted(by_lane.items())},
                    # Records a knob hit more than once (a seq in two copies) keep their count above.
                }
                for knob, by_lane in entries.items() if by_lane
            },
        }
    return {"generation": generation, "topics": topics}


class FaultLedger:
    """What the reference mirror injected, per source topic and knob (read from its workdir).

    ``count(topic, knob)`` is the number of records the knob acted on; ``seqs(topic, knob,
    producer_id, lane)`` the sorted sequence numbers.  Knob names: :data:`LEDGER_KNOBS`
    (``stop_tail``: records held back; ``lose_producer``: records of lost producers).
    """

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data
        self.generation = int(data.get("generation", 0))
        self.topics: dict[str, Any] = dict(data.get("topics", {}))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> FaultLedger:
        p = Path(path)
        return cls(json.loads(p.read_text())) if p.exists() else cls({})

    def _entry(self, topic: str, knob: str) -> dict[str, Any]:
        if knob not in LEDGER_KNOBS:
            raise KeyError(f"unknown ledger knob {knob!r}; known: {', '.join(LEDGER_KNOBS)}")
        return dict(self.topics.get(topic, {}).get("injected", {}).get(knob, {}))

    def count(self, topic: str, knob: str) -> int:
        return int(self._entry(topic, knob).get("count", 0))

    def lanes(self, topic: str, knob: str) -> dict[tuple[str, int], list[int]]:
        """(producer id, lane) -> sorted distinct seqs the knob acted on."""
        out = {}
        for name, ranges in self._entry(topic, knob).get("lanes", {}).items():
            pid, _, lane = name.rpartition("/")
            out[(pid, int(lane))] = [s for a, b in ranges for s in range(a, b + 1)]
        return out

    def seqs(self, topic: str, knob: str, producer_id: str | None = None, lane: int | None = None) -> list[int]:
        return sorted({
            s for (pid, ln), seqs in self.lanes(topic, knob).items()
            if (producer_id is None or pid == producer_id) and (lane is None or ln == lane) for s in seqs
        })

    def knobs(self, topic: str) -> Knobs:
        return Knobs.from_dict(self.topics.get(topic, {}).get("knobs", {}))

    def __repr__(self) -> str:
        counts = {t: {k: v["count"] for k, v in e.get("injected", {}).items()} for t, e in self.topics.items()}
        return f"FaultLedger(generation={self.generation}, {counts})"


def resolve(defaults: Knobs, per_topic: Mapping[str, Knobs], topic: str) -> Knobs:
    """The knobs in force for ``topic``: its own, else the defaults."""
    return per_topic.get(topic, defaults)
