"""A MirrorMaker 2 cluster of several nodes: one node SIGKILLed mid-stream, then a rolling restart.

Dedicated MM2 runs as a Connect cluster; from Kafka 3.5 (KIP-710) several ``connect-mirror-maker``
processes with the same mm2.properties share the work, when each has the internal REST server
(``dedicated.mode.enable.internal.rest=true``, ``listeners=http://127.0.0.1:0``): a follower
forwards the task configs it computes to the leader through it, so a topic discovered on a
follower is copied at all.  Kafka's ``DedicatedMirrorIntegrationTest.testMultiNodeCluster``
checks that topics are copied by a three-node cluster, then after a rolling restart.

What it expects, NODES nodes (node 0 the test's own replicator, the others from
``MirrorMaker2.node``), topics created after the nodes joined (each discovery reconfigures
the tasks through the leader), records flowing at RATE msg/s per topic throughout:

* at KILL_AT node 0 (the first to join: most likely the leader) is SIGKILLed.  Its tasks are
  lost to the group until the coordinator drops it (the worker's ``session.timeout.ms``, 10 s)
  and the survivors reassign them (``scheduled.rebalance.max.delay.ms``: Connect's default 5
  minutes; REASSIGN_DELAY_MS here).  Copying resumed when a record sent after the kill to
  every partition of a sentinel topic (TASKS partitions, so one on each source task: MM2 deals
  a topic's partitions round-robin over its tasks) is on the target: the figure
  ``multi_node_resume_s``.  Node 0 is started again.
* then a rolling restart: each node in turn stopped (SIGTERM) and started, the next one only
  once the restarted node runs a connector or task again (its log says so: every node has
  the same Connect worker id, ``source->target``, so the status topic cannot tell them apart).
* nothing lost, every lane in order; duplicates only from the kill, at most the records of
  one offset commit interval (``multi_node_duplicates_bound``: RATE x topics x the target
  herder's ``offset.flush.interval.ms``); a graceful stop commits first.

What it does not prove: the forwarding itself.  Where the source connector runs (leader or
follower) when a topic is discovered is up to the group; measured with 4.3.1, the same run
without the internal REST server passed too (copying resumed 10.3 s after the kill, 136
duplicates), so a release that broke the forwarding may pass here.

Why: production MM2 runs on several nodes for availability.  A node dying must not stop the
copy for longer than the group needs to notice (the default 5-minute delay surprises), nor
lose records; a rolling restart (config change, upgrade) must not either.

Skips: other replicators than MM2 (no nodes); MM2 before 3.5 (no internal REST: followers
cannot hand task configs to the leader).  ``nightly``: it needs an MM2 cluster of its own,
three JVMs with 320 MB heaps on a 2-core machine (the nodes beyond the first one).
"""

from __future__ import annotations

import re
import time
import uuid

import pytest

from pytest_kafka_mirror.faults import action, at, start
from pytest_kafka_mirror.replicators import duplicates_bound

NODES = 3
RATE = 150  # messages/s per topic
TOPICS = 2
TASKS = 4  # MM2's tasks.max as the plugin renders it: the sentinel topic's partitions
KILL_AT = 5
REASSIGN_DELAY_MS = 3000
RESUME_TIMEOUT_S = 120
NODE_HEAP = "-Xms64M -Xmx320M"
MULTI_NODE = {
    "dedicated.mode.enable.internal.rest": "true",
    "listeners": "http://127.0.0.1:0",  # every node and herder its own port
    **{f"{alias}.scheduled.rebalance.max.delay.ms": str(REASSIGN_DELAY_MS) for alias in ("source", "target")},
}


@pytest.fixture
def mm2_nodes(mirror_env, tmp_path):
    """``add(n)``: start n more nodes of the test's MM2 (each start waits until it copies);
    every node started here is stopped at teardown."""
    nodes = []

    def add(n: int) -> list:
        for i in range(1, n + 1):
            node = mirror_env.replicator.node(tmp_path / f"node-{len(nodes) + 1}", heap=NODE_HEAP)
            nodes.append(node)
            node.start()
        return nodes

    try:
        yield add
    finally:
        for node in reversed(nodes):
            node.stop()


def _working(node, timeout: float) -> float:
    """Seconds until ``node``'s log of this start says it runs a connector or task of its own
    (every node has the same Connect worker id, so the status topic cannot tell them apart)."""
    t0 = time.monotonic()
    path = getattr(node.runner, "log_path", None)  # the whole log of this start; a container's: its tail

    def log() -> str:
        return path.read_text(errors="replace") if path is not None and path.exists() else node.logs(5000)

    while not re.search(r"Starting (task|connector) Mirror", log()):
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"{node.label} started no connector or task of its own in {timeout:g} s "
                                 f"after its start; its log ends:\n{node.logs(30)}")
        time.sleep(0.5)
    return time.monotonic() - t0


