"""Runtime capability probes: ask the broker, don't trust its name.

Each probe works on its own throw-away topic (``kafka-mirror-probe-…``, outside the test
prefix so no replicator copies it), returns ``(supported, reason)`` and never raises: a
probe that errors means "not supported" with the error as the reason.  The whole set
takes a few seconds, so backends run it once, on first ``capabilities()``.

DeleteRecords is only probed when the caller says it is safe: Tansu 0.6 panics on it and
an unknown cluster behind ``bootstrap:`` might be a Tansu.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from typing import Any

from ..processes.managed import wait_until
from .base import Capabilities, KafkaAdminMixin

__all__ = ["probe_capabilities"]

_DYNAMIC_TOPIC_CONFIG = 1  # ConfigSource.DYNAMIC_TOPIC_CONFIG
#: how long a topic config change may take to show in a describe (applied by the broker)
_APPLIED_WITHIN_S = 5.0
_OLD_TS = 1_000_000  # 1970-01-01T00:16:40Z: a LogAppendTime broker replaces it


def _consumer(cluster: KafkaAdminMixin, **extra: Any) -> Any:
    from confluent_kafka import Consumer

    from .._kafkalog import with_logger

    return Consumer(with_logger({
        **cluster.client_config(),
        "group.id": f"kafka-mirror-probe-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "fetch.queue.backoff.ms": 1,
        "fetch.wait.max.ms": 10,
        "auto.offset.reset": "earliest",
        **extra,
    }))


def _read(
    cluster: KafkaAdminMixin,
    topic: str,
    want: int,
    timeout: float = 5.0,
    until: bytes | None = None,
    config: dict[str, Any] | None = None,
) -> list[Any]:
    """Records of partition 0 from offset 0 until ``want`` arrived (and one with the value
    ``until``, when given) or ``timeout`` passed."""
    from confluent_kafka import TopicPartition

    c = _consumer(cluster, **(config or {}))
    out: list[Any] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])

        def enough() -> bool:
            out.extend(m for m in c.consume(100, 0.05) if not m.error())
            return len(out) >= want and (until is None or any(m.value() == until for m in out))

        with contextlib.suppress(TimeoutError):  # a probe that got less: the caller judges it
            wait_until(enough, timeout, f"{want} probe records", interval=0)
    finally:
        c.close()
    return out


def _produce(cluster: KafkaAdminMixin, topic: str, values: list[bytes], **kw: Any) -> None:
    from confluent_kafka import Producer

    from .._kafkalog import with_logger

    p = Producer(with_logger({**cluster.client_config(), "linger.ms": 0}))
    for v in values:
        p.produce(topic, v, partition=0, **kw)
    if p.flush(10):
        raise RuntimeError(f"{len(values)} probe records not acknowledged within 10 s")


def _add_partitions(cluster: KafkaAdminMixin, topic: str) -> tuple[bool, str]:
    from confluent_kafka.admin import NewPartitions

    fut = cluster.admin().create_partitions([NewPartitions(topic, 2)], operation_timeout=10)[topic]
    fut.result(timeout=15)
    try:
        wait_until(lambda: cluster.partitions(topic) == 2, 10, "the grown topic in metadata")
    except TimeoutError:
        return False, "CreatePartitions was acknowledged but metadata still shows 1 partition after 10 s"
    return True, "probed: CreatePartitions grew a topic from 1 to 2 partitions"


def _log_append_time(cluster: KafkaAdminMixin, topic: str) -> tuple[bool, str]:
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

    _produce(cluster, topic, [b"probe"], timestamp=_OLD_TS)
    got = _read(cluster, topic, 1)
    if not got:
        return False, "the probe record was not readable within 5 s"
    ts_type, ts = got[0].timestamp()
    if ts_type == TIMESTAMP_LOG_APPEND_TIME and ts != _OLD_TS:
        return True, "probed: message.timestamp.type=LogAppendTime replaced the producer's timestamp"
    return False, (
        f"probed: with message.timestamp.type=LogAppendTime the broker kept the producer's timestamp "
        f"(type {ts_type}, {ts} ms)"
    )


def _transactions(cluster: KafkaAdminMixin, topic: str) -> tuple[bool, str]:
    from confluent_kafka import Producer

    from .._kafkalog import with_logger

    p = Producer(with_logger({**cluster.client_config(),
                              "transactional.id": f"kafka-mirror-probe-{uuid.uuid4().hex[:8]}"}))
    p.init_transactions(15)
    p.begin_transaction()
    p.produce(topic, b"aborted", partition=0)
    p.flush(10)  # else abort_transaction purges it before it ever reaches the broker
    p.abort_transaction(15)
    p.begin_transaction()
    p.produce(topic, b"committed", partition=0)
    p.commit_transaction(15)
    # The aborted record precedes the committed one: read until the committed one shows.
    seen = [m.value() for m in _read(cluster, topic, 1, until=b"committed", config={"isolation.level": "read_committed"})]
    if seen == [b"committed"]:
        return True, "probed: read_committed saw the committed record and not the aborted one"
    if b"aborted" in seen:
        return False, "probed: read_committed consumers see aborted records"
    return False, f"probed: read_committed consumer read {seen!r} instead of the committed record"


def _watermarks(cluster: KafkaAdminMixin, topic: str) -> tuple[bool, str]:
    from confluent_kafka import TopicPartition

    _produce(cluster, topic, [b"w%d" % i for i in range(5)])
    c = _consumer(cluster)
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()
    if (low, high) == (0, 5):
        return True, "probed: watermarks (0, 5) after 5 records"
    return False, f"probed: watermarks ({low}, {high}) after 5 records on a fresh partition, expected (0, 5)"


def _delete_records(cluster: KafkaAdminMixin, topic: str) -> tuple[bool, str]:
    from confluent_kafka import TopicPartition

    _produce(cluster, topic, [b"d%d" % i for i in range(4)])
    fut = cluster.admin().delete_records([TopicPartition(topic, 0, 2)], operation_timeout=10)
    for f in fut.values():
        f.result(timeout=15)
    got = [m.offset() for m in _read(cluster, topic, 2)]
    if got and got[0] == 2:
        return True, "probed: DeleteRecords moved the log start to offset 2"
    return False, f"probed: after DeleteRecords up to offset 2 the partition still starts at {got[:1]}"


def _config_sources(cluster: KafkaAdminMixin, topic: str) -> dict[str, tuple[str | None, int]]:
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = cluster.admin().describe_configs([resource])[resource].result(timeout=15)
    return {name: (e.value, int(e.source)) for name, e in entries.items()}


def _topic_config_defaults(cluster: KafkaAdminMixin, topic: str) -> tuple[bool, str]:
    """retention.bytes set on the topic is its own config (DYNAMIC_TOPIC_CONFIG) while
    retention.ms is described as a default; deleted, retention.bytes is a default again."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    def alter(op: Any) -> None:
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
            ConfigEntry("retention.bytes", "1000", incremental_operation=op)])
        cluster.admin().incremental_alter_configs([resource])[resource].result(timeout=15)

    def described(done: Callable[[dict[str, tuple[str, int]]], bool]) -> dict[str, tuple[str, int]]:
        # A KRaft controller acknowledges a change before its broker applied it: a describe
        # right after it may show the config before (seen once in CI, Kafka 3.8.1); the
        # last description is judged below when the change never shows
        seen: list[dict[str, tuple[str, int]]] = []

        def applied() -> bool:
            seen.append(_config_sources(cluster, topic))
            return done(seen[-1])

        with contextlib.suppress(TimeoutError):
            wait_until(applied, _APPLIED_WITHIN_S, "the topic config change to be applied", interval=0.1)
        return seen[-1]

    alter(AlterConfigOpType.SET)
    set_ = described(lambda seen: seen.get("retention.bytes") == ("1000", _DYNAMIC_TOPIC_CONFIG))
    own, other = set_.get("retention.bytes"), set_.get("retention.ms")
    alter(AlterConfigOpType.DELETE)
    # waited for only when the set showed (else the probe fails whatever the delete shows)
    deleted = described(lambda seen: own != ("1000", _DYNAMIC_TOPIC_CONFIG) or seen.get(
        "retention.bytes", ("", _DYNAMIC_TOPIC_CONFIG))[1] != _DYNAMIC_TOPIC_CONFIG).get("retention.bytes")
    if own == ("1000", _DYNAMIC_TOPIC_CONFIG) and other is not None and other[1] != _DYNAMIC_TOPIC_CONFIG \
            and deleted is not None and deleted[1] != _DYNAMIC_TOPIC_CONFIG:
        return True, "probed: a topic's own config described as DYNAMIC_TOPIC_CONFIG, deleted it is a default again"
    return False, (f"probed: retention.bytes set on a topic described as (value, ConfigSource) {own}, "
                   f"retention.ms (never set) as {other}, retention.bytes deleted as {deleted}; "
                   f"expected ('1000', {_DYNAMIC_TOPIC_CONFIG}), a default, a default")


