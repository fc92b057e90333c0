"""Compacted topics: the latest value of every key arrives.

Once its log cleaner ran, a topic with ``cleanup.policy=compact`` keeps only the latest
record of each key (and those of its active segment): a replicator that reads it late
copies a log with offset gaps, and the consumers of the remote topic still need the
latest value of every key.  Here each lane of the producer is a key (its record key is
the lane number): 40 keys, some 30 values each.  The run declares the topic compacted
(``compacted=[topic]``), so the verifier expects the latest acknowledged record of every
lane (``latest_missing`` 0), counts the older ones that did not arrive as
``compacted_away`` (not lost), and checks order (no lower sequence after a higher one in a
target partition), duplicates, phantoms and corruption as for any topic.

* ``test_compacted_topic``: the replicator copies the topic as it is written.  Expected:
  every key's latest value arrives, in order, once; the remote topic is compacted too
  (MirrorMaker 2 creates it with the source topic's configs, ``cleanup.policy`` among
  them, and so does the reference mirror).  Runs on every broker: one without a log
  cleaner keeps every record, and nothing is compacted away.
* ``test_compacted_backlog``: once the replicator copies the topic (a warm-up record of
  each partition crossed it), it is paused (SIGSTOP) while the records are produced, and the source's log cleaner compacts the topic (segments roll every 100 ms,
  ``min.cleanable.dirty.ratio`` 0.01; the private source's ``log.cleaner.backoff.ms`` set
  to 0.5 s, from 15 s); then the replicator resumes and copies a compacted backlog, offsets
  with gaps.  Expected: the latest value of every key arrives, in order; what the cleaner
  removed is ``compacted_away``, at least the figure ``compacted_before_copy`` (how many of
  ours the source had removed when the replicator resumed).  Needs a source with a log
  cleaner (Tansu has none: it skips, with the reason) and a private environment.

Why: compacted topics hold state (Kafka Streams changelogs, CDC tables, ``_schemas``).
On the target what matters is the latest value of every key; a replicator that trips
over offset gaps, or a remote topic created without the compact policy, loses it.
"""

from __future__ import annotations

import contextlib
import time
import uuid

import pytest

from pytest_kafka_mirror import explain
from pytest_kafka_mirror.processes.managed import wait_until

KEYS, PARTITIONS = 40, 2
RATE, DURATION = 400, 3  # some 30 values per key
COMPACT = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"}
CLEANER_BACKOFF_MS = "500"
COMPACT_TIMEOUT_S = 30
SETTLED_S = 1.0  # the cleaner removed nothing more for this long (it looks every 0.5 s)
CONFIG_TIMEOUT_S = 30


def _topic_configs(cluster, topic: str) -> dict[str, str]:
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = cluster.admin().describe_configs([resource])[resource].result(timeout=15)
    return {name: e.value for name, e in entries.items() if e.value is not None}


def _remote_policy(mirror_env, topic: str) -> str | None:
    """The remote topic's cleanup.policy once it is ``compact`` (or what it has after CONFIG_TIMEOUT_S)."""
    remote = mirror_env.replicator.target_topic(topic)
    policy: list[str | None] = [None]

    def compact() -> bool:
        policy[0] = _topic_configs(mirror_env.target, remote).get("cleanup.policy")
        return policy[0] == "compact"

    with contextlib.suppress(TimeoutError):  # then what it has
        wait_until(compact, CONFIG_TIMEOUT_S, f"cleanup.policy=compact on {remote}", interval=0.5)
    return policy[0]


def _check_keys(report, run) -> None:
    """Every lane is a key of the compacted topic, with several values acknowledged."""
    lanes = [s for s in report.lanes if s.expected]
    assert len(lanes) == KEYS and all(s.compacted for s in lanes), report.summary()
    assert min(s.expected for s in lanes) >= 5, f"too few values per key to compact: {report.summary()}"


@pytest.mark.kafka_mirror_topics(1, partitions=PARTITIONS, config=COMPACT)
def test_compacted_topic(mirror_env, mirror_topics, mirror_producer, mirror_verifier):
    [topic] = mirror_topics(1, partitions=PARTITIONS, config=COMPACT)
    run = mirror_producer.new_run([topic], lanes=KEYS, compacted=[topic])
    mirror_producer.produce(run, rate=RATE, duration=DURATION)
    source_policy = _topic_configs(mirror_env.source, topic).get("cleanup.policy")
    remote_policy = _remote_policy(mirror_env, topic) if source_policy == "compact" else None

    report = mirror_verifier(run)

    report.assert_ok()
    _check_keys(report, run)
    rep = mirror_env.replicator
    if source_policy == "compact" and not rep.no_config_sync:
        assert remote_policy == "compact", (
            f"{rep.target_topic(topic)} has cleanup.policy={remote_policy!r} after {CONFIG_TIMEOUT_S} s; the "
            f"source topic has compact: its remote topic keeps every old value (and consumers of it see them); "
            f"{explain(rep, 'config sync')}")


