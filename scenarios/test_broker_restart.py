"""The target broker restarts mid-run.

What it expects: nothing lost (duplicates allowed: the replicator's in-flight produce
requests are retried), and p99 back under the SLO within RECOVERY_S seconds.

Why: rolling broker restarts are routine; a replicator must ride them out.

Needs a cluster that keeps its data across a restart and that the plugin controls.  The
embedded Tansu broker keeps data in memory, so a restart empties it: the scenario skips
there with that reason (run it with --kafka-mirror-target container:apache/kafka:... or
kafka-home:PATH).
"""

from __future__ import annotations

from pytest_kafka_mirror.faults import at, restart

RATE = 300
DURATION = 15
P99_SLO_MS = 2000
RECOVERY_S = 20


def test_target_broker_restart(mirror_topics, mirror_producer, mirror_verifier, mirror_faults):
    mirror_faults.require("target.lifecycle", "target.restart_keeps_data")
    topics = mirror_topics(1, partitions=3)
    run = mirror_producer(topics, rate=RATE, duration=DURATION, faults=[at(5, restart(mirror_faults.target))])

    report = mirror_verifier(run)

    report.assert_ok(allow_duplicates=True)
    report.assert_recovers_within(RECOVERY_S, p99_ms=P99_SLO_MS)
