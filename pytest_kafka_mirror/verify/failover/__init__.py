"""Failover correctness: are consumer groups' translated offsets on the target safe to resume from?

When the source is gone, consumers move to the target and resume from their group's
offsets translated by the replicator: the group's committed offsets on the target
(MirrorMaker 2's ``sync.group.offsets.enabled``) or the checkpoints topic
(``<source>.checkpoints.internal``, what ``RemoteClusterUtils.translateOffsets`` reads).
:func:`check_failover` reads both the way a failing-over consumer would, after the run,
and checks them against the data — never against watermarks (Tansu's are wrong): the
witness groups (:mod:`~pytest_kafka_mirror.capture.witness`) know exactly which records each
group had consumed at each committed offset, and the capture knows which record sits at
each target offset.  Per witness group and partition, and per way of translating
(``via="checkpoint"`` / ``"synced"``):

skipped (loss on failover)
    records the group had *not* consumed whose every copy on the target lies before the
    offset a resuming consumer starts at: it never reads them.  Checked at the failover
    moment (the group's last commit against the latest translation) and for every
    checkpoint of the run against the commit it translated (a failover could have
    happened right after it).
rereads
    copies at or after the resume offset of records the group had already consumed:
    what the resuming consumer reads a second time.  A figure, not a verdict: MM2
    translates to at most one past its latest offset sync, and how far apart its syncs
    are is not up to the translation (a backlog copied at full speed gets few of them).
coarser than the syncs (``sync_*`` fields)
    the offset syncs the replicator wrote (``mm2-offset-syncs.<target>.internal``, read
    from offset 0) say what MM2's algorithm could translate: for upstream offset U the
    latest sync at or before U, its downstream offset (+1 when U is past it), from the
    syncs its sync store kept (64 per partition, exponentially spaced back from the
    newest: :class:`SyncHistory` replays them).  A translation at least that good is
    MM2's design however many re-reads it leaves; a worse one is a translation bug.
    A checkpoint can only use syncs written before it: syncs stamped within
    :data:`SYNC_READ_LAG_S` before it may not have been read yet, within
    :data:`SYNC_LEAD_S` after it may have been.
beyond_end
    how far a translation points past the end of the target partition (as captured at
    the end of the run): "negative lag", records produced there after failover skipped.
rewinds
    checkpoints whose downstream offset went back while the group's upstream offset did
    not (MM2 guards against this since 3.x; restarts used to break it).
staleness
    at the failover moment: how many source offsets and seconds the latest checkpoint
    is behind the group's last commit; over the run: the longest time from a commit to
    the first checkpoint reflecting it.
heartbeats
    the replicated heartbeats topic (``<source>.heartbeats``): age of the newest
    heartbeat at failover (the replication lag MM2 users watch), the longest gap, count.

A partition without any translation falls back to the consumer's ``auto.offset.reset``
(``reset=``; Kafka's default ``latest``): that is what a real consumer would do, so an
untranslated partition shows as skipped records (latest) or re-reads (earliest), and
:meth:`FailoverReport.assert_translated` names it.  An empty partition needs no
translation (MM2 writes no checkpoint for it).

No check passes on nothing.  A part that cannot run although it should (the replicator
writes no checkpoints, does not sync the group offsets a test asked for, emits no
heartbeats, whatever the reason, its own settings included) is in
:attr:`FailoverReport.not_run` with the setting in effect
(``source->target.emit.checkpoints.enabled=false (--kafka-mirror-replicator-properties)``)
and what a consumer failing over would do instead, and ``assert_ok`` fails; so does a check
that saw no group at all.  A part is left out only on purpose (the test's marker
``leave_out``, the option ``--kafka-mirror-leave-out``, or synced offsets nobody asked for):
:attr:`FailoverReport.left_out`, and the summary says "not checked".

The check is in parts: :mod:`.target` (what the target holds: checkpoints, committed
offsets, heartbeats), :mod:`.captured` (what the capture saw per partition), :mod:`.syncs`
(offset syncs and MM2's sync store), :mod:`.entry` (one group partition's translation,
with the syncs as evidence), :mod:`.report` (the report and its assertions) and
:mod:`.check` (:func:`check_failover`, :func:`evaluate`).
"""

from __future__ import annotations

from .check import check_failover, evaluate
from .entry import FailoverEntry
from .report import PARTS, FailoverReport
from .syncs import SYNC_READ_LAG_S, SeenSync, SyncEvidence, SyncHistory, read_offset_syncs
from .target import FAILOVER_FILE, RESETS, FailoverError, SeenCheckpoint, TargetReader, TargetState

__all__ = ["FAILOVER_FILE", "PARTS", "RESETS", "SYNC_READ_LAG_S", "FailoverEntry", "FailoverError", "FailoverReport",
           "SeenCheckpoint", "SeenSync", "SyncEvidence", "SyncHistory", "TargetReader", "TargetState",
           "check_failover", "evaluate", "read_offset_syncs"]
