"""The failover checks on hand-built data: exact counts, and the evidence in each message.

Each case states a witness group's consumption (what it had read at each committed
offset), the target partition as the capture saw it, and the translations the target
holds (checkpoints, synced group offsets, heartbeats); :func:`failover.evaluate` must
count exactly what a consumer resuming there would skip or read again.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_kafka_mirror.capture.witness import WitnessLog, witness
from pytest_kafka_mirror.replicators._checkpoints import REFERENCE_DEFAULTS
from pytest_kafka_mirror.verify import MirrorMismatchError
from pytest_kafka_mirror.verify.failover import SeenCheckpoint, SeenSync, SyncHistory, TargetState, evaluate
from pytest_kafka_mirror.verify.failover.captured import _Partition

T0 = 1_700_000_000.0  # commit times, epoch seconds
SYNC = replace(REFERENCE_DEFAULTS, sync_group_offsets=True, offset_lag_max=10)


def _log(commits: list[tuple[float, dict[int, int]]], partitions: tuple[int, ...] = (0,), name: str = "w",
         runs: dict[int, list[list[object]]] | None = None) -> WitnessLog:
    """A witness on topic ``t`` that read lane P, seqs 0.. at offsets 0.. of partition P."""
    log = WitnessLog(name, f"g-{name}", {"t": list(partitions)})
    log.runs = {("t", p): r for p, r in (runs or {p: [[0, "p1", p, 0, 100]] for p in partitions}).items()}
    log.commits = [{"label": "x", "time_us": int(t * 1e6), "offsets": {"t": {str(p): u for p, u in offs.items()}}}
                   for t, offs in commits]
    return log


def _part(pairs: list[tuple[int, int]], lane: int = 0, end: int | None = None) -> _Partition:
    """A target partition holding (offset, seq) of producer p1's lane."""
    p = _Partition(end=end if end is not None else (max(o for o, _ in pairs) + 1 if pairs else 0))
    if pairs:
        p.lanes[("p1", lane)] = ([o for o, _ in pairs], [s for _, s in pairs])
    return p


def _cp(up: int, down: int, *, p: int = 0, at: float = T0 + 1, seq: int = 0, group: str = "g-w") -> SeenCheckpoint:
    return SeenCheckpoint(group, "t", p, up, down, int(at * 1000), seq)


def _sync(up: int, down: int, *, at: float = T0 - 1, seq: int = 0, p: int = 0) -> SeenSync:
    return SeenSync("t", p, up, down, int(at * 1000), seq)


def _state(cps: list[SeenCheckpoint], synced: dict[tuple[str, int], int] | None = None,
           heartbeats: list[int] | None = None, syncs: list[SeenSync] | None = None) -> TargetState:
    """``syncs``: the offset-syncs topic (default: read, and empty); ``heartbeats``: their
    timestamps (default: one, a second before the failover)."""
    return TargetState(checkpoints=cps, synced={"g-w": synced or {}},
                       heartbeats=[int((T0 + 9) * 1000)] if heartbeats is None else heartbeats,
                       heartbeats_topic_exists=True, checkpoints_topic_exists=True, read_at=T0 + 10,
                       syncs=syncs if syncs is not None else [])


def _eval(log: WitnessLog, parts: dict[int, _Partition], state: TargetState, **kw: object):
    return evaluate([log], {("t", p): part for p, part in parts.items()}, state, kw.pop("settings", SYNC), {},
                    run_dir="RUN", **kw)  # type: ignore[arg-type]


ONE_TO_ONE = _part([(o, o) for o in range(100)])  # offsets 0..99 hold seqs 0..99


def test_exact_translation_skips_and_rereads_nothing() -> None:
    r = _eval(_log([(T0, {0: 60})]), {0: ONE_TO_ONE}, _state([_cp(60, 60)], synced={("t", 0): 60}))
    for via in ("checkpoint", "synced"):
        e = r.entry("w", "t", 0, via)
        assert (e.translated, e.exact, e.skipped, e.rereads, e.beyond_end) == (60, 60, 0, 0, 0)
    r.assert_ok(max_rereads=0, max_records_behind=0)
    assert r.figures()["failover_skipped"] == 0 and r.not_run == {}


