"""A bad line between the datacenters: 30 ms of latency and 1 % packet loss on the
replicator's link to the source cluster, then a bandwidth cap below the produce rate.

Only the replicator's traffic crosses the faulty link; the producer and the capture keep
clean connections, as in a real cross-datacenter setup where producers and consumers are
local to their cluster.

What it expects:

* latency + loss: nothing lost, order kept, and the added delay visible in the median
  (each fetch crosses the link twice: request and response, so p50 rises by at least
  2 × 30 ms);
* under capacity (bandwidth cap for a few seconds), then catch-up: nothing lost, latency
  grows while the cap holds, and after the cap is lifted the replicator catches up — the
  report's catch-up rate says how fast, and p99 is back under the SLO within RECOVERY_S.

Why: replication across regions lives with latency, loss and limited bandwidth; the
question is whether it stays correct and how far behind it falls.

Loss and bandwidth need root (iptables / tc on the loopback port of the link): the
scenarios skip with the reason otherwise.  Delay needs nothing.
"""

from __future__ import annotations

from pytest_kafka_mirror.faults import at, bandwidth, delay, heal, loss

RATE = 300
P99_SLO_MS = 2000
RECOVERY_S = 20


def test_latency_30ms_and_1pct_loss(mirror_topics, mirror_producer, mirror_verifier, mirror_faults):
    mirror_faults.require("link_loss")
    link = mirror_faults.source_link
    topics = mirror_topics(1, partitions=3)
    run = mirror_producer(topics, rate=RATE, duration=10, faults=[at(0, delay(link, 30)), at(0, loss(link, 1))])

    report = mirror_verifier(run)

    report.assert_ok()
    assert report.latency.p50_ms >= 60, f"the 30 ms link delay does not show: {report.summary()}"


def test_under_capacity_then_catch_up(mirror_topics, mirror_producer, mirror_verifier, mirror_faults):
    mirror_faults.require("link_bandwidth")
    link = mirror_faults.source_link
    topics = mirror_topics(1, partitions=3)
    size = 1000
    # 300 msg/s of 1000 B is 2.4 Mbit/s; cap at a third of that for 5 s.
    run = mirror_producer(topics, rate=RATE, duration=15, message_size=size,
                          faults=[at(3, bandwidth(link, 800)), at(8, heal(link))])

    report = mirror_verifier(run)

    report.assert_ok()
    assert report.catch_up_rate() is not None, report.summary()
    report.assert_recovers_within(RECOVERY_S, p99_ms=P99_SLO_MS)
