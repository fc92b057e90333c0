"""Where a replicator starts a topic it has no position for: the beginning, or its end.

MirrorMaker 2's source consumer starts a partition it has no committed position for at
its beginning (``auto.offset.reset=earliest``, MM2's own default).  With
``source.consumer.auto.offset.reset=latest`` (Kafka's ``testReplicateFromLatest``) it
starts at the partition's end when it is first assigned: what the topic held before is
never copied, which is what a team wants when it mirrors a topic with a long history
only from now on.

What it expects: the replicator is stopped; the topic is created and 300 records are
produced to it (by a producer outside the verified run: if any of them is copied, it
arrives as a phantom of an unknown producer, counted exactly); the replicator starts
again, discovers the topic and starts it at its end (readiness: warm-up records are sent
again every 2 s until one of each partition crossed); then a producer of the verified run
writes for 4 s.  Every record of that run arrives, in order, once; none of the 300 does.

Why: a release or a deployment that ignores the consumer override copies the whole
history at once (a burst the target was not sized for), and one that applies it to
partitions it *did* have a position for skips records.
"""

from __future__ import annotations

import pytest

from pytest_kafka_mirror import MirrorProducer, TopicLanes, explain

RATE = 200
BEFORE = 300
LATEST = {"source.consumer.auto.offset.reset": "latest"}


@pytest.mark.nightly  # a replicator of its own, stopped and started again (on real Kafka: ~90 s)
@pytest.mark.kafka_mirror(replicator_properties=LATEST)
def test_replicate_from_latest(mirror_env, mirror_topics, mirror_producer, mirror_verifier):
    # "latest" is the partition's end as the broker reports it (ListOffsets): Tansu's is
    # wrong after multi-record batches (measured: the reference mirror then started at
    # offset 1 and copied 298 of the 300)
    missing = mirror_env.source.capabilities().missing("accurate_watermarks")
    if missing:
        pytest.skip(f"the source cluster ({mirror_env.source.spec}) lacks {missing[0]}: a replicator's 'latest' "
                    "start is its end offset")
    rep = mirror_env.replicator
    rep.stop()
    [topic] = mirror_topics(1, partitions=2)
    before = MirrorProducer(mirror_env.source.bootstrap_servers).run([TopicLanes(topic, 2)], rate=None, count=BEFORE)
    assert before.stats["acked"] == BEFORE, before.stats
    rep.start()
    run = mirror_producer(topic, rate=RATE, duration=4)

    report = mirror_verifier(run)

    assert report.expected == RATE * 4, report.summary()
    assert not report.phantom and not report.foreign, (
        f"records produced before the replicator first assigned {topic} arrived ({report.phantom} phantoms, "
        f"{report.foreign} of an unknown producer): {explain(rep, 'start position')}")
    report.assert_ok()  # a record of the 300 would be a phantom (unknown producer)
