"""Topology changes mid-run: a new topic appears, an existing topic grows partitions.

What it expects:

* new topic: the replicator discovers it and mirrors it completely; the report gives the
  discovery time (topic created → a warm-up record of every partition on the target,
  before the topic's records start), asserted under DISCOVERY_S.  MirrorMaker 2 polls for new topics every
  ``refresh.topics.interval.seconds`` (default 600 s!): set it low or this fails.
* partition growth: records produced to the new partitions arrive too (the replicator must
  notice the partition count change and the target topic must grow): a producer of 2
  lanes, then the topic grows from 2 to 4 partitions, then a producer of 4 lanes.

Why: teams add topics and partitions without telling the replication owners.

Adding partitions needs a cluster that supports CreatePartitions: the embedded Tansu
broker does not, so that scenario skips there with the reason.
"""

from __future__ import annotations

import time

from pytest_kafka_mirror import explain
from pytest_kafka_mirror.faults import action, at

RATE = 200
DISCOVERY_S = 10


def test_new_topic_discovered_mid_run(mirror_topics, mirror_producer, mirror_verifier, mirror_faults):
    [old] = mirror_topics(1, partitions=2)
    [new] = mirror_topics(1, partitions=2, name="new", create=False)  # a name only, for now
    run = mirror_producer.new_run([old, new], partitions={new: 2})

    def create_and_produce() -> None:
        mirror_faults.source.create_topic(new, 2)
        # A second producer on the new topic, once the replicator copies it (readiness:
        # its discovery time is a figure of its own, not the latency of its records).
        run.produce_in_background(topics=[new], rate=RATE, duration=6)

    mirror_producer.produce(run, topics=[old], rate=RATE, duration=10,
                            faults=[at(3, action(f"create topic {new}", create_and_produce, kind="topology"))])

    report = mirror_verifier(run)

    report.assert_ok()
    discovery = report.discovery_seconds(new)
    assert discovery is not None and discovery <= DISCOVERY_S, (
        f"discovery of {new} took {discovery} s (limit {DISCOVERY_S} s): "
        f"{explain(mirror_faults.replicator, 'discovery')}")


def test_partition_growth_mid_run(mirror_topics, mirror_producer, mirror_verifier, mirror_faults):
    """The source topic grows from 2 to 4 partitions mid-run.

    Figure ``partition_growth_s``: the growth -> the remote topic grew and a warm-up
    record of every partition, new ones included, was copied (the readiness round of the
    second producer, which starts right after the growth).
    """
    mirror_faults.require("source.add_partitions", "target.add_partitions")
    [topic] = mirror_topics(1, partitions=2)
    run = mirror_producer.new_run([topic])
    mirror_producer.produce(run, rate=RATE, duration=4)  # a producer with 2 lanes, partitions 0-1
    grown_at_us = time.time_ns() // 1000
    mirror_faults.source.add_partitions(topic, 4)
    # A second producer with 4 lanes: lanes 2 and 3 use the new partitions.  Its readiness
    # round waits until the replicator copies them (grown on the target), so their
    # records' latency does not include the replicator noticing the growth.
    mirror_producer.produce(run, rate=RATE, duration=6, lanes=4)
    after = [r for r in run.readiness if r.topic == topic and r.started_us >= grown_at_us and r.ready_us]
    run.record_figure("partition_growth_s", (after[0].ready_us - grown_at_us) / 1e6 if after else None,
                      f"{topic}: 2 -> 4 partitions on the source -> a record of each of the 4 copied"
                      if after else "no readiness round after the growth completed")

    report = mirror_verifier(run)

    report.assert_ok()
    grown = {p for lane in report.lanes if lane.lane >= 2 for p in lane.partitions}
    assert grown == {2, 3}, f"lanes 2-3 arrived in target partitions {grown}: {report.summary()}"
    assert report.scenario["partition_growth_s"]["value"] is not None, report.scenario
