"""Failover: consumers move to the target and resume from their groups' translated offsets.

Witness consumer groups (``witness(...)``) consume the source while it is produced and
commit at chosen points; ``mirror_failover(run)`` then fails them over to the target the
way a consumer would — the group's offset synced to the target, and the latest
checkpoint in ``source.checkpoints.internal`` — and checks each translation against what
the capture read on the target (never against watermarks):

* **no loss**: a consumer resuming at the translated offset reads every record its group
  had not consumed (at the failover moment, and right after every checkpoint of the run);
* **as good as the offset syncs allow**: MirrorMaker 2 translates a group's upstream
  offset U from the latest offset sync at or before U that its sync store kept (that
  sync's downstream offset, +1 when U is past it); every translation of the run is at
  least that good, from the syncs the replicator had written before it (read from
  ``mm2-offset-syncs.target.internal``).  How many records that re-reads depends on how
  far apart the syncs are, which is not up to the translation: a backlog copied at full
  speed gets few syncs (measured with MM2 4.x: a group at upstream 298 translated to 1,
  297 re-reads, as the syncs allowed).  Re-reads are reported, per group and partition;
  groups at the end are held to none (the delayed sync at every offset flush, 3.7+);
* **within the log, monotonic**: no translation points past the end of the target
  partition ("negative lag"), no checkpoint goes back while its group did not;
* **translated**: every partition holding records has a translation;
* **fresh**: the latest checkpoint is not behind the group's last commit at failover, and
  the replicated heartbeats (``source.heartbeats``) are recent.

Group offset sync (``sync.group.offsets.enabled``) is off by default in MirrorMaker 2;
these scenarios turn it on (the marker gives the test a replicator of its own with it),
so both ways of translating are checked.  On the embedded default the reference mirror
does what MM2 3.7+ does: offset syncs every ``offset.lag.max`` records plus a delayed one
at every offset flush, checkpoints and group offset sync every second (MM2: 60 s by
default; the plugin renders 5 s for ``mm2:``).

Why: mirroring exists for failover.  Most reported MM2 bugs are here — negative lag,
checkpoints that rewind after a restart, low-throughput partitions never translated
exactly, empty partitions without checkpoints — and Kafka's own tests only check loose
bounds.
"""

from __future__ import annotations

import pytest

from pytest_kafka_mirror import witness
from pytest_kafka_mirror.faults import at, kill, start, terminate

RATE = 300  # messages/s per topic
SYNC = {"sync.group.offsets.enabled": "true"}


def heartbeat_slo_ms(report) -> float:
    """The newest replicated heartbeat may be one interval old, plus replication and slack."""
    return report.settings.get("heartbeats_interval", 1.0) * 1000 + 3000


@pytest.mark.upgrade_gate
@pytest.mark.kafka_mirror(replicator_properties=SYNC)
def test_failover_after_steady_state(mirror_topics, mirror_producer, mirror_verifier, mirror_failover):
    """Groups mid-stream (committed at 3 s only), at the end, and committing along the way.

    Expects every check to pass once the replicator had time to translate the last
    commits: nothing skipped, every translation as good as the offset syncs allow (the
    mid-stream group's is as coarse as the syncs around its position: its re-reads are
    reported, not bounded; the end groups' is exact), no translation past the end of the
    log, no rewind, no staleness, and a heartbeat no older than one interval plus slack.
    """
    topics = mirror_topics(2, partitions=3)
    run = mirror_producer(topics, rate=RATE, duration=8, witnesses=[
        witness("mid", at=3), witness("end"), witness("along", at=[3, 6, "end"]),
    ])

    mirror_verifier(run).assert_ok()
    report = mirror_failover(run)

    report.assert_ok(max_records_behind=0, as_syncs_allow=True, max_heartbeat_lag_ms=heartbeat_slo_ms(report))
    for e in report.entries:
        if e.witness != "mid":
            assert e.rereads == 0, f"a group at the end re-reads {e.rereads} records: {e.head()}"


