"""Connect status records read from a real (Tansu) broker, MM2's ``status()`` in start-up
errors, and ``stop()`` + ``start()`` of MM2 on the fake distribution (tests/fake_kafka.py)
and, with ``KAFKA_MIRROR_KAFKA_HOME``, on a real one."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from pytest_kafka_mirror.clusters.tansu import TansuCluster
from pytest_kafka_mirror.replicators import ReplicatorError, ReplicatorOptions, make_replicator
from pytest_kafka_mirror.replicators.connect_status import describe_status_topic, read_status_topic
from pytest_kafka_mirror.replicators.mm2 import MirrorMaker2, parse_properties
from tests.fake_kafka import calls, make_fake_kafka_home

pytestmark = pytest.mark.integration

TRACE = "org.apache.kafka.connect.errors.ConnectException: no route\n\tat X.run(X.java:1)"


def _status(state: str, trace: str | None = None, *, wrapped: bool = False) -> bytes:
    payload = {"state": state, "trace": trace, "worker_id": "source->target", "generation": 1}
    doc = {"schema": {"type": "struct", "fields": []}, "payload": payload} if wrapped else payload
    return json.dumps(doc).encode()


def _write(cluster: TansuCluster, topic: str, records: list[tuple[str, bytes | None]]) -> None:
    """Status records as Connect's producer writes them: string keys, the default partitioner."""
    from confluent_kafka import Producer

    p = Producer({**cluster.client_config(), "linger.ms": 0})
    for key, value in records:
        p.produce(topic, key=key.encode(), value=value)
    assert p.flush(10) == 0


def test_describe_a_status_topic_on_tansu(tansu_pair: tuple[TansuCluster, TansuCluster]) -> None:
    _, dst = tansu_pair
    topic = dst.create_topic(f"mm2-status.source.{uuid.uuid4().hex[:8]}.internal", 5)  # Connect's default: 5
    config = dst.client_config()
    assert describe_status_topic(config, topic) == f"no status records in {topic}"
    _write(dst, topic, [
        ("status-connector-MirrorSourceConnector", _status("UNASSIGNED")),
        ("status-task-MirrorSourceConnector-0", _status("UNASSIGNED")),
        ("status-connector-MirrorCheckpointConnector", _status("RUNNING", wrapped=True)),
        ("status-connector-MirrorSourceConnector", _status("RUNNING")),
        ("status-task-MirrorSourceConnector-0", _status("FAILED", TRACE)),
        ("status-task-MirrorSourceConnector-1", _status("RUNNING")),
        ("status-task-MirrorSourceConnector-2", _status("RUNNING")),
        ("status-task-MirrorSourceConnector-2", None),
        ("status-topic-km-a:connector-MirrorSourceConnector", b'{"topic": {"name": "km-a"}}'),
    ])
    assert len(read_status_topic(config, topic) or []) == 9
    assert describe_status_topic(config, topic) == (
        "MirrorSourceConnector RUNNING, task 0 FAILED: org.apache.kafka.connect.errors.ConnectException: no route, "
        "task 1 RUNNING; MirrorCheckpointConnector RUNNING, no tasks"
    )


def test_a_missing_topic_or_broker_is_said_not_raised(tansu_pair: tuple[TansuCluster, TansuCluster]) -> None:
    _, dst = tansu_pair
    topic = f"mm2-status.source.{uuid.uuid4().hex[:8]}.internal"
    assert describe_status_topic(dst.client_config(), topic).startswith(f"no topic {topic} ")
    assert topic not in dst.topics()  # reading did not create it
    text = describe_status_topic({"bootstrap.servers": "127.0.0.1:1"}, topic, timeout=1)
    assert text.startswith(f"cannot read {topic} from 127.0.0.1:1: ")


def _fake_mm2(tmp_path: Path, pair: tuple[TansuCluster, TansuCluster], **opts: object) -> MirrorMaker2:
    home = make_fake_kafka_home(tmp_path)
    options = ReplicatorOptions(topic_prefix=f"cs{uuid.uuid4().hex[:4]}", startup_timeout=60, **opts)  # type: ignore[arg-type]
    rep = make_replicator(f"mm2:{home}", pair[0], pair[1], tmp_path / "mm2", options)
    assert isinstance(rep, MirrorMaker2)
    return rep


def test_mm2_status_reads_its_own_status_topic(tmp_path: Path, tansu_pair: tuple[TansuCluster, TansuCluster]) -> None:
    rep = _fake_mm2(tmp_path, tansu_pair)
    head = f"MirrorMaker 2's Connect status ({rep.status_topic}): "
    assert rep.status().startswith(head + f"no topic {rep.status_topic} ")  # never started: no Connect worker yet
    tansu_pair[1].create_topic(rep.status_topic, 5)
    _write(tansu_pair[1], rep.status_topic, [("status-connector-MirrorSourceConnector", _status("RUNNING")),
                                             ("status-task-MirrorSourceConnector-0", _status("RUNNING"))])
    assert rep.status() == head + "MirrorSourceConnector RUNNING, task 0 RUNNING"


def test_a_start_that_does_not_copy_quotes_the_connect_status(
    tmp_path: Path, tansu_pair: tuple[TansuCluster, TansuCluster]
) -> None:
    # the fake MM2 (the reference mirror) copies nothing that its topic filter leaves out, the probe included
    rep = _fake_mm2(tmp_path, tansu_pair, properties=(("source->target.topics", "^elsewhere-.*"),))
    rep.startup_timeout = 6
    with pytest.raises(ReplicatorError) as info:
        rep.start()
    assert f"MirrorMaker 2's Connect status ({rep.status_topic}): no topic {rep.status_topic}" in str(info.value)
    assert not rep.running


def test_mm2_stop_then_start_resumes_the_same_instance(
    tmp_path: Path, tansu_pair: tuple[TansuCluster, TansuCluster]
) -> None:
    rep = _fake_mm2(tmp_path, tansu_pair)
    try:
        rep.start()
        first = rep.properties_path.read_text()
        rep.stop()  # SIGTERM, returns once the process has exited
        assert not rep.running
        rep.start()  # returns once a probe record crossed over again
        assert rep.properties_path.read_text() == first
        assert parse_properties(first)["target.group.id"] == f"source-mm2-{rep.instance}"
    finally:
        rep.stop()
    assert len(calls(Path(rep.home or ""))) == 2 and rep.starts == 2


def test_real_mm2_restarts_after_sigterm(tmp_path: Path, tansu_pair: tuple[TansuCluster, TansuCluster]) -> None:
    """Issue 12 item 4 with a real MirrorMaker 2: SIGTERM + start copies again, and its
    Connect status says RUNNING."""
    home = os.environ.get("KAFKA_MIRROR_KAFKA_HOME")
    if not home:
        pytest.skip("KAFKA_MIRROR_KAFKA_HOME is not set: no Apache Kafka distribution to run (none can be installed here)")
    rep = make_replicator(f"mm2:{home}", *tansu_pair, tmp_path / "mm2",
                          ReplicatorOptions(topic_prefix=f"cs{uuid.uuid4().hex[:4]}"))
    try:
        rep.start()
        assert "MirrorSourceConnector RUNNING" in rep.status()  # type: ignore[attr-defined]
        rep.stop()
        rep.start()
        assert "MirrorSourceConnector RUNNING" in rep.status()  # type: ignore[attr-defined]
    finally:
        rep.stop()
