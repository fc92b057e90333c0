"""End to end: the real pipeline with every fault knob, and the verifier's exact counts.

Embedded Tansu clusters, the reference mirror (the plugin's session fixtures), two
producers, the capture of target *and* source, Spark.  One run covers every knob, one
knob per topic, so a single capture and verification pay for all of them.  What each
topic must show comes from the mirror's ledger of what it injected, not from the rates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_kafka_mirror.replicators import FaultLedger, Knobs
from pytest_kafka_mirror.verify import MirrorMismatchError, MirrorReport
from tests.docs import section_example

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pytest_kafka_mirror.facades import MirrorProducerFactory, MirrorTopics, MirrorVerifier
    from pytest_kafka_mirror.faults.schedule import MirrorFaults
    from pytest_kafka_mirror.replicators.reference import ReferenceReplicator

pytestmark = pytest.mark.integration

PER_LANE = 30  # records per lane and producer; 2 partitions, 2 lanes per topic
PRODUCERS = ("pmain", "plost")
DELAY_MS = 150.0
P99_SLO_MS = 1000

#: The rate knobs pick records by a hash of (seed, knob, topic, producer, lane, seq), and
#: topic names are new in every run: each knob must pick at least one of a topic's 120
#: records whatever the names.  At 5% it picked none in 0.95**120 = 0.2% of runs (a CI
#: run failed so); at 15%, 0.85**120 = 3e-9.
RATE = 0.15

KNOBS = {
    "clean": Knobs(),
    "drop": Knobs(drop=RATE, seed=11),
    "droprange": Knobs(drop_seqs=((1, 10, 19),)),
    "dup": Knobs(duplicate=RATE, seed=12),
    "replay": Knobs(replay=((0, 5, 14),)),
    "reorder": Knobs(reorder=5, seed=13),
    "delay": Knobs(delay_ms=DELAY_MS, jitter_ms=50, seed=14),
    "corrupt": Knobs(corrupt=RATE, seed=15),
    "strip": Knobs(strip_headers=RATE, seed=16),
    "split": Knobs(split_lanes=((1, 20),)),
    "tail": Knobs(stop_tail=3),
    "lose": Knobs(lose_producers=("plost",)),
}

_FIGURES = ("lost", "unseen", "duplicated", "reordered", "phantom", "corrupted", "lost_by_replicator",
            "missing_in_source", "never_acked")


def _topic_figures(report: MirrorReport, topic: str) -> dict[str, Any]:
    """One topic's figures: lane sums, lanes split, headers lost, and the missing seqs per lane."""
    lanes = [s for s in report.lanes if s.topic == topic]
    out: dict[str, Any] = {name: sum(getattr(s, name) for s in lanes) for name in _FIGURES}
    out["lane_split"] = sum(1 for s in lanes if len(s.partitions) > 1)
    out["headers_lost"] = sum(1 for r in report.examples.get("headers_lost", []) if r["topic"] == topic)
    out["missing"] = {(s.producer_id, s.lane): [q for r in s.missing_ranges for q in range(r.first, r.last + 1)]
                      for s in lanes if s.missing_ranges}
    return out


def _expected(ledger: FaultLedger, topic: str, per_lane: int = PER_LANE) -> dict[str, Any]:
    """What the verifier must report for ``topic``, from what the mirror says it did."""
    want: dict[str, Any] = dict.fromkeys(_FIGURES, 0) | {"lane_split": 0, "headers_lost": 0, "missing": {}}
    gone = {knob: ledger.lanes(topic, knob) for knob in ("drop", "strip_headers", "stop_tail", "lose_producer")}
    missing = {key: sorted(seqs) for by_lane in gone.values() for key, seqs in by_lane.items()}
    n_missing = sum(len(seqs) for seqs in missing.values())

    def trailing(seqs: list[int]) -> int:
        """Missing seqs at the end of a lane: nothing after them arrived, so they are unseen."""
        n = 0
        while per_lane - 1 - n in seqs:
            n += 1
        return n

    unseen = sum(trailing(seqs) for seqs in missing.values())
    want |= {
        "missing": missing,
        "lost": n_missing - unseen,
        "unseen": unseen,
        "lost_by_replicator": n_missing,
        "duplicated": ledger.count(topic, "duplicate") + ledger.count(topic, "replay"),
        "reordered": ledger.count(topic, "reorder"),
        "corrupted": ledger.count(topic, "corrupt"),
        "headers_lost": ledger.count(topic, "strip_headers"),
        "lane_split": len(ledger.lanes(topic, "split")),
    }
    return want