def test_translated_too_far_ahead_skips_exactly_that_many_with_the_records_named() -> None:
    r = _eval(_log([(T0, {0: 60})]), {0: ONE_TO_ONE}, _state([_cp(60, 65)], synced={("t", 0): 65}))
    e = r.entry("w", "t", 0)
    assert (e.skipped, e.history_skipped, e.rereads) == (5, 5, 0)
    assert e.skipped_rows == [{"producer_id": "p1", "lane": 0, "first_seq": 60, "last_seq": 64, "count": 5,
                               "first_offset": 60, "last_offset": 64}]
    assert r.skipped == 10  # checkpoint and synced: 5 each
    with pytest.raises(MirrorMismatchError) as err:
        r.assert_no_loss()
    msg = str(err.value)
    assert "loss on failover: 10 records" in msg
    assert ("group g-w, t partition 0: committed upstream 60 (consumed through p1/lane 0 seq 59); translated by "
            "checkpoint to 65 (upstream 60); target end of log 100, first unconsumed record at 60") in msg
    assert "p1           0     60         64        5      60            64" in msg


def test_coarse_translation_rereads_and_is_bounded_on_request() -> None:
    r = _eval(_log([(T0, {0: 60})]), {0: ONE_TO_ONE}, _state([_cp(60, 41)], synced={("t", 0): 41}))
    assert r.max_rereads == 19 and r.skipped == 0
    r.assert_ok()  # re-reads are bounded only when asked
    r.assert_rereads_at_most(19)
    with pytest.raises(MirrorMismatchError, match=r"(?s)re-reads above 10 .*resuming at 41 re-reads 19 records"):
        r.assert_rereads_at_most()  # default: offset.lag.max = 10
    with pytest.raises(ValueError, match="no witnesses \\['nope'\\]"):
        r.assert_rereads_at_most(1, witnesses=["nope"])


def test_translation_past_the_end_of_the_log() -> None:
    r = _eval(_log([(T0, {0: 100})]), {0: ONE_TO_ONE}, _state([_cp(100, 103)], synced={("t", 0): 103}))
    e = r.entry("w", "t", 0)
    assert (e.beyond_end, e.history_beyond_end, e.skipped, e.exact) == (3, 3, 0, 100)
    with pytest.raises(MirrorMismatchError, match="resumes at 103, 3 past the end 100"):
        r.assert_within_log()


def test_a_checkpoint_that_went_back_is_a_rewind_but_a_rewound_group_is_not() -> None:
    cps = [_cp(60, 60, seq=1), _cp(60, 50, seq=2, at=T0 + 2), _cp(40, 40, seq=3, at=T0 + 3), _cp(70, 70, seq=4)]
    r = _eval(_log([(T0, {0: 60}), (T0 + 4, {0: 70})]), {0: ONE_TO_ONE}, _state(cps, synced={("t", 0): 70}))
    e = r.entry("w", "t", 0)
    assert [(x["downstream_before"], x["downstream"]) for x in e.rewinds] == [(60, 50)]
    assert r.rewinds == 1 and e.checkpoints == 4
    with pytest.raises(MirrorMismatchError, match="(?s)checkpoints went backwards: 1 rewinds.*60 .* 50"):
        r.assert_monotonic()


def test_staleness_at_failover_and_checkpoint_delays() -> None:
    # commits at 60 (T0) and 90 (T0 + 5); the only checkpoint came 0.5 s after the first
    log = _log([(T0, {0: 60}), (T0 + 5, {0: 90})])
    r = _eval(log, {0: ONE_TO_ONE}, _state([_cp(60, 60, at=T0 + 0.5)], synced={("t", 0): 60}))
    e = r.entry("w", "t", 0)
    assert (e.records_behind, e.seconds_behind, e.max_delay_s, e.never_translated) == (30, 5.0, 0.5, [90])
    assert (e.skipped, e.rereads) == (0, 30)  # a stale checkpoint re-reads, it does not lose
    with pytest.raises(MirrorMismatchError, match="30 source offsets behind \\(limit 10\\); 5.00 s behind"):
        r.assert_checkpoints_fresh(max_records=10, max_seconds=1)
    with pytest.raises(MirrorMismatchError, match="commits at upstream \\[90\\] never got a checkpoint"):
        r.assert_checkpoints_fresh(max_delay_s=2)


