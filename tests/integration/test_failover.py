"""Failover checks end to end: witness groups on Tansu, the reference mirror's checkpoints,
group offset sync and heartbeats, the fake MirrorMaker 2, exact counts from the knobs.

The knob test produces in two phases so that its counts are exact: a witness group
commits at the end of phase 1 and the test waits until that commit is translated (the
delayed offset sync was flushed: an exact translation, plus the knob's shift); phase 2
then puts records behind it, which a translation that is too far ahead skips.  The
offset syncs the mirror wrote on the source say which translations are as good as they
allow (clean, ahead) and which are coarser (rewind).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_kafka_mirror.capture.witness import WitnessLog, witness
from pytest_kafka_mirror.clusters.tansu import TansuCluster
from pytest_kafka_mirror.replicators import Knobs
from pytest_kafka_mirror.replicators.reference import ReferenceReplicator
from pytest_kafka_mirror.run import MirrorRun
from pytest_kafka_mirror.verify import MirrorMismatchError
from pytest_kafka_mirror.verify.failover import FailoverEntry, FailoverReport, check_failover
from tests.docs import section_example

if TYPE_CHECKING:
    from pytest_kafka_mirror.config import Settings
    from pytest_kafka_mirror.facades import MirrorFailover, MirrorProducerFactory, MirrorTopics

pytestmark = pytest.mark.integration

PER_PARTITION = 50  # records per partition and phase; 2 partitions per topic
AHEAD, REWIND = 5, 7
FAST = (("sync.group.offsets.enabled", "true"), ("emit.checkpoints.interval.seconds", "1"),
        ("sync.group.offsets.interval.seconds", "1"), ("target.offset.flush.interval.ms", "1000"),
        ("emit.heartbeats.interval.seconds", "1"))


def _synced(target: str, group: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": target})
    tps = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10).topic_partitions
    return {(tp.topic, tp.partition): tp.offset for tp in tps or []}


def _wait_synced(target: str, group: str, want: dict[tuple[str, int], int], timeout: float = 20.0) -> None:
    t0 = time.monotonic()
    while (have := _synced(target, group)) != want:
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"group {group} on the target: {have}, waited {timeout:g} s for {want}")
        time.sleep(0.2)


def _end_commit(log: WitnessLog) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the offset the witness group committed last."""
    return {(t, int(p)): int(off) for t, parts in log.commits[-1]["offsets"].items() for p, off in parts.items()}


def _check_knob_partition(report: FailoverReport, name: str, topic: str, p: int, u1: int, u2: int) -> None:
    """Exact counts on one partition of the knob test: phase 1 committed at ``u1`` (the
    target holds the same offsets: the mirror copies one to one), phase 2 at ``u2``."""
    def e(w: str, via: str = "checkpoint") -> FailoverEntry:
        return report.entry(w, topic, p, via)

    vias = ("checkpoint", "synced")
    if name == "clean":
        for via in vias:
            assert (e("first", via).translated, e("second", via).translated) == (u1, u2)
            assert e("first", via).rereads == e("second", via).rereads == 0
            # the offset syncs: the delayed sync of the last record of phase 1 makes u1 the best translation
            assert (e("first", via).sync_best, e("first", via).sync_verdict) == (u1, "as synced")
            assert e("first", via).sync["upstream"] == u1 - 1  # type: ignore[index]
            assert e("second", via).sync_verdict == "as synced" and e("second", via).coarser == 0
    elif name == "ahead":
        for via in vias:
            assert e("first", via).skipped == AHEAD  # seqs 0..4 of phase 2, at offsets u1..u1+4
            assert e("second", via).beyond_end == AHEAD and e("second", via).skipped == 0
            assert (e("first", via).sync_best, e("first", via).sync_verdict) == (u1, "ahead")
        assert (e("first").skipped_rows[0]["first_offset"], e("first").skipped_rows[0]["count"]) == (u1, AHEAD)
    elif name == "rewind":
        # a rewound checkpoint: once per partition, and the latest one re-reads what it gave back;
        # the synced offset only moves forward (MM2 never syncs a lower offset)
        assert [(r["downstream_before"], r["downstream"]) for r in e("first").rewinds] == [(u1, u1 - REWIND)]
        assert e("first").rereads == REWIND and e("first", "synced").rereads == 0
        assert e("second").translated == u2 - REWIND and not e("second").rewinds
        # and coarser than the syncs allow, by exactly the knob
        assert (e("first").coarser, e("first").sync_verdict) == (REWIND, "coarser")
        assert [(h["downstream"], h["floor"]) for h in e("first").history_coarser] == [(u1 - REWIND, u1)]
        assert e("first", "synced").coarser == 0  # its synced offset is the checkpoint before the knob
    else:  # stopped checkpointing: phase 1 was translated, phase 2 never
        assert (e("first").translated, e("first").sync_verdict) == (u1, "as synced")
        stopped = e("second")
        assert (stopped.translated, stopped.records_behind, stopped.never_translated) == (None, u2, [u2])


