"""``kafka-mirror cleanup`` on real brokers: what sessions left of the plugin's prefix, listed,
deleted with ``--yes``, and a topic a consumer keeps recreating (as MirrorMaker 2's consumer,
still assigned to the deleted partitions, did on a user's clusters) deleted again or named
with the broker setting that brings it back.

On the embedded Tansu brokers the dry run, the deletion and the unreachable cluster; a
consumer assigned to a topic deleted under it crashes librdkafka 2.16 against Tansu
(SIGSEGV, seen here), so the topic that comes back is proven on Apache Kafka, whose broker
runs with ``auto.create.topics.enable=true`` for it (Kafka's default; the plugin's own
``kafka:`` clusters turn it off).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from pytest_kafka_mirror._kafkalog import with_logger
from pytest_kafka_mirror.clusters.base import Cluster
from pytest_kafka_mirror.clusters.tansu import TansuCluster
from pytest_kafka_mirror.processes.managed import child_env

pytestmark = pytest.mark.integration


def _prefix() -> str:
    """A prefix of this test's own: the pair is shared by the module, and cleanup deletes by pattern."""
    return f"kmc{uuid.uuid4().hex[:6]}"


def _topics(cluster: Cluster) -> set[str]:
    return set(cluster.admin().list_topics(timeout=10).topics)  # type: ignore[attr-defined]


def _commit_group(cluster: Cluster, group: str, topic: str) -> None:
    """A witness's consumer group: offsets committed without joining (assign + commit)."""
    c = Consumer(with_logger({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                              "enable.auto.commit": False}))
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    finally:
        c.close()


def _cleanup(*args: str) -> subprocess.CompletedProcess[str]:
    """The console script's code path, in a process of its own (its stderr is only what it prints), of
    this checkout (child_env)."""
    return subprocess.run([sys.executable, "-m", "pytest_kafka_mirror.cli", "cleanup", *args], capture_output=True,
                          text=True, timeout=120, env=child_env(None), check=False)


def test_cleanup_lists_then_deletes_with_yes_on_every_cluster(tansu_pair: tuple[TansuCluster, TansuCluster]) -> None:
    source, target = tansu_pair
    p = _prefix()
    for name in (f"{p}-master-t-1", f"{p}-master-t-2", f"other-{p}"):
        source.create_topic(name, 1)
    target.create_topic(f"primary.{p}-master-t-1", 1)
    _commit_group(source, f"{p}-master-t-x-end", f"{p}-master-t-1")
    given = ["--bootstrap", source.bootstrap_servers, "--bootstrap", target.bootstrap_servers, "--topic-prefix", p]

    dry = _cleanup(*given)
    assert (dry.returncode, dry.stderr) == (0, "")
    assert dry.stdout.splitlines() == [
        f"{source.bootstrap_servers}: 2 topic(s) and 1 consumer group(s) of prefix {p}:",
        f"  topic {p}-master-t-1", f"  topic {p}-master-t-2", f"  group {p}-master-t-x-end",
        f"{target.bootstrap_servers}: 1 topic(s) and 0 consumer group(s) of prefix {p}:",
        f"  topic primary.{p}-master-t-1",
        "nothing deleted; --yes deletes them",
    ]
    assert {f"{p}-master-t-1", f"{p}-master-t-2"} <= _topics(source) and f"primary.{p}-master-t-1" in _topics(target)

    t0 = time.monotonic()
    done = _cleanup(*given, "--yes")
    print(f"cleanup --yes took {time.monotonic() - t0:.1f} s")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[-3:] == [
        f"deleted 2 topic(s) from {source.bootstrap_servers}",
        f"deleted 1 consumer group(s) from {source.bootstrap_servers}",
        f"deleted 1 topic(s) from {target.bootstrap_servers}",
    ]
    assert {t for t in _topics(source) | _topics(target) if p in t} == {f"other-{p}"}  # not the prefix's: kept
    again = _cleanup(*given, "--yes")
    assert (again.returncode, again.stdout.splitlines()) == (0, [
        f"{source.bootstrap_servers}: nothing of prefix {p}", f"{target.bootstrap_servers}: nothing of prefix {p}"])


