"""Exactly-once MirrorMaker 2: a crash mid-stream leaves no duplicate on the target.

MirrorMaker 2 (Kafka 3.5+, KIP-618 in its Connect runtime) copies exactly once when the
target's worker has ``exactly.once.source.support=enabled``: each task writes its records
and its source offsets in one transaction, so after a SIGKILL the restarted task resumes
exactly after what it committed, and a ``read_committed`` consumer (the capture) never
sees the aborted rest.  Dedicated MM2 needs its internal REST server for that; the plugin
renders it (``dedicated.mode.enable.internal.rest``, a listener per herder) whenever the
properties ask for exactly-once.

What it expects: SIGKILL at 4 s, start at 6 s, records flowing throughout:

* ``exactly_once``: nothing lost, nothing duplicated (``assert_no_duplicates``: every
  extra copy is named by lane and sequence), in order;
* ``at_least_once`` (the same run without it): nothing lost; the duplicates a crash
  causes are reported, not failed on (a kill right after an offset commit may cause none).

Runs on Apache Kafka brokers (transactions: a ``read_committed`` consumer must not see
aborted records, which Tansu shows) with an MM2 of 3.5 or later; other replicators skip
with the reason.

Why: "exactly-once" is why teams upgrade past 3.5 and the easiest thing to lose by a
misconfiguration; a release that silently falls back to at-least-once shows here.
"""

from __future__ import annotations

import pytest

from pytest_kafka_mirror.faults import at, kill, start

RATE = 300
EOS = {"target.exactly.once.source.support": "enabled"}


@pytest.mark.parametrize("mode", [
    pytest.param("exactly_once", marks=pytest.mark.kafka_mirror(replicator_properties=EOS)),
    pytest.param("at_least_once", marks=pytest.mark.nightly),  # the control: 160 s on real Kafka + MM2
])
def test_exactly_once_across_a_crash(mode, mirror_topics, mirror_producer, mirror_verifier, mirror_faults):
    rep = mirror_faults.replicator
    release = rep.release
    if not rep.spec.startswith(("mm2:", "mm2-connect:")) or release is None or (release.version or (0,)) < (3, 5):
        pytest.skip(f"exactly-once source support: MirrorMaker 2 of Kafka 3.5 or later, not {rep.spec}")
    mirror_faults.require("target.transactions")
    topics = mirror_topics(2, partitions=3)
    run = mirror_producer(topics, rate=RATE, duration=10 + 3 * (rep.startup_seconds or 0.0),
                          faults=[at(4, kill(rep)), at(6, start(rep))])

    report = mirror_verifier(run)

    if mode == "exactly_once":
        report.assert_exactly_once()  # names every missing and duplicated range
        report.assert_ok()  # and the rest: in order, no phantom, ...
    else:
        report.assert_ok(allow_duplicates=True)
