"""Offset gaps on the consuming side: a record must not be skipped because the broker
showed a later one of its partition first.

A consumer asks for offset N and takes what the broker returns; if the first batch
starts at N+1, it moves on and never asks for N again.  Tansu (0.6, memory storage) does
that when several producer connections append to one partition at once: a fetch can
return a batch appended concurrently before an earlier one is visible.  Measured: two
producer processes at 400 msg/s each on 3 shared partitions, one record in ~3 runs of
1,600 skipped by a plain librdkafka consumer, though it is in the log (a later re-read
finds it).  The capture would report it lost, and the reference mirror would not copy it.

:class:`GapGuard` sits between ``consumer.consume()`` and the code that handles the
records: when a partition's next offset is not the one expected, it seeks the partition
back to the missing offset and drops the partition's later records of the batch, until
the gap fills (counted as ``refetched``) or has been open ``wait`` seconds: then the
offsets are taken as really absent (transaction markers, compaction, deleted records;
counted as ``accepted``) and the records after them are handled.  A partition's order
is kept: nothing is handled twice or out of offset order.  Cost: a dict lookup per
record (the capture makes :meth:`GapGuard.filter`'s check in its own per-record pass and
calls :meth:`GapGuard.resume` at the first gap); on a transactional topic, up to
``wait`` seconds of delay per control record.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["GAP_WAIT", "GapGuard"]

#: Seconds a gap is re-read before it is taken as real.
GAP_WAIT = 0.25


class GapGuard:
    """Checks each partition's offsets are consecutive, re-reading gaps (module docstring)."""

    def __init__(self, consumer: Any, *, wait: float = GAP_WAIT, clock: Callable[[], float] = time.monotonic,
                 log: Callable[[str], None] | None = None) -> None:
        self.consumer = consumer
        self.wait = wait
        self.clock = clock
        self.log = log
        self.next: dict[tuple[str, int], int] = {}
        self.open: dict[tuple[str, int, int], float] = {}  # (topic, partition, missing offset) -> first seen
        self.refetched = 0  # gaps that filled when re-read: records a plain consumer would have skipped
        self.accepted = 0  # gaps taken as real after `wait`
        self.accepted_offsets = 0

    def start(self, topic: str, partition: int, offset: int) -> None:
        """The offset a partition is assigned at (the first record expected)."""
        if offset >= 0:
            self.next[(topic, partition)] = offset

    def filter(self, msgs: Sequence[Any]) -> Sequence[Any]:
        """The records to handle, in order (errors passed through)."""
        if self.open:
            return self._slow(msgs, 0)
        nxt = self.next
        for i, m in enumerate(msgs):
            if m.error() is not None:
                continue
            key = (m.topic(), m.partition())
            off = m.offset()
            if off == nxt.get(key, off):
                nxt[key] = off + 1
                continue
            return self._slow(msgs, i)
        return msgs

    def resume(self, msgs: Sequence[Any], start: int) -> list[Any]:
        """The records to handle of ``msgs[start:]``, when ``msgs[start]`` is the first whose
        offset is not :attr:`next` (the capture's loop checks the offsets of ``msgs[:start]``
        itself, as :meth:`filter` does, and stops there)."""
        return self._slow(msgs, start)[start:]  # _slow keeps msgs[:start], handled already

    def _slow(self, msgs: Sequence[Any], start: int) -> list[Any]:
        from confluent_kafka import KafkaException, TopicPartition

        out = list(msgs[:start])
        nxt = self.next
        blocked: set[tuple[str, int]] = set()
        now = self.clock()
        for m in msgs[start:]:
            if m.error() is not None:
                out.append(m)
                continue
            key = (m.topic(), m.partition())
            if key in blocked:
                continue
            off = m.offset()
            want = nxt.get(key, off)
            if off < want:  # handled already (a re-delivery)
                continue
            if off > want:
                gap = (key[0], key[1], want)
                first = self.open.setdefault(gap, now)
                if now - first < self.wait:
                    try:
                        self.consumer.seek(TopicPartition(key[0], key[1], want))
                        blocked.add(key)
                        continue
                    except KafkaException as exc:
                        if self.log is not None:
                            self.log(f"cannot re-read {key[0]}/{key[1]} at {want} ({exc}): offsets taken as absent")
                del self.open[gap]
                self.accepted += 1
                self.accepted_offsets += off - want
            elif self.open and self.open.pop((key[0], key[1], off), None) is not None:
                self.refetched += 1
                if self.log is not None:
                    self.log(f"{key[0]}/{key[1]} offset {off}: shown by the broker after a later one, re-read")
            nxt[key] = off + 1
            out.append(m)
        return out

    def to_dict(self) -> dict[str, int]:
        return {"refetched": self.refetched, "accepted": self.accepted, "accepted_offsets": self.accepted_offsets,
                "open": len(self.open)}
