"""Consumer-group offset translation as MirrorMaker 2 does it, for the reference mirror.

Three parts, as in MM2 (apache/kafka ``connect/mirror``; the record formats are in
:mod:`pytest_kafka_mirror.replicators.mm2_records`):

* :class:`SyncTracker` — when to write an **offset sync** (``OffsetSyncWriter.PartitionState``,
  3.7+): at once for the first record of a partition in this process's lifetime, when the
  downstream offset ran ``offset.lag.max`` or more past one after the last sync, when an
  upstream offset was skipped, or when the downstream offset went back; otherwise the
  sync is *delayed* and sent at the next offset flush (``offset.flush.interval.ms``), so a
  low-throughput partition gets an exact sync within one flush interval (KAFKA-15906,
  apache/kafka#14967, Kafka 3.7);
* :class:`SyncStore` — MM2's ``OffsetSyncStore``: 64 syncs per partition, kept at
  exponentially spaced upstream offsets (finer near the live end), and the translation of
  an upstream offset: the latest sync at or before it, plus one past it when the group is
  further (never more: MM2 cannot know how many records between two syncs were copied);
* :class:`CheckpointTask` — a thread that every ``emit.checkpoints.interval.seconds``
  reads the committed offsets of the source's consumer groups, translates them and writes
  **checkpoints** to ``<source>.checkpoints.internal`` on the target (only when more
  recent: a rewound group upstream, or a downstream offset that advanced — MM2's
  ``checkpointIsMoreRecent``; its last checkpoints survive a restart, as MM2 3.8+ reads
  them back from the checkpoints topic: ``CheckpointStore``); with ``sync.group.offsets.enabled`` it commits the latest
  checkpoints as the groups' offsets on the target, forward only and only for groups
  without members there (MM2's ``syncGroupOffset``); and it writes a **heartbeat**
  every ``emit.heartbeats.interval.seconds`` into the source's ``heartbeats`` topic (as
  MM2's target->source heartbeat connector does), which the mirror copies to
  ``<source>.heartbeats`` on the target with the data.

The settings are MM2's own property names (:class:`CheckpointSettings`), so the same
``--kafka-mirror-replicator-properties`` configure a real MM2 and the reference mirror,
and the failover checks learn from them what either replicator does.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from .mm2_records import Checkpoint, Heartbeat, MM2Names

__all__ = [
    "EMITTER_HEADER",
    "MM2_DEFAULTS",
    "REFERENCE_DEFAULTS",
    "CheckpointSettings",
    "CheckpointTask",
    "SyncStore",
    "SyncTracker",
]

#: Header naming the reference mirror that wrote a heartbeat: each mirror copies only its
#: own, so mirrors sharing a source cluster neither copy each other's heartbeats nor mask
#: each other's outage.
EMITTER_HEADER = "kafka-mirror.emitter"

_TRUE, _FALSE = ("true", "yes", "1", "on"), ("false", "no", "0", "off")


@dataclass(frozen=True)
class CheckpointSettings:
    """What a replicator does about consumer groups, in MM2's terms (property names below)."""

    emit_checkpoints: bool = True  # emit.checkpoints.enabled
    checkpoints_interval: float = 60.0  # emit.checkpoints.interval.seconds
    sync_group_offsets: bool = False  # sync.group.offsets.enabled
    sync_interval: float = 60.0  # sync.group.offsets.interval.seconds
    offset_lag_max: int = 100  # offset.lag.max
    flush_interval: float = 60.0  # TARGET.offset.flush.interval.ms / 1000 (the target herder's offset commit)
    emit_heartbeats: bool = True  # emit.heartbeats.enabled
    heartbeats_interval: float = 1.0  # emit.heartbeats.interval.seconds
    groups: tuple[str, ...] = (".*",)  # groups: regexes, each matched in full
    groups_exclude: tuple[str, ...] = ("console-consumer-.*", "connect-.*", "__.*")  # groups.exclude
    names: MM2Names = field(default_factory=MM2Names)
    syncs_location: str = "source"  # offset-syncs.topic.location (where the checkpoint task reads them)
    #: where the source connector writes the offset syncs when MM2's connectors are
    #: configured one by one and it differs from :attr:`syncs_location` (None: the same)
    syncs_written_location: str | None = None
    #: emit.offset-syncs.enabled (MM2 3.9+): without offset syncs MM2 runs no checkpoint
    #: connector (its validation refuses it): no checkpoints, no group offset sync
    emit_offset_syncs: bool = True
    #: MM2's OffsetSyncStore: "exponential" (3.4.1+: 64 syncs per partition, exponentially
    #: spaced back from the newest) or "latest" (up to 3.4.0: the newest sync only, so a
    #: group behind it is not translated; ahead of it, downstream + the upstream step)
    sync_store: str = "exponential"
    #: attribute -> the property that set it, as written (``KEY=VALUE``, and where it came
    #: from when the replicator says: ``(the test's marker)``); an attribute not in it has
    #: the default of :attr:`defaults_from`.  What failure messages quote (:meth:`quote`).
    written: Mapping[str, str] = field(default_factory=dict, compare=False)
    #: whose defaults the attributes not in :attr:`written` have
    defaults_from: str = "MM2's default"
    #: attribute -> the property that asked to turn it on (``true`` under any of its keys,
    #: quoted as in :attr:`written`), whatever won: a part a test or user asked for and that
    #: is off in effect is a failure, not a skip
    asked: Mapping[str, str] = field(default_factory=dict, compare=False)

    #: property name -> (attribute, kind)
    PROPERTIES: ClassVar[dict[str, tuple[str, str]]] = {
        "emit.checkpoints.enabled": ("emit_checkpoints", "bool"),
        "emit.checkpoints.interval.seconds": ("checkpoints_interval", "seconds"),
        "sync.group.offsets.enabled": ("sync_group_offsets", "bool"),
        "sync.group.offsets.interval.seconds": ("sync_interval", "seconds"),
        "offset.lag.max": ("offset_lag_max", "count"),
        "emit.heartbeats.enabled": ("emit_heartbeats", "bool"),
        "emit.heartbeats.interval.seconds": ("heartbeats_interval", "seconds"),
        "groups": ("groups", "regexes"),
        "groups.exclude": ("groups_exclude", "regexes"),
        "offset-syncs.topic.location": ("syncs_location", "location"),
        "emit.offset-syncs.enabled": ("emit_offset_syncs", "bool"),
    }
    NAME_PROPERTIES: ClassVar[tuple[str, ...]] = ("replication.policy.separator", "replication.policy.internal.topic.separator.enabled",
                       "heartbeats.topic.name")

    @property
    def offset_syncs_topic(self) -> str:
        """The offset-syncs topic on its cluster (:attr:`syncs_location`)."""
        return self.names.offset_syncs_topic_on(self.syncs_location)

    def with_properties(self, props: Mapping[str, str] | Iterable[tuple[str, str]],
                        flow: str = "source->target",
                        origins: Mapping[str, str] | None = None,
                        readers: Mapping[str, str] | None = None) -> tuple[CheckpointSettings, list[str]]:
        """These settings with MM2 properties applied (``KEY`` or ``FLOW.KEY``, the latter
        winning); returns them and the keys that are not about offsets or heartbeats.
        ``origins``: where each property (as written) came from, quoted in :attr:`written`.
        ``readers``: MM2 on a Connect cluster, its connectors configured one by one: key ->
        the connector that reads it; a ``CONNECTOR.KEY`` property of that connector wins.

        The offset flush is a Connect worker setting: MM2 reads it for the target's herder
        as ``<target alias>.offset.flush.interval.ms`` (a top-level one is ignored by MM2).

        ValueError names the property and what it accepts.
        """
        pairs = list(props.items()) if isinstance(props, Mapping) else list(props)
        plain = {k.strip(): (k.strip(), v.strip()) for k, v in pairs if not k.strip().startswith(flow + ".")}
        scoped = {k.strip()[len(flow) + 1:]: (k.strip(), v.strip()) for k, v in pairs
                  if k.strip().startswith(flow + ".")}
        own = {key: (k.strip(), v.strip()) for k, v in pairs for key, reader in (readers or {}).items()
               if k.strip() == f"{reader}.{key}"}
        values: dict[str, Any] = {}
        written = dict(self.written)
        asked = dict(self.asked)
        names = self.names
        other: list[str] = []
        flush_key = f"{self.names.target_alias}.offset.flush.interval.ms"
        for source in (plain, scoped, own):
            for key, (as_written, raw) in source.items():
                attr, kind = self.PROPERTIES.get(key) or (("flush_interval", "ms") if key == flush_key else (None, ""))
                if attr is not None:
                    values[attr] = _parse(key, raw, kind)
                    written[attr] = _quoted(as_written, raw, (origins or {}).get(as_written))
                    if raw.lower() in _TRUE:
                        asked[attr] = written[attr]
                elif key == "replication.policy.separator":
                    names = replace(names, separator=raw)
                elif key == "replication.policy.internal.topic.separator.enabled":
                    names = replace(names, internal_separator=_parse(key, raw, "bool"))
                elif key == "heartbeats.topic.name":
                    names = replace(names, heartbeats=raw)
                elif source is plain:
                    other.append(key)
        done = replace(self, names=names, written=written, asked=asked, **values)
        return done._with_syncs_writer(plain, scoped, pairs, readers, origins), other

    def _with_syncs_writer(self, plain: Mapping[str, tuple[str, str]], scoped: Mapping[str, tuple[str, str]],
                           pairs: list[tuple[str, str]], readers: Mapping[str, str] | None,
                           origins: Mapping[str, str] | None) -> CheckpointSettings:
        """MM2's connectors configured one by one: where the source connector writes the
        offset syncs (its own ``offset-syncs.topic.location`` over the flow's), recorded
        when it is not where the checkpoint connector reads them."""
        key = "offset-syncs.topic.location"
        reader = (readers or {}).get(key)
        if reader is None or reader == "MirrorSourceConnector":
            return self
        own = [(k.strip(), v.strip()) for k, v in pairs if k.strip() == f"MirrorSourceConnector.{key}"]
        given = own[-1] if own else scoped.get(key) or plain.get(key)
        as_written, raw = given or (key, "source")
        location = _parse(key, raw, "location")
        if location == self.syncs_location:
            return replace(self, syncs_written_location=None)
        where = (origins or {}).get(as_written) if given else self.defaults_from
        written = {**self.written, "syncs_written_location": _quoted(as_written, raw, where)}
        return replace(self, syncs_written_location=location, written=written)

    def quote(self, attr: str) -> str:
        """The setting behind ``attr`` as it is in effect: ``KEY=VALUE (where it came from)``,
        or the default's key and value with :attr:`defaults_from`."""
        if attr in self.written:
            return self.written[attr]
        key = next((k for k, (a, _) in self.PROPERTIES.items() if a == attr),
                   f"{self.names.target_alias}.offset.flush.interval.ms" if attr == "flush_interval" else attr)
        value = getattr(self, attr)
        if isinstance(value, bool):
            text = str(value).lower()
        elif attr == "flush_interval":
            text = f"{value * 1000:g}"
        elif isinstance(value, tuple):
            text = ",".join(value)
        else:
            text = f"{value:g}" if isinstance(value, float) else str(value)
        return f"{key}={text} ({self.defaults_from})"

    def no_checkpoints(self) -> str | None:
        """Why this replicator writes no checkpoints at all (None: it does): the setting in
        effect.  MM2 runs no checkpoint connector without offset syncs (3.9+, KIP-1031)."""
        if not self.emit_offset_syncs:
            return (f"{self.quote('emit_offset_syncs')}: MirrorMaker 2 runs no checkpoint connector without offset "
                    "syncs, so it writes no checkpoints")
        if not self.emit_checkpoints:
            return f"{self.quote('emit_checkpoints')}: the replicator writes no checkpoints"
        if self.syncs_written_location is not None:
            return (f"{self.quote('syncs_written_location')} but {self.quote('syncs_location')}: the checkpoint "
                    f"connector reads offset syncs on the {self.syncs_location} cluster, the source connector "
                    f"writes them on the {self.syncs_written_location} one, so no group offset is translated")
        return None

    def no_group_sync(self) -> str | None:
        """Why this replicator commits no group offsets on the target (None: it does).  MM2's
        checkpoint task syncs them: no checkpoints, no group offset sync."""
        if not self.sync_group_offsets:
            return f"{self.quote('sync_group_offsets')}: the replicator commits no group offsets on the target"
        why = self.no_checkpoints()
        return f"{why}, and MirrorMaker 2's checkpoint task is what syncs group offsets" if why else None

    def no_heartbeats(self) -> str | None:
        """Why this replicator emits no heartbeats (None: it does)."""
        if not self.emit_heartbeats:
            return f"{self.quote('emit_heartbeats')}: the replicator emits no heartbeats"
        return None

    def groups_settings(self) -> str:
        """The settings behind which groups get checkpoints and synced offsets, and when."""
        return ", ".join(self.quote(a) for a in ("emit_checkpoints", "checkpoints_interval", "sync_group_offsets",
                                                 "sync_interval", "groups", "groups_exclude", "emit_offset_syncs"))

    def for_aliases(self, source_alias: str, target_alias: str) -> CheckpointSettings:
        """These settings for the flow ``source_alias -> target_alias`` (the names of its
        checkpoints, offset-syncs and remote heartbeats topics; the target herder's flush key)."""
        return replace(self, names=replace(self.names, source_alias=source_alias, target_alias=target_alias))

    def group_filter(self, default: str | None = None) -> Callable[[str], bool]:
        """``groups`` minus ``groups.exclude``; ``default`` (a search regex) replaces the
        include list when the groups are the default ``.*``."""
        include = ([re.compile(default)] if default is not None and self.groups == (".*",)
                   else [re.compile(g) for g in self.groups])
        exclude = [re.compile(g) for g in self.groups_exclude]
        full = default is None or self.groups != (".*",)

        def ok(group: str) -> bool:
            hit = any((p.fullmatch(group) if full else p.search(group)) for p in include)
            return hit and not any(p.fullmatch(group) for p in exclude)

        return ok

    def to_dict(self) -> dict[str, Any]:
        return {
            "emit_checkpoints": self.emit_checkpoints, "checkpoints_interval": self.checkpoints_interval,
            "sync_group_offsets": self.sync_group_offsets, "sync_interval": self.sync_interval,
            "offset_lag_max": self.offset_lag_max, "flush_interval": self.flush_interval,
            "emit_heartbeats": self.emit_heartbeats, "heartbeats_interval": self.heartbeats_interval,
            "checkpoints_topic": self.names.checkpoints_topic, "heartbeats_topic": self.names.remote_heartbeats_topic,
            "offset_syncs_topic": self.offset_syncs_topic, "sync_store": self.sync_store,
            "written": dict(self.written), "defaults_from": self.defaults_from,
        }


