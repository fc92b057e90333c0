"""The session's topics on clusters the plugin did not start: deleted at its end, exactly
those it created (docs/your-clusters.md), unless --kafka-mirror-keep-topics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from pytest_kafka_mirror.config import resolve_settings
from pytest_kafka_mirror.provisioning import delete_session_topics
from pytest_kafka_mirror.replicators.base import ReplicatorBase


class _Future:
    def __init__(self, error: KafkaError | None) -> None:
        self.error = error

    def result(self, timeout: float | None = None) -> None:
        if self.error is not None:
            raise KafkaException(self.error)


class _Cluster:
    created_topics: list[str] | None = None  # as KafkaAdminMixin: only bootstrap: clusters keep a list

    def __init__(self, servers: str, created: list[str] | None = None, missing: tuple[str, ...] = ()) -> None:
        self.bootstrap_servers = servers
        if created is not None:
            self.created_topics = created
        self.missing = missing
        self.deleted: list[str] = []

    def admin(self) -> _Cluster:
        return self

    def delete_topics(self, topics: list[str], operation_timeout: float) -> dict[str, Any]:
        self.deleted += topics
        return {t: _Future(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART) if t in self.missing else None) for t in topics}

    def delete_consumer_groups(self, groups: list[str], request_timeout: float) -> dict[str, Any]:
        self.deleted += groups
        return {g: _Future(KafkaError(KafkaError.GROUP_ID_NOT_FOUND) if g in self.missing else None) for g in groups}


class _Replicator(ReplicatorBase):
    probe_topic = "km-kafka-mirror-probe-1"

    def target_topic(self, topic: str) -> str:
        return f"primary.{topic}"


def test_exactly_the_created_topics_and_their_copies_are_deleted() -> None:
    source = _Cluster("a:1", ["km-master-t-1", "kafka-mirror-warmup"])
    target = _Cluster("b:1", missing=("primary.kafka-mirror-warmup",))
    said = delete_session_topics(source, target, _Replicator(), source_kind="bootstrap", target_kind="bootstrap")
    assert source.deleted == ["km-master-t-1", "kafka-mirror-warmup", "km-kafka-mirror-probe-1"]
    assert target.deleted == ["primary.km-master-t-1", "primary.kafka-mirror-warmup", "primary.km-kafka-mirror-probe-1"]
    # a copy that never existed is not counted, nor an error
    assert said == "deleted 3 test topic(s) from the source (a:1); deleted 2 test topic(s) from the target (b:1)"


def test_the_witness_groups_are_deleted_where_they_exist() -> None:
    source = _Cluster("a:1", ["km-master-t-1"])
    target = _Cluster("b:1", missing=("km-master-t-x-mid",))  # not synced there
    groups = ["km-master-t-x-mid", "km-master-t-x-end"]
    said = delete_session_topics(source, target, _Replicator(), source_kind="bootstrap", target_kind="bootstrap",
                                 groups=groups)
    assert source.deleted[-2:] == groups and target.deleted[-2:] == groups
    assert said == ("deleted 2 test topic(s) from the source (a:1); deleted 2 witness consumer group(s) from the "
                    "source; deleted 2 test topic(s) from the target (b:1); deleted 1 witness consumer group(s) "
                    "from the target")
    # a session without witnesses asks for no group deletion
    quiet = _Cluster("a:1", ["km-master-t-1"])
    delete_session_topics(quiet, _Cluster("b:1"), _Replicator(), source_kind="bootstrap", target_kind="tansu")
    assert quiet.deleted == ["km-master-t-1", "km-kafka-mirror-probe-1"]


def test_only_clusters_the_plugin_did_not_start_are_touched() -> None:
    source = _Cluster("a:1", ["km-master-t-1"])
    target = _Cluster("b:1")
    said = delete_session_topics(source, target, _Replicator(), source_kind="bootstrap", target_kind="kafka")
    assert target.deleted == [] and source.deleted == ["km-master-t-1", "km-kafka-mirror-probe-1"]
    assert "target" not in said


def test_a_failed_deletion_is_named() -> None:
    source = _Cluster("a:1", ["km-master-t-1"])
    source.missing = ()

    def refuse(topics: list[str], operation_timeout: float) -> dict[str, Any]:
        return {t: _Future(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)) for t in topics}

    source.delete_topics = refuse  # type: ignore[method-assign]
    said = delete_session_topics(source, _Cluster("b:1"), _Replicator(), source_kind="bootstrap", target_kind="tansu")
    assert said.startswith("deleted 0 test topic(s) from the source (a:1); could not delete 2: km-master-t-1 (")


@pytest.mark.parametrize(("given", "keep"), [({}, False), ({"kafka_mirror_keep_topics": "true"}, True)])
def test_keep_topics_setting(tmp_path: Path, given: dict[str, str], keep: bool) -> None:
    settings = resolve_settings({}, lambda k: given.get(k), {}, rootdir=tmp_path)
    assert settings.keep_topics is keep
    assert resolve_settings({"kafka_mirror_keep_topics": True}, lambda k: None, {}, rootdir=tmp_path).keep_topics


@pytest.mark.parametrize(("keep", "source_spec", "deleted"), [
    (False, "bootstrap:a:1", ["km-master-t-1", "km-kafka-mirror-probe-1"]),
    (True, "bootstrap:a:1", []),       # --kafka-mirror-keep-topics
    (False, "tansu", []),              # clusters the plugin started go away with their data
])
def test_the_session_end_deletes_unless_kept(tmp_path: Path, keep: bool, source_spec: str, deleted: list[str]) -> None:
    from pytest_kafka_mirror.plugin import _delete_session_topics
    from pytest_kafka_mirror.session import KafkaMirrorSession

    ini = {"kafka_mirror_source": source_spec, "kafka_mirror_keep_topics": str(keep).lower()}
    session = KafkaMirrorSession(resolve_settings({}, lambda k: ini.get(k), {}, rootdir=tmp_path))
    source = _Cluster("a:1", ["km-master-t-1"])
    _delete_session_topics(session, source, _Cluster("b:1"), _Replicator())  # type: ignore[arg-type]
    assert source.deleted == deleted
    assert session.closing_notes == (["deleted 2 test topic(s) from the source (a:1) (keep them with "
                                      "--kafka-mirror-keep-topics)"] if deleted else [])