@pytest.mark.kafka_mirror(drain_timeout=3, settle=0.3)
def test_every_knob_is_reported_exactly(
    replicator: ReferenceReplicator, mirror_topics: MirrorTopics, mirror_producer: MirrorProducerFactory,
    spark: SparkSession,
) -> None:
    topics = {name: mirror_topics(1, partitions=2, name=name)[0] for name in KNOBS}
    for name, knobs in KNOBS.items():
        replicator.set_faults(topics[name], knobs)
    assert replicator.faults(topics["drop"]) == KNOBS["drop"]

    run = mirror_producer.new_run(list(topics.values()), capture_source=True)
    for pid in PRODUCERS:
        run.produce(rate=None, count=2 * PER_LANE, format="headers", message_size=120, producer_id=pid)
    report = run.verify(spark=spark, examples=10_000)
    ledger = replicator.ledger()

    assert report.reconciled and report.expected == len(KNOBS) * len(PRODUCERS) * 2 * PER_LANE
    for name, topic in topics.items():
        got, want = _topic_figures(report, topic), _expected(ledger, topic)
        assert got == want, name
    # Every knob did something (a seed that picks nothing would prove nothing).
    for name, knob in [("drop", "drop"), ("dup", "duplicate"), ("reorder", "reorder"), ("corrupt", "corrupt"),
                       ("strip", "strip_headers")]:
        assert ledger.count(topics[name], knob) > 0, name
    assert ledger.seqs(topics["droprange"], "drop", "pmain", 1) == list(range(10, 20))
    assert ledger.count(topics["replay"], "replay") == 2 * 10
    assert ledger.count(topics["lose"], "lose_producer") == 2 * PER_LANE
    assert ledger.lanes(topics["tail"], "stop_tail") == {
        (pid, lane): list(range(PER_LANE - 3, PER_LANE)) for pid in PRODUCERS for lane in (0, 1)}
    assert report.lane(topics["split"], "pmain", 1).partitions == [0, 1]
    # Delay is latency only: nothing arrived sooner than the knob's delay.
    delayed = report.latency_by_topic[topics["delay"]]
    assert delayed.min_ms is not None and delayed.min_ms >= DELAY_MS
    assert report.phantom == report.foreign == 0

    with pytest.raises(MirrorMismatchError) as e:
        report.assert_no_loss()
    msg = str(e.value)
    n = report.lost + report.unseen
    assert f"source log: {n} lost by the replicator (in the source log, absent on the target), 0 missing" in msg
    assert f"{topics['lose']}/plost/lane 0 (source partition 0, nothing arrived): unseen 0-{PER_LANE - 1}" in msg


def _readme_example(section: str) -> str:
    """The first Python block of a section of docs/faults.md."""
    return section_example("faults", section)


@pytest.mark.kafka_mirror(drain_timeout=2, settle=0.3)
def test_readme_fault_injection_example(
    replicator: ReferenceReplicator, mirror_topics: MirrorTopics, mirror_producer: MirrorProducerFactory,
    mirror_verifier: MirrorVerifier,
) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(_readme_example("Fault injection"), "docs/faults.md", "exec"), namespace)
    namespace["test_drops_are_caught"](replicator, mirror_topics, mirror_producer, mirror_verifier)
    # The example proves something: its topic really lost records.
    (report,) = mirror_verifier.reports
    assert report.lost + report.unseen > 0


def test_docs_faults_on_a_timeline_example(
    mirror_topics: MirrorTopics, mirror_producer: MirrorProducerFactory, mirror_verifier: MirrorVerifier,
    mirror_faults: MirrorFaults,
) -> None:
    """docs/faults.md's timeline example, as printed: the replicator killed at 4 s and started at 6 s."""
    namespace: dict[str, Any] = {}
    exec(compile(_readme_example("Faults on a timeline"), "docs/faults.md", "exec"), namespace)
    namespace["test_replicator_crash"](mirror_topics, mirror_producer, mirror_verifier, mirror_faults)
    (report,) = mirror_verifier.reports
    assert [m["label"] for m in report.markers][:2] == ["kill replicator (reference)", "start replicator (reference)"], report.markers


