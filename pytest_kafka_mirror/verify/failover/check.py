"""The failover check: wait for the translations to converge, then judge every witness
group's translated offsets against the capture and the offset syncs."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...capture.witness import WitnessLog, load_witness_logs
from ...processes.managed import wait_until
from .captured import _load_capture, _Partition
from .entry import MAX_SHOWN, FailoverEntry, _add_sync_evidence, when
from .report import PARTS, FailoverReport
from .syncs import SYNC_READ_LAG_S, SeenSync, SyncHistory, _offset_syncs
from .target import FAILOVER_FILE, RESETS, FailoverError, SeenCheckpoint, TargetReader, TargetState

if TYPE_CHECKING:
    from ...replicators._checkpoints import CheckpointSettings


def _latest_commits(log: WitnessLog) -> dict[tuple[str, int], list[tuple[float, int]]]:
    """(topic, partition) -> [(commit time s, offset)] of the successful commits, in order."""
    out: dict[tuple[str, int], list[tuple[float, int]]] = {}
    for c in log.commits:
        if c.get("error"):
            continue
        for topic, parts in c["offsets"].items():
            for p, off in parts.items():
                out.setdefault((topic, int(p)), []).append((c["time_us"] / 1e6, int(off)))
    return out


def _converged(logs: Sequence[WitnessLog], parts: Mapping[tuple[str, int], _Partition], state: TargetState,
               settings: CheckpointSettings, rename: Mapping[str, str], heartbeat_since: float | None = None) -> bool:
    """Every witnessed commit is checkpointed (and synced, with group offset sync) and its
    translation can no longer improve: it is exact, or a whole offset flush plus a
    checkpoint (and sync) interval passed since the commit (MM2 then has its best sync);
    and, with ``heartbeat_since`` (epoch s), a replicated heartbeat emitted since then arrived."""
    if heartbeat_since is not None and not any(t >= heartbeat_since * 1000 for t in state.heartbeats):
        return False
    if settings.no_checkpoints():
        return True
    settle = settings.flush_interval + settings.checkpoints_interval + 1.0
    if settings.no_group_sync() is None:
        settle += settings.sync_interval
    latest: dict[tuple[str, str, int], SeenCheckpoint] = {}
    for cp in state.checkpoints:
        latest[(cp.group, cp.topic, cp.partition)] = cp
    now = time.time()
    for log in logs:
        for (topic, p), commits in _latest_commits(log).items():
            part = parts.get((topic, p), _Partition())
            if not commits or part.end == 0:
                continue
            at, upstream = commits[-1]
            seen = latest.get((log.group, rename.get(topic, topic), p))
            if seen is None or seen.upstream != upstream:
                return False
            if state.synced is not None and state.synced.get(log.group, {}).get((seen.topic, p)) != seen.downstream:
                return False
            exact = part.first_unconsumed(log.consumed_ranges(topic, p, upstream))
            if now - at < settle and seen.downstream != exact:
                return False
    return True


def _await_translations(reader: TargetReader, logs: Sequence[WitnessLog], parts: Mapping[tuple[str, int], _Partition],
                        settings: CheckpointSettings, rename: Mapping[str, str], wait: float,
                        heartbeat_since: float | None = None) -> TargetState:
    """Read the target until every witnessed commit is translated (and a heartbeat since
    ``heartbeat_since`` arrived), at most ``wait`` seconds; the state read last."""
    try:
        state = reader.read()
        if not _converged(logs, parts, state, settings, rename, heartbeat_since):
            try:
                wait_until(lambda: _converged(logs, parts, reader.read(), settings, rename, heartbeat_since),
                           wait, "the witnessed commits' translations", interval=0.5)
            except TimeoutError:
                pass  # judged as they are: the report says what is missing, and why
        return reader.state
    finally:
        reader.close()


def check_failover(
    run_dir: str | os.PathLike[str],
    target_bootstrap: str,
    settings: CheckpointSettings,
    topics: Mapping[str, str],
    *,
    wait: float | None = None,
    reset: str = "latest",
    emitter: str | None = None,
    source_bootstrap: str | None = None,
    sync_read_lag: float = SYNC_READ_LAG_S,
    leave_out: Mapping[str, str] | None = None,
) -> FailoverReport:
    """Fail over the run's witness groups to the target and check their translated offsets.

    ``topics`` maps source to target topic names; ``settings`` says what the replicator
    does about groups (``replicator.checkpoints``); ``emitter`` keeps only the heartbeats
    of that reference mirror.  The failover happens once every witnessed commit is
    translated (checkpoint and, with group offset sync, the target group's offset) and a
    replicated heartbeat emitted during the run arrived, or after ``wait`` seconds at the
    latest (default: from the replicator's intervals; ``0``: at once).  ``reset`` is the
    failing-over consumer's ``auto.offset.reset`` for partitions without a translation.
    ``leave_out``: parts (:data:`~.report.PARTS`) not to check, each with the reason (the
    test's marker, ``--kafka-mirror-leave-out``).  Writes ``RUN_DIR/failover.json``.

    The offset syncs are then read from the source cluster (``source_bootstrap``; without
    it the syncs check is in ``not_run``) or, with ``offset-syncs.topic.location=target``,
    from the target.  ``sync_read_lag``: how long after a sync was written the replicator
    may still have translated without it (:data:`SYNC_READ_LAG_S`; the reference mirror
    uses a sync before it writes it).
    """
    if reset not in RESETS:
        raise ValueError(f"reset={reset!r}: the consumer's auto.offset.reset, one of {', '.join(RESETS)}")
    leave_out = dict(leave_out or {})
    unknown = sorted(set(leave_out) - set(PARTS))
    if unknown:
        raise ValueError(f"leave_out={unknown}: the parts of a failover check are {', '.join(PARTS)}")
    run = Path(run_dir)
    logs = load_witness_logs(run)
    if not logs:
        raise FailoverError(f"no witness consumer groups in {run}: produce with "
                            "mirror_producer(..., witnesses=[witness('end'), ...]) to check failover")
    rename = dict(topics)
    witnessed = {t for log in logs for t in log.partitions}
    parts, capture_status = _load_capture(run, witnessed)
    from ...rundir import load_manifests

    starts = [m.started_us / 1e6 for m in load_manifests(run) if m.started_us]
    since = min(starts) if starts else None
    heartbeats = "heartbeats" not in leave_out and settings.no_heartbeats() is None
    if wait is None:
        wait = (2 * settings.checkpoints_interval + settings.flush_interval + 5.0
                + (settings.sync_interval if settings.sync_group_offsets else 0.0)
                + (settings.heartbeats_interval if heartbeats else 0.0))
    t0 = time.monotonic()
    state = _await_translations(TargetReader(target_bootstrap, settings, [log.group for log in logs], emitter),
                                logs, parts, settings, rename, wait, since if heartbeats else None)
    sync_note = None
    if settings.no_checkpoints() is None and "checkpoints" not in leave_out and "offset syncs" not in leave_out:
        state.syncs, state.syncs_note, sync_note = _offset_syncs(settings, source_bootstrap, target_bootstrap)
    report = evaluate(logs, parts, state, settings, rename, reset=reset, run_dir=str(run),
                      waited_s=round(time.monotonic() - t0, 3), since=since, sync_read_lag=sync_read_lag,
                      leave_out=leave_out)
    if sync_note:
        report.notes.append(sync_note)
    if capture_status.get("reason") not in (None, "satisfied"):
        report.notes.append(f"the capture ended by {capture_status.get('reason')}: the end of the target log is "
                            "what it read")
    for log in logs:
        if not log.complete or log.note:
            report.notes.append(f"witness {log.name}: {log.note}")
    report.write(run / FAILOVER_FILE)
    return report


def evaluate(
    logs: Sequence[WitnessLog],
    parts: Mapping[tuple[str, int], _Partition],
    state: TargetState,
    settings: CheckpointSettings,
    rename: Mapping[str, str],
    *,
    reset: str = "latest",
    run_dir: str = "",
    waited_s: float = 0.0,
    since: float | None = None,
    sync_read_lag: float = SYNC_READ_LAG_S,
    leave_out: Mapping[str, str] | None = None,
) -> FailoverReport:
    """The checks on data already read (pure: the tests feed it hand-built states).

    ``since``: when production started (epoch seconds); heartbeats before it are not counted.
    ``sync_read_lag``: see :class:`SyncHistory`.  ``leave_out``: see :func:`check_failover`.
    """
    report = FailoverReport(run_dir, state.read_at, waited_s, reset, settings.to_dict())
    checkpoints, synced = _translation_parts(report, settings, dict(leave_out or {}), state)
    histories = None
    if checkpoints and "offset syncs" in (leave_out or {}):
        report.left_out["offset syncs"] = dict(leave_out or {})["offset syncs"]
    elif checkpoints:
        histories = _sync_histories(state, report, sync_read_lag, settings.sync_store)
    synced_offsets = (state.synced or {}) if synced else None
    sequences: dict[tuple[str, str, int], list[SeenCheckpoint]] = {}
    for cp in sorted(state.checkpoints, key=lambda c: c.seq):
        sequences.setdefault((cp.group, cp.topic, cp.partition), []).append(cp)
    fallback = {"partitions": 0, "skipped_latest": 0, "rereads_earliest": 0}
    for log in logs:
        commits_by_tp = _latest_commits(log)
        for topic, plist in sorted(log.partitions.items()):
            target = rename.get(topic, topic)
            for p in plist:
                commits = commits_by_tp.get((topic, p), [])
                if not commits:
                    report.notes.append(f"witness {log.name} never committed {topic}[{p}]")
                    continue
                part = parts.get((topic, p), _Partition())
                _add_fallback(fallback, part, log.consumed_ranges(topic, p, commits[-1][1]))
                seq = sequences.get((log.group, target, p), [])
                new: list[FailoverEntry] = []
                if checkpoints:
                    last = seq[-1] if seq else None
                    new.append(_entry(log, topic, target, p, commits, part, "checkpoint",
                                      last.downstream if last else None, last, seq, reset, state.read_at))
                if synced_offsets is not None:
                    new.append(_entry(log, topic, target, p, commits, part, "synced",
                                      synced_offsets.get(log.group, {}).get((target, p)), None, [], reset,
                                      state.read_at))
                for e in new:
                    if histories is not None:
                        history = histories.get((topic, p)) or SyncHistory([], store=settings.sync_store)
                        _add_sync_evidence(e, history, seq)
                report.entries += new
    if set(report.not_run) & {"checkpoints", "synced offsets"}:
        report.fallback = fallback
    for e in report.untranslatable():
        if e.via == "checkpoint" or not checkpoints:
            report.notes.append(f"not translated, as MM2's design allows: {e.where}, committed upstream "
                                f"{e.committed}: {e.untranslatable}; a consumer failing over falls back to "
                                f"auto.offset.reset={reset}: resumes at {e.resume_at}, skipped {e.skipped}, "
                                f"re-reads {e.rereads}")
    _heartbeat_part(report, state, settings, since, dict(leave_out or {}))
    _explain(report, state, settings, [log.group for log in logs], waited_s)
    return report


def _translation_parts(report: FailoverReport, settings: CheckpointSettings, leave_out: dict[str, str],
                       state: TargetState) -> tuple[bool, bool]:
    """Whether the checkpoints and the synced offsets are checked; the others go to
    ``left_out`` (on purpose) or ``not_run`` (a failure: the setting in effect)."""
    checkpoints = False
    if "checkpoints" in leave_out:
        report.left_out["checkpoints"] = leave_out["checkpoints"]
    elif settings.no_checkpoints():
        report.not_run["checkpoints"] = str(settings.no_checkpoints())
    else:
        checkpoints = True
        if not state.checkpoints_topic_exists:
            report.notes.append(f"no checkpoints topic {settings.names.checkpoints_topic} on the target")
    why = settings.no_group_sync()
    if "synced offsets" in leave_out:
        report.left_out["synced offsets"] = leave_out["synced offsets"]
    elif why and "sync_group_offsets" in settings.asked:
        report.not_run["synced offsets"] = f"{why}, although {settings.asked['sync_group_offsets']} asked for them"
    elif why:
        report.left_out["synced offsets"] = (f"{why}; nobody asked for them (sync.group.offsets.enabled=true in the "
                                             "test's marker or the replicator properties does)")
    return checkpoints, why is None and "synced offsets" not in leave_out


def _add_fallback(fallback: dict[str, int], part: _Partition, consumed: Any) -> None:
    """What a consumer with no translation would do on ``part``: skip with latest, re-read with earliest."""
    if part.end == 0:
        return
    fallback["partitions"] += 1
    fallback["skipped_latest"] += part.evaluate(consumed, part.end)[0]
    fallback["rereads_earliest"] += part.evaluate(consumed, 0)[1]


def _heartbeat_part(report: FailoverReport, state: TargetState, settings: CheckpointSettings, since: float | None,
                    leave_out: dict[str, str]) -> None:
    if "heartbeats" in leave_out:
        report.left_out["heartbeats"] = leave_out["heartbeats"]
        report.heartbeats = {"topic": settings.names.remote_heartbeats_topic}
        return
    report.heartbeats, why = _heartbeats(state, settings, since)
    if why:
        report.not_run["heartbeats"] = why


def _explain(report: FailoverReport, state: TargetState, settings: CheckpointSettings, groups: Sequence[str],
             waited_s: float) -> None:
    """Why a part that ran found nothing where it should have: the settings behind it."""
    took = settings.group_filter()
    excluded = [g for g in groups if not took(g)]
    filtered = (f"the group filter leaves out the witness groups {', '.join(excluded)} "
                f"({settings.quote('groups')}, {settings.quote('groups_exclude')})") if excluded else ""
    if any(e.via == "checkpoint" for e in report.untranslated()) and not state.checkpoints:
        report.explain["checkpoints"] = filtered or (
            f"no checkpoint of any witness group arrived in the {waited_s:.0f} s the check waited after the run "
            f"({settings.quote('checkpoints_interval')}, {settings.quote('flush_interval')}); the checkpoints topic "
            f"{settings.names.checkpoints_topic} {'exists' if state.checkpoints_topic_exists else 'does not exist'} "
            "on the target")
    if any(e.via == "synced" for e in report.untranslated()) and not any((state.synced or {}).values()):
        report.explain["synced offsets"] = filtered or (
            f"no witness group had a committed offset on the target after the {waited_s:.0f} s the check waited "
            f"({settings.quote('sync_group_offsets')}, {settings.quote('sync_interval')}, "
            f"{settings.quote('checkpoints_interval')}; MM2 moves only groups with no active member on the target)")
    hb = report.heartbeats
    if "heartbeats" not in report.not_run and "heartbeats" not in report.left_out and not hb.get("count"):
        report.explain["heartbeats"] = (f"{settings.quote('heartbeats_interval')}; {hb.get('count_all', 0)} heartbeats "
                                        f"in {hb.get('topic')} in all, none emitted since production started")


def _sync_histories(state: TargetState, report: FailoverReport, read_lag: float,
                    store: str) -> dict[tuple[str, int], SyncHistory] | None:
    """The offset syncs per source partition; None (and ``not_run``) when they were not read."""
    if state.syncs is None:
        report.not_run["offset syncs"] = state.syncs_note
        return None
    by_tp: dict[tuple[str, int], list[SeenSync]] = {}
    for s in sorted(state.syncs, key=lambda s: s.seq):
        by_tp.setdefault((s.topic, s.partition), []).append(s)
    return {tp: SyncHistory(syncs, read_lag_s=read_lag, store=store) for tp, syncs in by_tp.items()}


def _entry(log: WitnessLog, topic: str, target: str, p: int, commits: list[tuple[float, int]], part: _Partition,
           via: str, translated: int | None, latest: SeenCheckpoint | None, seq: list[SeenCheckpoint], reset: str,
           read_at: float) -> FailoverEntry:
    at, upstream = commits[-1]
    first_at = next(t for t, off in commits if off == upstream)
    consumed = log.consumed_ranges(topic, p, upstream)
    resume = translated if translated is not None else (part.end if reset == "latest" else 0)
    skipped, rereads, skipped_rows, reread_rows = part.evaluate(consumed, resume)
    e = FailoverEntry(
        group=log.group, witness=log.name, topic=topic, target_topic=target, partition=p, via=via,
        committed=upstream, committed_at=first_at, consumed_last=log.last_consumed(topic, p, upstream),
        translated=translated, translated_upstream=latest.upstream if latest else None, resume_at=resume,
        end_of_log=part.end, exact=part.first_unconsumed(consumed), skipped=skipped, rereads=rereads,
        beyond_end=max(0, resume - part.end), skipped_rows=skipped_rows[:MAX_SHOWN], reread_rows=reread_rows[:MAX_SHOWN],
    )
    if via != "checkpoint":
        return e
    e.checkpoints = len(seq)
    cp_up = latest.upstream if latest else None
    e.records_behind = max(0, upstream - (cp_up if cp_up is not None else 0)) if part.end else 0
    if e.records_behind:
        since = next((t for t, off in commits if off > (cp_up if cp_up is not None else -1)), at)
        e.seconds_behind = round(max(0.0, read_at - since), 3)
    else:
        e.seconds_behind = 0.0
    # every distinct committed offset: how long until a checkpoint reflected it
    delays: list[float] = []
    seen_offsets: set[int] = set()
    for t, off in commits:
        if off in seen_offsets or part.end == 0:
            continue
        seen_offsets.add(off)
        cp = next((c for c in seq if c.upstream >= off), None)
        if cp is None:
            e.never_translated.append(off)
        else:
            delays.append(max(0.0, cp.time_ms / 1000 - t))
    e.max_delay_s = round(max(delays), 3) if delays else None
    # every checkpoint against the commit it translated, and the rewinds
    prev: SeenCheckpoint | None = None
    for cp in seq:
        c_consumed = log.consumed_ranges(topic, p, cp.upstream)
        c_skipped, _, _, _ = part.evaluate(c_consumed, cp.downstream)
        beyond = max(0, cp.downstream - part.end)
        if c_skipped or beyond:
            e.history_rows.append({"time": when(cp.time_ms / 1000), "upstream": cp.upstream, "downstream": cp.downstream,
                                   "skipped": c_skipped, "exact": part.first_unconsumed(c_consumed),
                                   "beyond_end": beyond})
        e.history_skipped = max(e.history_skipped, c_skipped)
        e.history_beyond_end = max(e.history_beyond_end, beyond)
        if prev is not None and cp.downstream < prev.downstream and cp.upstream >= prev.upstream:
            e.rewinds.append({"time": when(cp.time_ms / 1000), "upstream_before": prev.upstream,
                              "downstream_before": prev.downstream, "upstream": cp.upstream,
                              "downstream": cp.downstream, "checkpoint_offset": cp.seq})
        prev = cp
    e.history_rows = e.history_rows[:MAX_SHOWN]
    return e


def _heartbeats(state: TargetState, settings: CheckpointSettings,
                since: float | None) -> tuple[dict[str, Any], str | None]:
    topic = settings.names.remote_heartbeats_topic
    if settings.no_heartbeats():
        return {"topic": topic}, str(settings.no_heartbeats())
    if not state.heartbeats_topic_exists:
        return {"topic": topic}, (f"no replicated heartbeats topic {topic} on the target: the replicator copied no "
                                  f"heartbeat ({settings.quote('emit_heartbeats')}, "
                                  f"{settings.quote('heartbeats_interval')})")
    window_start_ms = int(since * 1000) if since is not None else 0
    read_ms = int(state.read_at * 1000)
    stamps = sorted({t for t in state.heartbeats if window_start_ms <= t <= read_ms})
    out: dict[str, Any] = {"topic": topic, "count": len(stamps), "newest_ms": None, "lag_ms": None,
                           "max_gap_ms": None, "gap_after_ms": None,
                           "interval_s": settings.heartbeats_interval, "count_all": len(set(state.heartbeats)),
                           "watched_s": None if since is None else round(max(0.0, state.read_at - since), 3)}
    if stamps:
        out["newest_ms"] = stamps[-1]
        out["lag_ms"] = read_ms - stamps[-1]
        gaps = [(b - a, a) for a, b in pairwise(stamps)]
        if gaps:
            out["max_gap_ms"], out["gap_after_ms"] = max(gaps)
    return out, None

