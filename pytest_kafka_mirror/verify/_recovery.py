"""Figures derived from the per-second timeline and the fault markers.

Pure functions over report data (no Spark), so they work on stored reports too.

*Recovery* after a fault at time F: when the mirror was back within the SLO, followed
through the end of the data, the drain included (the capture goes on reading after
production ended until every acknowledged record arrived or its drain timeout passed).

- During production: the start of the first second ``s >= F`` from which on, through the
  last second of production, every second is healthy — its p99 latency (of the records
  produced in it) is within the SLO, and every record produced in it arrived
  (``received == sent``; the producer counts ``sent`` per second of the records' own
  timestamps, so the two are exactly comparable) — except blips: once the mirror was
  healthy for :data:`HOLD_S` seconds in a row, fewer than ``HOLD_S`` unhealthy seconds
  followed by a healthy one do not undo the recovery (on a loaded 2-core machine one
  second's p99 crosses the SLO now and then, long after a restart was caught up:
  measured 2081 ms against 2000 ms, 13 s after the recovery); a relapse of ``HOLD_S``
  seconds does, and so does an unhealthy last second of production.
- Otherwise (the last second of production was not healthy, or the fault came after it):
  after production ended nothing new is produced to time, so the backlog decides, by
  arrival time.  The mirror recovered when every record produced from the fault's second
  on had arrived: at the end of the second in which the last record arrived (the
  timeline counts arrivals per second), never before F.  When some of those records
  never arrived, it did not recover by the end of the data (the end of the timeline's
  last second): ``seconds`` is None and ``missing`` says how many.

So a limit on ``seconds`` is the one applied even when the mirror comes back after
production ended; a run whose data ends before the limit and before a recovery cannot
show one, and says so (``data_end``).  ``seconds`` is ``recovered_time - F``, in whole
seconds of the timeline's clock.  What the drain cannot tell: a replicator still slow,
but moving, when production ended also clears its backlog in the end, and is then
credited as recovered at its last arrival; produce long enough after the fault to
watch it recover during production where that difference matters.

*Catch-up rate*: the peak arrival rate (records/s) in the seconds from the heal of the
fault (from F when nothing healed it) to the end: how fast the replicator drains a backlog.
*Backlog*: the largest number of records produced but not yet arrived
(cumulative sent - cumulative arrived) at any second boundary during the episode.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["HOLD_S", "Recovery", "discovery_seconds", "recoveries", "with_missing_so_far"]

#: seconds a recovery must hold before a shorter blip over the SLO no longer undoes it, and
#: the length of a relapse that does
HOLD_S = 3


@dataclass
class Recovery:
    """One fault episode and how the mirror came back from it."""

    label: str
    fault_time: float  # UTC epoch seconds
    healed_time: float | None
    recovered_time: float | None
    seconds: float | None  # recovered_time - fault_time
    seconds_after_heal: float | None
    peak_p99_ms: float | None
    backlog: int
    catch_up_rate: float | None  # records/s
    #: recovered after production ended, when the last record produced arrived (the drain)
    in_drain: bool = False
    #: the end of the last second of production (UTC epoch seconds); None without production
    production_end: float | None = None
    #: the end of the timeline's last second: the last arrival, or production's end if later
    data_end: float | None = None
    #: records produced from the fault's second on that never arrived (not recovered then)
    missing: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _healthy(entry: dict[str, Any], p99_ms: float) -> bool:
    p99 = entry.get("p99_ms")
    return (p99 is None or p99 <= p99_ms) and entry.get("received", 0) >= entry.get("sent", 0)


def with_missing_so_far(timeline: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The timeline with ``missing_so_far``: records produced up to each second that never
    arrived (cumulative ``sent - received``)."""
    out, total = [], 0
    for e in timeline:
        total += max(0, int(e.get("sent", 0)) - int(e.get("received", 0)))
        out.append({**e, "missing_so_far": total})
    return out


