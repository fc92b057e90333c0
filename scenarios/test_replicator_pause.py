"""The replicator freezes (SIGSTOP) for longer than the latency SLO, then resumes (SIGCONT).

What it expects: nothing lost, nothing duplicated, order kept — a paused process keeps its
connections and its place.  Latency of the records produced during the pause exceeds the
SLO (that is the point: the report must show it), and after the resume the replicator
catches up and p99 comes back under the SLO within RECOVERY_S seconds.

Why: a long GC pause, a throttled container or a hung VM looks exactly like this.  The
report tells how long the replicator needs to catch up after one.
"""

from __future__ import annotations

from pytest_kafka_mirror.faults import at, pause, resume

RATE = 300
DURATION = 12
PAUSE_AT, RESUME_AT = 3, 7  # a 4 s pause
P99_SLO_MS = 1000
RECOVERY_S = 10


def test_paused_past_the_slo(mirror_topics, mirror_producer, mirror_verifier, mirror_faults):
    topics = mirror_topics(1, partitions=4)
    rep = mirror_faults.replicator
    run = mirror_producer(topics, rate=RATE, duration=DURATION,
                          faults=[at(PAUSE_AT, pause(rep)), at(RESUME_AT, resume(rep))])

    report = mirror_verifier(run)

    report.assert_ok()
    # The pause must be visible: the oldest record waited out the whole pause.
    assert report.latency.max_ms >= (RESUME_AT - PAUSE_AT) * 1000 * 0.8, report.summary()
    report.assert_recovers_within(RECOVERY_S, p99_ms=P99_SLO_MS)