@pytest.mark.parametrize(("reset", "skipped", "rereads", "resume"), [("latest", 60, 0, 100), ("earliest", 0, 40, 0)])
def test_an_untranslated_partition_falls_back_to_auto_offset_reset(reset: str, skipped: int, rereads: int,
                                                                    resume: int) -> None:
    r = _eval(_log([(T0, {0: 40})]), {0: ONE_TO_ONE}, _state([]), reset=reset)
    e = r.entry("w", "t", 0)
    assert (e.translated, e.resume_at, e.skipped, e.rereads, e.records_behind) == (None, resume, skipped, rereads, 40)
    with pytest.raises(MirrorMismatchError, match=f"no translation: 2 group partitions.*auto.offset.reset={reset}"):
        r.assert_translated()


def test_an_empty_partition_needs_no_translation() -> None:
    r = _eval(_log([(T0, {0: 0})], runs={0: []}), {0: _part([], end=0)}, _state([]))
    e = r.entry("w", "t", 0)
    assert (e.translated, e.end_of_log, e.skipped, e.rereads, e.records_behind, e.exact) == (None, 0, 0, 0, 0, 0)
    r.assert_ok(max_rereads=0, max_records_behind=0)


def test_duplicates_of_a_recopied_range_are_rereads_never_losses() -> None:
    # seqs 0..59 at 0..59, a replicator restart copied 40..59 again at 60..79, then 60..99 at 80..119
    part = _part([(o, o) for o in range(60)] + [(60 + i, 40 + i) for i in range(20)]
                 + [(80 + i, 60 + i) for i in range(40)])
    r = _eval(_log([(T0, {0: 60})]), {0: part}, _state([_cp(60, 61)], synced={("t", 0): 61}))
    e = r.entry("w", "t", 0)
    assert (e.skipped, e.rereads, e.exact, e.end_of_log) == (0, 19, 80, 120)
    r = _eval(_log([(T0, {0: 60})]), {0: part}, _state([_cp(60, 85)], synced={("t", 0): 85}))
    assert r.entry("w", "t", 0).skipped == 5  # seqs 60..64 at offsets 80..84


def test_every_checkpoint_of_the_run_is_checked_against_the_commit_it_translated() -> None:
    # an early checkpoint skipped 3 records of its commit; the latest one is exact
    cps = [_cp(30, 33, seq=1), _cp(60, 60, seq=2)]
    r = _eval(_log([(T0, {0: 30}), (T0 + 1, {0: 60})]), {0: ONE_TO_ONE}, _state(cps, synced={("t", 0): 60}))
    e = r.entry("w", "t", 0)
    assert (e.skipped, e.history_skipped) == (0, 3)
    assert e.history_rows[0]["upstream"] == 30 and e.history_rows[0]["skipped"] == 3
    with pytest.raises(MirrorMismatchError, match="checkpoints of the run that skipped records"):
        r.assert_no_loss()


def test_heartbeat_lag_gap_and_checks_that_could_not_run() -> None:
    stamps = [int((T0 + s) * 1000) for s in (0, 1, 2, 6, 7, 9.5)]
    settings = replace(SYNC, sync_group_offsets=False)
    r = _eval(_log([(T0, {0: 60})]), {0: ONE_TO_ONE}, _state([_cp(60, 60)], heartbeats=stamps), settings=settings)
    assert r.heartbeats["lag_ms"] == 500 and r.heartbeats["max_gap_ms"] == 4000 and r.heartbeats["count"] == 6
    assert "synced offsets" in r.left_out and [e.via for e in r.entries] == ["checkpoint"]
    r.assert_heartbeats(max_lag_ms=500)
    with pytest.raises(MirrorMismatchError, match="heartbeats stopped for 4000 ms \\(limit 2000 ms\\)"):
        r.assert_heartbeats(max_lag_ms=1000, max_gap_ms=2000)
    r = _eval(_log([(T0, {0: 60})]), {0: ONE_TO_ONE}, _state([_cp(60, 60)]),
              settings=replace(settings, emit_heartbeats=False))
    with pytest.raises(MirrorMismatchError, match="no replicated heartbeats to check: emit.heartbeats.enabled=false "
                                                  ".*: the replicator emits no heartbeats"):
        r.assert_heartbeats(max_lag_ms=1)


