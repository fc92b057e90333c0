"""The reference mirror process: consume the source, produce to the target (MM1 style).

Run as ``python -m pytest_kafka_mirror.replicators._reference_main --source BS --target BS
--topics REGEX [--prefix P] [--faults FILE --ledger FILE]``.  It discovers source topics
matching REGEX by polling metadata (no consumer group: Tansu's group join is slow, and a
mirror does not need one), creates each on the target with the same partition count, and
copies every record with its key, value, headers, timestamp and partition.

Committed positions (``--offsets FILE``), as MirrorMaker 1 commits its consumer offsets:
per source partition, the offset after the last record the target acknowledged, in order
(a failed delivery freezes its partition's position, so a restart copies it again).  The
file is written every ``--commit-interval`` seconds and, after a final flush, on SIGTERM;
a (re)started mirror resumes from it.  So a graceful restart copies nothing twice, and a
SIGKILL re-copies at most what arrived since the last commit: at-least-once, as every
replicator without transactions.  Topics with active fault knobs are not committed (their
stages hold and reorder records): a restart copies them again from the start.  SIGTERM
flushes and exits 0.

Consumer groups (``replicators/_checkpoints.py``), as MirrorMaker 2 handles them: offset
syncs to ``mm2-offset-syncs.target.internal`` (decided per acknowledged record),
checkpoints to ``source.checkpoints.internal`` and optionally group offsets on the target
(a thread), heartbeats into the source's ``heartbeats`` topic, copied to
``source.heartbeats`` with the data.  ``--properties FILE`` takes MM2's property names
(``emit.checkpoints.interval.seconds``, ``offset.lag.max``, ...; others are ignored with a
log line), so the fake MM2 of the tests passes its ``mm2.properties`` through.  The sync
store and the last checkpoints are kept beside the committed positions, so a restarted
mirror translates and guards against rewinds as before.

Fault injection (``replicators/_knobs.py``): ``--faults FILE`` is a JSON control file
``{"generation": N, "default": {knobs}, "topics": {topic: {knobs}}}`` that the mirror
re-reads whenever it changes.  After applying a generation it writes its ledger of
injected faults to ``--ledger FILE`` and then ``FILE.ack`` holding N, so a controller knows
the new knobs are in force before it produces.  Topics without active knobs take the
fast path: records are copied without being decoded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

STATUS_EVERY = 5.0


def _log(msg: str) -> None:
    sys.stdout.write(f"{time.strftime('%H:%M:%S')} reference-mirror: {msg}\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="reference-mirror")
    ap.add_argument("--source", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--topics", required=True, help="regex of source topics to mirror")
    ap.add_argument("--prefix", default="", help="target topic = PREFIX + source topic")
    ap.add_argument("--discovery-interval", type=float, default=0.25)
    ap.add_argument("--ready-file", type=Path)
    ap.add_argument("--warmup-topic", default="", help="target topic for one warm-up record ('' = none)")
    ap.add_argument("--faults", type=Path, help="JSON control file of fault knobs (re-read when it changes)")
    ap.add_argument("--ledger", type=Path, help="where to write the ledger of injected faults")
    ap.add_argument("--offsets", type=Path, help="committed positions: read at start, written as records are acked")
    ap.add_argument("--commit-interval", type=float, default=1.0, help="seconds between two commits")
    ap.add_argument("--properties", type=Path, help="MM2-style properties: checkpoints, offset syncs, heartbeats")
    ap.add_argument("--emitter-id", default="", help="this mirror's heartbeat id (default: from the pid)")
    args = ap.parse_args(argv)

    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from pytest_kafka_mirror.mm2_records import OffsetSync
    from pytest_kafka_mirror.replicators._checkpoints import (
        EMITTER_HEADER,
        REFERENCE_DEFAULTS,
        CheckpointTask,
        KnobView,
        SyncStore,
        SyncTracker,
    )
    from pytest_kafka_mirror.replicators._knobs import (
        CHECKPOINT_KNOBS,
        FaultEngine,
        Knobs,
        Ledger,
        MirrorRecord,
        ledger_dump,
    )
    from pytest_kafka_mirror._gaps import GapGuard
    from pytest_kafka_mirror.replicators.mm2 import parse_properties
    from pytest_kafka_mirror.rundir import write_json_atomic

    settings = REFERENCE_DEFAULTS
    if args.properties is not None:
        try:
            settings, ignored = settings.with_properties(parse_properties(args.properties.read_text()))
        except (OSError, ValueError) as exc:
            _log(f"bad --properties {args.properties}: {exc}")
            return 2
        if ignored:
            _log(f"ignoring properties the reference mirror does not implement: {', '.join(sorted(ignored))}")
    emitter_id = args.emitter_id or f"reference-mirror-{os.getpid()}"

    stopping = False

    def on_term(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    pattern = re.compile(args.topics)
    consumer = Consumer({
        "bootstrap.servers": args.source,
        "group.id": f"reference-mirror-{os.getpid()}",  # required by librdkafka; never joined (assign only)
        "enable.auto.commit": False,
        "fetch.queue.backoff.ms": 1,
        "fetch.wait.max.ms": 10,
        "fetch.error.backoff.ms": 10,
        # Partitions are assigned at offset 0 rather than OFFSET_BEGINNING: resolving
        # BEGINNING costs ~0.5 s on Tansu, which would show up as latency of the first
        # records.  A log whose start moved past 0 is caught by the reset to earliest.
        "auto.offset.reset": "earliest",
        "topic.metadata.refresh.interval.ms": 1000,
    })
    # A broker showing a later record of a partition first (Tansu with several producers on
    # one partition) must not make the mirror skip the earlier one: re-read the gap.
    gaps = GapGuard(consumer, log=_log)
    producer = Producer({
        "bootstrap.servers": args.target,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "queue.buffering.max.messages": 500000,
        # librdkafka refuses records over message.max.bytes (1 MB by default) before sending
        # them; a mirror must pass on whatever the source accepted.
        "message.max.bytes": 16 * 1024 * 1024,
    })
    src_admin = AdminClient({"bootstrap.servers": args.source})
    dst_admin = AdminClient({"bootstrap.servers": args.target})

    assigned: dict[str, int] = {}  # source topic -> partitions assigned
    copied = 0
    errors = 0
    last_error = ""
    prefix = args.prefix

    # -- fault knobs ---------------------------------------------------------------------
    defaults = Knobs()
    per_topic: dict[str, Knobs] = {}
    engines: dict[str, FaultEngine] = {}
    ledgers: dict[str, Ledger] = {}
    in_force: dict[str, Knobs] = {}
    generation = 0
    control_sig: tuple[int, int] | None = None
    knob_view = KnobView(Knobs(), {}, {None: time.monotonic()})

    def checkpoint_knobs(k: Knobs) -> tuple[Any, ...]:
        return tuple(getattr(k, name) for name in CHECKPOINT_KNOBS)

    def send(rec: MirrorRecord) -> None:
        while True:
            try:
                producer.produce(prefix + rec.topic, rec.value, rec.key, partition=rec.partition,
                                 headers=rec.headers, timestamp=rec.timestamp or 0, on_delivery=count_errors)
                return
            except BufferError:
                producer.poll(0.05)

    def set_engine(topic: str) -> None:
        """Give ``topic`` the knobs now in force, releasing what the old engine buffered."""
        knobs = per_topic.get(topic, defaults)
        if in_force.get(topic, Knobs()) == knobs and (topic in engines or not knobs.active):
            return
        old = engines.pop(topic, None)
        if old is not None:
            for rec in old.release():
                send(rec)
            ledgers[topic].discard_held(old)
        in_force[topic] = knobs
        if knobs.active:
            ledger = ledgers.setdefault(topic, Ledger())
            engines[topic] = FaultEngine(topic, knobs, assigned.get(topic, 1), ledger)
            _log(f"faults on {topic}: {knobs}")
        elif old is not None:
            _log(f"faults off on {topic}")

    def write_ledger() -> None:
        if args.ledger:
            tables = {t: (in_force.get(t, Knobs()), ledger, engines.get(t)) for t, ledger in ledgers.items()}
            write_json_atomic(args.ledger, ledger_dump(tables, generation))

    def read_control() -> None:
        nonlocal defaults, per_topic, generation, control_sig, knob_view
        try:
            st = os.stat(args.faults)
        except OSError:
            return
        sig = (st.st_mtime_ns, st.st_ino)
        if sig == control_sig:
            return
        control_sig = sig
        try:
            data = json.loads(args.faults.read_text())
            new_defaults = Knobs.from_dict(data.get("default", {}))
            new_topics = {t: Knobs.from_dict(k) for t, k in data.get("topics", {}).items()}
        except (OSError, ValueError, TypeError) as exc:
            _log(f"ignoring unreadable fault control file {args.faults}: {exc}")
            return
        # When each topic's checkpoint knobs took effect (stop_checkpoints_after counts from there).
        now = time.monotonic()
        old = knob_view
        since: dict[str | None, float] = {
            None: old.since.get(None, now) if checkpoint_knobs(old.defaults) == checkpoint_knobs(new_defaults) else now}
        for t, k in new_topics.items():
            same = t in old.per_topic and checkpoint_knobs(old.knobs(t)) == checkpoint_knobs(k)
            since[t] = old.since.get(t, now) if same else now
        knob_view = KnobView(new_defaults, new_topics, since)
        defaults, per_topic = new_defaults, new_topics
        for topic in assigned:
            set_engine(topic)
        generation = int(data.get("generation", 0))
        write_ledger()
        write_json_atomic(args.faults.with_name(args.faults.name + ".ack"), generation)

    # -- committed positions (see the module docstring) ---------------------------------
    committed: dict[tuple[str, int], int] = {}  # source (topic, partition) -> next offset to copy
    syncs_path = args.offsets.with_name("offset-syncs.json") if args.offsets is not None else None
    store = SyncStore()
    if syncs_path is not None and syncs_path.exists():
        try:
            store.load(json.loads(syncs_path.read_text()))
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            _log(f"ignoring unreadable offset syncs {syncs_path}: {exc}")
    tracker = SyncTracker(settings.offset_lag_max) if settings.emit_checkpoints else None
    if args.offsets is not None and args.offsets.exists():
        try:
            saved = json.loads(args.offsets.read_text())
            committed = {(t, int(p)): int(o) for t, parts in saved.items() for p, o in parts.items()}
            _log(f"resuming from {len(committed)} committed positions in {args.offsets}")
        except (OSError, ValueError, AttributeError) as exc:
            _log(f"ignoring unreadable committed positions {args.offsets}: {exc}")
    # Source offsets in produce order per target (topic, partition): an idempotent producer
    # reports deliveries of one partition in order, so each report pops the oldest.
    inflight: dict[tuple[str, int], deque[int]] = {}
    frozen: set[tuple[str, int]] = set()  # a delivery failed: never commit past it
    last_commit = time.monotonic()

    def count_errors(err: Any, msg: Any) -> None:
        """Delivery report of a record that went through fault stages: not committed."""
        nonlocal errors, last_error
        if err is not None:
            errors += 1
            last_error = str(err)

    track = tracker.update if tracker is not None else None

    def on_delivery(err: Any, msg: Any) -> None:
        count_errors(err, msg)
        queue = inflight.get((msg.topic(), msg.partition()))
        if not queue:
            return
        offset = queue.popleft()
        key = (msg.topic()[len(prefix):], msg.partition())
        if err is not None:
            frozen.add(key)
        elif key not in frozen:
            committed[key] = offset + 1
            if track is not None:
                track(key, offset, msg.offset())

    def commit() -> None:
        nonlocal last_commit
        last_commit = time.monotonic()
        if args.offsets is None:
            return
        out: dict[str, dict[str, int]] = {}
        for (topic, part), off in committed.items():
            if topic not in engines:
                out.setdefault(topic, {})[str(part)] = off
        if syncs_path is not None and tracker is not None:
            # with the positions: a restart translates with the syncs of what it resumes from
            write_json_atomic(syncs_path, store.dump())
        write_json_atomic(args.offsets, out)

    def create_topic(admin: Any, name: str, partitions: int) -> bool:
        """Create ``name``; False when it already existed."""
        fs = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10)
        try:
            fs[name].result(timeout=15)
            return True
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
            return False

    names = settings.names

    def internal(topic: str) -> bool:
        """MM2's internal topics (``*.internal``, ``__*``, ``.*``) and heartbeats are not data."""
        return (topic.endswith((".internal", names.separator + names.heartbeats)) or topic.startswith(("__", "."))
                or topic == names.heartbeats)

    def discover() -> None:
        md = src_admin.list_topics(timeout=5)
        new: list[Any] = []
        for name, t in md.topics.items():
            if t.error is not None or not pattern.search(name) or internal(name):
                continue
            n = len(t.partitions)
            have = assigned.get(name, 0)
            if n <= have:
                continue
            target = args.prefix + name
            if have == 0 and create_topic(dst_admin, target, n):
                _log(f"created target topic {target} with {n} partitions")
            # From the committed position (a restart), else offset 0 (see the consumer config).
            new += [TopicPartition(name, p, committed.get((name, p), 0)) for p in range(have, n)]
            assigned[name] = n
            set_engine(name)
            _log(f"mirroring {name} partitions {have}..{n - 1} -> {target}")
        if new:
            for tp in new:
                gaps.start(tp.topic, tp.partition, tp.offset)
            consumer.incremental_assign(new)

    if args.faults:
        read_control()
    discover()
    # -- consumer groups: internal topics, offset syncs, the heartbeat relay, the thread --------
    sync_producer = None
    hb_topic = names.heartbeats if settings.emit_heartbeats else None
    hb_emitter = emitter_id.encode()
    if settings.emit_checkpoints:
        create_topic(dst_admin, names.checkpoints_topic, 1)
        on_source = settings.syncs_location == "source"
        create_topic(src_admin if on_source else dst_admin, names.offset_syncs_topic, 1)
        sync_producer = Producer({"bootstrap.servers": args.source if on_source else args.target, "linger.ms": 5})
    if hb_topic is not None:
        create_topic(src_admin, hb_topic, 1)
        create_topic(dst_admin, names.remote_heartbeats_topic, 1)
        gaps.start(hb_topic, 0, committed.get((hb_topic, 0), 0))
        consumer.incremental_assign([TopicPartition(hb_topic, 0, committed.get((hb_topic, 0), 0))])
    task = None
    if settings.emit_checkpoints or settings.emit_heartbeats:
        task = CheckpointTask(
            settings, source=args.source, target=args.target,
            topic_ok=lambda t: bool(pattern.search(t)) and not internal(t),
            group_ok=settings.group_filter(args.topics), rename=lambda t: prefix + t, store=store,
            knob_view=lambda: knob_view,
            state_path=args.offsets.with_name("checkpoints.json") if args.offsets is not None else None,
            emitter_id=emitter_id, log=_log,
        )
    if args.warmup_topic:
        # Acquire the idempotent producer id now (~0.5 s on Tansu) rather than on the
        # first mirrored record, which would otherwise carry that delay as latency.
        create_topic(dst_admin, args.warmup_topic, 1)
        producer.produce(args.warmup_topic, b"reference-mirror warm-up")
        if producer.flush(15):
            _log("warning: warm-up record not acknowledged within 15 s")
    if task is not None:
        task.start()
    if args.ready_file:
        args.ready_file.write_text(str(os.getpid()))
    _log(f"ready: {args.source} -> {args.target}, topics /{args.topics}/, prefix {args.prefix!r}")

    next_discovery = time.monotonic() + args.discovery_interval
    next_status = time.monotonic() + STATUS_EVERY
    next_control = 0.0
    next_flush = time.monotonic() + settings.flush_interval
    produce = producer.produce
    while not stopping:
        msgs = gaps.filter(consumer.consume(500, 0.01))
        now = time.monotonic()
        for m in msgs:
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    _log(f"consume error: {m.error()}")
                continue
            topic = m.topic()
            if topic == hb_topic:
                # Heartbeats are copied with the data (a backlog delays them too), but only
                # this mirror's own; at most once: the position moves when they are read.
                headers = m.headers()
                if headers and (EMITTER_HEADER, hb_emitter) in headers:
                    with contextlib.suppress(BufferError):  # a full queue: this heartbeat is skipped
                        produce(names.remote_heartbeats_topic, m.value(), m.key(), partition=0, headers=headers,
                                timestamp=m.timestamp()[1], on_delivery=count_errors)
                committed[(hb_topic, m.partition())] = m.offset() + 1
                continue
            copied += 1
            engine = engines.get(topic)
            if engine is not None:
                rec = MirrorRecord.decoded(topic, m.partition(), m.offset(), m.key(), m.value(), m.headers(),
                                           m.timestamp()[1])
                for out in engine.feed(rec, now):
                    send(out)
                continue
            target_tp = (prefix + topic, m.partition())
            while True:
                try:
                    produce(
                        target_tp[0],
                        m.value(),
                        m.key(),
                        partition=m.partition(),
                        headers=m.headers(),
                        timestamp=m.timestamp()[1],
                        on_delivery=on_delivery,
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            queue = inflight.get(target_tp)
            if queue is None:
                queue = inflight[target_tp] = deque()
            queue.append(m.offset())
        for engine in engines.values():
            for out in engine.tick(now):
                send(out)
        producer.poll(0)
        if tracker is not None and sync_producer is not None:
            if now >= next_flush:  # MM2 sends the delayed syncs at its offset flush
                tracker.promote()
                next_flush = now + settings.flush_interval
            for key, up, down in tracker.take():
                store.apply(key, up, down)
                sync = OffsetSync(key[0], key[1], up, down)
                sync_producer.produce(names.offset_syncs_topic, sync.value(), sync.key(), partition=0)
            sync_producer.poll(0)
        if args.faults and now >= next_control:
            read_control()
            next_control = now + 0.05
        if now >= next_discovery:
            try:
                discover()
            except KafkaException as exc:
                _log(f"topic discovery failed (will retry): {exc}")
            next_discovery = now + args.discovery_interval
        if now - last_commit >= args.commit_interval:
            commit()
        if now >= next_status:
            groups = f", {task.emitted} checkpoints ({task.errors} errors)" if task is not None else ""
            _log(f"copied {copied} records, {errors} delivery errors{' (last: ' + last_error + ')' if errors else ''}"
                 f"{groups}, offset gaps re-read {gaps.refetched}, taken as absent {gaps.accepted}")
            next_status = now + STATUS_EVERY
    # A graceful stop sends what the fault stages still buffer (delays, reorder windows);
    # a held-back tail stays unsent.
    for engine in engines.values():
        for out in engine.release():
            send(out)
    left = producer.flush(10)
    if task is not None:
        task.stop()
    if tracker is not None and sync_producer is not None:
        tracker.promote()  # a graceful stop leaves exact syncs behind, as MM2's last offset flush does
        for key, up, down in tracker.take():
            store.apply(key, up, down)
            sync = OffsetSync(key[0], key[1], up, down)
            sync_producer.produce(names.offset_syncs_topic, sync.value(), sync.key(), partition=0)
        sync_producer.flush(5)
    commit()  # after the flush: every copied record is acknowledged (or frozen its partition)
    consumer.close()
    write_ledger()
    _log(f"stopped: copied {copied} records, {errors} delivery errors, {left} unflushed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
