"""A consumed batch to segment rows: the capture's per-record work (its hot loop), the seen
bitmaps the stop decision reads and the live figures of the progress file.

**Per-record work** is what limits a capture process (a bare consume loop reads several
times faster, see docs/performance.md), so :meth:`RowBuilder.add` decodes
records as the producer writes them inline — four ``km.*`` headers in order, or a
``pid;seq;ts;`` body, the key naming the lane — and hands anything else to
:func:`records.decode`, which classifies it exactly as before (foreign, headerless, or ours
with its metadata damaged: a ``km.*`` header missing or rewritten, the key gone).  A row is a tuple of the six columns that change from record to
record, plus a run tuple per run of one lane of one partition (:class:`.segments.SegmentRows`:
the writer thread's conversion to Arrow holds the GIL, and 14 fields per row cost the
loop a fifth of its rate).  The seen bitmap of the previous record's lane is reused; a
payload's checksum is checked once (the producer sends 256 payload variants); the gap
guard's offset check is done in the same pass; live figures are counted per batch.
"""

from __future__ import annotations

import zlib
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .segments import SegmentRows

__all__ = ["CHUNK_BITS", "LiveFigures", "RowBuilder", "SeenBitmap", "merge_progress"]

CHUNK_BITS = 1 << 16
_FULL_CHUNK = b"\xff" * (CHUNK_BITS // 8)
#: Entries of the caches (producer ids, payload checksums) before they are emptied:
#: bounded, whatever arrives.
_CACHE = 4096


class SeenBitmap:
    """Sparse bitmap of sequence numbers: 8 KiB chunks, allocated on first use."""

    __slots__ = ("chunks", "distinct")

    def __init__(self) -> None:
        self.chunks: dict[int, bytearray] = {}
        self.distinct = 0

    def add(self, seq: int) -> bool:
        """Mark ``seq``; return True if it was new."""
        chunk = self.chunks.get(seq >> 16)
        if chunk is None:
            chunk = self.chunks[seq >> 16] = bytearray(CHUNK_BITS // 8)
        i = (seq & 0xFFFF) >> 3
        bit = 1 << (seq & 7)
        if chunk[i] & bit:
            return False
        chunk[i] |= bit
        self.distinct += 1
        return True

    def __contains__(self, seq: int) -> bool:
        chunk = self.chunks.get(seq >> 16)
        return chunk is not None and bool(chunk[(seq & 0xFFFF) >> 3] & (1 << (seq & 7)))

    def covers(self, ranges: Iterable[Iterable[int]]) -> bool:
        """True when every sequence of the inclusive ranges is marked.

        Whole chunks compare as bytes, and so do the whole bytes of a partial chunk: the
        capture asks this every 0.1 s once producers are done, over every lane.
        """
        for a, b in ranges:
            s = a
            while s <= b:
                base = s & ~0xFFFF
                e = min(b, base + 0xFFFF)  # last seq of this range in this chunk
                chunk = self.chunks.get(s >> 16)
                if chunk is None:
                    return False
                if e - s + 1 == CHUNK_BITS:
                    if chunk != _FULL_CHUNK:
                        return False
                else:
                    lo, hi = s - base, e - base
                    first_full, last_full = (lo + 7) >> 3, ((hi + 1) >> 3) - 1
                    if first_full <= last_full and chunk[first_full : last_full + 1].strip(b"\xff"):
                        return False
                    # the bits outside whole bytes, at either end
                    edges = range(lo, min(hi + 1, first_full * 8)) if first_full <= last_full else range(lo, hi + 1)
                    tail = range(max((last_full + 1) * 8, lo), hi + 1) if first_full <= last_full else range(0)
                    for bit in (*edges, *tail):
                        if not chunk[bit >> 3] & (1 << (bit & 7)):
                            return False
                s = e + 1
        return True


class LiveFigures:
    """Identified arrivals per source topic and a cumulative latency histogram, for live
    metrics (``metrics.py`` reads them from the progress file).

    Counted per consumed batch with C-level work (a Counter update, a sort, one bisect per
    bound), or per columnar chunk with numpy (:meth:`add_latencies`), not per record: every
    copy counts, as it arrives.
    """

    def __init__(self, bounds_ms: Sequence[float]) -> None:
        if list(bounds_ms) != sorted(bounds_ms):
            raise ValueError(f"latency bounds must ascend: {list(bounds_ms)}")
        self.bounds_us = [round(b * 1000) for b in bounds_ms]
        self.bounds_ms = list(bounds_ms)
        self.by_topic: Counter[str] = Counter()
        self.cumulative = [0] * len(bounds_ms)
        self.count = 0
        self.sum_us = 0

    def add_batch(self, topics: Sequence[str], produce_ts_us: Sequence[int | None], arrival_us: int) -> None:
        """Records of one batch: their source topics and produce times (None: not ours)."""
        self.by_topic.update(t for t, p in zip(topics, produce_ts_us, strict=True) if p is not None)
        self._latencies(sorted(p for p in produce_ts_us if p is not None), arrival_us)

    def add_counted(self, by_topic: dict[str, int], produce_ts_us: list[int], arrival_us: int) -> None:
        """Identified records of one batch (the capture loop collects only those), counted
        per source topic by the loop; sorts ``produce_ts_us`` in place.  A negative produce
        time is a record without one (its ``km.t`` header damaged): counted, no latency."""
        self.by_topic.update(by_topic)
        produce_ts_us.sort()
        untimed = bisect_left(produce_ts_us, 0)
        self._latencies(produce_ts_us[untimed:] if untimed else produce_ts_us, arrival_us)

    def add_latencies(self, by_topic: dict[str, int], latencies_us: Any) -> None:
        """Identified records of a columnar chunk (:mod:`.columns`): counted per source
        topic, and each one's latency (µs, a numpy array), as :meth:`add_counted` counts them."""
        import numpy as np

        self.by_topic.update(by_topic)
        if not len(latencies_us):
            return
        # the first bound each latency is under (len: none): latency <= bound i <=> index <= i
        under = np.bincount(np.searchsorted(self.bounds_us, latencies_us, side="left"),
                            minlength=len(self.bounds_us) + 1)
        below = np.cumsum(under[:-1]).tolist()
        self.cumulative = [c + k for c, k in zip(self.cumulative, below, strict=True)]
        self.count += len(latencies_us)
        self.sum_us += int(latencies_us.sum())

    def _latencies(self, pts: list[int], arrival_us: int) -> None:
        n = len(pts)
        if not n:
            return
        # latency <= bound  <=>  produce_ts >= arrival - bound
        for i, bound in enumerate(self.bounds_us):
            self.cumulative[i] += n - bisect_left(pts, arrival_us - bound)
        self.count += n
        self.sum_us += n * arrival_us - sum(pts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "by_topic": dict(self.by_topic),
            # copies: the segment writer's thread writes this while the loop counts on
            "latency": {"bounds_ms": list(self.bounds_ms), "cumulative": list(self.cumulative), "count": self.count,
                        "sum_us": self.sum_us},
        }


def merge_progress(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The progress of a multi-process capture as one: counts and live figures summed, a
    topic's partitions counted once every process has assigned its share of them."""
    if len(parts) == 1:
        return dict(parts[0])
    out: dict[str, Any] = {}
    for name in ("records", "ours", "foreign", "headerless", "damaged", "warmup", "duplicates_seen"):
        out[name] = sum(int(p.get(name, 0)) for p in parts)
    out["elapsed"] = max((float(p.get("elapsed", 0.0)) for p in parts), default=0.0)
    topics = {t for p in parts for t in p.get("partitions", {})}
    out["partitions"] = {t: min(int(p.get("partitions", {}).get(t, 0)) for p in parts) for t in topics}
    by_topic: Counter[str] = Counter()
    latency: dict[str, Any] | None = None
    for p in parts:
        by_topic.update(p.get("by_topic", {}))
        h = p.get("latency")
        if h:
            if latency is None:
                latency = {"bounds_ms": h["bounds_ms"], "cumulative": [0] * len(h["cumulative"]), "count": 0,
                           "sum_us": 0}
            latency["cumulative"] = [a + b for a, b in zip(latency["cumulative"], h["cumulative"], strict=True)]
            latency["count"] += h["count"]
            latency["sum_us"] += h["sum_us"]
    out["by_topic"] = dict(by_topic)
    if latency is not None:
        out["latency"] = latency
    return out


class RowBuilder:
    """Consumed records to segment rows, seen bitmaps, counts and live figures.

    ``mapping``: target topic -> source topic (rows name the source topic); ``log``: where a
    consume error goes.
    """

    def __init__(self, mapping: dict[str, str], live: LiveFigures, log: Callable[[str], None] = print) -> None:
        from ..produce import records  # noqa: F401 - imported now, not when the first records arrive

        self.mapping = mapping
        self.live = live
        self.log = log
        self.seen: dict[tuple[str, str, int], SeenBitmap] = {}
        self.counts = {"records": 0, "ours": 0, "foreign": 0, "headerless": 0, "damaged": 0, "warmup": 0,
                       "duplicates_seen": 0}
        #: "SOURCE_TOPIC:PARTITION" -> one past the offset of its last warm-up record on the target
        self.warmup_ends: dict[str, int] = {}
        self.pids: dict[bytes, str] = {}  # producer ids, decoded once: one str per producer, not per row
        self.header_pids: dict[bytes, str] = {}  # the same of km.p headers, those RecordEncoder writes
        self.checksums: dict[bytes, bool] = {}  # payload -> its checksum is right

    def add(  # hot loop: one pass per record, written out (a call per record costs ~10% of the rate)
        self, msgs: Sequence[Any], arrival: int, rows: SegmentRows,
        offsets: dict[tuple[str, int], int] | None = None,
    ) -> int:
        """Handle ``msgs`` (stamped ``arrival``, µs), adding their rows to ``rows``.

        With ``offsets`` (:attr:`GapGuard.next`), a partition's records must follow each
        other: the pass stops at the first record that does not (the gap guard re-reads the
        gap, :meth:`GapGuard.resume`).  Returns how many records were handled.  (Messages
        as Any: the client's stubs type every field optional, which the branches handle.)
        """
        from ..produce.records import HDR_LANE, HDR_PRODUCER, HDR_SEQ, HDR_TS

        values = rows.values
        append, run_append = values.append, rows.runs.append
        mapping_get = self.mapping.get
        seen = self.seen
        crc32 = zlib.crc32
        pids, hpids, checksums = self.pids, self.header_pids, self.checksums
        if len(pids) > _CACHE:
            pids.clear()
        if len(hpids) > _CACHE:
            hpids.clear()
        if len(checksums) > _CACHE:
            checksums.clear()
        checking = offsets is not None
        next_offsets = offsets if offsets is not None else {}
        ours_pts: list[int] = []
        by_topic: dict[str, int] = {}  # ours per source topic, counted per run of one lane
        handled, run_start, run_dups, dups, expect, chunk_no = len(msgs), 0, 0, 0, -1, -1
        last_target = last_part = source = last_source = last_pid = last_lane = run_kind = None
        bm, chunk = SeenBitmap(), bytearray()  # set at the first record (its lane is new)
        seq: int
        pts: int
        for m in msgs:
            if m.error() is not None:
                self._error(m)
                continue
            target, part, off = m.topic(), m.partition(), m.offset()
            # Per run of one partition: its source topic and (GapGuard.filter's check, in
            # this pass) the offset it must go on from.
            if part != last_part or target != last_target:
                if checking and last_target is not None:
                    next_offsets[(last_target, last_part)] = expect
                last_target, last_part, run_kind = target, part, None
                source = mapping_get(target, target)
                expect = next_offsets.get((target, part), off) if checking else off
            if off != expect and checking:
                handled = msgs.index(m)
                break
            expect = off + 1
            key, value, headers = m.key(), m.value(), m.headers()
            kind = None
            try:
                # The producer's own shapes, decoded inline; anything else (a replicator
                # that reorders or adds headers, a corrupted checksum field, foreign data)
                # goes through decode(), which classifies it exactly.
                if headers:
                    if len(headers) == 4:
                        (n0, v0), (n1, v1), (n2, v2), (n3, v3) = headers
                        # Exactly as written: names in order, the key the lane header, digits
                        # of the producer's widths (decode() says what else is damage).
                        if (n0 == HDR_PRODUCER and n1 == HDR_LANE and n2 == HDR_SEQ and n3 == HDR_TS and v1 == key
                                and 10 <= len(v2) <= 18 and 16 <= len(v3) <= 18 and len(v1) <= 5
                                and v1.isdigit() and v2.isdigit() and v3.isdigit()
                                and (pid := hpids.get(v0) or _header_pid(hpids, v0)) is not None):
                            lane, seq, pts = int(v1), int(v2), int(v3)
                            payload = value
                            size = len(key) + len(value) + 16 + len(v0) + len(v1) + len(v2) + len(v3)  # no key: _other
                            kind = "headers"
                elif value and key is not None and key.isdigit() and len(key) <= 5:
                    parts = value.split(b";", 3)
                    if len(parts) == 4 and parts[1].isdigit() and parts[2].isdigit():
                        payload = parts[3]
                        pid = pids.get(parts[0]) or pids.setdefault(parts[0], parts[0].decode())
                        lane, seq, pts = int(key), int(parts[1]), int(parts[2])
                        size = len(key) + len(value)
                        kind = "body"
                if kind is not None:
                    ok = checksums.get(payload)
                    if ok is None:
                        ok = len(payload) >= 8 and int(payload[:8], 16) == crc32(payload[8:])
                        checksums[payload] = ok
            except (ValueError, TypeError, AttributeError, UnicodeDecodeError):
                kind = None
            if kind is None:
                ident = self._other(m, source, target, key, value, headers, arrival, rows)  # type: ignore[arg-type]
                run_kind = None  # the next record of the inline shapes starts a run
                if ident is None:
                    continue
                pid, lane, seq, pts = ident
            ours_pts.append(pts)  # -1: no usable produce time (LiveFigures leaves it out)
            # SeenBitmap.add, inline, with the previous record's bitmap reused (records of
            # one partition mostly belong to one lane).
            if lane != last_lane or pid != last_pid or source != last_source:
                if last_source is not None:
                    n = len(ours_pts) - 1
                    by_topic[last_source] = by_topic.get(last_source, 0) + n - run_start
                    bm.distinct += n - run_start - (dups - run_dups)  # the lane's new sequences
                    run_start, run_dups = n, dups
                last_source, last_pid, last_lane, run_kind = source, pid, lane, None
                found = seen.get((source, pid, lane))
                if found is None:
                    found = seen[(source, pid, lane)] = SeenBitmap()
                bm, chunk_no = found, -1
            if kind is not None:  # (_other added its own row)
                if kind is not run_kind:  # a run: one lane of one partition, one shape
                    run_append((len(values), source, target, part, kind, pid, lane, arrival, None, None))
                    run_kind = kind
                append((off, seq, pts, m.timestamp()[1], size, ok))
            if seq >> 16 != chunk_no:  # the previous record's chunk, mostly
                chunk_no = seq >> 16
                chunk = bm.chunks.get(chunk_no)
                if chunk is None:
                    chunk = bm.chunks[chunk_no] = bytearray(CHUNK_BITS // 8)
            j, bit = (seq & 0xFFFF) >> 3, 1 << (seq & 7)
            if chunk[j] & bit:
                dups += 1
            else:
                chunk[j] |= bit
        if checking and last_target is not None:
            next_offsets[(last_target, last_part)] = expect
        if last_source is not None:
            by_topic[last_source] = by_topic.get(last_source, 0) + len(ours_pts) - run_start
            bm.distinct += len(ours_pts) - run_start - (dups - run_dups)
        counts = self.counts
        counts["records"] += handled
        counts["ours"] += len(ours_pts)
        counts["duplicates_seen"] += dups
        self.live.add_counted(by_topic, ours_pts, arrival)
        return handled

    def _error(self, m: Any) -> None:
        from confluent_kafka import KafkaError

        if m.error().code() != KafkaError._PARTITION_EOF:
            self.log(f"capture: consume error: {m.error()}")

    def _other(self, m: Any, source: str, target: str, key: bytes | None, value: bytes | None,
               headers: list[tuple[str, bytes]] | None, arrival: int, rows: SegmentRows,
               ) -> tuple[str, int, int, int] | None:
        """A record not in the producer's inline shapes: :func:`records.decode` classifies it.

        Returns its identity ``(producer id, lane, seq, produce time)`` when it is ours and
        identified, its metadata damaged or not (produce time -1: none usable), else None (a
        warm-up record: counted, not kept; foreign, headerless, too damaged to identify: kept,
        counted).
        """
        from ..produce.records import FOREIGN, Kind, decode

        try:
            d = decode(key, value, headers)
            size = (len(key) if key else 0) + (len(value) if value else 0)
            if headers:
                size += sum(len(k) + (len(v) if v else 0) for k, v in headers)
            evidence = f"key={(key or b'')[:40]!r} value={(value or b'')[:80]!r}" if d.kind is Kind.FOREIGN else None
        except Exception as exc:  # noqa: BLE001 - undecodable data is foreign, never fatal
            d, size, evidence = FOREIGN, 0, f"undecodable record: {exc!r}"[:200]
        counts = self.counts
        if d.kind is Kind.WARMUP:  # readiness proof, not a record of the run: counted, not kept
            counts["warmup"] += 1
            # ... but it moves the partition's end of log (the failover checks use it)
            end_key = f"{source}:{m.partition()}"
            self.warmup_ends[end_key] = max(self.warmup_ends.get(end_key, 0), m.offset() + 1)
            return None
        rows.append((source, target, m.partition(), m.offset(), d.kind.value, d.producer_id, d.lane, d.seq, d.ts_us,
                arrival, m.timestamp()[1], size, d.checksum_ok, evidence, d.damage))
        if d.damage is not None:
            counts["damaged"] += 1
        if d.kind is Kind.FOREIGN:
            counts["foreign"] += 1
            return None
        if d.kind is Kind.HEADERLESS:
            counts["headerless"] += 1
            return None
        if not d.identified:  # ours, but too damaged to say which record it is
            return None
        return d.producer_id, d.lane, d.seq, -1 if d.ts_us is None else d.ts_us  # type: ignore[return-value]


def _header_pid(cache: dict[bytes, str], value: bytes) -> str | None:
    """The producer id of a ``km.p`` value, cached when it is one RecordEncoder writes."""
    from ..produce.records import producer_id_of

    pid = producer_id_of(value)
    if pid is not None:
        cache[value] = pid
    return pid