def test_report_json(tmp_path: Path) -> None:
    r = _eval(_log([(T0, {0: 60})]), {0: ONE_TO_ONE}, _state([_cp(60, 65)], synced={("t", 0): 65}))
    d = json.loads(r.write(tmp_path / "f.json").read_text())
    assert d["figures"]["failover_skipped"] == 10 and d["entries"][0]["skipped_rows"][0]["first_seq"] == 60
    assert d["settings"]["checkpoints_topic"] == "source.checkpoints.internal"


def test_witness_specs_and_consumed_ranges() -> None:
    assert witness("both", at=[6, "end", 2]).at == (2.0, 6.0, "end")
    for bad, message in [({"name": "a b"}, "letters"), ({"name": "x", "at": -1}, "neither seconds"),
                         ({"name": "x", "at": []}, "at least one"), ({"name": "x", "partitions": [-1]}, ">= 0")]:
        with pytest.raises(ValueError, match=message):
            witness(**bad)  # type: ignore[arg-type]
    log = _log([(T0, {0: 8})], runs={0: [[0, "p1", 0, 0, 5], [5, "p2", 1, 10, 5]]})
    assert log.consumed_ranges("t", 0, 8) == {("p1", 0): [(0, 4)], ("p2", 1): [(10, 12)]}
    assert log.last_consumed("t", 0, 8) == "p2/lane 1 seq 12" and log.last_consumed("t", 0, 0) == "nothing of ours"
    assert WitnessLog.from_dict(json.loads(json.dumps(log.to_dict()))) == log


# -- the offset syncs as evidence: sync spacing (MM2's design) or a translation bug -------------------

BACKLOG = _part([(o, o) for o in range(400)])  # offsets 0..399 hold seqs 0..399
BACKLOG_RUNS = {0: [[0, "p1", 0, 0, 400]]}


def _backlog(cp_down: int, syncs: list[SeenSync], *, cp_at: float = T0 + 1):
    """A group committed 298 (a backlog: the records queued before the mirror copied them);
    the checkpoint at ``cp_at`` translated it to ``cp_down``, the synced group offset too."""
    log = _log([(T0, {0: 298})], runs=BACKLOG_RUNS)
    return _eval(log, {0: BACKLOG}, _state([_cp(298, cp_down, at=cp_at)], synced={("t", 0): cp_down}, syncs=syncs))


def test_sparse_syncs_rereads_are_mms_design_and_pass() -> None:
    # as measured with MM2 4.x: the backlog got a sync at its start and the next one past the group
    syncs = [_sync(0, 0, at=T0 - 5, seq=0), _sync(350, 350, at=T0 - 0.5, seq=1)]
    r = _backlog(1, syncs)
    for via in ("checkpoint", "synced"):
        e = r.entry("w", "t", 0, via)
        assert (e.translated, e.rereads, e.skipped, e.offset_syncs, e.sync_best, e.sync_floor) == (1, 297, 0, 2, 1, 1)
        assert (e.sync["upstream"], e.sync["downstream"], e.sync["offset"], e.sync_verdict) == (0, 0, 0, "as synced")
        assert e.coarser == 0 and e.history_coarser == []
        assert e.head().endswith(
            "2 offset syncs for this partition, the latest at or before upstream 298 it could have used is 0 -> 0 "
            f"(offset 0 of the syncs topic, {e.sync['time']}), so MM2 translates to 1 at best: as good as the syncs "
            "allow, all 297 re-reads from the spacing of the syncs (MM2's design)")
    r.assert_ok(max_records_behind=0)  # the syncs check is on: they were read
    r.assert_as_syncs_allow()
    assert r.figures()["failover_coarser_than_syncs"] == 0 and r.max_rereads == 297
    with pytest.raises(MirrorMismatchError, match="re-reads above 10"):
        r.assert_rereads_at_most()  # the flat bound blames MM2 for the spacing of its syncs


