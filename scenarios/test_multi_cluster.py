"""Several clusters and flows at once: active-active, fan-out, fan-in.

Each test has a private environment (its own clusters and replicator, ``source -> target``)
and grows it: ``mirror_env.add_cluster("third")`` starts a third cluster of the target's
kind, ``mirror_env.add_flow(SOURCE, TARGET)`` a second replicator of the one under test
between two of its clusters, and ``mirror_producer.for_flow(flow)`` produces on that flow.
Cluster roles are the replicators' cluster aliases, as MirrorMaker 2 names clusters:
under ``DefaultReplicationPolicy`` topic ``t`` of ``source`` is ``source.t`` on the target.

What each expects:

* ``test_active_active``: ``source -> target`` and ``target -> source`` at once, a producer
  on each side; each direction is verified (two verifications of one test: no loss, order,
  no duplicate, no phantom), and no record goes back: no topic named after two hops
  (``target.source.t``, ``source.target.t``) exists on either cluster.  Consumer groups of
  both sides (a witness mid-stream and one at the end on each) fail over through their own
  direction's checkpoints (Kafka's ``testReplication`` checks both): nothing skipped,
  translations as good as the offset syncs allow.  Every flow's topic
  filter matches the remote topics too (``^(?:ALIAS.)*PREFIX-.*``, asserted here): with the
  plain ``^PREFIX-.*`` the reverse flow would never consider ``source.t`` and the check
  would pass because of the filter, whatever the replicator does.  So it is the
  replicator's cycle detection that is tested (MM2's ``isCycle``: a topic whose source
  alias is the flow's target alias is never copied; the reference mirror models it).
  The ``identity`` variant skips: under ``IdentityReplicationPolicy`` MM2 cannot tell a
  copy from an original ("MirrorMaker is not able to prevent cycles when using this
  replication policy", its Javadoc; ``isCycle`` returns false when the upstream topic is
  the topic itself), and Kafka's own ``IdentityReplicationIntegrationTest`` replicates one way.
  Measured with MM2 4.3.1 both ways under it: 200 records grew to 223,455 copies in 16 s.
* ``test_fan_out``: ``source -> target`` and ``source -> third``; one producer run, captured
  on both targets (``also_capture``), two verifications of the same manifests.
* ``test_fan_in``: ``source -> target`` and ``third -> target``, one topic name ``t`` on both
  sources.  ``default``: the two copies land apart (``source.t``, ``third.t``), each verified.
  ``identity``: both land in ``t`` on the target: one run, producers on both sources, the
  lanes of both in one target topic (the aggregation a migration from the legacy
  MirrorMaker does).

Why: active-active pairs and regional aggregation are how MM2 is deployed; a release or a
setting that breaks alias naming or cycle detection copies records back and forth.

Timing: MM2 creates a remote topic seconds before it copies it, and each new topic costs
it a rebalance; every producer waits for readiness (a warm-up record per partition
through its own flow) before its schedule starts, and the cycle check first waits until
a record of a topic created after the runs has crossed each flow: proof that each scanned
its topics after the other direction's remote topic existed.
"""

from __future__ import annotations

import logging
import re

import pytest

from pytest_kafka_mirror import explain, witness

log = logging.getLogger(__name__)

RATE = 200  # messages/s per topic
DURATION = 4
POLICY = "org.apache.kafka.connect.mirror.{}ReplicationPolicy"
DEFAULT = {"replication.policy.class": POLICY.format("Default")}
IDENTITY = {"replication.policy.class": POLICY.format("Identity")}
#: why active-active under IdentityReplicationPolicy skips
IDENTITY_CYCLES = (
    "the policy keeps topic names, so MirrorMaker 2 cannot tell a copy from an original (isCycle() gives up when a "
    "topic's upstream topic is the topic itself; its Javadoc: 'MirrorMaker is not able to prevent cycles when using "
    "this replication policy') and the reference mirror models that; every record goes round for ever (measured "
    "with mm2:4.3.1 on kafka:4.3.1: 200 records in one single-partition topic became 223,455 in its log within "
    "16 s, ~15,000 more a second). Kafka's IdentityReplicationIntegrationTest replicates one way only")


