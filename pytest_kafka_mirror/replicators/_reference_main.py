"""The reference mirror process: consume the source, produce to the target (MM1 style).

Run as ``python -m pytest_kafka_mirror.replicators._reference_main --source BS --target BS
--topics REGEX [--prefix P] [--faults FILE --ledger FILE]``.  It discovers source topics
matching REGEX by polling metadata (no consumer group: Tansu's group join is slow, and a
mirror does not need one), creates each on the target with the same partition count, and
copies every record with its key, value, headers, timestamp and partition.  SIGTERM
flushes and exits 0.

Fault injection (``replicators/_knobs.py``): ``--faults FILE`` is a JSON control file
``{"generation": N, "default": {knobs}, "topics": {topic: {knobs}}}`` that the mirror
re-reads whenever it changes.  After applying a generation it writes its ledger of
injected faults to ``--ledger FILE`` and then ``FILE.ack`` holding N, so a controller knows
the new knobs are in force before it produces.  Topics without active knobs take the
fast path: records are copied without being decoded.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
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
    args = ap.parse_args(argv)

    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from pytest_kafka_mirror.replicators._knobs import FaultEngine, Knobs, Ledger, MirrorRecord, ledger_dump
    from pytest_kafka_mirror.rundir import write_json_atomic

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
    producer = Producer({
        "bootstrap.servers": args.target,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "queue.buffering.max.messages": 500000,
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

    def send(rec: MirrorRecord) -> None:
        while True:
            try:
                producer.produce(prefix + rec.topic, rec.value, rec.key, partition=rec.partition,
                                 headers=rec.headers, timestamp=rec.timestamp or 0, on_delivery=on_delivery)
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
        nonlocal defaults, per_topic, generation, control_sig
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
        defaults, per_topic = new_defaults, new_topics
        for topic in assigned:
            set_engine(topic)
        generation = int(data.get("generation", 0))
        write_ledger()
        write_json_atomic(args.faults.with_name(args.faults.name + ".ack"), generation)

    def on_delivery(err: Any, msg: Any) -> None:
        nonlocal errors, last_error
        if err is not None:
            errors += 1
            last_error = str(err)

    def discover() -> None:
        md = src_admin.list_topics(timeout=5)
        new: list[Any] = []
        for name, t in md.topics.items():
            if t.error is not None or not pattern.search(name):
                continue
            n = len(t.partitions)
            have = assigned.get(name, 0)
            if n <= have:
                continue
            target = args.prefix + name
            if have == 0:
                fs = dst_admin.create_topics([NewTopic(target, n, 1)], operation_timeout=10)
                try:
                    fs[target].result(timeout=15)
                    _log(f"created target topic {target} with {n} partitions")
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                        raise
            new += [TopicPartition(name, p, 0) for p in range(have, n)]
            assigned[name] = n
            set_engine(name)
            _log(f"mirroring {name} partitions {have}..{n - 1} -> {target}")
        if new:
            consumer.incremental_assign(new)

    if args.faults:
        read_control()
    discover()
    if args.warmup_topic:
        # Acquire the idempotent producer id now (~0.5 s on Tansu) rather than on the
        # first mirrored record, which would otherwise carry that delay as latency.
        fs = dst_admin.create_topics([NewTopic(args.warmup_topic, 1, 1)], operation_timeout=10)
        try:
            fs[args.warmup_topic].result(timeout=15)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
        producer.produce(args.warmup_topic, b"reference-mirror warm-up")
        if producer.flush(15):
            _log("warning: warm-up record not acknowledged within 15 s")
    if args.ready_file:
        args.ready_file.write_text(str(os.getpid()))
    _log(f"ready: {args.source} -> {args.target}, topics /{args.topics}/, prefix {args.prefix!r}")

    next_discovery = time.monotonic() + args.discovery_interval
    next_status = time.monotonic() + STATUS_EVERY
    next_control = 0.0
    produce = producer.produce
    while not stopping:
        msgs = consumer.consume(500, 0.01)
        now = time.monotonic()
        for m in msgs:
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    _log(f"consume error: {m.error()}")
                continue
            copied += 1
            engine = engines.get(m.topic())
            if engine is not None:
                rec = MirrorRecord.decoded(m.topic(), m.partition(), m.offset(), m.key(), m.value(), m.headers(),
                                           m.timestamp()[1])
                for out in engine.feed(rec, now):
                    send(out)
                continue
            while True:
                try:
                    produce(
                        prefix + m.topic(),
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
        for engine in engines.values():
            for out in engine.tick(now):
                send(out)
        producer.poll(0)
        if args.faults and now >= next_control:
            read_control()
            next_control = now + 0.05
        if now >= next_discovery:
            try:
                discover()
            except KafkaException as exc:
                _log(f"topic discovery failed (will retry): {exc}")
            next_discovery = now + args.discovery_interval
        if now >= next_status:
            _log(f"copied {copied} records, {errors} delivery errors{' (last: ' + last_error + ')' if errors else ''}")
            next_status = now + STATUS_EVERY
    # A graceful stop sends what the fault stages still buffer (delays, reorder windows);
    # a held-back tail stays unsent.
    for engine in engines.values():
        for out in engine.release():
            send(out)
    left = producer.flush(10)
    consumer.close()
    write_ledger()
    _log(f"stopped: copied {copied} records, {errors} delivery errors, {left} unflushed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
