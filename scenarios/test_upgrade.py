"""In-place upgrade mid-stream: the replicator is replaced by another release while records flow.

``upgrade``: the run starts on the release of ``--kafka-mirror-upgrade-from`` (e.g.
``mm2:3.9.1``); at SWITCH_AT that replicator stops (SIGTERM, waiting for its exit) and the
replicator under test (e.g. ``mm2:4.3.1``) starts on the same state: MirrorMaker 2's
Connect group and internal topics (committed source offsets, connector and task configs,
offset syncs, checkpoints), the legacy MirrorMaker's consumer group, the reference
mirror's committed positions.  ``rollback``: the other way round.  Without the option both
ends are the replicator under test (a restart onto a new process with the same state, what
a rolling restart of one release does), so the default suite runs it too.

What it expects:

* nothing lost, every lane in order;
* duplicates within what the offset commits allow: at most what was produced in one
  commit interval of the stopped replicator (MM2: its copying herder's
  ``offset.flush.interval.ms``; a graceful stop commits, so normally none).  The bound is
  the figure ``upgrade_duplicates_bound``;
* copying resumed: ``upgrade_resume_s`` (the stop began -> the new release copied its
  readiness probe) is a figure; p99 is back under the SLO within it plus CATCH_UP_S;
* consumer groups continuous across the switch: witness groups commit before, right after
  and at the end; failing over after the switch skips nothing, no checkpoint goes back, no
  translation points past the log (where the replicator translates groups: the legacy
  MirrorMaker does not, then this part is not checked and the report says so).

Why: every MM2 upgrade is this switch.  A new release that cannot read its predecessor's
configs or offsets (or the old one the new's, on a rollback) loses or repeats records,
or rewinds consumer groups, exactly when the platform team is watching least.
"""

from __future__ import annotations

import pytest

from pytest_kafka_mirror import witness
from pytest_kafka_mirror.faults import action, at
from pytest_kafka_mirror.replicators import duplicates_bound

RATE = 300  # messages/s per topic
TOPICS = 2
SWITCH_AT = 5  # seconds into the run
P99_SLO_MS = 2000
CATCH_UP_S = 12
SYNC = {"sync.group.offsets.enabled": "true"}
SWITCHABLE = ("reference", "mm2", "mm2-connect", "mm1")  # replicators the plugin starts from a release


@pytest.fixture
def releases(kafka_mirror_settings):
    """(previous, current) replicator specs; skips when no in-place switch is possible."""
    current = kafka_mirror_settings.replicator
    previous = kafka_mirror_settings.upgrade_from or current
    if current.kind not in SWITCHABLE:
        pytest.skip(f"an in-place switch needs a replicator the plugin starts ({', '.join(SWITCHABLE)}), "
                    f"not {current}")
    if previous.kind != current.kind:
        pytest.skip(f"--kafka-mirror-upgrade-from {previous} and the replicator {current} keep different state "
                    f"({previous.kind} vs {current.kind}): no in-place switch between them")
    return str(previous), str(current)


def _duration(rep) -> float:
    """Long enough to see the recovery: stop + start may take about three first starts."""
    return SWITCH_AT + 3 * (rep.startup_seconds or 0.0) + CATCH_UP_S


@pytest.mark.kafka_mirror(replicator_properties=SYNC)
@pytest.mark.parametrize("direction", [
    pytest.param("upgrade", marks=pytest.mark.kafka_mirror(release="previous")),
    pytest.param("rollback", marks=[pytest.mark.kafka_mirror(release="current"), pytest.mark.nightly]),
])
def test_in_place_upgrade_mid_stream(direction, releases, mirror_env, mirror_topics, mirror_producer,
                                     mirror_verifier, mirror_failover):
    previous, current = releases
    to = "current" if direction == "upgrade" else "previous"
    old = mirror_env.replicator
    topics = mirror_topics(TOPICS, partitions=3)

    def switch() -> None:
        mirror_env.switch_replicator(to)

    run = mirror_producer(topics, rate=RATE, duration=_duration(old), witnesses=[
        witness("before", at=SWITCH_AT - 2), witness("after", at=SWITCH_AT + 1), witness("end"),
    ], faults=[at(SWITCH_AT, action(f"switch {old.spec} -> {mirror_env.releases[to]}", switch, kind="outage"))])
    [switched] = [m for m in run.markers if m.label.startswith("switch ")]
    assert switched.error is None, f"the switch failed: {switched.error}"
    bound = duplicates_bound(old, rate=RATE, topics=TOPICS)
    run.record_figure("upgrade_resume_s", switched.took,
                      f"{old.spec} stopped (SIGTERM) -> {mirror_env.replicator.spec} copied its readiness probe")
    run.record_figure("upgrade_duplicates_bound", bound.records, bound.how)

    report = mirror_verifier(run)

    report.assert_ok(allow_duplicates=True)  # no loss, in order; duplicates bounded below
    across = f"across the switch {old.spec} -> {mirror_env.replicator.spec}"
    assert report.duplicated <= bound.records, f"{bound.exceeded(report.duplicated, across)}\n{report.summary()}"
    report.assert_recovers_within(switched.took + CATCH_UP_S, p99_ms=P99_SLO_MS)
    if mirror_env.replicator.checkpoints is not None:
        groups = mirror_failover(run)
        groups.assert_ok(as_syncs_allow=False)  # nothing skipped, no rewind, within the log, translated


ROLL_AT = 4  # seconds into the run


@pytest.mark.kafka_mirror(replicator_properties=SYNC, release="previous")
def test_rolling_upgrade_worker_by_worker(releases, mirror_env, mirror_topics, mirror_producer, mirror_verifier):
    """A Connect cluster (``mm2-connect:VERSION,workers=N``) upgraded as Strimzi rolls it:
    worker by worker, each stopped (SIGTERM) and replaced by a worker of the new release on
    the same group, internal topics and port, the others copying meanwhile.  Nothing lost,
    every lane in order, duplicates within one commit interval; the roll's length and its
    longest step are figures."""
    previous, current = releases
    old = mirror_env.replicator
    workers = getattr(old, "workers", 0)
    if not hasattr(old, "roll_onto") or workers < 2:
        pytest.skip(f"a rolling upgrade replaces the workers of a Connect cluster one at a time: "
                    f"mm2-connect:VERSION,workers=N with N >= 2, not {old.spec}")
    topics = mirror_topics(TOPICS, partitions=3)
    steps: list[float] = []

    def roll() -> None:
        steps.extend(mirror_env.roll_replicator("current"))

    run = mirror_producer(topics, rate=RATE, duration=ROLL_AT + workers * (old.startup_seconds or 30.0) + CATCH_UP_S,
                          faults=[at(ROLL_AT, action(f"roll {old.spec} -> {current} worker by worker", roll,
                                                     kind="outage"))])
    [rolled] = [m for m in run.markers if m.label.startswith("roll ")]
    assert rolled.error is None, f"the rolling upgrade failed: {rolled.error}"
    bound = duplicates_bound(old, rate=RATE, topics=TOPICS)
    run.record_figure("rolling_upgrade_s", rolled.took,
                      f"{workers} workers of {old.spec} replaced one at a time by {mirror_env.replicator.spec}'s")
    run.record_figure("rolling_upgrade_step_max_s", max(steps),
                      "the longest step: a worker stopped -> its successor running every task")
    report = mirror_verifier(run)
    report.assert_ok(allow_duplicates=True)
    across = f"across the rolling upgrade {old.spec} -> {mirror_env.replicator.spec}"
    assert report.duplicated <= bound.records, f"{bound.exceeded(report.duplicated, across)}\n{report.summary()}"
