"""FailoverReport: what the failover check found, as data and JSON, with assertions.

Plain data (no Kafka, no Spark), like :mod:`..report`: the figures are computed in
:mod:`.check`; this module holds them, writes them, and turns them into failures whose
message names the group, the partition, the upstream offset, the translated offset and
what the capture shows at those target offsets.

A part of the check that could not run (no checkpoints, no synced offsets a test asked
for, no heartbeats) is in :attr:`FailoverReport.not_run` with the setting in effect, and
every assertion that needs it fails: a consumer failing over would have nothing to resume
from.  A part left out on purpose (the test's marker, ``--kafka-mirror-leave-out``, or a
part the test did not ask for) is in :attr:`FailoverReport.left_out`, never a failure, and
the session's summary says "not checked".
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..report import COUNT, DURATION, LATENCY, MirrorMismatchError, check_limits, format_table, raise_mismatch
from .entry import MAX_SHOWN, FailoverEntry, when

__all__ = ["PARTS", "FailoverReport", "check_ok_limits"]

#: The parts of a failover check, as ``not_run`` / ``left_out`` / ``--kafka-mirror-leave-out`` name them.
PARTS = ("checkpoints", "synced offsets", "heartbeats", "offset syncs")
#: the parts that translate a group's offsets
TRANSLATIONS = ("checkpoints", "synced offsets")
#: a part's entries' ``via``
VIA = {"checkpoints": "checkpoint", "synced offsets": "synced"}

_COARSER_COLUMNS = ("time", "upstream", "downstream", "floor", "best", "sync_upstream", "sync_downstream",
                    "sync_offset")
_ROW_COLUMNS = ("producer_id", "lane", "first_seq", "last_seq", "count", "first_offset", "last_offset")


@dataclass
class FailoverReport:
    """What :func:`check_failover` found, with assertions whose messages carry the evidence."""

    run_dir: str
    read_at: float
    waited_s: float
    reset: str
    settings: dict[str, Any]
    entries: list[FailoverEntry] = field(default_factory=list)
    heartbeats: dict[str, Any] = field(default_factory=dict)
    #: parts (:data:`PARTS`) that could not be checked although they should have been, and
    #: why (the setting in effect): every assertion that needs one fails
    not_run: dict[str, str] = field(default_factory=dict)
    #: parts left out on purpose (the test's marker, --kafka-mirror-leave-out, a part the
    #: test did not ask for), and why: never a failure; the summary says "not checked"
    left_out: dict[str, str] = field(default_factory=dict)
    #: why a part that ran found nothing to check where it should have (e.g. no checkpoint
    #: of any witness group: the group filter, the interval, the replicator's task state)
    explain: dict[str, str] = field(default_factory=dict)
    #: what a consumer failing over with no translation would do (fallback to
    #: auto.offset.reset): group partitions, records skipped with latest, re-read with earliest
    fallback: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    # -- figures --------------------------------------------------------------------------

    def _max(self, name: str, via: str | None = None) -> Any:
        values = [getattr(e, name) for e in self.entries if (via is None or e.via == via)
                  and getattr(e, name) is not None]
        return max(values) if values else None

    @property
    def skipped(self) -> int:
        return sum(max(e.skipped, e.history_skipped) for e in self.entries)

    @property
    def max_rereads(self) -> int:
        return int(self._max("rereads") or 0)

    @property
    def rewinds(self) -> int:
        return sum(len(e.rewinds) for e in self.entries)

    def checked(self) -> dict[str, int]:
        """What was checked: groups, translations (a group's partition one way), heartbeat
        topics (1 when the replicated heartbeats were judged).  A gate fails a run that
        checked less than its baseline."""
        return {"failover_groups_checked": len({e.group for e in self.entries}),
                "failover_translations_checked": len(self.entries),
                "failover_heartbeats_checked": int("heartbeats" not in self.not_run
                                                   and "heartbeats" not in self.left_out
                                                   and bool(self.heartbeats.get("count")))}

    def figures(self) -> dict[str, Any]:
        """Numbers to gate on: skipped, rereads (max), beyond end (max), rewinds, staleness,
        heartbeat lag; and what was checked (:meth:`checked`)."""
        syncs_read = "offset syncs" not in self.not_run and "offset syncs" not in self.left_out
        return {
            "failover_skipped": self.skipped,
            "failover_rereads_max": self.max_rereads,
            "failover_beyond_end_max": max([max(e.beyond_end, e.history_beyond_end) for e in self.entries] or [0]),
            "failover_rewinds": self.rewinds,
            "failover_untranslated": len(self.untranslated()),
            "checkpoint_records_behind_max": self._max("records_behind", "checkpoint"),
            "checkpoint_seconds_behind_max": self._max("seconds_behind", "checkpoint"),
            "checkpoint_delay_max_s": self._max("max_delay_s", "checkpoint"),
            "heartbeat_lag_ms": self.heartbeats.get("lag_ms"),
            "heartbeat_max_gap_ms": self.heartbeats.get("max_gap_ms"),
            "failover_coarser_than_syncs": len(self.coarser_than_syncs()) if syncs_read else None,
            "failover_untranslatable": len(self.untranslatable()) if syncs_read else None,
            **self.checked(),
        }

    def entry(self, group_or_witness: str, topic: str, partition: int, via: str = "checkpoint") -> FailoverEntry:
        """The entry of a witness (or group) on ``topic``'s ``partition`` translated ``via``
        ``"checkpoint"`` or ``"synced"``; a :class:`MirrorMismatchError` saying why when there
        is none (e.g. that part was not checked: the setting in effect)."""
        __tracebackhide__ = True
        for e in self.entries:
            if group_or_witness in (e.group, e.witness) and topic in (e.topic, e.target_topic) and \
                    e.partition == partition and e.via == via:
                return e
        part = "checkpoints" if via == "checkpoint" else "synced offsets"
        why = self.not_run.get(part) or self.left_out.get(part)
        raise MirrorMismatchError(
            f"no failover entry for {group_or_witness} {topic}[{partition}] via {via}"
            + (f": the {part} were not checked: {why}" if why else "")
            + "; entries: " + (", ".join(f"{e.witness} {e.topic}[{e.partition}] {e.via}" for e in self.entries[:20])
                               or "none"))

    def untranslated(self) -> list[FailoverEntry]:
        """Entries whose partition holds records yet has no translation at all."""
        return [e for e in self.entries if e.translated is None and e.end_of_log > 0]

    def summary(self) -> str:
        f = self.figures()
        hb = "n/a" if f["heartbeat_lag_ms"] is None else f"{f['heartbeat_lag_ms']} ms"
        groups = len({e.group for e in self.entries})
        return (f"{groups} group{'' if groups == 1 else 's'}, {len(self.entries)} translations: skipped "
                f"{f['failover_skipped']}, rereads max {f['failover_rereads_max']}, beyond end max "
                f"{f['failover_beyond_end_max']}, rewinds {f['failover_rewinds']}, untranslated "
                f"{f['failover_untranslated']}, checkpoint behind max "
                f"{_na(f['checkpoint_records_behind_max'])} records / {_na(f['checkpoint_seconds_behind_max'])} s, "
                f"heartbeat lag {hb}"
                + (f"; not run: {'; '.join(f'{k}: {v}' for k, v in self.not_run.items())}" if self.not_run else "")
                + (f"; not checked: {'; '.join(f'{k}: {v}' for k, v in self.left_out.items())}"
                   if self.left_out else ""))

    def table(self) -> str:
        rows = [{"witness": e.witness, "topic": e.topic, "p": e.partition, "via": e.via, "committed": e.committed,
                 "translated": "-" if e.translated is None else e.translated, "exact": e.exact, "end": e.end_of_log,
                 "skipped": e.skipped, "rereads": e.rereads, "behind": e.records_behind,
                 "behind_s": None if e.seconds_behind is None else round(e.seconds_behind, 2),
                 "delay_s": None if e.max_delay_s is None else round(e.max_delay_s, 2)} for e in self.entries]
        cols = ("witness", "topic", "p", "via", "committed", "translated", "exact", "end", "skipped", "rereads",
                "behind", "behind_s", "delay_s")
        return format_table(rows, cols, limit=len(rows) or 1)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["figures"] = self.figures()
        return d

    def write(self, path: str | os.PathLike[str]) -> Path:
        from ...rundir import write_json_atomic

        p = Path(path)
        write_json_atomic(p, self.to_dict())
        return p

    # -- assertions -------------------------------------------------------------------------

    def assert_no_loss(self) -> None:
        """A consumer failing over at the end, or right after any checkpoint, skips nothing
        its group had not consumed."""
        __tracebackhide__ = True
        self._raise([*self._needs(*TRANSLATIONS), self._check_loss()])

    def assert_rereads_at_most(self, limit: int | None = None, *, witnesses: Sequence[str] | None = None) -> None:
        """At most ``limit`` re-read records per group and partition at the failover moment
        (default: the replicator's ``offset.lag.max``), for the named ``witnesses`` (default all).

        MirrorMaker 2 keeps its offset syncs exponentially spaced back from the newest, so
        a group translated while it was far behind the replicator's position (e.g. in the
        middle of a backlog after a restart) is translated coarsely and may re-read more
        than ``offset.lag.max``: that is MM2's design, so bound those witnesses separately.
        """
        __tracebackhide__ = True
        check_limits("assert_rereads_at_most", COUNT, limit=limit)
        self._raise([*self._needs(*TRANSLATIONS), self._check_rereads(limit, witnesses)])

    def assert_within_log(self) -> None:
        """No translation (latest or any checkpoint of the run) points past the end of the target log."""
        __tracebackhide__ = True
        self._raise([*self._needs(*TRANSLATIONS), self._check_within_log()])

    def assert_monotonic(self) -> None:
        """Checkpoints never went backwards while their group did not."""
        __tracebackhide__ = True
        self._raise([*self._needs("checkpoints"), self._check_monotonic()])

    def assert_translated(self) -> None:
        """Every partition holding records has a translation for every witness group."""
        __tracebackhide__ = True
        self._raise([*self._needs(*TRANSLATIONS), self._check_translated()])

    def assert_checkpoints_fresh(self, *, max_seconds: float | None = None, max_records: int | None = None,
                                 max_delay_s: float | None = None) -> None:
        """At failover, the latest checkpoint is at most ``max_records`` source offsets /
        ``max_seconds`` behind each group; over the run, no commit waited more than
        ``max_delay_s`` for its first checkpoint."""
        __tracebackhide__ = True
        check_limits("assert_checkpoints_fresh", DURATION, max_seconds=max_seconds, max_delay_s=max_delay_s)
        check_limits("assert_checkpoints_fresh", COUNT, max_records=max_records)
        self._raise([*self._needs("checkpoints"), self._check_fresh(max_seconds, max_records, max_delay_s)])

    def assert_heartbeats(self, *, max_lag_ms: float, max_gap_ms: float | None = None) -> None:
        """The newest replicated heartbeat is at most ``max_lag_ms`` old at failover (and no
        gap between two exceeds ``max_gap_ms``)."""
        __tracebackhide__ = True
        check_limits("assert_heartbeats", LATENCY, max_lag_ms=max_lag_ms, max_gap_ms=max_gap_ms)
        self._raise([*self._needs("heartbeats"), self._check_heartbeats(max_lag_ms, max_gap_ms)])

    def assert_ok(self, *, max_rereads: int | None = None, max_seconds_behind: float | None = None,
                  max_records_behind: int | None = None, max_heartbeat_lag_ms: float | None = None,
                  as_syncs_allow: bool | None = None) -> None:
        """Something was checked, and: no loss, within the log, monotonic, translated, as good
        as the offset syncs allow (``as_syncs_allow``; default: when the syncs were read, see
        :mod:`.check`), replicated heartbeats arrived (their age at most
        ``max_heartbeat_lag_ms`` when given), and the given limits (re-reads per group and
        partition, staleness); all failures together.  A part that could not run
        (:attr:`not_run`: no checkpoints, no synced offsets the test asked for, no
        heartbeats) fails, naming the setting in effect; a part left out on purpose
        (:attr:`left_out`) is not checked."""
        __tracebackhide__ = True
        check_ok_limits(max_rereads, max_seconds_behind, max_records_behind, max_heartbeat_lag_ms)
        # the missing translations (with their cause) before the loss they lead to
        checks = [*self._needs(*TRANSLATIONS, "heartbeats"), self._check_translated(), self._check_loss(),
                  self._check_within_log(), self._check_monotonic()]
        checks += self._syncs_checks(as_syncs_allow)
        if max_rereads is not None:
            checks.append(self._check_rereads(max_rereads))
        if max_seconds_behind is not None or max_records_behind is not None:
            checks.append(self._check_fresh(max_seconds_behind, max_records_behind, None))
        if "heartbeats" not in self.not_run and "heartbeats" not in self.left_out:
            checks.append(self._check_heartbeats(max_heartbeat_lag_ms, None) if max_heartbeat_lag_ms is not None
                          else self._check_heartbeats_seen())
        self._raise(checks)

    # -- what could not be checked ----------------------------------------------------------

    def _needs(self, *parts: str) -> list[str | None]:
        """The failures of an assertion that needs ``parts``: each that could not run
        (:attr:`not_run`), and, for the translations, none checked at all."""
        out: list[str | None] = [self._not_run_message(p) for p in parts if p in self.not_run]
        wanted = [p for p in parts if p in TRANSLATIONS and p not in self.left_out]
        if wanted and not self.entries and not any(p in self.not_run for p in wanted):
            out.append(self._nothing_checked())
        return out

    def _not_run_message(self, part: str) -> str:
        why = self.not_run[part]
        if part not in TRANSLATIONS:
            what = {"heartbeats": "no replicated heartbeats to check",
                    "offset syncs": "the translations could not be checked against the offset syncs"}.get(part, part)
            return f"{what}: {why}"
        lines = [f"nothing to fail over with ({part}): {why}"]
        fb = self.fallback
        first = next(p for p in TRANSLATIONS if p in self.not_run)
        if fb.get("partitions") and part == first:  # the same for either way of translating: said once
            lines.append(f"  a consumer failing over finds no translated offset for its group and falls back to "
                         f"auto.offset.reset: over the {fb['partitions']} group partitions witnessed here it would "
                         f"skip {fb['skipped_latest']} records its group had not consumed with latest (Kafka's "
                         f"default), or re-read {fb['rereads_earliest']} it had consumed with earliest")
        return "\n".join(lines)

    def _nothing_checked(self) -> str:
        why = self.explain.get("nothing") or "no witness group committed an offset on the run's topics"
        return f"nothing was checked: 0 groups, 0 translations ({why}); a check that saw nothing to check fails"

    def _check_heartbeats_seen(self) -> str | None:
        hb = self.heartbeats
        if hb.get("count"):
            return None
        return (f"heartbeats: no replicated heartbeat arrived in {hb.get('topic')} between the start of production "
                f"and the failover" + (f" ({hb['watched_s']:.1f} s)" if hb.get("watched_s") is not None else "")
                + (f"; {self.explain['heartbeats']}" if self.explain.get("heartbeats") else ""))

    # -- messages ---------------------------------------------------------------------------

    def _raise(self, problems: Sequence[str | None]) -> None:
        __tracebackhide__ = True
        raise_mismatch(self._head, problems)

    def _head(self) -> str:
        head = f"failover check in {self.run_dir} (auto.offset.reset={self.reset}): {self.summary()}"
        return head + "".join(f"\nnote: {n}" for n in self.notes)

    @staticmethod
    def _rows(rows: list[dict[str, Any]]) -> list[str]:
        return [format_table(rows, _ROW_COLUMNS, limit=MAX_SHOWN)] if rows else []

    def _check_loss(self) -> str | None:
        bad = [e for e in self.entries if e.skipped or e.history_skipped]
        if not bad:
            return None
        total = sum(max(e.skipped, e.history_skipped) for e in bad)
        lines = [f"loss on failover: {total} records a group had not consumed would never be read on the target"]
        for e in bad[:MAX_SHOWN]:
            lines.append(f"  {e.head()}")
            if e.skipped:
                lines.append(f"    resuming at {e.resume_at} skips {e.skipped} unconsumed records, all of their "
                             f"copies at lower target offsets:")
                lines += self._rows(e.skipped_rows)
            if e.history_skipped:
                lines.append(f"    checkpoints of the run that skipped records of the commit they translated "
                             f"(worst {e.history_skipped}):")
                lines.append(format_table(e.history_rows, ("time", "upstream", "downstream", "skipped", "exact",
                                                           "beyond_end"), limit=MAX_SHOWN))
        if len(bad) > MAX_SHOWN:
            lines.append(f"  ... and {len(bad) - MAX_SHOWN} more")
        return "\n".join(lines)

    def _check_rereads(self, limit: int | None, witnesses: Sequence[str] | None = None) -> str | None:
        if limit is None:
            limit = int(self.settings.get("offset_lag_max", 0))
        if witnesses is not None:
            unknown = set(witnesses) - {e.witness for e in self.entries}
            if unknown:
                raise ValueError(f"no witnesses {sorted(unknown)} in this failover report; "
                                 f"witnesses: {sorted({e.witness for e in self.entries})}")
        bad = [e for e in self.entries if e.rereads > limit and (witnesses is None or e.witness in witnesses)]
        if not bad:
            return None
        lines = [f"re-reads above {limit} per group and partition (offset.lag.max={self.settings.get('offset_lag_max')})"]
        for e in bad[:MAX_SHOWN]:
            lines.append(f"  {e.head()}")
            lines.append(f"    resuming at {e.resume_at} re-reads {e.rereads} records the group had consumed "
                         f"(latest checkpoint {e.records_behind} source offsets behind the commit):")
            lines += self._rows(e.reread_rows)
        return "\n".join(lines)

    def _check_within_log(self) -> str | None:
        bad = [e for e in self.entries if e.beyond_end or e.history_beyond_end]
        if not bad:
            return None
        lines = [("translated offsets beyond the end of the target log (negative lag: records written there "
                  "after failover would be skipped)")]
        for e in bad[:MAX_SHOWN]:
            lines.append(f"  {e.head()}")
            if e.beyond_end:
                lines.append(f"    resumes at {e.resume_at}, {e.beyond_end} past the end {e.end_of_log}")
            if e.history_beyond_end:
                lines.append(f"    a checkpoint of the run pointed {e.history_beyond_end} past the end:")
                lines.append(format_table(e.history_rows, ("time", "upstream", "downstream", "skipped", "exact",
                                                           "beyond_end"), limit=MAX_SHOWN))
        return "\n".join(lines)

    def _check_monotonic(self) -> str | None:
        bad = [e for e in self.entries if e.rewinds]
        if not bad:
            return None
        lines = [(f"checkpoints went backwards: {self.rewinds} rewinds of a translated offset while its group did "
                  "not move back")]
        for e in bad[:MAX_SHOWN]:
            lines.append(f"  {e.where}:")
            lines.append(format_table(e.rewinds, ("time", "upstream_before", "downstream_before", "upstream",
                                                  "downstream", "checkpoint_offset"), limit=MAX_SHOWN))
        return "\n".join(lines)

    def _check_fresh(self, max_seconds: float | None, max_records: int | None, max_delay: float | None) -> str | None:
        lines = []
        for e in (x for x in self.entries if x.via == "checkpoint" and x.end_of_log > 0 and not self._by_design(x)):
            why = []
            if max_records is not None and (e.records_behind or 0) > max_records:
                why.append(f"{e.records_behind} source offsets behind (limit {max_records})")
            if max_seconds is not None and (e.seconds_behind or 0) > max_seconds:
                why.append(f"{e.seconds_behind:.2f} s behind (limit {max_seconds:g} s)")
            if max_delay is not None and e.never_translated:
                why.append(f"commits at upstream {e.never_translated} never got a checkpoint")
            elif max_delay is not None and e.max_delay_s is not None and e.max_delay_s > max_delay:
                why.append(f"a commit waited {e.max_delay_s:.2f} s for its checkpoint (limit {max_delay:g} s)")
            if why:
                lines.append(f"  {e.head()}: " + "; ".join(why))
        if not lines:
            return None
        return "\n".join(["stale checkpoints:", *lines[:MAX_SHOWN]])

    def _check_heartbeats(self, max_lag_ms: float, max_gap_ms: float | None) -> str | None:
        if "heartbeats" in self.not_run or "heartbeats" in self.left_out:
            return None  # not run: _needs says why; left out on purpose: not checked
        hb = self.heartbeats
        why = []
        if hb.get("lag_ms") is None:
            why.append(f"no heartbeat arrived in {hb.get('topic')}"
                       + (f" ({self.explain['heartbeats']})" if self.explain.get("heartbeats") else ""))
        elif hb["lag_ms"] > max_lag_ms:
            why.append(f"the newest heartbeat in {hb.get('topic')} is {hb['lag_ms']} ms old at failover "
                       f"(limit {max_lag_ms:g} ms; emitted at {when(hb['newest_ms'] / 1000)})")
        if max_gap_ms is not None and (hb.get("max_gap_ms") or 0) > max_gap_ms:
            why.append(f"heartbeats stopped for {hb['max_gap_ms']} ms (limit {max_gap_ms:g} ms) after "
                       f"{when(hb['gap_after_ms'] / 1000)}")
        if not why:
            return None
        return "heartbeats: " + "; ".join(why) + f" ({hb.get('count', 0)} heartbeats during the run)"

    def _by_design(self, e: FailoverEntry) -> bool:
        """Whether ``e`` has no translation because the replicator's design allows none (an
        entry :meth:`untranslatable`: reported, never stale)."""
        return bool(e.untranslatable)

    def untranslatable(self) -> list[FailoverEntry]:
        """Untranslated entries MM2's algorithm could not have translated from the syncs the
        replicator wrote (each says why: e.g. the sync store started over at a re-copy after
        a crash); a failing-over consumer falls back to ``auto.offset.reset`` there."""
        return [e for e in self.untranslated() if e.untranslatable]

    def coarser_than_syncs(self) -> list[FailoverEntry]:
        """Entries translated (at failover, or by any checkpoint of the run) worse than the syncs allow."""
        return [e for e in self.entries if e.coarser or e.history_coarser]

    def _check_translated(self) -> str | None:
        """Untranslated partitions are failures, except where the offset syncs show MM2
        could not translate (:meth:`untranslatable`): those are reported, with the reason
        and what the fallback to ``auto.offset.reset`` costs, and checked by the loss check."""
        bad = [e for e in self.untranslated() if not e.untranslatable]
        if not bad:
            return None
        via = "/".join(sorted({e.via for e in bad}))
        lines = [(f"no translation: {len(bad)} group partitions holding records have no {via} offset on the "
                  f"target although the offset syncs allowed one (a failing-over consumer falls back to "
                  f"auto.offset.reset={self.reset})")]
        lines += [f"  why: {why}" for why in dict.fromkeys(self.explain[p] for p in TRANSLATIONS
                                                            if self.explain.get(p) and any(e.via == VIA[p] for e in bad))]
        for e in bad[:MAX_SHOWN]:
            lines.append(f"  {e.head()}; skipped {e.skipped}, re-read {e.rereads} under reset={self.reset}")
        return "\n".join(lines)

    def assert_as_syncs_allow(self, *, witnesses: Sequence[str] | None = None) -> None:
        """Every translation (the latest, and every checkpoint of the run) is at least what
        MirrorMaker 2's algorithm gives from the offset syncs the replicator had written
        and its sync store kept (see the module docs), however many re-reads that leaves;
        for the named ``witnesses`` (default all).  Fails when the syncs were not read."""
        __tracebackhide__ = True
        self._raise([*self._needs("checkpoints"), self._check_syncs(witnesses, required=True)])

    def _syncs_checks(self, as_syncs_allow: bool | None) -> list[str | None]:
        if "checkpoints" in self.not_run or "offset syncs" in self.left_out:
            return []  # nothing translated to check against them (that failure names its cause), or left out
        if as_syncs_allow or (as_syncs_allow is None and "offset syncs" not in self.not_run):
            return [self._check_syncs(None, required=bool(as_syncs_allow))]
        return []

    def _check_syncs(self, witnesses: Sequence[str] | None, *, required: bool) -> str | None:
        if "offset syncs" in self.not_run:
            return self._not_run_message("offset syncs") if required else None
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


def _na(value: Any) -> Any:
    return "n/a" if value is None else value


def check_ok_limits(max_rereads: int | None, max_seconds_behind: float | None, max_records_behind: int | None,
                    max_heartbeat_lag_ms: float | None) -> None:
    """The limits of a failover report's ``assert_ok`` (see :func:`.report.check_limits`)."""
    __tracebackhide__ = True
    check_limits("assert_ok", COUNT, max_rereads=max_rereads, max_records_behind=max_records_behind)
    check_limits("assert_ok", DURATION, max_seconds_behind=max_seconds_behind)
    check_limits("assert_ok", LATENCY, max_heartbeat_lag_ms=max_heartbeat_lag_ms)
