"""MirrorMaker 2's internal records and topic names: checkpoints, offset syncs, heartbeats.

Encoded and decoded byte for byte as MirrorMaker 2 writes them, so that the reference
mirror emits what a real MM2 emits and the failover checks read either one unchanged.
Based on apache/kafka ``connect/mirror-client`` ``Checkpoint.java`` and ``Heartbeat.java``,
``connect/mirror`` ``OffsetSync.java`` and ``DefaultReplicationPolicy.java`` (3.x-4.x):

* records use Kafka's protocol types (``org.apache.kafka.common.protocol.types``), all
  big-endian: ``INT16``, ``INT32``, ``INT64``, and ``STRING`` = an ``INT16`` byte length
  followed by UTF-8 bytes (a null string is not allowed there);
* **Checkpoint** (topic ``<source alias><sep>checkpoints<sep>internal`` on the target,
  one partition): key ``group: STRING, topic: STRING, partition: INT32`` (the topic is the
  *target* name, e.g. ``source.orders``); value = header ``version: INT16`` (0) followed by
  ``upstreamOffset: INT64, offset: INT64, metadata: STRING``;
* **OffsetSync** (topic ``mm2-offset-syncs<sep><alias><sep>internal``, partition 0, on the
  source by default — the alias is the *target* cluster's): key ``topic: STRING,
  partition: INT32`` (the *source* topic); value ``upstreamOffset: INT64, offset: INT64``,
  no version header;
* **Heartbeat** (topic ``heartbeats``; replicated as ``<alias><sep>heartbeats``): key
  ``sourceClusterAlias: STRING, targetClusterAlias: STRING``; value = header
  ``version: INT16`` (0) followed by ``timestamp: INT64`` (epoch milliseconds).

``<sep>`` is ``replication.policy.separator`` (``.`` by default), also used for internal
topics unless ``replication.policy.internal.topic.separator.enabled=false``.  Both the
default and the identity policy use these internal names, and the identity policy keeps
``<alias>.heartbeats`` for replicated heartbeats (to break cycles).

Translation (``OffsetSyncStore.translateDownstream``, 3.5+; unchanged in 3.7-4.x): the
store's latest sync at or before the group's upstream offset U (``lookupLatestSync``
scans ``syncs[0..63]``, newest first, for the first with ``upstreamOffset <= U``); its
downstream offset when ``upstreamOffset == U``, else that plus 1 (MM2 cannot know how
many records between two syncs were copied, so it never translates further than one
past a sync).  Every sync after U: -1, "too old to translate" (no checkpoint).
:func:`translate` implements the rule on a list of syncs and :func:`latest_sync`
names the sync it uses, for tests and evidence; the store itself keeps only 64 syncs
per partition, exponentially spaced back from the newest (``failover`` replays it).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "CHECKPOINT_VERSION",
    "HEARTBEAT_VERSION",
    "Checkpoint",
    "Heartbeat",
    "MM2Names",
    "OffsetSync",
    "RecordFormatError",
    "latest_sync",
    "translate",
]

CHECKPOINT_VERSION = 0
HEARTBEAT_VERSION = 0

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """Bytes that are not the MM2 record they were read as (truncated, bad version...)."""


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise ValueError(f"string of {len(raw)} bytes does not fit Kafka's STRING type (at most 32767)")
    return _I16.pack(len(raw)) + raw


class _Reader:
    """Sequential reads of Kafka protocol types from one buffer, with errors that say where."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def _take(self, n: int, field: str) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise RecordFormatError(f"{self.what}: {field} needs {n} bytes at byte {self.pos}, "
                                    f"only {len(self.data) - self.pos} left ({self.data[:64]!r})")
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def i16(self, field: str) -> int:
        return int(_I16.unpack(self._take(2, field))[0])

    def i32(self, field: str) -> int:
        return int(_I32.unpack(self._take(4, field))[0])

    def i64(self, field: str) -> int:
        return int(_I64.unpack(self._take(8, field))[0])

    def string(self, field: str) -> str:
        n = self.i16(field + " length")
        if n < 0:
            raise RecordFormatError(f"{self.what}: {field} is null (length {n}); MM2 writes non-null strings")
        try:
            return self._take(n, field).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"{self.what}: {field} is not UTF-8: {exc}") from None

    def version(self, expected: int) -> int:
        v = self.i16("version header")
        if v != expected:
            raise RecordFormatError(f"{self.what}: unknown version {v} (this reader knows {expected})")
        return v


def _readers(key: bytes | None, value: bytes | None, what: str) -> tuple[_Reader, _Reader]:
    if key is None or value is None:
        raise RecordFormatError(f"{what} record without a {'key' if key is None else 'value'}")
    return _Reader(key, f"{what} key"), _Reader(value, f"{what} value")