def test_a_translation_worse_than_the_syncs_allow_fails_naming_the_sync() -> None:
    syncs = [_sync(0, 0, at=T0 - 5, seq=0), _sync(200, 200, at=T0 - 4, seq=1), _sync(290, 290, at=T0 - 3, seq=2)]
    r = _backlog(1, syncs)
    e = r.entry("w", "t", 0)
    assert (e.sync_best, e.sync_floor, e.coarser, e.sync_verdict, e.rereads) == (291, 291, 290, "coarser", 297)
    assert [(h["upstream"], h["downstream"], h["floor"], h["sync_upstream"], h["sync_offset"])
            for h in e.history_coarser] == [(298, 1, 291, 290, 2)]
    assert r.figures()["failover_coarser_than_syncs"] == 2  # checkpoint and synced
    r.assert_no_loss()  # no record is skipped: only the syncs show the bug
    with pytest.raises(MirrorMismatchError) as err:
        r.assert_as_syncs_allow()
    msg = str(err.value)
    assert "translations coarser than the offset syncs allow: 2 group partitions" in msg
    assert ("the latest at or before upstream 298 it could have used is 290 -> 290 (offset 2 of the syncs topic, "
            in msg)
    assert "so MM2 translates to 291 at best, 291 at worst from the syncs its store kept: translated 290 below that, " \
           "a translation bug" in msg
    with pytest.raises(MirrorMismatchError, match="translations coarser than the offset syncs allow"):
        r.assert_ok()
    assert _backlog(291, syncs).entry("w", "t", 0).sync_verdict == "as synced"
    _backlog(291, syncs).assert_ok(max_rereads=7)


def test_a_checkpoint_can_only_use_syncs_written_before_it() -> None:
    early = _sync(0, 0, at=T0 - 5, seq=0)
    # written 3 s after the checkpoint: it could not have used it
    late = _backlog(1, [early, _sync(290, 290, at=T0 + 4, seq=1)])
    assert (late.entry("w", "t", 0).sync_best, late.entry("w", "t", 0).sync_verdict) == (1, "as synced")
    late.assert_as_syncs_allow()
    # written 0.5 s before it: it may not have read it yet (SYNC_READ_LAG_S), but could have used it
    just = _backlog(1, [early, _sync(290, 290, at=T0 + 0.5, seq=1)])
    e = just.entry("w", "t", 0)
    assert (e.sync_best, e.sync_floor, e.sync_verdict) == (291, 1, "allowed")
    assert (e.sync_kept, e.sync_newest["upstream"]) == (291, 290)  # type: ignore[index]
    assert ("but MM2's sync store keeps syncs exponentially spaced back from its newest (290 -> 290), which gives "
            "291 (1 at worst, if it had not read the latest ones yet): translated 1, as MM2's design allows "
            "(297 re-reads)") in e.head()
    just.assert_as_syncs_allow()
    # written 3 s before it: it had read it
    with pytest.raises(MirrorMismatchError, match="translated 290 below that, a translation bug"):
        _backlog(1, [early, _sync(290, 290, at=T0 - 2, seq=1)]).assert_as_syncs_allow()


def test_mm2s_sync_store_drops_old_syncs_so_a_far_behind_group_is_translated_coarsely() -> None:
    # a sync for every record 0..1000: MM2's store keeps 1000, 999, 998, 996, 992, 976, 960, 896, 768, 512, 0
    syncs = [_sync(u, u, at=T0 - 5 + u / 1000, seq=u) for u in range(1001)]
    assert SyncHistory(syncs).evidence(298, None).floor == 1
    log = _log([(T0, {0: 298})], runs=BACKLOG_RUNS)
    part = _part([(o, o) for o in range(1001)])
    r = _eval(log, {0: part}, _state([_cp(298, 1, at=T0 + 1)], synced={("t", 0): 1}, syncs=syncs))
    e = r.entry("w", "t", 0)
    assert (e.sync_best, e.sync_floor, e.sync_kept, e.sync_verdict, e.rereads) == (298, 1, 1, "allowed", 297)
    assert "from its newest (1000 -> 1000), which gives 1 (1 at worst" in e.head()
    r.assert_as_syncs_allow()
    r = _eval(log, {0: part}, _state([_cp(298, 0, at=T0 + 1)], synced={("t", 0): 0}, syncs=syncs))
    assert r.entry("w", "t", 0).coarser == 1
    with pytest.raises(MirrorMismatchError, match="1 at worst from the syncs its store kept: translated 1 below"):
        r.assert_as_syncs_allow()