def test_cleanup_with_one_cluster_unreachable_deletes_nothing(tansu_pair: tuple[TansuCluster, TansuCluster]) -> None:
    source, _ = tansu_pair
    p = _prefix()
    source.create_topic(f"{p}-master-t-1", 1)
    done = _cleanup("--bootstrap", source.bootstrap_servers, "--bootstrap", "127.0.0.1:1", "--topic-prefix", p,
                    "--connect-timeout", "1", "--yes")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr and "rdkafka" not in done.stderr
    assert done.stderr.startswith("kafka-mirror cleanup: cluster: no answer from bootstrap servers 127.0.0.1:1 "
                                  "within 1 s")
    assert f"{p}-master-t-1" in _topics(source)
    source.admin().delete_topics([f"{p}-master-t-1"], operation_timeout=10)


# -- Apache Kafka with auto.create.topics.enable=true, a consumer that keeps polling -------------------------


@pytest.fixture
def auto_creating_kafka(tmp_path: Path) -> Iterator[Cluster]:
    """One Apache Kafka broker that auto-creates topics, as a user's cluster does by default."""
    from pytest_kafka_mirror.clusters.kafka_home import KafkaCluster
    from tests.kafka import KAFKA_VERSION, release_or_skip

    cluster = KafkaCluster("yours", release_or_skip(KAFKA_VERSION), tmp_path,
                           server_properties={"auto.create.topics.enable": "true"})
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def test_a_topic_a_consumer_keeps_recreating_is_named_then_removed_once_it_stops(
        auto_creating_kafka: Cluster) -> None:
    kafka = auto_creating_kafka
    polled, kept = "km-master-polled-1", "km-master-idle-1"
    for name in (polled, kept):
        kafka.create_topic(name, 2)
    stop, asked = threading.Event(), threading.Event()

    def consume() -> None:  # MM2's consumer: assigned to the partitions, polling, allowed to create them
        c = Consumer(with_logger({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "like-mm2s-consumer",
                                  "allow.auto.create.topics": True, "enable.auto.commit": False}))
        c.assign([TopicPartition(polled, p, 0) for p in range(2)])
        try:
            while not stop.is_set():
                c.poll(0.2)
                asked.set()
        finally:
            c.close()

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    try:
        assert asked.wait(30)
        t0 = time.monotonic()
        kept_coming = _cleanup("--bootstrap", kafka.bootstrap_servers, "--yes")
        print(f"cleanup --yes with the consumer polling took {time.monotonic() - t0:.1f} s")
    finally:
        stop.set()
        consumer.join(30)
    assert kept_coming.stderr == ""
    assert kept_coming.returncode == 1, kept_coming.stdout
    where = kafka.bootstrap_servers
    assert kept_coming.stdout.splitlines()[-2:] == [
        f"deleted 2 topic(s) from {where} (1 of them again after they came back)",
        (f"1 topic(s) came back after deletion: auto.create.topics.enable=true on {where} (a consumer still assigned "
         f"to them recreates them; stop the replicator's flow or set allow.auto.create.topics=false on its consumer): "
         f"{polled}"),
    ]
    assert kept not in _topics(kafka) and polled in _topics(kafka)  # it did come back, the idle one did not

    t0 = time.monotonic()
    after = _cleanup("--bootstrap", kafka.bootstrap_servers, "--yes")
    print(f"cleanup --yes after the consumer stopped took {time.monotonic() - t0:.1f} s")
    assert (after.returncode, after.stderr) == (0, "")
    assert after.stdout.splitlines()[-1] == f"deleted 1 topic(s) from {where}"
    assert not {t for t in _topics(kafka) if t.startswith("km-")}
