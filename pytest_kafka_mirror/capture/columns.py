"""The capture's columnar fast path: a chunk of consumed batches decoded a column at a time.

A bare consume loop spends ~0.7 µs a record on 2 cores; the per-record loop of
:meth:`.rows.RowBuilder.add` adds 2 µs or more of Python to each record of the body
format (a split, two ``int()``, the row tuple, the bitmap's bit), so a capture read body
records at a fifth of the bare loop's rate.  Here the capture's work on a chunk of
records (the batches of a few ``consume()`` calls: up to :data:`CHUNK_RECORDS`) is a
fixed number of C calls whatever its size: each field pulled out of all its messages at
once (``map`` over the client's methods), the values joined into one buffer, and the
producer's fixed-width fields (``pid;SEQUENCE;TIMESTAMP;payload``: 10 and 16 digits)
read from it as numpy digit matrices; a payload is compared with the variant its
sequence carries (:func:`~..produce.records.payload_variants`), and only one that
differs gets its checksum computed; the seen bitmaps take a lane's sequences at once.

**Exactly the per-record loop's result, or nothing.**  :meth:`ColumnDecoder.add`
checks the whole chunk first and changes nothing unless every record is in the
producer's body shape as written (no error, no header, a lane key, one producer-id
width, the fixed widths, payloads of one length) and every partition's offsets follow
each other; otherwise it returns False and the capture hands each batch to the
per-record loop, which classifies anything else (foreign, damaged, warm-up records,
gaps).  Rows, runs, seen bitmaps, counts and live figures are then what that loop
gives (tests/unit/test_capture_rows.py checks it on generated chunks).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from itertools import chain
from operator import itemgetter
from typing import Any

import numpy as np

from ..produce.records import SEQ_WIDTH, TS_WIDTH, VARIANTS, payload_variants
from .rows import CHUNK_BITS, RowBuilder, SeenBitmap
from .segments import SegmentRows

__all__ = ["CHUNK_RECORDS", "MIN_RECORDS", "ColumnDecoder"]

#: Records the capture collects (over several consume() calls) before decoding them as one
#: chunk; it decodes sooner when a call returns less than a full batch (caught up).
CHUNK_RECORDS = 8192
#: Below this many records a chunk goes to the per-record loop: a chunk's C calls cost
#: ~0.1-0.2 ms whatever its size.
MIN_RECORDS = 64
#: Payloads longer than this are checked record by record (the variant table of a length
#: is 256 x its bytes, and so is a chunk's gathered matrix per record).
MAX_PAYLOAD = 4096

_DIGITS = 10 ** np.arange(TS_WIDTH - 1, -1, -1, dtype=np.int64)  # place values of 16 digits
_SEMI = ord(";")
_SEQ_AT, _TS_AT = 1, 1 + SEQ_WIDTH + 1  # from the ';' after the producer id
_PAYLOAD_AT = _TS_AT + TS_WIDTH + 1


def _message_methods() -> tuple[Any, ...]:
    """The client's Message type and its methods, called through ``map`` on every message."""
    from confluent_kafka import Message

    return (Message, Message.headers, Message.topic, Message.partition, Message.offset, Message.key, Message.value,
            Message.timestamp)


class _Chunk:
    """The columns of a chunk of body-format records, checked (:meth:`ColumnDecoder._read`)."""

    __slots__ = ("arrival", "keylen", "lane", "length", "n", "offset", "ok", "part", "pid", "pts",
                 "record_ts", "seq", "targets", "tix")

    def __init__(self, **fields: Any) -> None:
        for name, value in fields.items():
            setattr(self, name, value)