def _quoted(as_written: str, raw: str, where: str | None) -> str:
    """A property as :attr:`CheckpointSettings.written` quotes it: ``KEY=VALUE (where)``."""
    return f"{as_written}={raw}" + (f" ({where})" if where else "")


def _parse(key: str, raw: str, kind: str) -> Any:
    low = raw.lower()
    if kind == "bool":
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise ValueError(f"replicator property {key}={raw!r}: expected true or false")
    if kind == "location":
        if low not in ("source", "target"):
            raise ValueError(f"replicator property {key}={raw!r}: expected source or target")
        return low
    if kind == "regexes":
        items = tuple(p.strip() for p in raw.split(",") if p.strip())
        for p in items:
            try:
                re.compile(p)
            except re.error as exc:
                raise ValueError(f"replicator property {key}: {p!r} is not a regular expression: {exc}") from None
        return items
    try:
        number = float(raw) if kind in ("seconds", "ms") else int(raw)
    except ValueError:
        raise ValueError(f"replicator property {key}={raw!r}: expected a {'whole ' if kind == 'count' else ''}number") from None
    if number < 0 or (kind != "count" and number == 0):
        raise ValueError(f"replicator property {key}={raw!r}: expected a number {'>= 0' if kind == 'count' else '> 0'}")
    return number / 1000.0 if kind == "ms" else number