def _set_cleaner_backoff(cluster, ms: str) -> str:
    """Set ``log.cleaner.backoff.ms`` on every broker (a dynamic broker config: the cleaner
    threads restart with it); what happened, in words.  (The cluster-wide default, resource
    name "", is refused by the client: "Invalid ConfigResource".)"""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    admin = cluster.admin()
    try:
        brokers = sorted(admin.list_topics(timeout=10).brokers)
        resources = [ConfigResource(ConfigResource.Type.BROKER, str(b), incremental_configs=[
            ConfigEntry("log.cleaner.backoff.ms", ms, incremental_operation=AlterConfigOpType.SET)]) for b in brokers]
        for future in admin.incremental_alter_configs(resources).values():
            future.result(timeout=15)
    except Exception as exc:  # noqa: BLE001 - the cleaner then wakes every 15 s: slower, still within the wait
        return f"log.cleaner.backoff.ms not set ({type(exc).__name__}: {exc})"
    return f"log.cleaner.backoff.ms={ms} on broker {', '.join(map(str, brokers))}"


def _ours_on_source(cluster, topic: str, partitions: int) -> tuple[int, int]:
    """Records of ours (not warm-up records) the source topic holds now, and its offsets
    (high - low watermark, over its partitions: more than its records once compacted)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    from pytest_kafka_mirror.produce.records import WARMUP_KEY

    consumer = Consumer({**cluster.client_config(), "group.id": f"kafka-mirror-compacted-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        ends, start, offsets = {}, [], 0
        for p in range(partitions):
            lo, hi = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            offsets += hi - lo
            if hi > lo:
                ends[p] = hi
                start.append(TopicPartition(topic, p, lo))
        consumer.assign(start)
        ours, deadline = 0, time.monotonic() + 30
        while ends and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        ends.pop(m.partition(), None)
                    continue
                ours += m.key() != WARMUP_KEY
                if m.offset() >= ends.get(m.partition(), 0) - 1:
                    ends.pop(m.partition(), None)
        assert not ends, f"could not read partitions {sorted(ends)} of {topic} to their end in 30 s"
        return ours, offsets
    finally:
        consumer.close()


def _await_compaction(cluster, topic: str, acked: int) -> tuple[int, str]:
    """Records of ours the source's cleaner removed, once it removed some and then no more
    for SETTLED_S (0 after COMPACT_TIMEOUT_S), and what the source held then, in words."""
    t0 = time.monotonic()
    held, since = acked, t0
    while time.monotonic() - t0 < COMPACT_TIMEOUT_S:
        ours, offsets = _ours_on_source(cluster, topic, PARTITIONS)
        if ours != held:
            held, since = ours, time.monotonic()
        elif held < acked and time.monotonic() - since >= SETTLED_S:
            break
        time.sleep(0.25)
    return acked - held, (f"{time.monotonic() - t0:.1f} s after production ended the source held {held} of them "
                          f"over {offsets} offsets")


@pytest.mark.nightly  # a private environment, a paused replicator and the log cleaner: 90-160 s on real Kafka
def test_compacted_backlog(mirror_env, mirror_faults, mirror_topics, mirror_producer, mirror_verifier):
    mirror_faults.require("source.log_compaction")
    rep = mirror_faults.replicator
    backoff = _set_cleaner_backoff(mirror_env.source, CLEANER_BACKOFF_MS)  # a private source: this test's alone
    [topic] = mirror_topics(1, partitions=PARTITIONS, config=COMPACT)
    run = mirror_producer.new_run([topic], lanes=KEYS, compacted=[topic])
    run.await_ready([topic])  # the replicator copies the topic: paused now, it has copied none of the records
    rep.pause()
    paused = time.monotonic()
    try:
        manifest = mirror_producer.produce(run, rate=RATE, duration=DURATION, wait_for_target=False)
        acked = sum(lane.acked_count for lane in manifest.lanes)
        removed, held = _await_compaction(mirror_env.source, topic, acked)
    finally:
        rep.resume()
    run.record_figure("compacted_before_copy", removed, f"of {acked} records of {topic}: {held}; the replicator "
                                                        f"resumed after {time.monotonic() - paused:.1f} s ({backoff})")
    assert removed > 0, (f"the source did not compact {topic} in {COMPACT_TIMEOUT_S} s ({backoff}): "
                         f"{acked} records of ours still there")

    remote_policy = None if rep.no_config_sync else _remote_policy(mirror_env, topic)

    report = mirror_verifier(run)

    report.assert_ok()
    _check_keys(report, run)
    if not rep.no_config_sync:
        assert remote_policy == "compact", (f"{rep.target_topic(topic)} has cleanup.policy={remote_policy!r}: "
                                            f"{explain(rep, 'config sync')}")
    assert report.compacted_away >= removed, (
        f"{removed} records were gone from the source before the replicator resumed, yet only "
        f"{report.compacted_away} did not arrive: {report.summary()}")
