"""The reference mirror's consumer-group offset handling, against MirrorMaker 2's semantics.

``SyncTracker`` is ``OffsetSyncWriter.PartitionState`` (when to write an offset sync),
``SyncStore`` is ``OffsetSyncStore`` (which syncs to keep, how to translate): the
expectations below are those of apache/kafka's ``OffsetSyncStoreTest`` and of the
conditions in ``OffsetSyncWriter``.
"""

from __future__ import annotations

import pytest

from pytest_kafka_mirror.replicators import Knobs, parse_knobs
from pytest_kafka_mirror.replicators._checkpoints import (
    MM2_DEFAULTS,
    REFERENCE_DEFAULTS,
    SyncStore,
    SyncTracker,
)
from pytest_kafka_mirror.replicators.mm2 import format_properties, parse_properties, render_mm2_properties

TP = ("topic1", 2)


# -- when to write a sync ----------------------------------------------------------------------


def test_tracker_syncs_the_first_record_then_every_offset_lag_max() -> None:
    t = SyncTracker(offset_lag_max=10)
    for off in range(31):
        t.update(TP, off, off)
    # first record; then when the downstream offset is lag.max past one after the last sync
    assert t.take() == [(TP, 0, 0), (TP, 11, 11), (TP, 22, 22)]
    assert t.take() == []
    t.promote()  # the offset flush: the latest record's sync, delayed until now
    assert t.take() == [(TP, 30, 30)]


def test_tracker_syncs_at_once_on_a_skipped_upstream_offset_or_a_truncated_downstream() -> None:
    t = SyncTracker(offset_lag_max=100)
    for up, down in [(0, 0), (1, 1), (5, 2), (6, 3), (7, 1)]:
        t.update(TP, up, down)
    assert t.take() == [(TP, 0, 0), (TP, 5, 2), (TP, 7, 1)]  # first, skipped 2..4, downstream went back
    t.promote()
    assert t.take() == []  # the delayed sync (6, 3) was superseded by the immediate one


def test_tracker_with_offset_lag_max_zero_syncs_every_record() -> None:
    t = SyncTracker(offset_lag_max=0)
    for off in range(4):
        t.update(TP, off, off + 10)
    assert [up for _, up, _ in t.take()] == [0, 1, 2, 3]


# -- which syncs to keep, and the translation (OffsetSyncStoreTest) -----------------------------


def test_store_translation() -> None:
    s = SyncStore()
    assert s.translate(TP, 0) is None  # no sync at all
    s.apply(TP, 100, 200)
    assert s.translate(TP, 150) == 201  # one past the sync, never further
    s.apply(TP, 150, 251)
    assert s.translate(TP, 150) == 251
    assert s.translate(TP, 5) == -1  # before every sync
    s.apply(TP, 200, 10)  # downstream offsets reset
    assert s.translate(TP, 200) == 10
    s.apply(TP, 20, 20)  # upstream offsets reset: all earlier syncs are invalid
    assert s.translate(TP, 20) == 20


def _sparse(s: SyncStore, sync: int, previous: int) -> None:
    assert s.translate(TP, sync - 1) == (previous if previous == -1 else previous + 1), (sync, previous)
    assert s.translate(TP, sync) == sync
    assert s.translate(TP, sync + 1) == sync + 1
    assert s.translate(TP, sync + 2) == sync + 1


def test_store_keeps_syncs_exponentially_spaced_back_from_the_latest() -> None:
    """testPastOffsetTranslation: syncs every 10 offsets; older offsets translate coarser."""
    s = SyncStore()
    off = 0
    while off <= 1000:
        s.apply(TP, off, off, loading=True)  # the initial read of the syncs topic
        off += 10
    while off <= 10000:
        s.apply(TP, off, off)
        off += 10
    _sparse(s, 1000, -1)
    for sync, previous in [(4840, 1000), (6760, 4840), (8680, 6760), (9160, 8680), (9640, 9160), (9880, 9640),
                           (9940, 9880), (9970, 9940), (9990, 9970), (10000, 9990)]:
        _sparse(s, sync, previous)
    s.apply(TP, 1500, 11000)  # an upstream rewind clears the history
    assert (s.translate(TP, 1499), s.translate(TP, 1500), s.translate(TP, 2000)) == (-1, 11000, 11001)