#: What a MirrorMaker 2 does when its properties say nothing (its documented defaults).
MM2_DEFAULTS = CheckpointSettings()
#: The reference mirror's defaults: MM2's behaviour at test speed (every second), and
#: groups = the mirror's topic filter unless ``groups`` is given.
REFERENCE_DEFAULTS = CheckpointSettings(checkpoints_interval=1.0, sync_interval=1.0, flush_interval=1.0,
                                        defaults_from="the reference mirror's default")


# -- offset syncs ------------------------------------------------------------------------------


class SyncTracker:
    """Decides per delivered record whether to write an offset sync now, later, or not.

    ``update`` is called for every record the target acknowledged, in order per partition
    (the mirror's delivery callback), so its usual path is a dict lookup, three
    comparisons and three stores; the delayed sync is not built until the flush needs it.
    ``take()`` returns the syncs to write now; ``promote()`` (every flush interval) makes
    the delayed ones due.  Keys are the mirror's source ``(topic, partition)``.
    """

    __slots__ = ("lag_max", "pending", "states")

    def __init__(self, offset_lag_max: int) -> None:
        self.lag_max = offset_lag_max
        # key -> [previous upstream, previous downstream, downstream of the last sync,
        #         whether a delayed sync (of the previous pair) is due at the next flush]
        self.states: dict[tuple[str, int], list[Any]] = {}
        # Every immediate sync is kept (MM2 overwrites a partition's pending sync when its
        # producer is busy; the mirror's delivery reports come in batches, which would
        # otherwise leave one sync per batch and coarser translations than MM2's).
        self.pending: list[tuple[tuple[str, int], int, int]] = []

    def update(self, key: tuple[str, int], upstream: int, downstream: int) -> None:
        st = self.states.get(key)
        if (st is not None and upstream - st[0] == 1  # no upstream offset skipped
                and downstream >= st[1]  # the downstream topic was not truncated
                and downstream - st[2] - 1 < self.lag_max):  # the translation is not too stale yet
            st[0], st[1], st[3] = upstream, downstream, True
            return
        # the first record of this lifetime, or one of the conditions above: sync at once
        self.states[key] = [upstream, downstream, downstream, False]
        self.pending.append((key, upstream, downstream))

    def promote(self) -> None:
        for key, st in self.states.items():
            if st[3]:
                self.pending.append((key, st[0], st[1]))
                st[3] = False

    def take(self) -> list[tuple[tuple[str, int], int, int]]:
        if not self.pending:
            return []
        out, self.pending = self.pending, []
        return out


