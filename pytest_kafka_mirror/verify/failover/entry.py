"""One failover entry: a witness group on one partition, translated one way, judged
against the capture and the offset syncs (plain data; computed in :mod:`.check`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .syncs import LATEST, SeenSync, SyncEvidence, SyncHistory
from .target import SeenCheckpoint

__all__ = ["MAX_SHOWN", "FailoverEntry", "when"]

MAX_SHOWN = 10


def when(epoch: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(epoch)) + f".{int(epoch * 1000) % 1000:03d} UTC"


@dataclass
class FailoverEntry:
    """One witness group on one partition, translated one way (``via``), with the offset syncs
    the translation could have used (``sync_*``; None when the syncs were not read)."""

    group: str
    witness: str
    topic: str  # source topic
    target_topic: str
    partition: int
    via: str  # "checkpoint" | "synced"
    committed: int  # the group's last committed offset on the source (U)
    committed_at: float  # epoch seconds of the commit that reached it
    consumed_last: str  # the record at U - 1, for messages
    translated: int | None  # None: no translation, the consumer falls back to auto.offset.reset
    translated_upstream: int | None  # the upstream offset the translation reflects (checkpoints)
    resume_at: int  # where the failing-over consumer starts
    end_of_log: int  # one past the last captured offset of the target partition
    exact: int  # the first target offset holding a record the group had not consumed (end if none)
    skipped: int = 0
    rereads: int = 0
    beyond_end: int = 0
    records_behind: int | None = None  # source offsets the latest checkpoint is behind U
    seconds_behind: float | None = None
    checkpoints: int = 0
    max_delay_s: float | None = None  # longest commit -> first checkpoint reflecting it
    never_translated: list[int] = field(default_factory=list)  # committed offsets no checkpoint ever reflected
    history_skipped: int = 0  # worst skipped of any checkpoint against the commit it translated
    history_beyond_end: int = 0
    rewinds: list[dict[str, Any]] = field(default_factory=list)
    skipped_rows: list[dict[str, Any]] = field(default_factory=list)
    reread_rows: list[dict[str, Any]] = field(default_factory=list)
    history_rows: list[dict[str, Any]] = field(default_factory=list)  # the checkpoints that skipped or overshot
    # -- the offset syncs the translation could have used (None when the syncs were not read)
    offset_syncs: int | None = None  # syncs of this partition in the offset-syncs topic
    sync_for: int | None = None  # the upstream offset the translation was of (its checkpoint's)
    sync: dict[str, Any] | None = None  # the latest sync at or before it the translation could have used
    sync_best: int | None = None  # MM2's rule on that sync: the best translation the syncs allowed
    sync_floor: int | None = None  # the worst MM2's sync store gives from the syncs it could have read
    sync_kept: int | None = None  # what MM2's sync store gives after every sync it could have read
    sync_newest: dict[str, Any] | None = None  # the newest of those syncs
    sync_verdict: str | None = None  # "as synced" | "allowed" | "coarser" | "ahead" | "no sync"
    coarser: int = 0  # how far the translation is below sync_floor
    history_coarser: list[dict[str, Any]] = field(default_factory=list)  # checkpoints of the run below their floor
    #: no translation, and MM2's sync store (replayed from every sync written) could not give one: why
    untranslatable: str | None = None

    @property
    def where(self) -> str:
        tt = f" -> {self.target_topic}" if self.target_topic != self.topic else ""
        return f"group {self.group}, {self.topic}{tt} partition {self.partition}"

    def translation(self) -> str:
        if self.translated is None:
            return f"no translation ({self.via}): falls back to auto.offset.reset, resumes at {self.resume_at}"
        up = f" (upstream {self.translated_upstream})" if self.translated_upstream is not None else ""
        return f"translated by {self.via} to {self.translated}{up}"

    def head(self) -> str:
        text = self.sync_text()
        return (f"{self.where}: committed upstream {self.committed} (consumed through {self.consumed_last}); "
                f"{self.translation()}; target end of log {self.end_of_log}, first unconsumed record at {self.exact}"
                + (f"; {text}" if text else ""))

    def sync_text(self) -> str:
        """Why the translation is what it is, by the offset syncs: MM2's design or a bug."""
        if self.offset_syncs is None:
            return ""
        n = f"{self.offset_syncs} offset sync{'' if self.offset_syncs == 1 else 's'} for this partition"
        if self.translated is None and self.untranslatable:
            return f"{n}; {self.untranslatable}"
        if self.translated is None or self.sync_for is None:
            return n
        if self.sync is None:
            return f"{n}, none at or before upstream {self.sync_for} it could have used"
        head = (f"{n}, the latest at or before upstream {self.sync_for} it could have used is {self.sync['upstream']} "
                f"-> {self.sync['downstream']} (offset {self.sync['offset']} of the syncs topic, {self.sync['time']}),"
                f" so MM2 translates to {self.sync_best} at best")
        if self.sync_verdict == "coarser":
            return (f"{head}, {self.sync_floor} at worst from the syncs its store kept: translated {self.coarser} "
                    "below that, a translation bug")
        if self.sync_verdict == "ahead":
            return (f"{head}: translated {self.translated - (self.sync_best or 0)} past it (MM2 never translates past "
                    "a sync it has read)")
        if self.sync_verdict == "allowed":
            newest = self.sync_newest or {}
            return (f"{head}; but MM2's sync store keeps syncs exponentially spaced back from its newest "
                    f"({newest.get('upstream')} -> {newest.get('downstream')}), which gives {self.sync_kept} "
                    f"({self.sync_floor} at worst, if it had not read the latest ones yet): translated "
                    f"{self.translated}, as MM2's design allows ({self.rereads} re-reads)")
        why = f", all {self.rereads} re-reads from the spacing of the syncs (MM2's design)" if self.rereads else ""
        return f"{head}: as good as the syncs allow{why}"