class ColumnDecoder:
    """The fast path of one capture process, beside its :class:`.rows.RowBuilder` (whose
    bitmaps, counts, live figures and caches it updates as the builder would)."""

    def __init__(self, builder: RowBuilder, *, min_records: int = MIN_RECORDS) -> None:
        self.builder = builder
        self.min_records = min_records
        self.methods = _message_methods()
        #: payload length -> the variants as rows of 8-byte words (zero-padded)
        self.variants: dict[int, np.ndarray] = {}
        self.chunks = 0  # chunks decoded here (the status's "columnar_chunks")

    def add(self, batches: Sequence[tuple[Sequence[Any], int]], rows: SegmentRows,
            offsets: dict[tuple[str, int], int]) -> bool:
        """Decode ``batches`` (``(messages, arrival µs)`` of consecutive consume() calls) into
        ``rows`` and the builder's state, checking each partition's offsets against
        ``offsets`` (:attr:`.gaps.GapGuard.next`, advanced) — or, when anything is not the
        fast path's (module docstring), change nothing and return False."""
        n = sum(len(msgs) for msgs, _ in batches)
        if n < self.min_records:
            return False
        try:
            chunk = self._read(batches, n)
        except TypeError:  # a consume error or a null key or value (len(None)), a test's stand-in messages
            return False
        if chunk is None:
            return False
        ends = self._offsets(chunk, offsets)
        if ends is None:
            return False
        offsets.update(ends)
        self._commit(chunk, rows)
        self.chunks += 1
        return True

    # -- reading and checking ------------------------------------------------------------
    def _read(self, batches: Sequence[tuple[Sequence[Any], int]], n: int) -> _Chunk | None:
        """The chunk's columns, or None when a record is not in the producer's body shape.

        A consume error is a message without a key (librdkafka gives an error event none),
        so the lane check declines it without asking each message for its error.
        """
        message, headers, topic, partition, offset, key, value, timestamp = self.methods
        msgs = list(chain.from_iterable(m for m, _ in batches)) if len(batches) > 1 else list(batches[0][0])
        if type(msgs[0]) is not message or list(map(headers, msgs)).count(None) != n:
            return None
        lane = self._lanes(list(map(key, msgs)), n)
        if lane is None:
            return None
        values = list(map(value, msgs))  # a null value fails len() in _body: TypeError, declined
        body = self._body(values, n)
        if body is None:
            return None
        pid, seq, pts, ok = body
        topics = list(map(topic, msgs))
        if topics.count(topics[0]) == n:  # one target topic: no index per record
            targets, tix = [topics[0]], np.zeros(n, np.int64)
        else:
            targets = list(dict.fromkeys(topics))
            tix = np.fromiter(map({t: i for i, t in enumerate(targets)}.__getitem__, topics), np.int64, n)
        sizes = [len(msgs) for msgs, _ in batches]
        return _Chunk(
            n=n, targets=targets, tix=tix, pid=pid, seq=seq, pts=pts, ok=ok, length=len(values[0]), lane=lane[0],
            keylen=lane[1],
            part=np.fromiter(map(partition, msgs), np.int64, n), offset=np.fromiter(map(offset, msgs), np.int64, n),
            record_ts=np.fromiter(map(itemgetter(1), map(timestamp, msgs)), np.int64, n),
            arrival=np.repeat(np.array([a for _, a in batches], np.int64), sizes))

    @staticmethod
    def _lanes(keys: list[Any], n: int) -> tuple[Any, int] | None:
        """The lane of each record and the keys' length, for keys the per-record loop reads
        as a lane (ASCII digits, at most 5) and of one length (the producer pads them to
        its widest lane's), else None.  A missing key fails len(): TypeError, declined."""
        width = len(keys[0])
        if not 1 <= width <= 5 or list(map(len, keys)).count(width) != n:
            return None
        digits = np.frombuffer(b"".join(keys), np.uint8).reshape(n, width) - np.uint8(48)
        if (digits > 9).any():
            return None
        return digits @ _DIGITS[-width:], width

    def _body(self, values: list[bytes], n: int) -> tuple[str, Any, Any, Any] | None:
        """``(producer id, seq, produce time, checksum_ok)`` of ``pid;SEQ;TS;payload`` values
        written as the producer writes them (one producer id; 10 and 16 digits; payloads of
        one length), else None.  Values of one length are the rows of one byte matrix: each
        field a column slice of it, nothing gathered record by record."""
        first = values[0]
        width = first.find(b";")
        length = len(first)
        payload_len = length - width - _PAYLOAD_AT
        if width < 1 or not 8 <= payload_len <= MAX_PAYLOAD or list(map(len, values)).count(length) != n:
            return None
        rows = np.frombuffer(b"".join(values), np.uint8).reshape(n, length)
        if not ((rows[:, width] == _SEMI).all() and (rows[:, width + _TS_AT - 1] == _SEMI).all()
                and (rows[:, width + _PAYLOAD_AT - 1] == _SEMI).all()):
            return None
        pid_bytes = first[:width]
        if (rows[:, :width] != np.frombuffer(pid_bytes, np.uint8)).any():
            return None  # several producers (or a damaged id): the per-record loop
        seq_digits = rows[:, width + _SEQ_AT:width + _SEQ_AT + SEQ_WIDTH] - np.uint8(48)
        ts_digits = rows[:, width + _TS_AT:width + _TS_AT + TS_WIDTH] - np.uint8(48)
        if (seq_digits > 9).any() or (ts_digits > 9).any():
            return None
        pids = self.builder.pids
        try:
            pid = pids.get(pid_bytes) or pids.setdefault(pid_bytes, pid_bytes.decode())
        except UnicodeDecodeError:
            return None
        seq = seq_digits @ _DIGITS[-SEQ_WIDTH:]
        pts = ts_digits @ _DIGITS
        ok = self._checksums(values, rows[:, width + _PAYLOAD_AT:], seq)
        return pid, seq, pts, ok

    def _checksums(self, values: list[bytes], payloads: np.ndarray, seq: np.ndarray) -> np.ndarray:
        """checksum_ok per record: a payload equal to the variant its sequence carries is
        right; any other is checked as the per-record loop checks it (cached).  Payloads
        compare as 8-byte words (copied into rows padded to a multiple of 8 bytes)."""
        n, length = payloads.shape
        table = self.variants.get(length)
        words = (length + 7) // 8
        if table is None:
            padded = np.zeros((VARIANTS, words * 8), np.uint8)
            padded[:, :length] = np.frombuffer(b"".join(payload_variants(length)), np.uint8).reshape(VARIANTS, length)
            table = self.variants[length] = padded.view(np.uint64)
        mine = np.zeros((n, words * 8), np.uint8)
        mine[:, :length] = payloads
        ok = (mine.view(np.uint64) == table[seq % VARIANTS]).all(axis=1)
        checksums = self.builder.checksums
        skip = len(values[0]) - length
        for i in np.flatnonzero(~ok).tolist():
            payload = values[i][skip:]
            right = checksums.get(payload)
            if right is None:
                try:
                    right = int(payload[:8], 16) == zlib.crc32(payload[8:])
                except ValueError:
                    right = False
                checksums[payload] = right
            ok[i] = right
        return ok

    def _offsets(self, c: _Chunk, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int] | None:
        """Each partition's offsets follow each other from where ``offsets`` says it goes on
        (the per-record loop's check); its next offsets, or None at a gap."""
        change = np.ones(c.n, bool)
        change[1:] = (c.part[1:] != c.part[:-1]) | (c.tix[1:] != c.tix[:-1])
        if (np.diff(c.offset)[~change[1:]] != 1).any():
            return None
        starts = np.flatnonzero(change).tolist()
        ends: dict[tuple[str, int], int] = {}
        first, last = c.offset[starts].tolist(), c.offset[[*(s - 1 for s in starts[1:]), c.n - 1]].tolist()
        for i, s in enumerate(starts):
            key = (c.targets[int(c.tix[s])], int(c.part[s]))
            if first[i] != ends.get(key, offsets.get(key, first[i])):
                return None
            ends[key] = last[i] + 1
        return ends

    # -- committing ----------------------------------------------------------------------
    def _commit(self, c: _Chunk, rows: SegmentRows) -> None:
        """Rows, bitmaps, counts and live figures of a checked chunk."""
        b = self.builder
        sources = [b.mapping.get(t, t) for t in c.targets]
        change = np.ones(c.n, bool)
        # a run ends where its shared columns change: target (and source), partition, lane, arrival
        change[1:] = ((c.part[1:] != c.part[:-1]) | (c.tix[1:] != c.tix[:-1]) | (c.lane[1:] != c.lane[:-1])
                      | (c.arrival[1:] != c.arrival[:-1]))
        starts = np.flatnonzero(change)
        runs = [(s, sources[t], c.targets[t], p, "body", c.pid, lane, a, None, None) for s, t, p, lane, a in zip(
            starts.tolist(), c.tix[starts].tolist(), c.part[starts].tolist(), c.lane[starts].tolist(),
            c.arrival[starts].tolist(), strict=True)]
        rows.add_columns({"offset": c.offset, "seq": c.seq, "produce_ts_us": c.pts, "record_ts_ms": c.record_ts,
                          "size": np.full(c.n, c.length + c.keylen, np.int64), "checksum_ok": c.ok}, runs)
        # a lane's bitmap is its source topic's (several targets may copy one source)
        src = np.array([sources.index(s) for s in sources], np.int64)[c.tix]
        width = int(c.lane.max()) + 1
        group = src * width + c.lane
        dups, by_topic = 0, {}
        for g in np.unique(group[starts]).tolist():  # every lane of the chunk begins a run
            mine = group == g
            source, lane = sources[g // width], g % width
            bm = b.seen.get((source, c.pid, lane))
            if bm is None:
                bm = b.seen[(source, c.pid, lane)] = SeenBitmap()
            dups += _mark(bm, c.seq[mine])
            by_topic[source] = by_topic.get(source, 0) + int(np.count_nonzero(mine))
        counts = b.counts
        counts["records"] += c.n
        counts["ours"] += c.n
        counts["duplicates_seen"] += dups
        b.live.add_latencies(by_topic, c.arrival - c.pts)


def _mark(bm: SeenBitmap, seqs: np.ndarray) -> int:
    """Mark ``seqs`` (one lane's) in ``bm``; returns how many were seen before (in ``bm`` or
    earlier in ``seqs``): the per-record loop's duplicates."""
    # a partition's records of a lane come in order: already sorted and distinct, mostly
    distinct = seqs if len(seqs) < 2 or (seqs[1:] > seqs[:-1]).all() else np.unique(seqs)
    before = 0
    cids = distinct >> 16
    edges = (np.flatnonzero(cids[1:] != cids[:-1]) + 1).tolist()
    for lo, hi in zip([0, *edges], [*edges, len(distinct)], strict=True):
        part = distinct[lo:hi]
        cid = int(part[0]) >> 16
        chunk = bm.chunks.get(cid)
        if chunk is None:
            chunk = bm.chunks[cid] = bytearray(CHUNK_BITS // 8)
        view = np.frombuffer(chunk, np.uint8)
        low = part & 0xFFFF
        index, bits = low >> 3, (np.uint8(1) << (low & 7).astype(np.uint8))
        before += int(np.count_nonzero(view[index] & bits))
        np.bitwise_or.at(view, index, bits)
    bm.distinct += len(distinct) - before
    return len(seqs) - len(distinct) + before