_SLOTS = 64
_U64 = 0xFFFFFFFFFFFFFFFF


def _s64(x: int) -> int:
    """Java long arithmetic: wrap to a signed 64-bit value."""
    x &= _U64
    return x - (1 << 64) if x >> 63 else x


def _invariant_b(i_sync: tuple[int, int], j_sync: tuple[int, int], i: int, j: int) -> bool:
    bound = _s64(j_sync[0] + _s64(1 << j) - _s64(1 << i))
    return i_sync is j_sync or bound < 0 or i_sync[0] <= bound


def _invariant_c(i_sync: tuple[int, int], j_sync: tuple[int, int], i: int) -> bool:
    bound = _s64(j_sync[0] + (1 << max(i - 2, 0)))
    return i_sync is j_sync or (bound >= 0 and i_sync[0] >= bound)


class SyncStore:
    """MM2's OffsetSyncStore (3.6+): per source partition 64 syncs, and the translation.

    The array keeps syncs exponentially spaced back from the latest one (invariants A-D of
    ``OffsetSyncStore.java``: ``syncs[0]`` is the latest, ``syncs[i]`` at most ``2^j - 2^i``
    after ``syncs[j]`` and at least ``2^(i-2)`` after it, ``syncs[63]`` the earliest
    usable), ported line for line with identity comparisons as in Java; so translation is
    exact near the live end and coarser further back, as in MM2.  Thread-safe: the mirror's
    main thread applies syncs, the checkpoint thread translates.
    """

    def __init__(self) -> None:
        self.syncs: dict[tuple[str, int], list[tuple[int, int]]] = {}
        self.lock = threading.Lock()

    def apply(self, key: tuple[str, int], upstream: int, downstream: int, *, loading: bool = False) -> None:
        """Take one sync.  ``loading``: MM2's initial read of the syncs topic, during which
        each sync replaces all earlier ones (only the last is usable afterwards)."""
        sync = (upstream, downstream)
        with self.lock:
            original = self.syncs.get(key)
            if original is None or loading or original[0][0] > upstream:
                self.syncs[key] = [sync] * _SLOTS
                return
            syncs = list(original)
            replacement = sync
            index = 0  # into original: the next old value that may replace a stale one
            syncs[0] = replacement
            for current in range(1, _SLOTS):
                previous = current - 1
                while True:
                    old = original[index]
                    recent = _invariant_b(syncs[previous], old, previous, current)
                    separated_prev = _invariant_c(syncs[previous], old, previous)
                    separated_next = current + 1 >= _SLOTS or _invariant_c(old, syncs[current + 1], current)
                    duplicate = index + 1 < _SLOTS and old is original[index + 1]
                    promote = recent and separated_prev and separated_next
                    if promote:
                        replacement = old
                    skip = duplicate or not separated_prev
                    if promote or skip:
                        index += 1
                    if not (index < current and skip):
                        break
                if _invariant_b(syncs[previous], syncs[current], previous, current):
                    break
                syncs[current] = replacement
            self.syncs[key] = syncs

    def translate(self, key: tuple[str, int], upstream: int) -> int | None:
        """The downstream offset for a group at ``upstream``; -1 when every sync is after it
        (too old to translate); None without any sync of the partition."""
        with self.lock:
            arr = self.syncs.get(key)
            if arr is None:
                return None
            sync = next((s for s in arr if s[0] <= upstream), arr[-1])
        if sync[0] > upstream:
            return -1
        return sync[1] + (0 if sync[0] == upstream else 1)

    # -- persistence (the reference mirror keeps it beside its committed positions) ----------

    def dump(self) -> dict[str, dict[str, list[list[int]]]]:
        """``{topic: {partition: [[upstream, downstream, repeat], ...]}}`` (slots run-length coded)."""
        out: dict[str, dict[str, list[list[int]]]] = {}
        with self.lock:
            for (topic, part), arr in self.syncs.items():
                runs: list[list[int]] = []
                for i, sync in enumerate(arr):
                    if i and sync is arr[i - 1]:  # identity, as the store compares them
                        runs[-1][2] += 1
                    else:
                        runs.append([sync[0], sync[1], 1])
                out.setdefault(topic, {})[str(part)] = runs
        return out

    def load(self, data: Mapping[str, Mapping[str, list[list[int]]]]) -> None:
        with self.lock:
            for topic, parts in data.items():
                for part, runs in parts.items():
                    arr: list[tuple[int, int]] = []
                    for up, down, n in runs:
                        sync = (int(up), int(down))
                        arr += [sync] * int(n)
                    if len(arr) == _SLOTS:
                        self.syncs[(topic, int(part))] = arr