@pytest.mark.parametrize("step", [1, 3, 7, 100])
def test_store_expires_at_most_one_distinct_sync_per_new_one(step: int) -> None:
    """testKeepMostDistinctSyncs, over 20 000 offsets: invariant A (latest kept), D (earliest
    kept), and never more than one distinct sync lost per sync received."""
    s = SyncStore()
    last = 1
    for off in range(0, 20_001, step):
        s.apply(TP, off, off)
        arr = s.syncs[TP]
        assert arr[0][0] == off and arr[-1][0] == 0
        count = 1 + sum(1 for i in range(1, len(arr)) if arr[i] is not arr[i - 1])
        assert count - last >= -1, f"expired {last - count + 1} syncs at offset {off}"
        last = count


def test_store_survives_a_restart_through_its_file() -> None:
    s = SyncStore()
    for off in range(0, 5000, 37):
        s.apply(TP, off, off + 3)
    again = SyncStore()
    again.load(s.dump())
    assert all(again.translate(TP, u) == s.translate(TP, u) for u in range(0, 5100, 13))
    again.apply(TP, 5001, 5004)  # and it keeps working as the same store would
    s.apply(TP, 5001, 5004)
    assert again.syncs[TP] == s.syncs[TP]


# -- settings: MM2's property names ------------------------------------------------------------


def test_settings_from_mm2_properties() -> None:
    props = {"emit.checkpoints.interval.seconds": "5", "source->target.emit.checkpoints.interval.seconds": "2",
             "sync.group.offsets.enabled": "TRUE", "offset.lag.max": "0", "target.offset.flush.interval.ms": "2500",
             "source->target.groups": "^km-.*, other", "replication.policy.separator": "_", "tasks.max": "4",
             "offset.flush.interval.ms": "1"}  # top-level: MM2 ignores it, and so do we
    s, other = MM2_DEFAULTS.with_properties(props)
    assert (s.checkpoints_interval, s.sync_group_offsets, s.offset_lag_max, s.flush_interval) == (2.0, True, 0, 2.5)
    assert s.groups == ("^km-.*", "other") and s.names.checkpoints_topic == "source_checkpoints_internal"
    assert sorted(other) == ["offset.flush.interval.ms", "tasks.max"]
    assert MM2_DEFAULTS.checkpoints_interval == 60 and REFERENCE_DEFAULTS.checkpoints_interval == 1


@pytest.mark.parametrize(("key", "value", "message"), [
    ("offset.lag.max", "-1", "expected a number >= 0"),
    ("emit.checkpoints.interval.seconds", "0", "expected a number > 0"),
    ("sync.group.offsets.enabled", "maybe", "expected true or false"),
    ("groups", "km-(", "not a regular expression"),
    ("offset-syncs.topic.location", "sideways", "expected source or target"),
])
def test_bad_settings_name_the_property(key: str, value: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"replicator property {key}.*{message}"):
        MM2_DEFAULTS.with_properties({key: value})


def test_group_filter() -> None:
    ok = REFERENCE_DEFAULTS.group_filter(default="^km-gw0-")  # the mirror's topic filter (a search)
    assert ok("km-gw0-test-1-end") and not ok("km-gw1-test-1-end") and not ok("connect-km-gw0-x")
    ok = MM2_DEFAULTS.with_properties({"groups": "km-.*"})[0].group_filter(default="^x")  # MM2: full match
    assert ok("km-a") and not ok("a-km-a") and not ok("__km")


def test_properties_file_round_trip() -> None:
    props = render_mm2_properties(source_bootstrap="127.0.0.1:1", target_bootstrap="127.0.0.1:2", topics="^km-.*")
    assert parse_properties(format_properties(props)) == props
    assert props["source->target.groups"] == "^km-.*" and props["target.offset.flush.interval.ms"] == "5000"
    assert props["sync.group.offsets.interval.seconds"] == props["emit.checkpoints.interval.seconds"] == "5"
    assert parse_properties("# c\n! c\n a\\:b : c d \nk=v\\=w\nbare\n") == {"a:b": "c d ", "k": "v=w", "bare": ""}


def test_checkpoint_knobs_keep_records_on_the_fast_path() -> None:
    k = parse_knobs("translate_ahead=5,checkpoint_rewind=2,stop_checkpoints_after=1.5")
    assert k == Knobs(translate_ahead=5, checkpoint_rewind=2, stop_checkpoints_after=1.5)
    assert k.checkpoint_faults and not k.active
    assert Knobs.from_dict(k.to_dict()) == k and str(k) == "translate_ahead=5,checkpoint_rewind=2,stop_checkpoints_after=1.5"
    assert Knobs(drop=0.1).active and not Knobs(drop=0.1).checkpoint_faults
    with pytest.raises(ValueError, match="stop_checkpoints_after"):
        Knobs(stop_checkpoints_after=-1)
    with pytest.raises(ValueError, match="translate_ahead"):
        Knobs(translate_ahead=-3)
