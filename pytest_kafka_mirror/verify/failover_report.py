"""FailoverReport: what the failover check found, as data and JSON, with assertions.

Plain data (no Kafka, no Spark), like :mod:`.report`: the figures are computed in
:mod:`pytest_kafka_mirror.verify.failover`; this module holds them, writes them, and turns
them into failures whose message names the group, the partition, the upstream offset,
the translated offset and what the capture shows at those target offsets.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .report import COUNT, DURATION, LATENCY, check_limits, format_table, raise_mismatch

__all__ = ["MAX_SHOWN", "FailoverEntry", "FailoverReport", "when"]

MAX_SHOWN = 10


@dataclass
class FailoverEntry:
    """One witness group on one partition, translated one way (``via``)."""

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
        return (f"{self.where}: committed upstream {self.committed} (consumed through {self.consumed_last}); "
                f"{self.translation()}; target end of log {self.end_of_log}, first unconsumed record at {self.exact}")


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
    not_run: dict[str, str] = field(default_factory=dict)
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

    def figures(self) -> dict[str, Any]:
        """Numbers to gate on: skipped, rereads (max), beyond end (max), rewinds, staleness, heartbeat lag."""
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
        }

    def entry(self, group_or_witness: str, topic: str, partition: int, via: str = "checkpoint") -> FailoverEntry:
        for e in self.entries:
            if group_or_witness in (e.group, e.witness) and topic in (e.topic, e.target_topic) and \
                    e.partition == partition and e.via == via:
                return e
        raise KeyError(f"no failover entry for {group_or_witness} {topic}[{partition}] via {via}; entries: "
                       + ", ".join(f"{e.witness} {e.topic}[{e.partition}] {e.via}" for e in self.entries[:20]))

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
                f"{f['failover_untranslated']}, checkpoint behind max {f['checkpoint_records_behind_max']} records / "
                f"{f['checkpoint_seconds_behind_max']} s, heartbeat lag {hb}"
                + (f"; not run: {'; '.join(f'{k}: {v}' for k, v in self.not_run.items())}" if self.not_run else ""))

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
        from ..rundir import write_json_atomic

        p = Path(path)
        write_json_atomic(p, self.to_dict())
        return p

    # -- assertions -------------------------------------------------------------------------

    def assert_no_loss(self) -> None:
        """A consumer failing over at the end, or right after any checkpoint, skips nothing
        its group had not consumed."""
        __tracebackhide__ = True
        self._raise([self._check_loss()])

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
        self._raise([self._check_rereads(limit, witnesses)])

    def assert_within_log(self) -> None:
        """No translation (latest or any checkpoint of the run) points past the end of the target log."""
        __tracebackhide__ = True
        self._raise([self._check_within_log()])

    def assert_monotonic(self) -> None:
        """Checkpoints never went backwards while their group did not."""
        __tracebackhide__ = True
        self._raise([self._check_monotonic()])

    def assert_translated(self) -> None:
        """Every partition holding records has a translation for every witness group."""
        __tracebackhide__ = True
        self._raise([self._check_translated()])

    def assert_checkpoints_fresh(self, *, max_seconds: float | None = None, max_records: int | None = None,
                                 max_delay_s: float | None = None) -> None:
        """At failover, the latest checkpoint is at most ``max_records`` source offsets /
        ``max_seconds`` behind each group; over the run, no commit waited more than
        ``max_delay_s`` for its first checkpoint."""
        __tracebackhide__ = True
        check_limits("assert_checkpoints_fresh", DURATION, max_seconds=max_seconds, max_delay_s=max_delay_s)
        check_limits("assert_checkpoints_fresh", COUNT, max_records=max_records)
        self._raise([self._check_fresh(max_seconds, max_records, max_delay_s)])

    def assert_heartbeats(self, *, max_lag_ms: float, max_gap_ms: float | None = None) -> None:
        """The newest replicated heartbeat is at most ``max_lag_ms`` old at failover (and no
        gap between two exceeds ``max_gap_ms``)."""
        __tracebackhide__ = True
        check_limits("assert_heartbeats", LATENCY, max_lag_ms=max_lag_ms, max_gap_ms=max_gap_ms)
        self._raise([self._check_heartbeats(max_lag_ms, max_gap_ms)])

    def assert_ok(self, *, max_rereads: int | None = None, max_seconds_behind: float | None = None,
                  max_records_behind: int | None = None, max_heartbeat_lag_ms: float | None = None,
                  as_syncs_allow: bool | None = None) -> None:
        """No loss, within the log, monotonic, translated, as good as the offset syncs allow
        (``as_syncs_allow``; default: when the syncs were read, see ``failover.py``), and the
        given limits (re-reads per group and partition, staleness, heartbeat lag); all
        failures together."""
        __tracebackhide__ = True
        check_ok_limits(max_rereads, max_seconds_behind, max_records_behind, max_heartbeat_lag_ms)
        checks = [self._check_loss(), self._check_within_log(), self._check_monotonic(), self._check_translated()]
        checks += self._syncs_checks(as_syncs_allow)
        if max_rereads is not None:
            checks.append(self._check_rereads(max_rereads))
        if max_seconds_behind is not None or max_records_behind is not None:
            checks.append(self._check_fresh(max_seconds_behind, max_records_behind, None))
        if max_heartbeat_lag_ms is not None:
            checks.append(self._check_heartbeats(max_heartbeat_lag_ms, None))
        self._raise(checks)

    def _syncs_checks(self, as_syncs_allow: bool | None) -> list[str | None]:
        """The offset-sync checks of :meth:`assert_ok` (a report that read the syncs adds them)."""
        return ["the offset syncs were not read: cannot check the translations against them"] if as_syncs_allow else []

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

    def _check_translated(self) -> str | None:
        bad = self.untranslated()
        if not bad:
            return None
        via = "/".join(sorted({e.via for e in bad}))
        lines = [(f"no translation: {len(bad)} group partitions holding records have no {via} offset on the "
                  f"target (a failing-over consumer falls back to auto.offset.reset={self.reset})")]
        for e in bad[:MAX_SHOWN]:
            lines.append(f"  {e.head()}; skipped {e.skipped}, re-read {e.rereads} under reset={self.reset}")
        return "\n".join(lines)

    def _by_design(self, e: FailoverEntry) -> bool:
        """Whether ``e`` has no translation because the replicator's design allows none (the
        subclass with the offset syncs says; such an entry is reported, never stale)."""
        return False

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
        if "heartbeats" in self.not_run:
            return f"heartbeat lag could not be measured: {self.not_run['heartbeats']}"
        hb = self.heartbeats
        why = []
        if hb.get("lag_ms") is None:
            why.append(f"no heartbeat arrived in {hb.get('topic')}")
        elif hb["lag_ms"] > max_lag_ms:
            why.append(f"the newest heartbeat in {hb.get('topic')} is {hb['lag_ms']} ms old at failover "
                       f"(limit {max_lag_ms:g} ms; emitted at {when(hb['newest_ms'] / 1000)})")
        if max_gap_ms is not None and (hb.get("max_gap_ms") or 0) > max_gap_ms:
            why.append(f"heartbeats stopped for {hb['max_gap_ms']} ms (limit {max_gap_ms:g} ms) after "
                       f"{when(hb['gap_after_ms'] / 1000)}")
        if not why:
            return None
        return "heartbeats: " + "; ".join(why) + f" ({hb.get('count', 0)} heartbeats during the run)"


def check_ok_limits(max_rereads: int | None, max_seconds_behind: float | None, max_records_behind: int | None,
                    max_heartbeat_lag_ms: float | None) -> None:
    """The limits of a failover report's ``assert_ok`` (see :func:`.report.check_limits`)."""
    __tracebackhide__ = True
    check_limits("assert_ok", COUNT, max_rereads=max_rereads, max_records_behind=max_records_behind)
    check_limits("assert_ok", DURATION, max_seconds_behind=max_seconds_behind)
    check_limits("assert_ok", LATENCY, max_heartbeat_lag_ms=max_heartbeat_lag_ms)


def when(epoch: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(epoch)) + f".{int(epoch * 1000) % 1000:03d} UTC"
