"""Steady state: a constant rate through a healthy replicator.

What it expects: every record the source acknowledged arrives on the target (no loss,
no unseen tail), in order within each lane, without duplicates, phantoms or corruption,
and the 99th percentile of end-to-end latency stays under the SLO.

Why: this is the baseline every other scenario is compared with.  If it fails, the
replicator (or its configuration) is broken before any fault is injected.

Copy and adapt: change RATE / DURATION / SIZE to your replicator's production load and
P99_SLO_MS to your SLO.
"""

from __future__ import annotations

import pytest

RATE = 500  # messages/s per topic
DURATION = 5  # seconds
SIZE = 512  # bytes per record, metadata included
P99_SLO_MS = 2000


@pytest.mark.upgrade_gate
@pytest.mark.kafka_mirror_topics(2, partitions=4)
@pytest.mark.parametrize("record_format", ["headers", "body"])
def test_steady_state(mirror_topics, mirror_producer, mirror_verifier, record_format):
    topics = mirror_topics(2, partitions=4)
    run = mirror_producer(topics, rate=RATE, duration=DURATION, format=record_format, message_size=SIZE)

    report = mirror_verifier(run)

    assert report.totals["expected"] == 2 * RATE * DURATION
    report.assert_ok(p99_ms=P99_SLO_MS)