def probe_capabilities(
    cluster: KafkaAdminMixin,
    *,
    delete_records: bool = False,
    declared: dict[str, tuple[bool | None, str]] | None = None,
    lifecycle: bool = False,
) -> Capabilities:
    """Probe what ``cluster`` supports.  ``declared`` wins over probing (known facts such as
    ``restart_keeps_data``); ``delete_records`` is probed only when True."""
    from confluent_kafka.admin import NewTopic

    declared = dict(declared or {})
    probes: dict[str, Callable[[KafkaAdminMixin, str], tuple[bool, str]]] = {
        "add_partitions": _add_partitions,
        "log_append_time": _log_append_time,
        "transactions": _transactions,
        "accurate_watermarks": _watermarks,
        "topic_config_defaults": _topic_config_defaults,
    }
    if delete_records:
        probes["delete_records"] = _delete_records
    elif "delete_records" not in declared:
        declared["delete_records"] = (None, "not probed: DeleteRecords crashes some Kafka-compatible brokers (Tansu 0.6)")
    values: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    created: list[str] = []
    admin = cluster.admin()
    for name, probe in probes.items():
        if name in declared:
            continue
        topic = f"kafka-mirror-probe-{name.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
        config = {"message.timestamp.type": "LogAppendTime"} if name == "log_append_time" else {}
        try:
            admin.create_topics([NewTopic(topic, 1, cluster.replication_factor, config=config)], operation_timeout=10)[topic].result(timeout=15)
            created.append(topic)
            with contextlib.suppress(TimeoutError):  # the probe says what it finds
                wait_until(lambda: cluster.partitions(topic) is not None, 10, "the probe topic in metadata")
            values[name], reasons[name] = probe(cluster, topic)
        except Exception as exc:
            msg = exc.args[0] if exc.args else exc
            values[name], reasons[name] = False, f"probed: {type(exc).__name__}: {msg}"
    for name, (value, why) in declared.items():
        values[name], reasons[name] = value, why
    if created:
        try:
            admin.delete_topics(created, operation_timeout=5)
        except Exception:
            pass
    return Capabilities(lifecycle=lifecycle, reasons=reasons, **values)