def _sync_row(s: SeenSync | None) -> dict[str, Any] | None:
    return None if s is None else {"upstream": s.upstream, "downstream": s.downstream, "offset": s.seq,
                                   "time": when(s.time_ms / 1000)}


def _verdict(translated: int, ev: SyncEvidence) -> str:
    if ev.floor is not None and translated < ev.floor:
        return "coarser"
    if ev.best is None:
        return "no sync"
    if translated > ev.best:
        return "ahead"
    return "as synced" if translated == ev.best else "allowed"


def _untranslatable(history: SyncHistory, upstream: int) -> str | None:
    """Why MM2's sync store, after every sync the replicator wrote, cannot translate
    ``upstream``; None when it can (then a missing translation is the replicator's fault)
    or when the partition has no sync at all (MM2 writes one for the first record it copies)."""
    n = len(history.syncs)
    if not n:
        return None
    kept = history.translate(n, upstream)
    if kept is not None and kept >= 0:
        return None
    start = history.generation[n]
    first = history.syncs[start]
    head = f"MM2's offset-sync store holds no sync at or before upstream {upstream}, so MM2 cannot translate it"
    if start:
        before = history.syncs[start - 1]
        return (f"{head}: the store started over at the sync {first.upstream} -> {first.downstream} "
                f"({when(first.time_ms / 1000)}, offset {first.seq} of the syncs topic), whose upstream offset went back "
                f"from {before.upstream}: the replicator copied again from its last committed position (a restart "
                f"after a crash), and MM2 then drops every older sync (OffsetSyncStore: an upstream rewind "
                f"invalidates all previous offsets); as MM2's design allows")
    if first.upstream > upstream:
        return f"{head}: the first sync of this partition is at upstream {first.upstream}; as MM2's design allows"
    newest = history.syncs[-1]
    if history.store == LATEST:
        return (f"{head}: up to 3.4.0 it keeps the newest sync only ({newest.upstream} -> {newest.downstream}), "
                f"past it ('too far in the past to translate accurately'); as MM2's design allows")
    return (f"{head}: it keeps 64 syncs, exponentially spaced back from the newest ({newest.upstream} -> "
            f"{newest.downstream}), none of them at or before it; as MM2's design allows")


def _add_sync_evidence(e: FailoverEntry, history: SyncHistory, seq: list[SeenCheckpoint]) -> None:
    """The syncs behind ``e``'s translation and behind every checkpoint of the run (pure)."""
    e.offset_syncs = len(history.syncs)
    if e.translated is None:
        e.untranslatable = _untranslatable(history, e.committed)
        return
    # a synced group offset is a checkpoint's downstream offset (MM2 syncs its latest checkpoints)
    cp = seq[-1] if e.via == "checkpoint" and seq else next(
        (c for c in reversed(seq) if c.downstream == e.translated), seq[-1] if seq else None)
    ev = history.evidence(cp.upstream if cp else e.committed, cp.time_ms if cp else None)
    e.sync_for, e.sync, e.sync_best, e.sync_floor = ev.upstream, _sync_row(ev.sync), ev.best, ev.floor
    e.sync_kept, e.sync_newest = ev.kept, _sync_row(ev.newest)
    e.sync_verdict = _verdict(e.translated, ev)
    e.coarser = max(0, ev.floor - e.translated) if ev.floor is not None else 0
    if e.via != "checkpoint":
        return
    for c in seq:
        cev = history.evidence(c.upstream, c.time_ms)
        if cev.floor is not None and c.downstream < cev.floor:
            row = {"time": when(c.time_ms / 1000), "upstream": c.upstream, "downstream": c.downstream,
                   "floor": cev.floor, "best": cev.best}
            sync = _sync_row(cev.sync) or {}
            row.update({f"sync_{k}": sync.get(k) for k in ("upstream", "downstream", "offset")})
            e.history_coarser.append(row)
    e.history_coarser = e.history_coarser[:MAX_SHOWN]
