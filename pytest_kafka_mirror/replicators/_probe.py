"""Readiness of a replicator we cannot ask: a probe record produced on the source must
arrive on the target.

A replicator's own "started" log line says little (MirrorMaker 2 logs it long before its
tasks copy anything); the only proof that matters to a test is a copied record.  The
probe topic matches the mirrored topic filter (``PREFIX-kafka-mirror-probe-…``) but is
never captured, so it does not disturb any run.  One replicator keeps one probe topic for
all its starts: a restart is then proven on a topic it already mirrors, without the topic
discovery (and, for MirrorMaker 2, the task reconfiguration and rebalance) a new probe
topic would cost.  The probe record is a warm-up record (``_readiness``), re-sent until
one arrives: a replicator that subscribes after the first one was written and starts
from the latest offset still sees a later one.

After a process's first start, :func:`warm_up` sends a burst of warm-up records through
the probe topic and waits until they crossed over.  A replicator that just started runs
cold (a JVM interprets its code until the JIT compiled it): measured with MirrorMaker
2 4.3.1 on Kafka 4.3.1, the first test of a fresh process had p50 600-900 ms for several
seconds, the next one on the same process 70 ms; under CI's load the first test's p99
passed its 2 s SLO.  The burst gives the first test the replicator every later test gets.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from ._readiness import await_ready
from .base import ReplicatorError

__all__ = ["WARM_UP_RECORDS", "ensure_probe_topic", "probe_topic_name", "wait_replicating", "warm_up"]

#: records of the burst after a first start; enough for a JVM's JIT to compile the per-record paths
WARM_UP_RECORDS = 10_000


def probe_topic_name(topic_prefix: str) -> str:
    return f"{topic_prefix}-kafka-mirror-probe-{uuid.uuid4().hex[:8]}"


def ensure_probe_topic(bootstrap: str, topic: str) -> None:
    """Create the probe topic unless it exists: before the replicator starts, so its first
    scan finds it (a topic created later costs MirrorMaker 2 a task reconfiguration).  The
    broker's default replication factor (-1), as every topic of a multi-broker cluster needs."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    from .._kafkalog import admin_client

    admin = admin_client(bootstrap, {"socket.connection.setup.timeout.ms": 5000})
    fs = admin.create_topics([NewTopic(topic, 1, -1)], operation_timeout=10)
    try:
        fs[topic].result(timeout=15)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise ReplicatorError(f"cannot create the probe topic {topic!r} on the source: {exc}") from None


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
    status: Callable[[], str] = lambda: "",
    resend: float = 5.0,
    create: bool = True,
    replicator: Any = None,
) -> float:
    """Block until a probe record crosses over (``create``: creating the probe topic if needed);
    return the seconds it took.

    Raises ReplicatorError when the replicator exits (with ``describe_exit()``) or after
    ``timeout`` seconds (with what was seen, ``status()``, ``logs()`` and, for a
    ``replicator`` the plugin configures, a hint from its settings and the evidence).
    """
    from .settings import readiness_hint

    t0 = time.monotonic()
    if create:
        ensure_probe_topic(source_bootstrap, source_topic)
    await_ready(
        source_bootstrap, target_bootstrap, {source_topic: (target_topic, 1)}, timeout=timeout, what=what,
        alive=alive, describe_exit=describe_exit, logs=logs, status=status, resend=resend,
        hint=lambda found: readiness_hint(replicator, {source_topic: target_topic}, found),
        during="during start-up",
    )
    return time.monotonic() - t0


def warm_up(source_bootstrap: str, target_bootstrap: str, source_topic: str, target_topic: str, *,
            count: int = WARM_UP_RECORDS, timeout: float = 15.0) -> tuple[int, float]:
    """Produce ``count`` warm-up records to the probe topic at once and wait until they
    arrived on the target, at most ``timeout`` seconds; return (arrived, seconds).  Never
    fails: a replicator slower than that is only less warm (every reader leaves warm-up
    records out, and readiness matches its own round's nonce)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from .._kafkalog import with_logger
    from ..produce.records import WARMUP_KEY, parse_warmup, warmup_value

    nonce = uuid.uuid4().hex[:12]
    t0 = time.monotonic()
    producer = Producer(with_logger({"bootstrap.servers": source_bootstrap, "linger.ms": 5,
                                     "socket.connection.setup.timeout.ms": 5000}))
    consumer = Consumer(with_logger({
        "bootstrap.servers": target_bootstrap, "group.id": f"kafka-mirror-warm-up-{nonce}",
        "enable.auto.commit": False, "enable.partition.eof": False, "fetch.wait.max.ms": 50,
        "socket.connection.setup.timeout.ms": 5000,
    }))
    arrived = 0
    try:
        consumer.assign([TopicPartition(target_topic, 0, 0)])
        ts = time.time_ns() // 1000
        for _ in range(count):
            producer.produce(source_topic, warmup_value(0, nonce, ts), WARMUP_KEY, partition=0)
            producer.poll(0)
        producer.flush(max(1.0, timeout / 3))
        while arrived < count and time.monotonic() - t0 < timeout:
            for m in consumer.consume(1000, 0.2):
                w = None if m.error() else parse_warmup(m.value())
                arrived += w is not None and w[2] == nonce
    finally:
        producer.flush(1)
        consumer.close()
        producer = consumer = None
    return arrived, time.monotonic() - t0