@dataclass(frozen=True)
class Checkpoint:
    """A consumer group's offset translated to the target: ``<alias>.checkpoints.internal``."""

    group: str
    topic: str  # the target topic (renamed by the replication policy)
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def key(self) -> bytes:
        return _string(self.group) + _string(self.topic) + _I32.pack(self.partition)

    def value(self) -> bytes:
        return (_I16.pack(CHECKPOINT_VERSION) + _I64.pack(self.upstream_offset) + _I64.pack(self.downstream_offset)
                + _string(self.metadata))

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> Checkpoint:
        k, v = _readers(key, value, "checkpoint")
        group, topic, partition = k.string("group"), k.string("topic"), k.i32("partition")
        v.version(CHECKPOINT_VERSION)
        return cls(group, topic, partition, v.i64("upstreamOffset"), v.i64("offset"), v.string("metadata"))


@dataclass(frozen=True)
class OffsetSync:
    """One upstream -> downstream offset pair of a source partition: ``mm2-offset-syncs.<alias>.internal``."""

    topic: str  # the source topic
    partition: int
    upstream_offset: int
    downstream_offset: int

    def key(self) -> bytes:
        return _string(self.topic) + _I32.pack(self.partition)

    def value(self) -> bytes:
        return _I64.pack(self.upstream_offset) + _I64.pack(self.downstream_offset)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> OffsetSync:
        k, v = _readers(key, value, "offset sync")
        topic, partition = k.string("topic"), k.i32("partition")
        return cls(topic, partition, v.i64("upstreamOffset"), v.i64("offset"))


@dataclass(frozen=True)
class Heartbeat:
    """A heartbeat: ``sourceClusterAlias`` emitted it toward ``targetClusterAlias`` at ``timestamp_ms``."""

    source_alias: str
    target_alias: str
    timestamp_ms: int

    def key(self) -> bytes:
        return _string(self.source_alias) + _string(self.target_alias)

    def value(self) -> bytes:
        return _I16.pack(HEARTBEAT_VERSION) + _I64.pack(self.timestamp_ms)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> Heartbeat:
        k, v = _readers(key, value, "heartbeat")
        source, target = k.string("sourceClusterAlias"), k.string("targetClusterAlias")
        v.version(HEARTBEAT_VERSION)
        return cls(source, target, v.i64("timestamp"))


@dataclass(frozen=True)
class MM2Names:
    """MM2's internal topic names for one ``source -> target`` flow (DefaultReplicationPolicy)."""

    source_alias: str = "source"
    target_alias: str = "target"
    separator: str = "."
    internal_separator: bool = True  # replication.policy.internal.topic.separator.enabled
    heartbeats: str = "heartbeats"  # heartbeats.topic.name

    @property
    def _isep(self) -> str:
        return self.separator if self.internal_separator else "."

    @property
    def checkpoints_topic(self) -> str:
        """On the target: ``source.checkpoints.internal``."""
        return f"{self.source_alias}{self._isep}checkpoints{self._isep}internal"

    @property
    def offset_syncs_topic(self) -> str:
        """Where ``offset-syncs.topic.location=source`` (the default) puts them: on the
        source, named after the *target* alias (``mm2-offset-syncs.target.internal``)."""
        return self.offset_syncs_topic_on("source")

    def offset_syncs_topic_on(self, location: str) -> str:
        """The offset-syncs topic on the ``location`` cluster, named after the *other*
        cluster's alias (MM2's ``offsetSyncsTopic()``): ``mm2-offset-syncs.source.internal``
        on the target."""
        other = self.target_alias if location == "source" else self.source_alias
        return f"mm2-offset-syncs{self._isep}{other}{self._isep}internal"

    @property
    def remote_heartbeats_topic(self) -> str:
        """The source cluster's heartbeats as replicated to the target: ``source.heartbeats``."""
        return f"{self.source_alias}{self.separator}{self.heartbeats}"


def latest_sync(syncs: Iterable[OffsetSync | tuple[int, int]], upstream_offset: int) -> tuple[int, int] | None:
    """The (upstream, downstream) sync MM2's rule translates ``upstream_offset`` from: the
    highest upstream offset at or before it (the later downstream offset on a tie, as a
    later sync replaces an earlier one); None when no sync is at or before it."""
    pairs = [(s.upstream_offset, s.downstream_offset) if isinstance(s, OffsetSync) else s for s in syncs]
    at_or_before = [p for p in pairs if p[0] <= upstream_offset]
    return max(at_or_before) if at_or_before else None


def translate(syncs: Iterable[OffsetSync | tuple[int, int]], upstream_offset: int) -> int | None:
    """MM2's translation of ``upstream_offset`` from the syncs of one partition.

    The latest sync (highest upstream offset) at or before ``upstream_offset``: its
    downstream offset, plus 1 when the group is past it.  -1 when every sync is after the
    offset (too old to translate; MM2 emits no checkpoint then), None without syncs.
    """
    pairs = [(s.upstream_offset, s.downstream_offset) if isinstance(s, OffsetSync) else s for s in syncs]
    if not pairs:
        return None
    sync = latest_sync(pairs, upstream_offset)
    if sync is None:
        return -1
    up, down = sync
    return down + (0 if up == upstream_offset else 1)