def test_checkpoint_knobs_are_caught_with_exact_counts(tmp_path: Path, tansu_pair: tuple[TansuCluster, TansuCluster]) -> None:
    src, dst = tansu_pair
    src.ensure_topic("kafka-mirror-warmup")
    topics = {name: f"fo-{name}" for name in ("clean", "ahead", "rewind", "stop")}
    for t in topics.values():
        src.create_topic(t, 2)
    rep = ReferenceReplicator(src.bootstrap_servers, dst.bootstrap_servers, tmp_path / "mirror", topics="^fo-",
                              properties=(("sync.group.offsets.enabled", "true"),))
    with rep:
        rep.set_faults(topics["ahead"], Knobs(translate_ahead=AHEAD))
        run = MirrorRun(tmp_path / "run", src.bootstrap_servers, dst.bootstrap_servers, {t: t for t in topics.values()},
                        partitions={t: 2 for t in topics.values()}, drain_timeout=10, warmup_topic="kafka-mirror-warmup")
        run.produce(rate=None, count=2 * PER_PARTITION, witnesses=[(witness("first"), "fo-g1")])
        # its "end" commit: 50 records and the warm-up records before them, on every partition
        u1 = _end_commit(run.witnesses[0].finish()[0])
        _wait_synced(dst.bootstrap_servers, "fo-g1", {
            (t, p): u1[t, p] + (AHEAD if name == "ahead" else 0) for name, t in topics.items() for p in (0, 1)})
        rep.set_faults(topics["rewind"], Knobs(checkpoint_rewind=REWIND))
        rep.set_faults(topics["stop"], Knobs(stop_checkpoints_after=0))
        # ready already: no warm-up records between the phases, so phase 2 starts at u1
        run.produce(rate=None, count=2 * PER_PARTITION, witnesses=[(witness("second"), "fo-g2")],
                    wait_for_target=False)
        run.finish()
        u2 = _end_commit(run.witnesses[1].logs[0])
        # the reference mirror translates with a sync before it writes it: no read lag (a little for the clock)
        report = check_failover(run.run_dir, dst.bootstrap_servers, rep.checkpoints, run.topics, wait=4,
                                emitter=rep.heartbeat_emitter, source_bootstrap=src.bootstrap_servers,
                                sync_read_lag=0.05)

    for name, t in topics.items():
        for p in (0, 1):
            _check_knob_partition(report, name, t, p, u1[t, p], u2[t, p])
    assert report.rewinds == 2 and len(report.untranslated()) == 4  # stop topic, 2 partitions, checkpoint + synced
    assert "offset syncs" not in report.not_run and all(e.offset_syncs for e in report.entries)
    # coarser than the syncs: only the rewind knob; group "first" exactly (its synced offset predates the
    # knob), group "second" as its checkpoints were rewound (and its synced offset, which copies them)
    coarser = report.coarser_than_syncs()
    assert {(e.witness, e.partition, e.via) for e in coarser if e.witness == "first"} == {
        ("first", 0, "checkpoint"), ("first", 1, "checkpoint")}
    assert {e.target_topic for e in coarser} == {topics["rewind"]}
    assert report.heartbeats["count"] >= 1 and report.heartbeats["lag_ms"] < 10_000
    assert all(not c.get("error") for log in run.witnesses for c in log.logs[0].commits)
    for check, match in [("assert_no_loss", "loss on failover"), ("assert_within_log", "beyond the end"),
                         ("assert_monotonic", "went backwards"), ("assert_translated", "no translation: 4"),
                         ("assert_as_syncs_allow", "coarser than the offset syncs allow")]:
        with pytest.raises(MirrorMismatchError, match=match):
            getattr(report, check)()


@pytest.mark.kafka_mirror(replicator_properties={"sync.group.offsets.enabled": "true"})
def test_readme_failover_example(mirror_topics: MirrorTopics, mirror_producer: MirrorProducerFactory,
                                 mirror_failover: MirrorFailover, request: pytest.FixtureRequest,
                                 kafka_mirror_settings: Settings) -> None:
    """The README's example, through the plugin's fixtures (its marker is repeated here)."""
    example = section_example("faults", "Failover")
    namespace: dict[str, Any] = {}
    exec(compile(example, "docs/faults.md", "exec"), namespace)
    namespace["test_failover"](mirror_topics, mirror_producer, mirror_failover)
    (report,) = mirror_failover.reports
    assert {e.witness for e in report.entries} == {"mid", "end", "p2"}
    assert {e.via for e in report.entries} == {"checkpoint", "synced"}
    assert report.not_run == {} and all(e.offset_syncs for e in report.entries)  # the syncs were read
    props = dict(request.node.user_properties)  # the figures, as JUnit properties
    assert props["kafka_mirror.failover.failover_skipped"] == 0 and "kafka_mirror.failover.heartbeat_lag_ms" in props
    assert any(kafka_mirror_settings.report_dir.glob("*test_readme_failover_example-failover.json"))