def recoveries(
    timeline: Sequence[dict[str, Any]],
    markers: Sequence[dict[str, Any]],
    p99_ms: float,
    *,
    since: float | None = None,
    label: str | None = None,
) -> list[Recovery]:
    """One :class:`Recovery` per fault marker of kind ``outage`` (or one from ``since``,
    UTC epoch seconds, when given — e.g. the end of a burst)."""
    if not timeline:
        return []
    entries = sorted(timeline, key=lambda e: e["t"])
    produced = [e for e in entries if e.get("sent", 0)]
    last = produced[-1]["t"] if produced else entries[-1]["t"]
    if since is not None:
        starts = [(label or f"from t={since:.3f}", since)]
    else:
        starts = [(m["label"], _time(m)) for m in markers if m.get("kind", "outage") == "outage"]
    heals = sorted(_time(m) for m in markers if m.get("kind") == "heal")
    out = []
    for name, fault in starts:
        healed = next((h for h in heals if h >= fault), None)
        recovered, missing, in_drain = _recovered(entries, fault, last, p99_ms)
        window = [e for e in entries if e["t"] + 1 > fault and (recovered is None or e["t"] <= recovered)]
        p99s = [e["p99_ms"] for e in window if e.get("p99_ms") is not None]
        backlog, cum_sent, cum_arrived = 0, 0, 0
        for e in entries:
            cum_sent += int(e.get("sent", 0))
            cum_arrived += int(e.get("arrived", 0))
            if e["t"] + 1 > fault and (recovered is None or e["t"] <= recovered):
                backlog = max(backlog, cum_sent - cum_arrived)
        # The backlog drains from the heal on, whatever the SLO: the catch-up rate is the
        # peak arrival rate from then to the end.
        after = healed if healed is not None else fault
        rates = [int(e.get("arrived", 0)) for e in entries if e["t"] >= math.floor(after)]
        out.append(Recovery(
            label=name,
            fault_time=fault,
            healed_time=healed,
            recovered_time=recovered,
            seconds=None if recovered is None else round(recovered - fault, 3),
            seconds_after_heal=None if recovered is None or healed is None else round(max(0.0, recovered - healed), 3),
            peak_p99_ms=max(p99s) if p99s else None,
            backlog=backlog,
            catch_up_rate=float(max(rates)) if rates else None,
            in_drain=in_drain,
            production_end=float(last + 1) if produced else None,
            data_end=float(entries[-1]["t"] + 1),
            missing=missing,
        ))
    return out


def _recovered(entries: Sequence[dict[str, Any]], fault: float, last: int,
               p99_ms: float) -> tuple[float | None, int, bool]:
    """``(recovered time, records missing, recovered in the drain)`` of a fault at ``fault``
    (see the module docstring); ``last``: the last second of production."""
    recovered: float | None = None
    healthy_run = unhealthy_run = 0  # consecutive seconds of each, up to this one
    for e in entries:
        if e["t"] + 1 <= fault:  # seconds that ended before the fault
            continue
        if e["t"] > last:
            break
        if not _healthy(e, p99_ms):
            unhealthy_run += 1
            # a blip after a held recovery is forgiven once health returns; a relapse of
            # HOLD_S seconds, or one before the recovery held, starts the search again
            if healthy_run < HOLD_S or unhealthy_run >= HOLD_S:
                recovered, healthy_run = None, 0
        else:
            if recovered is None:
                recovered = max(float(e["t"]), fault)
            healthy_run += 1
            unhealthy_run = 0
    if recovered is not None and unhealthy_run == 0:
        return recovered, 0, False
    # Not recovered by the end of production: the drain decides, by arrival time.
    missing = sum(max(0, int(e.get("sent", 0)) - int(e.get("received", 0))) for e in entries if e["t"] + 1 > fault)
    if missing:
        return None, missing, False
    arrivals = [e["t"] for e in entries if e.get("arrived", 0)]
    cleared = float(max([last, *arrivals]) + 1)  # the end of the second the last record arrived in
    return max(cleared, fault), 0, True


def _time(marker: dict[str, Any]) -> float:
    if "time" in marker:
        return float(marker["time"])
    return float(marker["at_us"]) / 1e6


def discovery_seconds(first_arrival_us: int | None, first_produce_us: int | None) -> float | None:
    """Seconds from the first record produced to a topic until the first one arrived."""
    if first_arrival_us is None or first_produce_us is None:
        return None
    return round((first_arrival_us - first_produce_us) / 1e6, 6)