def test_an_upstream_rewind_in_the_syncs_starts_the_store_over() -> None:
    # 0..99 copied, then the mirror re-copied from 60 (after a crash): syncs before the rewind are gone
    syncs = [_sync(0, 0, seq=0), _sync(50, 50, seq=1), _sync(99, 99, seq=2), _sync(60, 100, seq=3)]
    h = SyncHistory(syncs)
    assert (h.evidence(55, None).floor, h.evidence(55, None).best) == (None, None)  # too old to translate
    assert (h.evidence(70, None).floor, h.evidence(70, None).best) == (101, 101)


def test_mm2_up_to_3_4_0_keeps_the_newest_sync_only() -> None:
    """Before KAFKA-14666 (3.4.1) OffsetSyncStore held one sync per partition: an offset
    behind it is "too far in the past to translate accurately" (no checkpoint), one at or
    after it is the sync's downstream plus the step.  Measured with mm2:3.4.0 and
    offset.lag.max=0: a group committed mid-stream was never checkpointed."""
    syncs = [_sync(u, u, at=T0 - 5 + u / 1000, seq=u) for u in range(101)]
    legacy = SyncHistory(syncs, store="latest")
    assert (legacy.translate(101, 100), legacy.translate(101, 99), legacy.translate(101, 120)) == (100, -1, 120)
    assert SyncHistory(syncs).translate(101, 99) == 99  # 3.4.1+: kept, exact
    with pytest.raises(ValueError, match="store 'newest': exponential or latest"):
        SyncHistory(syncs, store="newest")
    log = _log([(T0, {0: 60})])
    part = _part([(o, o) for o in range(101)])
    old = replace(SYNC, sync_store="latest")
    r = _eval(log, {0: part}, _state([], synced={}, syncs=syncs), settings=old)
    e = r.entry("w", "t", 0)
    assert e.translated is None and [u.via for u in r.untranslatable()] == ["checkpoint", "synced"], e.head()
    assert "up to 3.4.0 it keeps the newest sync only (100 -> 100), past it" in e.head()
    # falling back to earliest, it re-reads and skips nothing; no checkpoint by design is not "stale"
    _eval(log, {0: part}, _state([], synced={}, syncs=syncs), settings=old, reset="earliest").assert_ok(
        max_records_behind=0)
    # the same syncs under the 3.4.1+ store: the missing translation is the replicator's fault
    r = _eval(log, {0: part}, _state([], synced={}, syncs=syncs))
    assert r.untranslatable() == [] and r.entry("w", "t", 0).translated is None


def test_every_checkpoint_of_the_run_is_held_to_its_syncs_and_ahead_is_named() -> None:
    syncs = [_sync(0, 0, at=T0 - 5, seq=0), _sync(30, 30, at=T0 - 5, seq=1), _sync(59, 59, at=T0 - 5, seq=2)]
    cps = [_cp(30, 25, seq=1, at=T0 + 1), _cp(60, 60, seq=2, at=T0 + 2)]
    r = _eval(_log([(T0, {0: 30}), (T0 + 1, {0: 60})]), {0: ONE_TO_ONE}, _state(cps, synced={("t", 0): 60},
                                                                             syncs=syncs))
    e = r.entry("w", "t", 0)
    assert (e.coarser, e.sync_verdict) == (0, "as synced")  # the latest is exact
    assert [(h["upstream"], h["downstream"], h["floor"]) for h in e.history_coarser] == [(30, 25, 30)]
    with pytest.raises(MirrorMismatchError, match="(?s)checkpoints of the run below the worst the syncs allowed"):
        r.assert_as_syncs_allow()
    r = _eval(_log([(T0, {0: 60})]), {0: ONE_TO_ONE}, _state([_cp(60, 65)], synced={("t", 0): 65}, syncs=syncs))
    e = r.entry("w", "t", 0)
    assert (e.sync_verdict, e.skipped) == ("ahead", 5)
    assert "so MM2 translates to 60 at best: translated 5 past it (MM2 never translates past a sync" in e.head()
    r.assert_as_syncs_allow()  # not coarser: the data checks catch what it skips
    with pytest.raises(MirrorMismatchError, match="loss on failover: 10 records"):
        r.assert_ok()


