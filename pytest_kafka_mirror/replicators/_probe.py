"""Readiness of a replicator we cannot ask: a probe record produced on the source must
arrive on the target.

A replicator's own "started" log line says little (MirrorMaker 2 logs it long before its
tasks copy anything); the only proof that matters to a test is a copied record.  The
probe topic matches the mirrored topic filter (``PREFIX-kafka-mirror-probe-…``) but is
never captured, so it does not disturb any run.  The record is re-sent every
``resend`` seconds: a replicator that subscribes after the first one was written and
starts from the latest offset still sees a later one.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from .base import ReplicatorError

__all__ = ["probe_topic_name", "wait_replicating"]


def probe_topic_name(topic_prefix: str) -> str:
    return f"{topic_prefix}-kafka-mirror-probe-{uuid.uuid4().hex[:8]}"


def wait_replicating(
    source_bootstrap: str,
    target_bootstrap: str,
    source_topic: str,
    target_topic: str,
    *,
    timeout: float,
    what: str,
    alive: Callable[[], bool] = lambda: True,
    describe_exit: Callable[[], str] = lambda: "",
    logs: Callable[[], str] = lambda: "",
    resend: float = 5.0,
) -> float:
    """Block until a probe record crosses over; return the seconds it took.

    Raises ReplicatorError when the replicator exits (with ``describe_exit()``) or after
    ``timeout`` seconds (with what was seen and ``logs()``).
    """
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    t0 = time.monotonic()
    deadline = t0 + timeout
    marker = f"kafka-mirror-probe {uuid.uuid4().hex}".encode()
    src_admin = AdminClient({"bootstrap.servers": source_bootstrap})
    fs = src_admin.create_topics([NewTopic(source_topic, 1, 1)], operation_timeout=10)
    try:
        fs[source_topic].result(timeout=15)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise ReplicatorError(f"cannot create the probe topic {source_topic!r} on the source: {exc}") from None
    producer = Producer({"bootstrap.servers": source_bootstrap, "linger.ms": 0})
    dst_admin = AdminClient({"bootstrap.servers": target_bootstrap})
    consumer = Consumer({
        "bootstrap.servers": target_bootstrap,
        "group.id": f"kafka-mirror-probe-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.queue.backoff.ms": 1,
        "fetch.wait.max.ms": 10,
    })
    sent = 0
    next_send = 0.0
    assigned = False
    try:
        while True:
            now = time.monotonic()
            if now >= next_send:
                producer.produce(source_topic, marker, partition=0)
                producer.poll(0)
                sent += 1
                next_send = now + resend
            if not assigned:
                # list all topics: a metadata request naming an unknown topic creates it on some brokers
                md = dst_admin.list_topics(timeout=5)
                t = md.topics.get(target_topic)
                if t is not None and t.error is None and t.partitions:
                    consumer.assign([TopicPartition(target_topic, p, 0) for p in t.partitions])
                    assigned = True
            if assigned:
                for m in consumer.consume(100, 0.05):
                    if not m.error() and m.value() == marker:
                        return time.monotonic() - t0
            else:
                time.sleep(0.1)
            if not alive():
                raise ReplicatorError(f"{what} exited during start-up: {describe_exit()}")
            if time.monotonic() >= deadline:
                seen = "exists but the probe record never arrived" if assigned else "was never created"
                tail = logs()
                raise ReplicatorError(
                    f"timed out after {timeout:g} s waiting for {what} to copy a probe record: {sent} sent to "
                    f"{source_topic!r} on the source ({source_bootstrap}); the target topic {target_topic!r} "
                    f"({target_bootstrap}) {seen}. Hint: check the replicator's topic filter and naming policy "
                    "(--kafka-mirror-naming), or raise --kafka-mirror-startup-timeout."
                    + (f"\nlast log lines:\n{tail}" if tail else "")
                )
    finally:
        producer.flush(2)
        consumer.close()
