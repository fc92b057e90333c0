"""A stall: arrivals on the target stopped while the source went on acknowledging.

The report's ``stall`` (None when there was none), from figures the Spark job and the
oracle each compute on their own and that their agreement tests compare: the per-second
timeline (``sent``, ``received``, ``missing_so_far``), the first and the last arrival of an
acknowledged record (first copies with a produce time, UTC epoch microseconds), the unseen
total; and from the manifests, when production started and ended.  Being a function of
those, it is computed once, here, like the capacity figures (``_capacity.py``).

Definitions (docs/how-it-works.md has them for users):

last arrival
    the latest first arrival of an acknowledged record (``last_arrival_us``);
production end
    the end of the last producer's schedule: its start plus its ``produce_seconds``
    (flushing excluded), its ``finished_us`` when the manifest has no produce seconds;
typical gap
    the mean gap between arrivals while records arrived: (last − first arrival) /
    (arrivals − 1) (``gap_s``; None for a single arrival);
stall
    the last arrival is more than ``max(STALL_MIN_S, STALL_GAPS × typical gap)``
    (``threshold_s``) before the production end, and records the source acknowledged
    from the last arrival's second on never arrived: ``acked_after``, the timeline's
    ``missing_so_far`` at its end less its value at the end of the second before the last
    arrival's (the producers count ``sent`` per second of the records' own timestamps, so
    the records of the last arrival's second that arrived before it are left out, and
    those still in flight then are in), at most ``unseen`` (records produced after the last
    arrival cannot have a later record of their lane arrive, so they are unseen; the cap
    keeps out the records of those seconds the source never acknowledged).

``at_s`` is the last arrival in seconds from the start of production (the earliest
producer's schedule start); ``quiet_s`` the production end less the last arrival.
Over all topics: one topic stalled while others still arrive is not a stall here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from pytest_kafka_mirror.rundir import Manifest

__all__ = ["STALL_GAPS", "STALL_MIN_S", "production_end_us", "stall_figures", "stall_text"]

#: A quiet tail shorter than this (seconds) before the production end is not a stall.
STALL_MIN_S = 2.0
#: ... nor one shorter than this many typical gaps between arrivals (a sparse run's).
STALL_GAPS = 5


def production_end_us(manifests: Sequence[Manifest]) -> int | None:
    """The end of the last producer's schedule (UTC epoch microseconds; None without producers)."""
    ends = []
    for m in manifests:
        seconds = m.stats.get("produce_seconds")
        ends.append(m.started_us + round(float(seconds) * 1e6) if seconds is not None else m.finished_us)
    return max(ends, default=None)


def stall_figures(timeline: Sequence[Mapping[str, Any]], manifests: Sequence[Manifest], *,
                  first_arrival_us: int | None, last_arrival_us: int | None, unseen: int) -> dict[str, Any] | None:
    """The report's ``stall`` (see the module docstring), or None when there was none."""
    end = production_end_us(manifests)
    if last_arrival_us is None or first_arrival_us is None or end is None or not unseen:
        return None
    arrivals = sum(int(e.get("arrived", 0)) for e in timeline)
    gap = (last_arrival_us - first_arrival_us) / 1e6 / (arrivals - 1) if arrivals > 1 else None
    threshold = max(STALL_MIN_S, STALL_GAPS * (gap or 0.0))
    quiet = (end - last_arrival_us) / 1e6
    if quiet <= threshold:
        return None
    stopped = last_arrival_us // 1_000_000
    before = [int(e.get("missing_so_far", 0)) for e in timeline if e["t"] < stopped]
    total = int(timeline[-1].get("missing_so_far", 0)) if timeline else 0
    acked_after = min(total - (before[-1] if before else 0), unseen)
    if acked_after <= 0:
        return None
    start = min(m.started_us for m in manifests)
    return {
        "last_arrival_us": int(last_arrival_us),
        "at_s": round((last_arrival_us - start) / 1e6, 3),
        "production_end_us": int(end),
        "quiet_s": round(quiet, 3),
        "gap_s": None if gap is None else round(gap, 6),
        "threshold_s": round(threshold, 3),
        "acked_after": acked_after,
    }


def stall_text(stall: Mapping[str, Any], replicator: Mapping[str, Any] | None = None) -> str:
    """``arrivals stopped 8.2 s into the run (12:00:08 UTC), ...``: the stall as a sentence,
    with what the replicator said about itself when it said anything."""
    when = datetime.fromtimestamp(stall["last_arrival_us"] / 1e6, timezone.utc).strftime("%H:%M:%S")
    text = (f"arrivals stopped {stall['at_s']:.1f} s into the run ({when} UTC), {stall['quiet_s']:.1f} s before "
            f"production ended: the source acknowledged {stall['acked_after']:,} more "
            f"record{'' if stall['acked_after'] == 1 else 's'} from that second on, and none of them arrived")
    said = (replicator or {}).get("health") or (replicator or {}).get("status")
    if said:
        text += f"; the replicator ({(replicator or {}).get('spec', '?')}) says: {said}"
    return text