def _no_flows(rep) -> str:
    """Why no further flow can be started with this replicator ('' when it can)."""
    if not rep.controllable:
        return f"{rep.spec} runs outside the plugin: it cannot start another flow between the test's clusters"
    return ""


def _no_cycle_detection(rep) -> str:
    """Why this replicator cannot run both ways on the same topics ('' when it can)."""
    if rep.detects_cycles:  # MM2 and the reference mirror under DefaultReplicationPolicy
        return ""
    settings = rep.effective_settings()
    if settings is not None:  # MM2, the reference mirror: the policy in effect
        return f"{rep.spec} under {settings.quote('replication.policy.class')}: {IDENTITY_CYCLES}"
    return f"{rep.spec} has no cycle detection (no cluster aliases in its topic names)"


def _scanned_since(factory, topics) -> None:
    """Block until a record of a topic created now has crossed ``factory``'s flow: its
    readiness round (a warm-up record of every partition, through that flow's replicator).

    Proof that the flow scanned its source's topics after ``topics`` (the other direction's
    remote topics) existed: a replicator finds new topics in a scan of all of them, and
    creates the remote topic of each one it takes in that scan, before copying any record
    (MM2's refreshTopicPartitions; the reference mirror's discovery does the same).  So once
    the new topic's record is across, a copy back of ``topics`` has had its chance: it would
    exist by now.  Waiting a fixed time instead proves nothing on a slow or loaded machine."""
    [fresh] = factory.topics(1, partitions=1)
    existing = set(factory.source.topics())
    assert set(topics) <= existing, f"{sorted(set(topics) - existing)} not on {factory.source.bootstrap_servers}"
    factory.new_run([fresh]).await_ready([fresh])


def _two_hops(topics, aliases) -> list[str]:
    """Topics named after two replication hops (``target.source.t``): records that went back."""
    hop = "(?:" + "|".join(map(re.escape, aliases)) + r")\."
    return sorted(t for t in topics if re.match(f"^{hop}{hop}", t))


@pytest.fixture
def cycle_detection(policy):
    """Skips the identity variant before any cluster starts (the reason: IDENTITY_CYCLES)."""
    if policy == "identity":
        pytest.skip(f"active-active under IdentityReplicationPolicy: {IDENTITY_CYCLES}")


@pytest.mark.parametrize("policy", [
    pytest.param("default", marks=pytest.mark.kafka_mirror(private=True, replicator_properties=DEFAULT)),
    pytest.param("identity", marks=pytest.mark.kafka_mirror(private=True, replicator_properties=IDENTITY)),
])
def test_active_active(policy, cycle_detection, mirror_env, mirror_topics, mirror_producer, mirror_verifier,
                       mirror_failover):
    forward = mirror_env.flow("source", "target")
    why = _no_flows(forward.replicator) or _no_cycle_detection(forward.replicator)
    if why:
        pytest.skip(f"active-active: {why}")
    backward = mirror_env.add_flow("target", "source")
    back = mirror_producer.for_flow(backward)
    [ta] = mirror_topics(1, partitions=2)
    [tb] = back.topics(1, partitions=2)
    copies = {forward: forward.replicator.target_topic(ta), backward: backward.replicator.target_topic(tb)}
    assert copies == {forward: f"source.{ta}", backward: f"target.{tb}"}, copies
    # Each flow's filter takes the other's copies: only cycle detection can keep them from going back.
    for flow, other in ((forward, backward), (backward, forward)):
        assert re.fullmatch(flow.replicator.topics, copies[other]), (
            f"{flow}'s topic filter {flow.replicator.topics} does not match {copies[other]}: no cycle would be "
            "seen because of the filter")

    run_ab = mirror_producer.new_run([ta])
    run_ba = back.new_run([tb])
    groups = [witness("mid", at=2), witness("end")]
    back.produce_in_background(run_ba, rate=RATE, duration=DURATION, witnesses=groups)
    mirror_producer.produce(run_ab, rate=RATE, duration=DURATION, witnesses=groups)

    report_ab = mirror_verifier(run_ab)
    report_ba = mirror_verifier(run_ba)
    # each direction's groups, translated by that direction's replicator
    # (source.checkpoints.internal on the target, target.checkpoints.internal on the source)
    failover_ab = mirror_failover(run_ab)
    failover_ba = mirror_failover(run_ba)

    report_ab.assert_ok()
    report_ba.assert_ok()
    for failover, flow in ((failover_ab, forward), (failover_ba, backward)):
        failover.assert_ok(as_syncs_allow=True)
        assert {e.target_topic for e in failover.entries} == {copies[flow]}, failover.entries[:3]
    # Nothing went back: both flows scanned their topics after the other direction's remote
    # topic existed (a record of a topic created afterwards crossed each), so a copy back
    # would exist by now.
    _scanned_since(mirror_producer, [copies[backward]])
    _scanned_since(back, [copies[forward]])
    on = {"source": set(mirror_env.source.topics()), "target": set(mirror_env.target.topics())}
    assert copies[forward] in on["target"] and copies[backward] in on["source"], on
    remote = {role: sorted(t for t in names if t.startswith(("source.", "target."))) for role, names in on.items()}
    log.info("remote topics after both directions ran: %s", remote)  # heartbeats may be among them
    went_back = {role: _two_hops(names, ("source", "target")) for role, names in on.items()}
    assert not any(went_back.values()), (
        f"records went back: {went_back}; {forward.replicator.spec} should never copy a topic that came from "
        f"the flow's target cluster: {explain(forward.replicator, 'cycles')}")


