"""MirrorMaker 2's records, byte for byte against examples built by hand from the Java schemas.

``Checkpoint.java``: key ``group STRING, topic STRING, partition INT32``; value = header
``version INT16`` + ``upstreamOffset INT64, offset INT64, metadata STRING``.
``OffsetSync.java``: key ``topic STRING, partition INT32``; value ``upstreamOffset INT64,
offset INT64`` (no header).  ``Heartbeat.java``: key ``sourceClusterAlias STRING,
targetClusterAlias STRING``; value = header ``version INT16`` + ``timestamp INT64``.
STRING = INT16 length + UTF-8; all big-endian.
"""

from __future__ import annotations

import pytest

from pytest_kafka_mirror.replicators.mm2_records import (
    Checkpoint,
    Heartbeat,
    MM2Names,
    OffsetSync,
    RecordFormatError,
    translate,
)


def test_checkpoint_bytes() -> None:
    cp = Checkpoint("g1", "source.t", 2, upstream_offset=100, downstream_offset=42, metadata="m")
    assert cp.key() == b"\x00\x02g1" + b"\x00\x08source.t" + b"\x00\x00\x00\x02"
    assert cp.value() == (b"\x00\x00"  # version 0
                          + b"\x00\x00\x00\x00\x00\x00\x00\x64"  # upstreamOffset 100
                          + b"\x00\x00\x00\x00\x00\x00\x00\x2a"  # offset 42
                          + b"\x00\x01m")  # metadata "m"
    assert Checkpoint.decode(cp.key(), cp.value()) == cp


def test_offset_sync_bytes() -> None:
    sync = OffsetSync("t", 3, upstream_offset=1000, downstream_offset=998)
    assert sync.key() == b"\x00\x01t\x00\x00\x00\x03"
    assert sync.value() == bytes.fromhex("00000000000003e8" "00000000000003e6")
    assert OffsetSync.decode(sync.key(), sync.value()) == sync


def test_heartbeat_bytes() -> None:
    hb = Heartbeat("target", "source", 1_700_000_000_000)
    assert hb.key() == b"\x00\x06target\x00\x06source"
    assert hb.value() == bytes.fromhex("0000" "0000018bcfe56800")
    assert Heartbeat.decode(hb.key(), hb.value()) == hb


def test_strings_are_utf8_with_a_byte_length() -> None:
    cp = Checkpoint("grüppe", "t", 0, 0, 0, "")
    assert cp.key().startswith(b"\x00\x07gr\xc3\xbcppe")  # 7 bytes, 6 characters
    assert Checkpoint.decode(cp.key(), cp.value()).group == "grüppe"
    with pytest.raises(ValueError, match="32767"):
        Checkpoint("x" * 40000, "t", 0, 0, 0).key()


@pytest.mark.parametrize(("key", "value", "message"), [
    (None, b"\x00\x00", "without a key"),
    (b"\x00\x02g1\x00\x01t\x00\x00\x00\x00", b"\x00\x01" + bytes(18), "unknown version 1"),
    (b"\x00\x02g1\x00\x01t\x00\x00\x00\x00", b"\x00\x00" + bytes(10), "offset needs 8 bytes"),
    (b"\x00\x09g1", b"\x00\x00" + bytes(18), "group needs 9 bytes"),
    (b"\xff\xffg1", b"\x00\x00" + bytes(18), "group is null"),
])
def test_bad_checkpoint_records_say_what_is_wrong(key: bytes | None, value: bytes, message: str) -> None:
    with pytest.raises(RecordFormatError, match=message):
        Checkpoint.decode(key, value)


def test_internal_topic_names_follow_the_replication_policy() -> None:
    n = MM2Names()
    assert (n.checkpoints_topic, n.offset_syncs_topic, n.remote_heartbeats_topic) == (
        "source.checkpoints.internal", "mm2-offset-syncs.target.internal", "source.heartbeats")
    n = MM2Names("us-west", "us-east", separator="_")
    assert (n.checkpoints_topic, n.offset_syncs_topic, n.remote_heartbeats_topic) == (
        "us-west_checkpoints_internal", "mm2-offset-syncs_us-east_internal", "us-west_heartbeats")
    n = MM2Names(separator="_", internal_separator=False)  # replication.policy.internal.topic.separator.enabled=false
    assert (n.checkpoints_topic, n.remote_heartbeats_topic) == ("source.checkpoints.internal", "source_heartbeats")


def test_offset_syncs_on_the_target_are_named_after_the_source() -> None:
    """MM2's offsetSyncsTopic(): named after the cluster it is *not* on (Kafka's
    testOffsetSyncsTopicsOnTarget waits for mm2-offset-syncs.<source alias>.internal on the target)."""
    from pytest_kafka_mirror.replicators import MM2_DEFAULTS

    n = MM2Names("us-west", "us-east")
    assert (n.offset_syncs_topic_on("source"), n.offset_syncs_topic_on("target")) == (
        "mm2-offset-syncs.us-east.internal", "mm2-offset-syncs.us-west.internal")
    on_target, _ = MM2_DEFAULTS.with_properties({"offset-syncs.topic.location": "target"})
    assert (on_target.offset_syncs_topic, on_target.to_dict()["offset_syncs_topic"]) == (
        "mm2-offset-syncs.source.internal", "mm2-offset-syncs.source.internal")
    assert MM2_DEFAULTS.offset_syncs_topic == "mm2-offset-syncs.target.internal"


def test_translation_is_one_past_the_latest_sync_at_or_before() -> None:
    # apache/kafka OffsetSyncStoreTest.testOffsetTranslation, on a plain list of syncs
    syncs = [OffsetSync("t", 0, 100, 200)]
    assert translate(syncs, 150) == 201
    syncs.append(OffsetSync("t", 0, 150, 251))
    assert translate(syncs, 150) == 251
    assert translate(syncs, 5) == -1  # before every sync: too old to translate
    assert translate([], 5) is None