def test_without_the_offset_syncs_the_check_is_not_run_and_says_why() -> None:
    state = _state([_cp(60, 60)], synced={("t", 0): 60})
    state.syncs, state.syncs_note = None, "no offset-syncs topic mm2-offset-syncs.target.internal on the source cluster"
    r = _eval(_log([(T0, {0: 60})]), {0: ONE_TO_ONE}, state)
    assert r.not_run["offset syncs"] == state.syncs_note and r.entry("w", "t", 0).offset_syncs is None
    assert r.figures()["failover_coarser_than_syncs"] is None
    r.assert_ok()  # listed in not_run: required only where the test asks for the syncs check
    with pytest.raises(MirrorMismatchError,
                       match="could not be checked against the offset syncs: no offset-syncs topic"):
        r.assert_as_syncs_allow()
    with pytest.raises(MirrorMismatchError, match="could not be checked against the offset syncs"):
        r.assert_ok(as_syncs_allow=True)


def test_steady_state_syncs_as_the_reference_mirror_wrote_them() -> None:
    # offset.lag.max 100 at 100 records/s: an immediate sync every ~100 offsets and a delayed one
    # at every 1 s flush; MM2's store then holds 347, 303, 202, 0: 247 is gone, so a group at 300
    # is translated from 202 (measured on the embedded default: 97 re-reads, as MM2's design gives)
    ups = [0, 46, 101, 146, 202, 247, 303, 347]
    syncs = [_sync(u, u, at=T0 - 4 + i / 2, seq=i) for i, u in enumerate(ups)]
    log = _log([(T0, {0: 300})], runs=BACKLOG_RUNS)
    for down, verdict in [(203, "allowed"), (248, "as synced"), (202, "coarser")]:
        r = _eval(log, {0: BACKLOG}, _state([_cp(300, down, at=T0 + 1)], synced={("t", 0): down}, syncs=syncs))
        e = r.entry("w", "t", 0)
        assert (e.sync_best, e.sync_kept, e.sync_floor, e.sync_verdict) == (248, 203, 203, verdict), down
        assert e.rereads == 300 - down


# -- no check passes on nothing -------------------------------------------------------------

#: the settings of a replicator whose properties turned checkpoints off, as the plugin quotes them
NO_CHECKPOINTS = SYNC.with_properties({"source->target.emit.checkpoints.enabled": "false"},
                                      origins={"source->target.emit.checkpoints.enabled": "--opt"})[0]


def test_no_checkpoints_is_a_failure_naming_the_setting_and_what_a_consumer_would_do() -> None:
    # the group consumed 60 of 100 records on partition 0: with latest it would skip the 40 it
    # had not consumed, with earliest re-read the 60 it had
    r = _eval(_log([(T0, {0: 60})]), {0: ONE_TO_ONE}, _state([]), settings=NO_CHECKPOINTS)
    assert r.entries == [] and set(r.not_run) >= {"checkpoints"} and "synced offsets" in r.left_out
    assert r.fallback == {"partitions": 1, "skipped_latest": 40, "rereads_earliest": 60}
    assert r.figures()["failover_groups_checked"] == 0 and r.figures()["failover_translations_checked"] == 0
    for check in (r.assert_ok, r.assert_no_loss, r.assert_translated, r.assert_monotonic):
        with pytest.raises(MirrorMismatchError, match=(
                r"nothing to fail over with \(checkpoints\): source->target.emit.checkpoints.enabled=false \(--opt\): "
                r"the replicator writes no checkpoints\n.*falls back to auto.offset.reset.*skip 40 records.*"
                r"re-read 60")):
            check()
    with pytest.raises(MirrorMismatchError, match="no failover entry .* via checkpoint: the checkpoints were not "
                                                  "checked: source->target.emit.checkpoints.enabled=false"):
        r.entry("w", "t", 0)


def test_no_offset_syncs_means_no_checkpoints_and_says_so() -> None:
    settings = SYNC.with_properties({"emit.offset-syncs.enabled": "false"})[0]
    r = _eval(_log([(T0, {0: 60})]), {0: ONE_TO_ONE}, _state([]), settings=settings)
    with pytest.raises(MirrorMismatchError, match="emit.offset-syncs.enabled=false: MirrorMaker 2 runs no checkpoint "
                                                  "connector without offset syncs"):
        r.assert_ok()


