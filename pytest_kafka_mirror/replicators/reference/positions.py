"""Committed positions, as MirrorMaker 1 commits its consumer offsets.

Per source partition, the offset after the last record the target acknowledged, in order:
an idempotent producer reports the deliveries of one partition in order, so each report
pops the oldest source offset sent there; a failed delivery freezes its partition's
position, so a restart copies it again.  The file is written every commit interval and,
after a final flush, on SIGTERM; a (re)started mirror resumes from it.  So a graceful
restart copies nothing twice, and a SIGKILL re-copies at most what arrived since the last
commit: at-least-once, as every replicator without transactions.  Topics with active
fault knobs are not committed (their stages hold and reorder records): a restart copies
them again from the start.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable, Container
from pathlib import Path
from typing import Any

from ...rundir import write_json_atomic

__all__ = ["DeliveryStats", "Positions"]


class DeliveryStats:
    """Delivery errors of the records the mirror produced (fault stages included)."""

    def __init__(self) -> None:
        self.errors = 0
        self.last_error = ""

    def __call__(self, err: Any, msg: Any) -> None:
        """A delivery report of a record that is not committed (fault stages, heartbeats)."""
        if err is not None:
            self.errors += 1
            self.last_error = str(err)


class Positions:
    """Source positions copied and acknowledged, committed to ``path`` (None: not kept)."""

    def __init__(self, path: Path | None, prefix: str, stats: DeliveryStats, log: Callable[[str], None],
                 track: Callable[[tuple[str, int], int, int], None] | None = None,
                 save_with: Callable[[], None] | None = None, reset: str = "earliest") -> None:
        self.path = path
        #: where a partition without a committed position starts (MM2's source consumer
        #: ``auto.offset.reset``): ``earliest``, or ``latest`` (its end when assigned)
        self.reset = reset
        self.prefix = prefix
        self.stats = stats
        self.track = track
        #: written with the positions (the offset sync store: a restart translates with the
        #: syncs of what it resumes from)
        self.save_with = save_with
        #: source (topic, partition) -> next offset to copy
        self.committed: dict[tuple[str, int], int] = {}
        #: target (topic, partition) -> source offsets in produce order
        self.inflight: dict[tuple[str, int], deque[int]] = {}
        self.frozen: set[tuple[str, int]] = set()  # a delivery failed: never commit past it
        self.last_commit = time.monotonic()
        if path is not None and path.exists():
            try:
                saved = json.loads(path.read_text())
                self.committed = {(t, int(p)): int(o) for t, parts in saved.items() for p, o in parts.items()}
                log(f"resuming from {len(self.committed)} committed positions in {path}")
            except (OSError, ValueError, AttributeError) as exc:
                log(f"ignoring unreadable committed positions {path}: {exc}")

    def start(self, topic: str, partition: int) -> int:
        """Where to start copying a partition: its committed position, else offset 0
        (``reset`` earliest) or its end when it is assigned (latest: ``OFFSET_END``)."""
        from confluent_kafka import OFFSET_END

        return self.committed.get((topic, partition), OFFSET_END if self.reset == "latest" else 0)

    def sent(self, target: tuple[str, int], offset: int) -> None:
        """A record of source ``offset`` was produced to ``target`` on the fast path."""
        queue = self.inflight.get(target)
        if queue is None:
            queue = self.inflight[target] = deque()
        queue.append(offset)

    def on_delivery(self, err: Any, msg: Any) -> None:
        self.stats(err, msg)
        queue = self.inflight.get((msg.topic(), msg.partition()))
        if not queue:
            return
        offset = queue.popleft()
        key = (msg.topic()[len(self.prefix):], msg.partition())
        if err is not None:
            self.frozen.add(key)
        elif key not in self.frozen:
            self.committed[key] = offset + 1
            if self.track is not None:
                self.track(key, offset, msg.offset())

    def commit(self, uncommitted: Container[str]) -> None:
        """Write the positions of every topic but ``uncommitted`` ones (those with fault engines)."""
        self.last_commit = time.monotonic()
        if self.path is None:
            return
        out: dict[str, dict[str, int]] = {}
        for (topic, part), off in self.committed.items():
            if topic not in uncommitted:
                out.setdefault(topic, {})[str(part)] = off
        if self.save_with is not None:
            self.save_with()
        write_json_atomic(self.path, out)
