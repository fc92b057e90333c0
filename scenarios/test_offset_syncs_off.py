"""Replication without offset syncs: records copied, no offset sync written.

MirrorMaker 2 writes an offset sync (source offset -> target offset) every
``offset.lag.max`` records and at every offset flush, for its checkpoints.  A team that
does not fail consumers over can turn that off: ``emit.offset-syncs.enabled=false``
(Kafka 3.9+, KIP-1031; Kafka's ``testReplicationWithoutOffsetSyncWillNotCreateOffsetSyncsTopic``).
MM2 then runs no checkpoint connector (its validation refuses one without syncs).

What it expects: the records are copied as usual (no loss, no duplicate, in order), and
the offset-syncs topic holds no sync of the test's topic.  (The topic itself may exist:
other replicators of the session share the source cluster and write theirs there.)

Why: the syncs are a write per hundred records on the source cluster, which a read-only
or a cost-sensitive source may not allow; a release that ignores the setting writes them
anyway.
"""

from __future__ import annotations

import pytest

from pytest_kafka_mirror.verify.failover.syncs import read_offset_syncs

RATE = 300
OFF = {"emit.offset-syncs.enabled": "false"}


@pytest.mark.nightly  # a replicator of its own (on real Kafka a second MM2) for one setting
@pytest.mark.kafka_mirror(replicator_properties=OFF)
def test_replication_without_offset_syncs(mirror_env, mirror_topics, mirror_producer, mirror_verifier):
    rep = mirror_env.replicator
    settings = rep.checkpoints
    release = rep.release
    if settings is None:
        pytest.skip(f"{rep.spec}: no MirrorMaker 2-style offset syncs to turn off")
    if release is not None and (release.version or (0,)) < (3, 9):
        pytest.skip(f"emit.offset-syncs.enabled: MirrorMaker 2 of Kafka 3.9 or later, not {rep.spec}")
    [topic] = mirror_topics(1, partitions=2)
    run = mirror_producer(topic, rate=RATE, duration=4)

    report = mirror_verifier(run)

    report.assert_ok()
    where = mirror_env.target if settings.syncs_location == "target" else mirror_env.source
    syncs, _ = read_offset_syncs(where.bootstrap_servers, settings.offset_syncs_topic)
    ours = [s for s in syncs or [] if s.topic == topic]
    assert not ours, f"{len(ours)} offset syncs of {topic} in {settings.offset_syncs_topic}: {ours[:5]}"
