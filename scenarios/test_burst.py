"""A burst: ten times the steady rate for a few seconds, then back.

What it expects: nothing lost, order kept, and the replicator absorbs the burst: p99 is
back under the SLO within RECOVERY_S seconds after the burst ends.

Why: traffic is never flat (batch jobs, replays, failovers upstream).  A replicator sized
for the average falls behind on a burst; the question is by how much and for how long.
"""

from __future__ import annotations

import pytest

RATE = 200
BURST = 10 * RATE
P99_SLO_MS = 2000
RECOVERY_S = 15


@pytest.mark.kafka_mirror_topics(1, partitions=4)
def test_burst_10x(mirror_topics, mirror_producer, mirror_verifier):
    topics = mirror_topics(1, partitions=4)
    # rate can be a profile: (seconds from start, messages/s) steps.
    profile = [(0, RATE), (4, BURST), (7, RATE)]
    run = mirror_producer(topics, rate=profile, duration=12)

    report = mirror_verifier(run)

    report.assert_ok()
    report.assert_recovers_within(RECOVERY_S, p99_ms=P99_SLO_MS, after=7)
