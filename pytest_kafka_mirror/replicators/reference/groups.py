"""Consumer groups, as MirrorMaker 2 handles them (the MM2 records are in ``.._checkpoints``).

Offset syncs to ``mm2-offset-syncs.target.internal`` (decided per acknowledged record,
the delayed ones sent at every offset flush), checkpoints to ``source.checkpoints.internal``
and optionally group offsets on the target (a thread), heartbeats into the source's
``heartbeats`` topic, copied to ``source.heartbeats`` with the data (a backlog delays them
too), but only this mirror's own.  The sync store and the last checkpoints are kept beside
the committed positions, so a restarted mirror translates and guards against rewinds as
before.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...rundir import write_json_atomic
from .._checkpoints import EMITTER_HEADER, CheckpointSettings, CheckpointTask, KnobView, SyncStore, SyncTracker
from ..mm2_records import OffsetSync
from .discovery import create_topic

__all__ = ["GroupSync"]


class GroupSync:
    """Offset syncs, checkpoints, group offset sync and heartbeats of one mirror process."""

    def __init__(self, settings: CheckpointSettings, *, source: str, target: str, offsets_path: Path | None,
                 emitter_id: str, log: Callable[[str], None]) -> None:
        if not settings.emit_offset_syncs and (settings.emit_checkpoints or settings.sync_group_offsets):
            log("emit.offset-syncs.enabled=false: no checkpoints and no group offset sync either (MM2 does not run "
                "its checkpoint connector without offset syncs)")
            settings = replace(settings, emit_checkpoints=False, sync_group_offsets=False)
        self.settings = settings
        self.source, self.target = source, target
        self.offsets_path = offsets_path
        self.emitter = emitter_id
        self.log = log
        self.names = settings.names
        self.syncs_path = offsets_path.with_name("offset-syncs.json") if offsets_path is not None else None
        self.store = SyncStore()
        if self.syncs_path is not None and self.syncs_path.exists():
            try:
                self.store.load(json.loads(self.syncs_path.read_text()))
            except (OSError, ValueError, TypeError, AttributeError) as exc:
                log(f"ignoring unreadable offset syncs {self.syncs_path}: {exc}")
        self.tracker = SyncTracker(settings.offset_lag_max) if settings.emit_checkpoints else None
        #: the source topic of heartbeats (None: heartbeats off)
        self.hb_topic = self.names.heartbeats if settings.emit_heartbeats else None
        self.hb_emitter = emitter_id.encode()
        self.sync_producer: Any = None
        self.task: CheckpointTask | None = None
        self.next_flush = time.monotonic() + settings.flush_interval

    @property
    def track(self) -> Callable[[tuple[str, int], int, int], None] | None:
        """Called per acknowledged record (source key, upstream, downstream offset)."""
        return self.tracker.update if self.tracker is not None else None

    def save(self) -> None:
        """Keep the sync store with the committed positions."""
        if self.syncs_path is not None and self.tracker is not None:
            write_json_atomic(self.syncs_path, self.store.dump())

    def setup(self, *, src_admin: Any, dst_admin: Any, consumer: Any, gaps: Any, start_offset: Callable[[str, int], int],
              topic_ok: Callable[[str], bool], topics: str, rename: Callable[[str], str],
              knob_view: Callable[[], KnobView]) -> None:
        """Create the internal topics, assign the heartbeats topic, build the checkpoint task."""
        from confluent_kafka import Producer, TopicPartition

        from ..._kafkalog import with_logger

        s, names = self.settings, self.names
        if s.emit_checkpoints:
            create_topic(dst_admin, names.checkpoints_topic, 1)
            on_source = s.syncs_location == "source"
            create_topic(src_admin if on_source else dst_admin, s.offset_syncs_topic, 1)
            self.sync_producer = Producer(with_logger({"bootstrap.servers": self.source if on_source else self.target,
                                                       "linger.ms": 5}))
        if self.hb_topic is not None:
            create_topic(src_admin, self.hb_topic, 1)
            create_topic(dst_admin, names.remote_heartbeats_topic, 1)
            offset = start_offset(self.hb_topic, 0)
            gaps.start(self.hb_topic, 0, offset)
            consumer.incremental_assign([TopicPartition(self.hb_topic, 0, offset)])
        if s.emit_checkpoints or s.emit_heartbeats:
            self.task = CheckpointTask(
                s, source=self.source, target=self.target, topic_ok=topic_ok, group_ok=s.group_filter(topics),
                rename=rename, store=self.store, knob_view=knob_view,
                state_path=self.offsets_path.with_name("checkpoints.json") if self.offsets_path is not None else None,
                emitter_id=self.emitter, log=self.log,
            )

    def start(self) -> None:
        if self.task is not None:
            self.task.start()

    def relay_heartbeat(self, m: Any, produce: Callable[..., None], on_delivery: Callable[..., None]) -> None:
        """Copy a heartbeat of this mirror's own (at most once: the position moves when it is read)."""
        headers = m.headers()
        if headers and (EMITTER_HEADER, self.hb_emitter) in headers:
            with contextlib.suppress(BufferError):  # a full queue: this heartbeat is skipped
                produce(self.names.remote_heartbeats_topic, m.value(), m.key(), partition=0, headers=headers,
                        timestamp=m.timestamp()[1], on_delivery=on_delivery)

    def _send_syncs(self) -> None:
        assert self.tracker is not None and self.sync_producer is not None
        for key, up, down in self.tracker.take():
            self.store.apply(key, up, down)
            sync = OffsetSync(key[0], key[1], up, down)
            self.sync_producer.produce(self.settings.offset_syncs_topic, sync.value(), sync.key(), partition=0)

    def tick(self, now: float) -> None:
        """Send the offset syncs due (MM2 sends the delayed ones at its offset flush)."""
        if self.tracker is None or self.sync_producer is None:
            return
        if now >= self.next_flush:
            self.tracker.promote()
            self.next_flush = now + self.settings.flush_interval
        self._send_syncs()
        self.sync_producer.poll(0)

    def stop(self) -> None:
        """Stop the checkpoint task; a graceful stop leaves exact syncs behind, as MM2's
        last offset flush does."""
        if self.task is not None:
            self.task.stop()
        if self.tracker is not None and self.sync_producer is not None:
            self.tracker.promote()
            self._send_syncs()
            self.sync_producer.flush(5)

    def status(self) -> str:
        return f", {self.task.emitted} checkpoints ({self.task.errors} errors)" if self.task is not None else ""