# -- the checkpoint thread -----------------------------------------------------------------------


@dataclass(frozen=True)
class KnobView:
    """The fault knobs as the checkpoint thread sees them: replaced whole by the main thread.

    ``knobs(topic)`` gives a topic's knobs; ``since[topic]`` (``None``: the default) when its
    checkpoint knobs took effect (monotonic seconds), for ``stop_checkpoints_after``.
    """

    defaults: Any = None
    per_topic: Mapping[str, Any] = field(default_factory=dict)
    since: Mapping[str | None, float] = field(default_factory=dict)

    def knobs(self, topic: str) -> Any:
        return self.per_topic.get(topic, self.defaults)

    def started(self, topic: str) -> float:
        return self.since.get(topic if topic in self.per_topic else None, 0.0)


class CheckpointTask(threading.Thread):
    """Checkpoints, group offset sync and heartbeats (see the module docstring)."""

    def __init__(
        self,
        settings: CheckpointSettings,
        *,
        source: str,
        target: str,
        topic_ok: Callable[[str], bool],
        group_ok: Callable[[str], bool],
        rename: Callable[[str], str],
        store: SyncStore,
        knob_view: Callable[[], KnobView],
        state_path: Path | None,
        emitter_id: str,
        log: Callable[[str], None],
    ) -> None:
        super().__init__(name="reference-mirror-checkpoints", daemon=True)
        self.settings = settings
        self.source, self.target = source, target
        self.topic_ok, self.group_ok, self.rename = topic_ok, group_ok, rename
        self.store = store
        self.knob_view = knob_view
        self.state_path = state_path
        self.emitter_id = emitter_id
        self.log = log
        self.stopping = threading.Event()
        #: (group, target topic, partition) -> last checkpoint emitted (MM2's CheckpointStore)
        self.last: dict[tuple[str, str, int], Checkpoint] = {}
        self.emitted = 0
        self.errors = 0
        if state_path is not None and state_path.exists():
            try:
                for row in json.loads(state_path.read_text()):
                    cp = Checkpoint(*row)
                    self.last[(cp.group, cp.topic, cp.partition)] = cp
            except (OSError, ValueError, TypeError) as exc:
                log(f"ignoring unreadable checkpoint state {state_path}: {exc}")

    def stop(self, timeout: float = 10.0) -> None:
        self.stopping.set()
        if self.is_alive():
            self.join(timeout)

    def run(self) -> None:
        from confluent_kafka import Producer

        from .._kafkalog import admin_client, with_logger

        s = self.settings
        self.src_admin = admin_client(self.source)
        self.dst_admin = admin_client(self.target)
        self.dst_producer = Producer(with_logger({"bootstrap.servers": self.target, "acks": "all", "linger.ms": 0}))
        self.src_producer = Producer(with_logger({"bootstrap.servers": self.source, "acks": "all", "linger.ms": 0}))
        now = time.monotonic()
        due = {"checkpoints": now + s.checkpoints_interval, "sync": now + s.sync_interval, "heartbeat": now}
        jobs: dict[str, tuple[bool, float, Callable[[], None]]] = {
            "checkpoints": (s.emit_checkpoints, s.checkpoints_interval, self.checkpoint_round),
            "sync": (s.emit_checkpoints and s.sync_group_offsets, s.sync_interval, self.sync_round),
            "heartbeat": (s.emit_heartbeats, s.heartbeats_interval, self.heartbeat),
        }
        while not self.stopping.is_set():
            now = time.monotonic()
            for name, (enabled, interval, job) in jobs.items():
                if enabled and now >= due[name]:
                    try:
                        job()
                    except Exception as exc:
                        self.errors += 1
                        self.log(f"{name} failed (will retry): {exc!r}")
                    due[name] = max(due[name] + interval, time.monotonic())
            waits = [due[n] for n, (enabled, _, _) in jobs.items() if enabled]
            self.stopping.wait(max(0.01, min(waits) - time.monotonic()) if waits else 1.0)
        self.dst_producer.flush(5)
        self.src_producer.flush(5)

    # -- checkpoints ------------------------------------------------------------------------

    def _groups(self) -> list[str]:
        listed = self.src_admin.list_consumer_groups(request_timeout=10).result(timeout=15)
        return sorted(g.group_id for g in listed.valid if self.group_ok(g.group_id))

    def _group_offsets(self, admin: Any, group: str) -> list[Any]:
        from confluent_kafka import ConsumerGroupTopicPartitions

        futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=10)
        return list(futures[group].result(timeout=15).topic_partitions or [])

    def _stopped(self, knobs: Any, topic: str, view: KnobView, now: float) -> bool:
        after = getattr(knobs, "stop_checkpoints_after", None)
        return after is not None and now - view.started(topic) >= after

    def checkpoint_round(self) -> None:
        """Translate every group's committed offsets and emit the checkpoints that are newer."""
        view = self.knob_view()
        now = time.monotonic()
        stamp = int(time.time() * 1000)
        out: list[Checkpoint] = []
        for group in self._groups():
            for tp in self._group_offsets(self.src_admin, group):
                if tp.error is not None or tp.offset < 0 or not self.topic_ok(tp.topic):
                    continue
                knobs = view.knobs(tp.topic)
                if self._stopped(knobs, tp.topic, view, now):
                    continue
                down = self.store.translate((tp.topic, tp.partition), tp.offset)
                if down is None or down < 0:  # no sync yet, or too old to translate: no checkpoint
                    continue
                ahead = getattr(knobs, "translate_ahead", 0)
                rewind = getattr(knobs, "checkpoint_rewind", 0)
                down = max(0, down + ahead - rewind)
                cp = Checkpoint(group, self.rename(tp.topic), tp.partition, tp.offset, down, tp.metadata or "")
                last = self.last.get((group, cp.topic, cp.partition))
                if (last is None or cp.upstream_offset < last.upstream_offset
                        or cp.downstream_offset > last.downstream_offset
                        or (rewind and cp.downstream_offset != last.downstream_offset)):
                    out.append(cp)
        if not out:
            return
        topic = self.settings.names.checkpoints_topic
        failed: list[Any] = []
        for cp in out:
            self.dst_producer.produce(topic, cp.value(), cp.key(), partition=0, timestamp=stamp,
                                      on_delivery=lambda err, msg: failed.append(err) if err else None)
        left = self.dst_producer.flush(10)
        if left or failed:
            raise RuntimeError(f"{len(failed) + left} of {len(out)} checkpoints to {topic} not acknowledged: "
                               f"{failed[0] if failed else 'flush timed out'}")
        for cp in out:
            self.last[(cp.group, cp.topic, cp.partition)] = cp
        self.emitted += len(out)
        self._save()

    def _save(self) -> None:
        if self.state_path is None:
            return
        from ..rundir import write_json_atomic

        write_json_atomic(self.state_path, [[c.group, c.topic, c.partition, c.upstream_offset, c.downstream_offset,
                                             c.metadata] for c in self.last.values()])

    # -- group offsets on the target -------------------------------------------------------

    def sync_round(self) -> None:
        """Commit the latest checkpoints as the groups' offsets on the target: only forward,
        only for groups without members there (MM2's syncGroupOffset)."""
        from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition

        by_group: dict[str, list[Checkpoint]] = {}
        for (group, _, _), cp in self.last.items():
            by_group.setdefault(group, []).append(cp)
        if not by_group:
            return
        described = self.dst_admin.describe_consumer_groups(sorted(by_group), request_timeout=10)
        for group, cps in sorted(by_group.items()):
            try:
                state = described[group].result(timeout=15).state
            except Exception:
                state = ConsumerGroupState.DEAD
            if state not in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD, ConsumerGroupState.UNKNOWN):
                continue
            current = {(tp.topic, tp.partition): tp.offset for tp in self._group_offsets(self.dst_admin, group)}
            due = [TopicPartition(cp.topic, cp.partition, cp.downstream_offset) for cp in cps
                   if current.get((cp.topic, cp.partition), -1) < cp.downstream_offset]
            if due:
                futures = self.dst_admin.alter_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group, due)], request_timeout=10)
                futures[group].result(timeout=15)

    # -- heartbeats ----------------------------------------------------------------------------

    def heartbeat(self) -> None:
        names = self.settings.names
        hb = Heartbeat(names.target_alias, names.source_alias, int(time.time() * 1000))
        self.src_producer.produce(names.heartbeats, hb.value(), hb.key(), partition=0, timestamp=hb.timestamp_ms,
                                  headers=[(EMITTER_HEADER, self.emitter_id.encode())])
        self.src_producer.poll(0)