def test_synced_offsets_asked_for_and_off_fail_not_asked_for_are_not_checked() -> None:
    # the test's marker asked (top level), the user's flow key turned it off: MM2's flow key wins
    asked = REFERENCE_DEFAULTS.with_properties(
        [("sync.group.offsets.enabled", "true"), ("source->target.sync.group.offsets.enabled", "false")],
        origins={"sync.group.offsets.enabled": "the test's marker",
                 "source->target.sync.group.offsets.enabled": "--kafka-mirror-replicator-properties"})[0]
    r = _eval(_log([(T0, {0: 60})]), {0: ONE_TO_ONE}, _state([_cp(60, 60)]), settings=asked)
    assert [e.via for e in r.entries] == ["checkpoint"]
    with pytest.raises(MirrorMismatchError, match=r"nothing to fail over with \(synced offsets\): source->target"
                                                  r".sync.group.offsets.enabled=false "
                                                  r"\(--kafka-mirror-replicator-properties\)"):
        r.assert_ok()
    r = _eval(_log([(T0, {0: 60})]), {0: ONE_TO_ONE}, _state([_cp(60, 60)]), settings=REFERENCE_DEFAULTS)
    r.assert_ok()
    assert "sync.group.offsets.enabled=false (the reference mirror's default)" in r.left_out["synced offsets"]


def test_a_part_left_out_on_purpose_is_not_checked_and_says_why() -> None:
    r = _eval(_log([(T0, {0: 60})]), {0: ONE_TO_ONE}, _state([_cp(60, 60)], synced={("t", 0): 60}, heartbeats=[]),
              leave_out={"heartbeats": "left out by --kafka-mirror-leave-out"})
    r.assert_ok()
    r.assert_heartbeats(max_lag_ms=1)  # left out: not checked
    assert r.left_out == {"heartbeats": "left out by --kafka-mirror-leave-out"}
    assert r.figures()["failover_heartbeats_checked"] == 0 and r.figures()["failover_translations_checked"] == 2
    assert "not checked: heartbeats: left out by --kafka-mirror-leave-out" in r.summary()


def test_no_heartbeat_during_the_run_fails_naming_the_interval() -> None:
    settings = SYNC.with_properties({"emit.heartbeats.interval.seconds": "600"}, origins={
        "emit.heartbeats.interval.seconds": "the test's marker"})[0]
    before = [int((T0 - 30) * 1000)]  # one heartbeat, before production started
    r = _eval(_log([(T0, {0: 60})]), {0: ONE_TO_ONE}, _state([_cp(60, 60)], synced={("t", 0): 60}, heartbeats=before),
              settings=settings, since=T0)
    assert r.figures()["failover_heartbeats_checked"] == 0
    with pytest.raises(MirrorMismatchError, match=r"no replicated heartbeat arrived in source.heartbeats between the "
                                                  r"start of production and the failover \(10.0 s\); "
                                                  r"emit.heartbeats.interval.seconds=600 \(the test's marker\)"):
        r.assert_ok()


def test_a_check_that_saw_no_group_fails() -> None:
    r = _eval(_log([]), {0: ONE_TO_ONE}, _state([_cp(60, 60)]))
    with pytest.raises(MirrorMismatchError, match="nothing was checked: 0 groups, 0 translations"):
        r.assert_ok()


def test_no_checkpoint_of_a_group_the_filter_leaves_out_names_the_filter() -> None:
    settings = SYNC.with_properties({"groups.exclude": "g-.*"}, origins={"groups.exclude": "--opt"})[0]
    r = _eval(_log([(T0, {0: 60})]), {0: ONE_TO_ONE}, _state([]), settings=settings)
    with pytest.raises(MirrorMismatchError, match=r"no translation: 2 group partitions.*\n  why: the group filter "
                                                  r"leaves out the witness groups g-w \(groups=.*"
                                                  r"groups.exclude=g-.\* \(--opt\)\)"):
        r.assert_ok()


def test_offset_syncs_left_out_are_not_checked_nor_required() -> None:
    state = _state([_cp(60, 60)], synced={("t", 0): 60})
    state.syncs = None
    r = _eval(_log([(T0, {0: 60})]), {0: ONE_TO_ONE}, state, leave_out={"offset syncs": "left out by the test"})
    assert r.left_out == {"offset syncs": "left out by the test"} and "offset syncs" not in r.not_run
    assert r.figures()["failover_coarser_than_syncs"] is None
    r.assert_ok(as_syncs_allow=True)  # left out on purpose: not checked, not failed
