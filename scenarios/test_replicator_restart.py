"""Replicator restarts: a graceful stop (SIGTERM) and a crash (SIGKILL), each followed by a start.

What it expects:

* SIGTERM + start: nothing lost, nothing duplicated.  A graceful replicator flushes what it
  consumed and commits exactly where it stopped, so the new process resumes there.
* SIGKILL + start: nothing lost; duplicates allowed.  A crashed replicator resumes from
  its last committed position, so records copied after that commit are copied again —
  at-least-once, the contract every Kafka replicator offers without transactions.

Both must catch up: latency spikes during the outage, then p99 comes back under the SLO.

Why: upgrades restart the replicator (SIGTERM), nodes die (SIGKILL).  A replicator that
loses records on either, or duplicates on a clean stop, must not be rolled out.

Each test gets its own replicator (the ``mirror_faults`` fixture), so restarting it does
not disturb other tests.
"""

from __future__ import annotations

from pytest_kafka_mirror.faults import at, kill, start, terminate

RATE = 300  # messages/s per topic
DURATION = 12  # seconds
P99_SLO_MS = 2000
RECOVERY_S = 15  # seconds from the restart until p99 is back under the SLO


def test_sigterm_then_start(mirror_topics, mirror_producer, mirror_verifier, mirror_faults):
    topics = mirror_topics(2, partitions=3)
    rep = mirror_faults.replicator
    run = mirror_producer(topics, rate=RATE, duration=DURATION, faults=[at(4, terminate(rep)), at(6, start(rep))])

    report = mirror_verifier(run)

    report.assert_ok()  # no loss, no duplicates, in order
    report.assert_recovers_within(RECOVERY_S, p99_ms=P99_SLO_MS)


def test_sigkill_then_start(mirror_topics, mirror_producer, mirror_verifier, mirror_faults):
    topics = mirror_topics(2, partitions=3)
    rep = mirror_faults.replicator
    run = mirror_producer(topics, rate=RATE, duration=DURATION, faults=[at(4, kill(rep)), at(6, start(rep))])

    report = mirror_verifier(run)

    # Re-copied records arrive again after the restart: duplicates, and re-reads that are
    # "behind a higher sequence" of their lane are duplicates, not reorders.
    report.assert_ok(allow_duplicates=True)
    report.assert_recovers_within(RECOVERY_S, p99_ms=P99_SLO_MS)