def _copying_on_every_partition(source, target, topic: str, remote: str, partitions: int, timeout: float) -> float:
    """Send a fresh record to every partition of ``topic`` every 0.5 s until each partition
    has one on ``remote``; the seconds it took (AssertionError naming the partitions on timeout)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    token = uuid.uuid4().hex[:8].encode()
    t0 = time.monotonic()
    while target.partitions(remote) != partitions:  # MM2 creates it (and grows it) by itself
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"{remote} does not have {partitions} partitions after {timeout:g} s")
        time.sleep(0.25)
    consumer = Consumer({**target.client_config(), "group.id": f"km-sentinel-{token.decode()}",
                         "enable.auto.commit": False})
    producer = Producer({**source.client_config(), "linger.ms": 0})
    try:
        ends = []
        while len(ends) < partitions:  # a topic just created may have no leader yet
            try:
                ends.append(consumer.get_watermark_offsets(TopicPartition(remote, len(ends)), timeout=10)[1])
            except Exception:
                if time.monotonic() - t0 > timeout:
                    raise
                time.sleep(0.25)
        consumer.assign([TopicPartition(remote, p, ends[p]) for p in range(partitions)])
        seen: set[int] = set()
        next_send = 0.0
        while len(seen) < partitions:
            if time.monotonic() - t0 > timeout:
                raise AssertionError(f"{remote}: partitions {sorted(set(range(partitions)) - seen)} got no record "
                                     f"sent after the kill within {timeout:g} s")
            if time.monotonic() >= next_send:
                for p in set(range(partitions)) - seen:
                    producer.produce(topic, token, partition=p)
                producer.flush(5)
                next_send = time.monotonic() + 0.5
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None and msg.value() == token:
                seen.add(msg.partition())
        return time.monotonic() - t0
    finally:
        consumer.close()
        producer.flush(5)


@pytest.mark.nightly
@pytest.mark.kafka_mirror(replicator_properties=MULTI_NODE)
def test_multi_node_kill_and_rolling_restart(mirror_env, mirror_topics, mirror_producer, mirror_verifier, mm2_nodes):
    rep = mirror_env.replicator
    release = rep.release
    if rep.spec.startswith("mm2-connect:"):
        pytest.skip(f"several nodes of dedicated MirrorMaker 2; the nodes of {rep.spec} are its Connect workers "
                    "(workers=N in the spec)")
    if not rep.spec.startswith("mm2:"):
        pytest.skip(f"several nodes of one replicator: MirrorMaker 2's dedicated mode, not {rep.spec}")
    if release is not None and (release.version or (0,)) < (3, 5):
        pytest.skip(f"multi-node dedicated MirrorMaker 2: Kafka 3.5 or later (KIP-710 internal REST), not {rep.spec}")
    nodes = [rep, *mm2_nodes(NODES - 1)]
    topics = mirror_topics(TOPICS, partitions=3)
    [sentinel] = mirror_topics(1, partitions=TASKS)
    resumed: list[float] = []
    rejoined: list[float] = []

    def kill_and_wait() -> None:  # the kill, then until every source task copies again
        rep.kill()
        resumed.append(_copying_on_every_partition(mirror_env.source, mirror_env.target, sentinel,
                                                   rep.target_topic(sentinel), TASKS, RESUME_TIMEOUT_S))

    def rolling_restart() -> None:
        for node in nodes:
            node.stop()
            node.start()  # returns once its probe record crossed: the cluster copies (maybe through the others)
            rejoined.append(_working(node, RESUME_TIMEOUT_S))  # this node runs a connector or task again

    run = mirror_producer.new_run(topics)
    _copying_on_every_partition(mirror_env.source, mirror_env.target, sentinel, rep.target_topic(sentinel), TASKS,
                                RESUME_TIMEOUT_S)  # the sentinel is mirrored before the clock starts
    duration = KILL_AT + 3 * (rep.startup_seconds or 10.0) + NODES * 2 * (rep.startup_seconds or 10.0)
    mirror_producer.produce(run, rate=RATE, duration=duration, faults=[
        at(KILL_AT, action(f"SIGKILL node 0 of {NODES}, until every task copies again", kill_and_wait, kind="outage")),
        at(KILL_AT + 1, start(rep)),
        at(KILL_AT + 2, action(f"rolling restart of {NODES} nodes", rolling_restart, kind="fault")),
    ])
    assert not run.fault_errors(), f"faults failed: {[(m.label, m.error) for m in run.fault_errors()]}"
    bound = duplicates_bound(rep, rate=RATE, topics=TOPICS)
    run.record_figure("multi_node_resume_s", resumed[0] if resumed else None,
                      f"node 0 of {NODES} SIGKILLed -> a record of every sentinel partition copied "
                      f"(scheduled.rebalance.max.delay.ms={REASSIGN_DELAY_MS})")
    run.record_figure("multi_node_duplicates_bound", bound.records, bound.how)

    report = mirror_verifier(run)

    report.assert_ok(allow_duplicates=True)  # no loss, every lane in order; a graceful stop must commit
    assert report.duplicated <= bound.records, bound.exceeded(
        report.duplicated, f"after one SIGKILL and a rolling restart of {NODES} MM2 nodes")
    print(f"{NODES} nodes: copying resumed {resumed[0]:.2f} s after the kill; each restarted node ran work again "
          f"{', '.join(f'{s:.1f}' for s in rejoined)} s after its start; {report.duplicated} duplicates "
          f"(bound {bound.records}); "
          f"markers {[(m['label'], m['took']) for m in report.markers]}")
