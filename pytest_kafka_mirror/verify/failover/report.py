"""The failover entries and report, with the offset syncs as evidence (on top of the
checks of :mod:`pytest_kafka_mirror.verify.failover_report`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..failover_report import MAX_SHOWN, when
from ..failover_report import FailoverEntry as _BaseEntry
from ..failover_report import FailoverReport as _BaseReport
from ..report import format_table

if TYPE_CHECKING:
    pass
from .syncs import LATEST, SeenSync, SyncEvidence, SyncHistory
from .target import SeenCheckpoint


@dataclass
class FailoverEntry(_BaseEntry):
    """One witness group on one partition, translated one way, with the offset syncs the
    translation could have used (``sync_*``; None when the syncs were not read)."""

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

    def head(self) -> str:
        text = self.sync_text()
        return super().head() + (f"; {text}" if text else "")

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


_COARSER_COLUMNS = ("time", "upstream", "downstream", "floor", "best", "sync_upstream", "sync_downstream",
                    "sync_offset")


@dataclass
class FailoverReport(_BaseReport):
    """The failover report, with the check that translations are as good as MM2's
    algorithm guarantees from the offset syncs the replicator wrote."""

    entries: list[FailoverEntry] = field(default_factory=list)  # type: ignore[assignment]

    def _by_design(self, e: _BaseEntry) -> bool:
        return isinstance(e, FailoverEntry) and bool(e.untranslatable)

    def untranslatable(self) -> list[FailoverEntry]:
        """Untranslated entries MM2's algorithm could not have translated from the syncs the
        replicator wrote (each says why: e.g. the sync store started over at a re-copy after
        a crash); a failing-over consumer falls back to ``auto.offset.reset`` there."""
        return [e for e in self.untranslated() if isinstance(e, FailoverEntry) and e.untranslatable]

    def coarser_than_syncs(self) -> list[FailoverEntry]:
        """Entries translated (at failover, or by any checkpoint of the run) worse than the syncs allow."""
        return [e for e in self.entries if e.coarser or e.history_coarser]

    def figures(self) -> dict[str, Any]:
        f = super().figures()
        syncs_read = "offset syncs" not in self.not_run
        f["failover_coarser_than_syncs"] = len(self.coarser_than_syncs()) if syncs_read else None
        f["failover_untranslatable"] = len(self.untranslatable()) if syncs_read else None
        return f

    def _check_translated(self) -> str | None:
        """Untranslated partitions are failures, except where the offset syncs show MM2
        could not translate (:meth:`untranslatable`): those are reported, with the reason
        and what the fallback to ``auto.offset.reset`` costs, and checked by the loss check."""
        bad = [e for e in self.untranslated() if not (isinstance(e, FailoverEntry) and e.untranslatable)]
        if not bad:
            return None
        via = "/".join(sorted({e.via for e in bad}))
        lines = [(f"no translation: {len(bad)} group partitions holding records have no {via} offset on the "
                  f"target although the offset syncs allowed one (a failing-over consumer falls back to "
                  f"auto.offset.reset={self.reset})")]
        for e in bad[:MAX_SHOWN]:
            lines.append(f"  {e.head()}; skipped {e.skipped}, re-read {e.rereads} under reset={self.reset}")
        return "\n".join(lines)

    def assert_as_syncs_allow(self, *, witnesses: Sequence[str] | None = None) -> None:
        """Every translation (the latest, and every checkpoint of the run) is at least what
        MirrorMaker 2's algorithm gives from the offset syncs the replicator had written
        and its sync store kept (see the module docs), however many re-reads that leaves;
        for the named ``witnesses`` (default all).  Fails when the syncs were not read."""
        __tracebackhide__ = True
        self._raise([self._check_syncs(witnesses, required=True)])

    def _syncs_checks(self, as_syncs_allow: bool | None) -> list[str | None]:
        if as_syncs_allow or (as_syncs_allow is None and "offset syncs" not in self.not_run):
            return [self._check_syncs(None, required=bool(as_syncs_allow))]
        return []

    def _check_syncs(self, witnesses: Sequence[str] | None, *, required: bool) -> str | None:
        if "offset syncs" in self.not_run:
            return f"offset syncs could not be checked: {self.not_run['offset syncs']}" if required else None
        bad = [e for e in self.coarser_than_syncs() if witnesses is None or e.witness in witnesses]
        if not bad:
            return None
        lines = [(f"translations coarser than the offset syncs allow: {len(bad)} group partitions (MM2 translates "
                  "upstream offset U from the latest sync at or before U that its store kept: that sync's downstream "
                  "offset, +1 when U is past it)")]
        for e in bad[:MAX_SHOWN]:
            lines.append(f"  {e.head()}")
            if e.history_coarser:
                lines.append("    checkpoints of the run below the worst the syncs allowed (floor; best: from the "
                             "latest sync):")
                lines.append(format_table(e.history_coarser, _COARSER_COLUMNS, limit=MAX_SHOWN))
        return "\n".join(lines)