@pytest.mark.kafka_mirror(replicator_properties=SYNC)
@pytest.mark.parametrize("stop", [terminate, kill], ids=["sigterm", "sigkill"])
def test_failover_right_after_replicator_restart(stop, mirror_topics, mirror_producer, mirror_verifier,
                                                 mirror_faults, mirror_failover):
    """The replicator stops at 4 s and starts again at 5 s; one group commits before the
    stop, one right after the start, one at the end; the failover comes as soon as the
    restarted replicator translated the last commits.

    Expects no loss, no rewind (the restarted replicator remembers its checkpoints and
    offset syncs, as MM2 3.8+ reads them back), nothing past the end of the log, and every
    translation as good as the offset syncs allow.  The group that committed right after
    the start sits in the backlog the replicator is catching up on; MM2 writes few syncs
    while it catches up and keeps few that far behind its newest, so that group's
    translation is coarse: its re-reads are reported, not bounded.

    After SIGKILL the replicator copies again what followed its last committed position:
    duplicates on the target, which a resuming consumer may read (they count as re-reads).
    The first offset sync after that goes back upstream, and MirrorMaker 2 then drops every
    older sync from its store (``OffsetSyncStore``: an upstream rewind invalidates all
    previous offsets), so a group committed below the rewind that was not checkpointed
    before the crash is never translated.  Measured with MM2 4.3.1 on Apache Kafka 4.3.1:
    the group committed at upstream 167 at 2 s, the crash came at 4 s before MM2's next
    checkpoint (every 5 s), and after the restart the store started over at the re-copy's
    first sync, above 167: no checkpoint, no synced offset, ever.  A consumer failing over
    falls back to ``auto.offset.reset``, so this case fails over with ``earliest``, what
    an operator sets to lose nothing there; the report names each such partition and why
    (``report.untranslatable()``, figure ``failover_untranslatable``), and a missing
    translation the syncs did allow is still a failure.  None may be skipped.
    """
    topics = mirror_topics(1, partitions=3)
    rep = mirror_faults.replicator
    run = mirror_producer(topics, rate=RATE, duration=8, faults=[at(4, stop(rep)), at(5, start(rep))], witnesses=[
        witness("before", at=2), witness("after", at=5.5), witness("end"),
    ])

    mirror_verifier(run).assert_ok(allow_duplicates=stop is kill)
    report = mirror_failover(run, reset="earliest" if stop is kill else "latest")

    report.assert_ok(as_syncs_allow=True, max_heartbeat_lag_ms=heartbeat_slo_ms(report))


@pytest.mark.kafka_mirror(replicator_properties=SYNC)
def test_low_throughput_partition(mirror_topics, mirror_producer, mirror_failover):
    """30 records over 3 partitions: far fewer than offset.lag.max (100) per partition.

    MirrorMaker 2 before 3.7 wrote an offset sync only every offset.lag.max records, so a
    group at the end of such a partition was translated to one past the first record and
    re-read nearly all of it after failover.  Since 3.7 a delayed sync goes out at every
    offset flush.  Expects every partition translated, nothing skipped, every translation
    as good as the offset syncs allow, and the group at the end translated exactly (no
    re-read).
    """
    (topic,) = mirror_topics(1, partitions=3)
    run = mirror_producer(topic, rate=6, duration=5, witnesses=[witness("mid", at=2), witness("end")])
    report = mirror_failover(run)

    report.assert_ok(as_syncs_allow=True)
    for e in report.entries:
        if e.witness == "end":
            assert e.rereads == 0 and e.translated == e.exact, f"not translated exactly: {e.head()}"


@pytest.mark.kafka_mirror(replicator_properties=SYNC)
def test_empty_partition(mirror_topics, mirror_producer, mirror_failover):
    """Two lanes on three partitions: partition 2 never gets a record.

    A group assigned to it commits position 0.  MirrorMaker 2 writes no offset sync for a
    partition it never copied a record of, so it has no checkpoint either: a failing-over
    consumer falls back to auto.offset.reset, which on an empty partition loses nothing
    (latest and earliest are both 0).  Expects no loss, no re-read and nothing past the
    end of the log there, and the other partitions translated as usual.
    """
    (topic,) = mirror_topics(1, partitions=3)
    # no readiness round: its warm-up record would be partition 2's only record
    run = mirror_producer(topic, rate=RATE, duration=4, lanes=2, wait_for_target=False, witnesses=[
        witness("all", at=[2, "end"]), witness("empty", at=[2, "end"], partitions=[2]),
    ])
    report = mirror_failover(run)

    report.assert_ok(as_syncs_allow=True)
    for via in ("checkpoint", "synced"):
        e = report.entry("empty", topic, 2, via=via)
        assert e.end_of_log == 0 and e.committed == 0 and e.skipped == e.rereads == e.beyond_end == 0, e.head()
    # nothing mirrored, no checkpoint (Kafka's testNoCheckpointsIfNoRecordsAreMirrored)
    e = report.entry("empty", topic, 2, via="checkpoint")
    assert e.translated is None and not e.offset_syncs, f"a checkpoint for a partition nothing was mirrored of: {e.head()}"