@pytest.mark.kafka_mirror(drain_timeout=10, settle=0.3)
def test_a_recovery_after_production_ended_is_held_to_the_limit(
    mirror_topics: MirrorTopics, mirror_producer: MirrorProducerFactory, mirror_verifier: MirrorVerifier,
    mirror_faults: MirrorFaults,
) -> None:
    """The reference mirror paused 1 s into a 3 s run and resumed 2 s after production
    ended: every record produced from the pause on arrives in the drain, late, so the mirror
    recovers there, when its backlog cleared.  The limit is held against that recovery (a
    limit above it passes, one below fails), not cut at the end of production."""
    from pytest_kafka_mirror.faults import at, pause, resume

    rep = mirror_faults.replicator
    topics = mirror_topics(1, partitions=2)
    run = mirror_producer(topics, rate=100, duration=3, faults=[at(1, pause(rep)), at(5, resume(rep))])
    report = mirror_verifier(run)

    report.assert_ok()
    [r] = report.recovery(P99_SLO_MS)
    assert r.in_drain and r.recovered_time is not None and r.production_end is not None, r
    assert r.recovered_time > r.production_end, r  # the recovery falls after production ended
    assert r.seconds is not None and r.seconds >= 4 - 1, r  # the pause lasted 4 s (seconds: 1 s resolution)
    report.assert_recovers_within(r.seconds + 0.5, p99_ms=P99_SLO_MS)
    with pytest.raises(MirrorMismatchError) as err:
        report.assert_recovers_within(r.seconds - 0.5, p99_ms=P99_SLO_MS)
    assert f"recovered after {r.seconds:g} s, in the drain" in str(err.value)


#: a body-format backlog: records a lane, and the knobs (rates per record) the capture's
#: columnar path must see through exactly as its per-record loop does
COLUMNAR_PER_LANE = 6000
COLUMNAR_KNOBS = {
    "clean": Knobs(),
    "drop": Knobs(drop=0.01, seed=21),
    "dup": Knobs(duplicate=0.01, seed=22),
    "reorder": Knobs(reorder=5, seed=23),
    "corrupt": Knobs(corrupt=0.01, seed=24),
}


@pytest.mark.kafka_mirror(drain_timeout=3, settle=0.3)
def test_a_body_backlog_decoded_a_column_at_a_time_is_reported_exactly(
    replicator: ReferenceReplicator, mirror_topics: MirrorTopics, mirror_producer: MirrorProducerFactory,
    spark: SparkSession,
) -> None:
    """Body records written as fast as the producer goes: the capture decodes them a chunk
    at a time (capture/columns.py), dropped, duplicated, reordered and corrupted ones among
    them, and the verifier's figures are the mirror's ledger, exactly."""
    topics = {name: mirror_topics(1, partitions=2, name=f"col{name}")[0] for name in COLUMNAR_KNOBS}
    for name, knobs in COLUMNAR_KNOBS.items():
        replicator.set_faults(topics[name], knobs)

    run = mirror_producer.new_run(list(topics.values()), capture_source=True)
    run.produce(rate=None, count=2 * COLUMNAR_PER_LANE, format="body", message_size=100, producer_id="pcol")
    report = run.verify(spark=spark, examples=10_000)
    ledger = replicator.ledger()

    assert report.capture["columnar_chunks"] > 0, report.capture
    assert report.reconciled and report.expected == len(COLUMNAR_KNOBS) * 2 * COLUMNAR_PER_LANE
    for name, topic in topics.items():
        got, want = _topic_figures(report, topic), _expected(ledger, topic, COLUMNAR_PER_LANE)
        assert got == want, name
    for name, knob in [("drop", "drop"), ("dup", "duplicate"), ("reorder", "reorder"), ("corrupt", "corrupt")]:
        assert ledger.count(topics[name], knob) > 0, name
    assert report.phantom == report.foreign == 0
