"""Failover checks end to end: witness groups on Tansu, the reference mirror's checkpoints,
group offset sync and heartbeats, the fake MirrorMaker 2, exact counts from the knobs.

The knob test produces in two phases so that its counts are exact: a witness group
commits at the end of phase 1 and the test waits until that commit is translated (the
delayed offset sync was flushed: an exact translation, plus the knob's shift); phase 2
then puts records behind it, which a translation that is too far ahead skips.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_kafka_mirror.clusters.tansu import TansuCluster
from pytest_kafka_mirror.replicators import Knobs, ReplicatorOptions, make_replicator
from pytest_kafka_mirror.replicators.reference import ReferenceReplicator
from pytest_kafka_mirror.run import MirrorRun
from pytest_kafka_mirror.verify import MirrorMismatchError
from pytest_kafka_mirror.verify.failover_report import FailoverEntry
from pytest_kafka_mirror.witness import witness
from tests.fake_kafka import make_fake_kafka_home

if TYPE_CHECKING:
    from pytest_kafka_mirror.config import Settings
    from pytest_kafka_mirror.session import MirrorFailover, MirrorProducerFactory, MirrorTopics

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
        run.witnesses[0].finish()  # its "end" commit: offset 50 on every partition
        _wait_synced(dst.bootstrap_servers, "fo-g1", {
            (t, p): PER_PARTITION + (AHEAD if name == "ahead" else 0) for name, t in topics.items() for p in (0, 1)})
        rep.set_faults(topics["rewind"], Knobs(checkpoint_rewind=REWIND))
        rep.set_faults(topics["stop"], Knobs(stop_checkpoints_after=0))
        run.produce(rate=None, count=2 * PER_PARTITION, witnesses=[(witness("second"), "fo-g2")])
        report = run.failover(rep.checkpoints, wait=4, emitter=rep.heartbeat_emitter)

    end = 2 * PER_PARTITION
    for p in (0, 1):
        def e(name: str, w: str, via: str = "checkpoint", p: int = p) -> FailoverEntry:
            return report.entry(w, topics[name], p, via)

        for via in ("checkpoint", "synced"):
            assert (e("clean", "first", via).translated, e("clean", "second", via).translated) == (50, end)
            assert e("clean", "first", via).rereads == e("clean", "second", via).rereads == 0
            assert e("ahead", "first", via).skipped == AHEAD  # seqs 0..4 of phase 2, at offsets 50..54
            assert e("ahead", "second", via).beyond_end == AHEAD and e("ahead", "second", via).skipped == 0
        assert e("ahead", "first").skipped_rows[0]["first_offset"] == 50
        assert e("ahead", "first").skipped_rows[0]["count"] == AHEAD
        # a rewound checkpoint: once per partition, and the latest one re-reads what it gave back;
        # the synced offset only moves forward (MM2 never syncs a lower offset)
        assert [(r["downstream_before"], r["downstream"]) for r in e("rewind", "first").rewinds] == [(50, 50 - REWIND)]
        assert e("rewind", "first").rereads == REWIND and e("rewind", "first", "synced").rereads == 0
        assert e("rewind", "second").translated == end - REWIND and not e("rewind", "second").rewinds
        # stopped checkpointing: phase 1 was translated, phase 2 never
        assert e("stop", "first").translated == 50
        stopped = e("stop", "second")
        assert (stopped.translated, stopped.records_behind, stopped.never_translated) == (None, end, [end])
    assert report.rewinds == 2 and len(report.untranslated()) == 4  # stop topic, 2 partitions, checkpoint + synced
    assert report.heartbeats["count"] >= 1 and report.heartbeats["lag_ms"] < 10_000
    assert all(not c.get("error") for log in run.witnesses for c in log.logs[0].commits)
    for check, match in [("assert_no_loss", "loss on failover"), ("assert_within_log", "beyond the end"),
                         ("assert_monotonic", "went backwards"), ("assert_translated", "no translation: 4")]:
        with pytest.raises(MirrorMismatchError, match=match):
            getattr(report, check)()


def test_fake_mm2_is_checked_unchanged(tmp_path: Path, tansu_pair: tuple[TansuCluster, TansuCluster]) -> None:
    """``mm2:`` on the fake distribution: the plugin renders MM2's settings, the fake passes
    them to the reference mirror, and the checks read MM2's names (``source.`` topics)."""
    src, dst = tansu_pair
    src.ensure_topic("kafka-mirror-warmup")
    home = make_fake_kafka_home(tmp_path)
    rep = make_replicator(f"mm2:{home}", src, dst, tmp_path / "mm2",
                          ReplicatorOptions(topic_prefix="fm", properties=FAST, startup_timeout=60))
    topic = "fm-x"
    src.create_topic(topic, 2)
    try:
        rep.start()
        settings = rep.checkpoints  # type: ignore[attr-defined]
        assert (settings.checkpoints_interval, settings.sync_group_offsets, settings.flush_interval,
                settings.heartbeats_interval) == (1, True, 1, 1)
        assert settings.groups == ("^fm-.*",)  # rendered: the test's groups are named like its topics
        run = MirrorRun(tmp_path / "run", src.bootstrap_servers, dst.bootstrap_servers,
                        {topic: rep.target_topic(topic)}, partitions={topic: 2}, drain_timeout=10,
                        warmup_topic="kafka-mirror-warmup")
        run.produce(rate=100, duration=2, witnesses=[(witness("mid", at=1), "fm-g-mid"), (witness("end"), "fm-g-end")])
        report = run.failover(settings)
    finally:
        rep.stop()
    assert {e.target_topic for e in report.entries} == {"source.fm-x"}
    report.assert_ok(max_records_behind=0)
    assert all(e.rereads == 0 for e in report.entries if e.witness == "end")
    assert report.heartbeats["topic"] == "source.heartbeats" and report.heartbeats["count"] >= 1


@pytest.mark.kafka_mirror(replicator_properties={"sync.group.offsets.enabled": "true"})
def test_readme_failover_example(mirror_topics: MirrorTopics, mirror_producer: MirrorProducerFactory,
                                 mirror_failover: MirrorFailover, request: pytest.FixtureRequest,
                                 kafka_mirror_settings: Settings) -> None:
    """The README's example, through the plugin's fixtures (its marker is repeated here)."""
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    example = text.split("\n## Failover\n", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(compile(example, "README.md", "exec"), namespace)  # noqa: S102 - our own docs
    namespace["test_failover"](mirror_topics, mirror_producer, mirror_failover)
    (report,) = mirror_failover.reports
    assert {e.witness for e in report.entries} == {"mid", "end", "p2"}
    assert {e.via for e in report.entries} == {"checkpoint", "synced"} and report.not_run == {}
    props = dict(request.node.user_properties)  # the figures, as JUnit properties
    assert props["kafka_mirror.failover.failover_skipped"] == 0 and "kafka_mirror.failover.heartbeat_lag_ms" in props
    assert any(kafka_mirror_settings.report_dir.glob("*test_readme_failover_example-failover.json"))