@pytest.mark.nightly  # a replicator of its own (on real Kafka a second MM2) for one setting
@pytest.mark.kafka_mirror(replicator_properties={**SYNC, "offset.lag.max": "0"})
def test_failover_with_frequent_offset_syncs(mirror_env, mirror_topics, mirror_producer, mirror_verifier,
                                             mirror_failover):
    """``offset.lag.max=0`` (Kafka's ``testOneWayReplicationWithFrequentOffsetSyncs``): the
    replicator wants an offset sync after every record it copies, so a group translates to
    exactly where it stopped, on any release (before 3.7, groups at the end re-read up to
    ``offset.lag.max`` records without it).

    Expects nothing skipped, every translation as good as the syncs allow, the groups at
    the end translated exactly (no re-read, through the checkpoints and the synced group
    offsets), and syncs far denser than the default setting gives: more than twice what
    ``offset.lag.max=100`` could write at most for the records copied (one per 100 plus a
    delayed one per partition and offset flush).  The figure ``offset_syncs_per_1000``
    says how dense they were (MM2 writes at most 10 at a time and keeps only the newest
    pending one per partition while they are in flight; measured 971 with MM2 4.3.1).

    MM2 up to 3.4.0 keeps only the newest sync per partition and does not translate an
    offset behind it, so with a sync per record the group committed mid-stream is never
    checkpointed (measured with mm2:3.4.0: no checkpoint, no synced offset, 576 syncs on
    its partition): the report names it untranslatable by design, and the failover falls
    back to ``earliest`` so that it re-reads rather than skips.
    """
    topics = mirror_topics(1, partitions=3)
    duration = 6
    run = mirror_producer(topics, rate=RATE, duration=duration, witnesses=[witness("mid", at=3), witness("end")])
    report = mirror_failover(run, reset="earliest")
    # every entry of a partition (each witness, each way) has its end of log and sync count
    per_partition = {e.partition: (e.end_of_log, e.offset_syncs or 0) for e in report.entries}
    copied, syncs = (sum(v[i] for v in per_partition.values()) for i in (0, 1))
    run.record_figure("offset_syncs_per_1000", None if not copied else 1000 * syncs // copied,
                      f"{syncs} offset syncs for {copied} records copied of {topics[0]}")

    mirror_verifier(run).assert_ok()
    report.assert_ok(max_records_behind=0, as_syncs_allow=True, max_heartbeat_lag_ms=heartbeat_slo_ms(report))
    for e in report.entries:
        if e.witness == "end":
            assert e.rereads == 0 and e.translated == e.exact, f"not translated exactly: {e.head()}"
    flushes = duration / report.settings.get("flush_interval", 60.0) + 2
    default_at_most = copied / 100 + len(per_partition) * flushes
    assert syncs > 2 * default_at_most, (
        f"{syncs} offset syncs for {copied} records copied: offset.lag.max=0 gives no more than the default would "
        f"({default_at_most:.0f} at most)")


@pytest.mark.nightly  # a replicator of its own (on real Kafka a second MM2) for one setting
@pytest.mark.kafka_mirror(replicator_properties={**SYNC, "offset-syncs.topic.location": "target"})
def test_offset_syncs_on_target(mirror_env, mirror_topics, mirror_producer, mirror_verifier, mirror_failover):
    """``offset-syncs.topic.location=target`` (Kafka's ``testOffsetSyncsTopicsOnTarget``):
    for a source cluster MM2 may not write to, it keeps its offset syncs on the target, in
    a topic named after the *source* alias (``mm2-offset-syncs.source.internal``).

    Expects the syncs of the test's topic in that topic on the target (the source's
    ``mm2-offset-syncs.target.internal`` may exist: other replicators of the session
    share the source), and a failover as good as after steady state: nothing skipped,
    every translation as good as those syncs allow (the check reads them from the
    target), the group at the end exact.
    """
    from pytest_kafka_mirror.verify.failover.syncs import read_offset_syncs

    topics = mirror_topics(1, partitions=3)
    run = mirror_producer(topics, rate=RATE, duration=6, witnesses=[witness("mid", at=2), witness("end")])

    mirror_verifier(run).assert_ok()
    report = mirror_failover(run)

    report.assert_ok(max_records_behind=0, as_syncs_allow=True, max_heartbeat_lag_ms=heartbeat_slo_ms(report))
    for e in report.entries:
        if e.witness == "end":
            assert e.rereads == 0, f"the group at the end re-reads {e.rereads} records: {e.head()}"
    name = mirror_env.replicator.checkpoints.offset_syncs_topic
    syncs, _ = read_offset_syncs(mirror_env.target.bootstrap_servers, name)
    assert syncs is not None, f"no {name} on the target: {mirror_env.target.topics()}"
    assert {s.partition for s in syncs if s.topic == topics[0]} == {0, 1, 2}, f"{name}: {syncs[:10]}"