@pytest.mark.kafka_mirror(private=True)
def test_fan_out(mirror_env, mirror_topics, mirror_producer, mirror_verifier):
    why = _no_flows(mirror_env.replicator)
    if why:
        pytest.skip(f"fan-out: {why}")
    mirror_env.add_cluster("third")
    second = mirror_env.add_flow("source", "third")
    topics = mirror_topics(2, partitions=2)
    run = mirror_producer.new_run(topics)
    on_third = mirror_producer.also_capture(run, second)
    mirror_producer.produce(run, rate=RATE, duration=DURATION)

    on_target = mirror_verifier(run)
    on_second = mirror_verifier(on_third)

    on_target.assert_ok()
    on_second.assert_ok()
    assert on_target.expected == on_second.expected == RATE * DURATION * len(topics), (
        on_target.expected, on_second.expected)


@pytest.mark.parametrize("policy", [
    # nightly on real Kafka + MM2 (99 s there): two one-way flows under the default policy,
    # which active-active covers too; the identity variant (the aggregation proper) runs always
    pytest.param("default", marks=[pytest.mark.kafka_mirror(private=True, replicator_properties=DEFAULT),
                                   pytest.mark.nightly]),
    pytest.param("identity", marks=pytest.mark.kafka_mirror(private=True, replicator_properties=IDENTITY)),
])
def test_fan_in(policy, mirror_env, mirror_topics, mirror_producer, mirror_verifier):
    why = _no_flows(mirror_env.replicator)
    if why:
        pytest.skip(f"fan-in: {why}")
    third = mirror_env.add_cluster("third")
    second = mirror_env.add_flow("third", "target")
    [topic] = mirror_topics(1, partitions=2)
    third.create_topic(topic, 2)  # the same name on the second source
    names = {mirror_env.replicator.target_topic(topic), second.replicator.target_topic(topic)}

    if policy == "default":  # two remote topics, a run each
        assert names == {f"source.{topic}", f"third.{topic}"}, names
        run_a = mirror_producer.new_run([topic])
        from_third = mirror_producer.for_flow(second)
        run_c = from_third.new_run([topic])
        from_third.produce_in_background(run_c, rate=RATE, duration=DURATION)
        mirror_producer.produce(run_a, rate=RATE, duration=DURATION)
        reports = [mirror_verifier(run_a), mirror_verifier(run_c)]
    else:  # one target topic, the lanes of both sources in it
        assert names == {topic}, names
        run = mirror_producer.new_run([topic])
        mirror_producer.produce_in_background(run, flow=second, rate=RATE, duration=DURATION)
        mirror_producer.produce(run, rate=RATE, duration=DURATION)
        reports = [mirror_verifier(run)]
        producers = {lane.producer_id for lane in reports[0].lanes}
        assert len(producers) == 2 and len(reports[0].lanes) == 4, [lane.name for lane in reports[0].lanes]

    for report in reports:
        report.assert_ok()
    assert sum(r.expected for r in reports) == 2 * RATE * DURATION, [r.expected for r in reports]
