"""Record shapes: large messages, many partitions, and headers vs the in-body format.

What it expects:

* 1 MB records arrive whole (checksums intact), none lost.  The topic allows 4 MB
  records; a replicator whose producer caps requests at 1 MB (librdkafka's and the Java
  client's default ``message.max.bytes`` / ``max.request.size``) fails here.
* 64 partitions, one lane each: every lane complete and in order — replicators that
  batch per partition or assign partitions lazily show their tail latency here.
* headers vs in-body: with the headers format every record keeps its km.* headers; the
  in-body format carries the same metadata in the value and passes on replicators that
  drop headers (uReplicator, Brooklin, older MirrorMaker 1 builds).

Why: default-size steady traffic hides size limits and per-partition overheads.
"""

from __future__ import annotations

import pytest

MB = 1024 * 1024


@pytest.mark.kafka_mirror_topics(1, partitions=2, config={"max.message.bytes": str(4 * MB)})
def test_large_messages_1mb(mirror_topics, mirror_producer, mirror_verifier):
    topics = mirror_topics(1, partitions=2, config={"max.message.bytes": str(4 * MB)})
    run = mirror_producer(topics, rate=10, duration=5, message_size=MB)

    report = mirror_verifier(run)

    report.assert_ok()
    assert report.expected == 50


@pytest.mark.kafka_mirror_topics(1, partitions=64)
def test_many_partitions(mirror_topics, mirror_producer, mirror_verifier):
    topics = mirror_topics(1, partitions=64)
    run = mirror_producer(topics, rate=640, duration=5)  # 10 msg/s per lane

    report = mirror_verifier(run)

    report.assert_ok()
    assert len(report.lanes) == 64


@pytest.mark.kafka_mirror_topics(1, partitions=3)
@pytest.mark.parametrize("record_format", ["headers", "body"])
def test_headers_preserved_or_in_body(mirror_topics, mirror_producer, mirror_verifier, record_format):
    topics = mirror_topics(1, partitions=3)
    run = mirror_producer(topics, rate=300, duration=4, format=record_format)

    report = mirror_verifier(run)

    report.assert_ok()  # includes assert_headers_intact(): fails when the replicator drops headers
