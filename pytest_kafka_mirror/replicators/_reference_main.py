"""The reference mirror process: consume the source, produce to the target (MM1 style).

Run as ``python -m pytest_kafka_mirror.replicators._reference_main --source BS --target BS
--topics REGEX [--prefix P]``.  It discovers source topics matching REGEX by polling
metadata (no consumer group: Tansu's group join is slow, and a mirror does not need one),
creates each on the target with the same partition count, and copies every record with its
key, value, headers, timestamp and partition.  SIGTERM flushes and exits 0.
"""

from __future__ import annotations

import argparse
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
    args = ap.parse_args(argv)

    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

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
            _log(f"mirroring {name} partitions {have}..{n - 1} -> {target}")
        if new:
            consumer.incremental_assign(new)

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
    produce = producer.produce
    prefix = args.prefix
    while not stopping:
        msgs = consumer.consume(500, 0.01)
        for m in msgs:
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    _log(f"consume error: {m.error()}")
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
            copied += 1
        producer.poll(0)
        now = time.monotonic()
        if now >= next_discovery:
            try:
                discover()
            except KafkaException as exc:
                _log(f"topic discovery failed (will retry): {exc}")
            next_discovery = now + args.discovery_interval
        if now >= next_status:
            _log(f"copied {copied} records, {errors} delivery errors{' (last: ' + last_error + ')' if errors else ''}")
            next_status = now + STATUS_EVERY
    left = producer.flush(10)
    consumer.close()
    _log(f"stopped: copied {copied} records, {errors} delivery errors, {left} unflushed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
