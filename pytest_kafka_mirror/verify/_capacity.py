"""What a replicator can carry: the report's ``capacity`` figures.

Computed from the records' per-second flow (per source topic: acknowledged records that
arrived, counted by the second they were produced and by the second they arrived), the
producers' manifests and the capture's samples of the target's end offsets.  Definitions
(docs/how-it-works.md has them for users):

``backlog`` (at the end of a UTC second)
    records produced up to then that arrived later: acknowledged on the source, not yet
    on the target (records that never arrived are loss, not backlog);
backlog window
    the seconds in which something arrived and the backlog at the second's start was at
    least what arrived in it (the replicator had a second of work waiting: it, not the
    producer, set the pace), in runs of at least :data:`MIN_RUN_S` seconds, less each
    run's first and last second (partial: it started or finished mid-second).  Seconds in
    which nothing arrived are not in it (a paused replicator has no rate);
``copy_rate`` / ``copy_rate_mb``
    records (MB, of the producers' message size) that arrived per second of the backlog
    window: the replicator's throughput where it was the bottleneck.  None, with ``why``,
    when it never had such a backlog;
``backlog_max``
    the largest backlog at the end of a second (records);
``caught_up_s``
    from the last acknowledged record produced to the last one arriving (the backlog back
    at zero);
``offered_rate``
    what the producers offered: their achieved records/s (per topic, summed over topics
    for ``all``);
``lower_bound`` / ``why``
    the copy rate is only a lower bound when a throttled producer was behind its schedule
    in a second of the window (its records' due times then run ahead of their sending, so
    the backlog looks larger than it was), or when the capture read more than
    :data:`CAPTURE_BEHIND_PCT` % fewer records over the window than the target's end
    offsets grew (the capture, not the replicator, set the pace).

A stepped rate profile (``rate=[(0, R1), (S2, R2), ...]``) gets one entry per step, over
the whole seconds inside it: ``offered_rate`` (the schedule, records/s over all topics),
``copy_rate`` (arrivals per second), ``p50_ms`` (the median of its seconds' p50) and
``p99_ms`` (its worst second's p99), ``backlog_start`` (at the end of its first whole second:
the records in flight at a higher rate are not growth) / ``backlog_end``, ``sustained``:
p99 at most the SLO, the backlog grew by at most :data:`STEP_GROWTH_PCT` % of the step's
records (the copy kept up within that much) and the producer kept to its schedule.  ``max_sustainable_rate`` is the
highest sustained step's offered rate.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_kafka_mirror.rundir import Manifest

__all__ = ["CAPTURE_BEHIND_PCT", "DEFAULT_SLO_P99_MS", "MIN_RUN_S", "STEP_GROWTH_PCT", "capacity_figures", "flow_query",
           "with_slo"]

#: A backlog shorter than this (seconds) is too short to measure a rate at 1 s resolution.
MIN_RUN_S = 3
#: The capture reading this much (percent) behind the target's end offsets over the
#: window makes the copy rate a lower bound.
CAPTURE_BEHIND_PCT = 5.0
#: A step's backlog may grow by this much (percent of the records it offered) and count as
#: sustained: the copy kept within that of the offered rate.
STEP_GROWTH_PCT = 5.0
#: The p99 SLO of a step when the run does not set one (``MirrorRun.capacity_slo_ms``).
DEFAULT_SLO_P99_MS = 1000.0

Series = dict[int, int]


def flow_query(query: Any, firsts: Any) -> Any:
    """Per (kind, source topic, producer, second) the acknowledged records that arrived,
    by produce second (``produced``) and by arrival second (``arrived``); per topic the
    last produce and arrival times (``ends``, in ``last_produce_us`` / ``last_arrival_us``)."""
    acked = "(SELECT * FROM {firsts} WHERE acked AND arrival_ts_us IS NOT NULL AND produce_ts_us IS NOT NULL)"
    return query(f"""
        SELECT 'produced' AS kind, topic, producer_id, produce_ts_us div 1000000 AS t, count(1) AS n,
               NULL AS last_produce_us, NULL AS last_arrival_us
        FROM {acked} GROUP BY topic, producer_id, produce_ts_us div 1000000
        UNION ALL
        SELECT 'arrived' AS kind, topic, producer_id, arrival_ts_us div 1000000 AS t, count(1) AS n,
               NULL AS last_produce_us, NULL AS last_arrival_us
        FROM {acked} GROUP BY topic, producer_id, arrival_ts_us div 1000000
        UNION ALL
        SELECT 'ends' AS kind, topic, NULL AS producer_id, NULL AS t, NULL AS n,
               max(produce_ts_us) AS last_produce_us, max(arrival_ts_us) AS last_arrival_us
        FROM {acked} GROUP BY topic""", firsts=firsts)


class _Flow:
    """One series (a topic, or all of them): records per produce second and per arrival
    second, bytes of them, the last produce and arrival times."""

    def __init__(self) -> None:
        self.produced: Series = defaultdict(int)
        self.arrived: Series = defaultdict(int)
        self.bytes = 0
        self.records = 0
        self.last_produce_us: int | None = None
        self.last_arrival_us: int | None = None

    def add_ends(self, produce_us: int | None, arrival_us: int | None) -> None:
        if produce_us is not None:
            self.last_produce_us = max(self.last_produce_us or produce_us, produce_us)
        if arrival_us is not None:
            self.last_arrival_us = max(self.last_arrival_us or arrival_us, arrival_us)

    def backlog(self) -> dict[int, int]:
        """Backlog at the end of each second, every second from the first to the last."""
        seconds = set(self.produced) | set(self.arrived)
        out: dict[int, int] = {}
        if not seconds:
            return out
        cum = 0
        for t in range(min(seconds), max(seconds) + 1):
            cum += self.produced.get(t, 0) - self.arrived.get(t, 0)
            out[t] = max(cum, 0)
        return out


def _flows(rows: Iterable[Mapping[str, Any]], sizes: Mapping[str, int]) -> dict[str | None, _Flow]:
    """Per source topic, and ``None`` for all of them."""
    flows: dict[str | None, _Flow] = defaultdict(_Flow)
    for row in rows:
        for key in (row["topic"], None):
            flow = flows[key]
            if row["kind"] == "ends":
                flow.add_ends(row["last_produce_us"], row["last_arrival_us"])
                continue
            n, t = int(row["n"]), int(row["t"])
            (flow.produced if row["kind"] == "produced" else flow.arrived)[t] += n
            if row["kind"] == "arrived":
                flow.records += n
                flow.bytes += n * sizes.get(row["producer_id"], 0)
    return flows


def _window(flow: _Flow, backlog: Mapping[int, int]) -> tuple[list[int], str]:
    """The seconds of the backlog window, or [] and why there is none."""
    qualifying = [t for t, n in sorted(flow.arrived.items()) if n > 0 and backlog.get(t - 1, 0) >= n]
    runs: list[list[int]] = []
    for t in qualifying:
        if runs and runs[-1][-1] == t - 1:
            runs[-1].append(t)
        else:
            runs.append([t])
    kept = [t for run in runs if len(run) >= MIN_RUN_S for t in run[1:-1]]
    if kept:
        return kept, ""
    if not qualifying:
        return [], ("no backlog: every second, the replicator copied more than was waiting at its start, so it kept "
                    "up with what the producers offered and its capacity was not reached")
    longest = max(len(run) for run in runs)
    return [], (f"the backlog lasted {longest} s at most: under {MIN_RUN_S} s is too short to measure a rate at "
                "1 s resolution")


def _producer_behind(manifests: Sequence[Manifest], topic: str | None, seconds: Sequence[int]) -> tuple[int, float]:
    """Seconds of ``seconds`` in which a throttled producer (of ``topic``; None: any) was
    behind its schedule, and the largest lag then (s)."""
    wanted, behind, worst = set(seconds), set(), 0.0
    for m in manifests:
        if topic is not None and topic not in m.topics:
            continue
        for sec, lag in m.stats.get("behind_s") or []:
            t = int((m.started_us + sec * 1e6) // 1_000_000)
            hit = {t, t + 1} & wanted
            if hit:
                behind |= hit
                worst = max(worst, float(lag))
    return len(behind), worst


def _capture_behind(status: Mapping[str, Any], topic: str | None, t0: float, t1: float) -> float | None:
    """Percent fewer records the capture read than the target's end offsets grew over
    ``[t0, t1]`` (None: no samples cover it)."""
    sampled = status.get("end_offsets") or {}
    # one capture process: its own status ("samples"); several: merged, one list per process
    groups = sampled["groups"] if "groups" in sampled else [sampled.get("samples") or []]
    sources = sampled.get("topics") or {}
    end_growth = read_growth = 0
    for samples in groups:
        inside = [s for s in samples if t0 - 0.5 <= s[0] <= t1 + 0.5]
        if len(inside) < 2:
            continue
        first, last = inside[0][1], inside[-1][1]
        for name in (last if topic is None else [t for t in last if sources.get(t) == topic]):
            if name in first:
                end_growth += last[name][0] - first[name][0]
                read_growth += last[name][1] - first[name][1]
    if end_growth <= 0:
        return None
    return max(0.0, (1.0 - read_growth / end_growth) * 100.0)


def _offered(producers: Sequence[Mapping[str, Any]], topic: str | None) -> float | None:
    rates = [(p.get("achieved_rate_per_topic") or 0.0) * (1 if topic is not None else len(p.get("topics") or []))
             for p in producers if topic is None or topic in (p.get("topics") or [])]
    return round(sum(rates), 3) if rates else None


def _series_figures(flow: _Flow, topic: str | None, manifests: Sequence[Manifest],
                    producers: Sequence[Mapping[str, Any]], status: Mapping[str, Any]) -> dict[str, Any]:
    backlog = flow.backlog()
    kept, why = _window(flow, backlog)
    caught = None
    if flow.last_produce_us is not None and flow.last_arrival_us is not None:
        caught = round(max(flow.last_arrival_us - flow.last_produce_us, 0) / 1e6, 3)
    size = flow.bytes / flow.records if flow.records else 0.0
    out: dict[str, Any] = {
        "copy_rate": None, "copy_rate_mb": None, "backlog_max": max(backlog.values(), default=0),
        "caught_up_s": caught, "window": None, "offered_rate": _offered(producers, topic), "lower_bound": False,
        "why": why,
    }
    if not kept:
        return out
    rate = sum(flow.arrived[t] for t in kept) / len(kept)
    out.update(copy_rate=round(rate, 3), copy_rate_mb=round(rate * size / 1e6, 6) if size else None,
               window=[kept[0], kept[-1] + 1], window_s=len(kept))
    reasons = []
    n_behind, lag = _producer_behind(manifests, topic, kept)
    if n_behind:
        reasons.append(f"a producer was behind its offered rate (up to {lag:.2f} s behind its schedule) in "
                       f"{n_behind} of the window's {len(kept)} s")
    behind = _capture_behind(status, topic, kept[0], kept[-1] + 1)
    if behind is not None and behind > CAPTURE_BEHIND_PCT:
        reasons.append(f"the capture read {behind:.0f} % behind the target's end offsets")
    if reasons:
        out["lower_bound"] = True
        out["why"] = f"{'; '.join(reasons)}: the copy rate is at least {rate:,.0f} records/s"
    measured = (status.get("end_offsets") or {})
    if behind is not None:
        out["capture_behind_pct"] = round(behind, 1)
    elif measured.get("measured") is False:
        note = f"the capture's lag behind the target was not measured ({measured.get('why') or 'no end offsets'})"
        out["why"] = "; ".join(filter(None, [out["why"], note]))
    return out


def _steps(flow: _Flow, manifests: Sequence[Manifest], timeline: Sequence[Mapping[str, Any]]) -> tuple[
        list[dict[str, Any]], str]:
    """One entry per step of the run's stepped rate profile (or [] and why there is none)."""
    stepped = [m for m in manifests if isinstance(m.rate, list) and len(m.rate) > 1]
    if not stepped:
        return [], "no stepped rate profile (rate=[(0, R1), (SECONDS, R2), ...]): no steps to find the knee in"
    profile = [tuple(s) for s in stepped[0].rate]  # type: ignore[union-attr]
    if any([tuple(s) for s in m.rate] != profile for m in stepped):  # type: ignore[union-attr]
        return [], "the producers' rate profiles differ: no common steps"
    start = min(m.started_us for m in stepped) / 1e6
    end = max(m.started_us / 1e6 + float(m.stats.get("produce_seconds") or 0.0) for m in stepped)
    topics = sum(len(m.topics) for m in stepped)
    backlog = flow.backlog()
    by_second = {int(e["t"]): e for e in timeline}
    steps = []
    for i, (at, rate) in enumerate(profile):
        w0 = start + at
        w1 = min(start + profile[i + 1][0], end) if i + 1 < len(profile) else end
        seconds = list(range(math.ceil(w0), math.floor(w1)))
        if not seconds:
            continue
        p50s = sorted(by_second[t]["p50_ms"] for t in seconds if by_second.get(t, {}).get("p50_ms") is not None)
        p99s = [by_second[t]["p99_ms"] for t in seconds if by_second.get(t, {}).get("p99_ms") is not None]
        n_behind, lag = _producer_behind(stepped, None, seconds)
        steps.append({
            "t0": seconds[0], "t1": seconds[-1] + 1, "offered_rate": round(rate * topics, 3),
            "copy_rate": round(sum(flow.arrived.get(t, 0) for t in seconds) / len(seconds), 3),
            "p50_ms": p50s[len(p50s) // 2] if p50s else None, "p99_ms": max(p99s) if p99s else None,
            # growth counted from the end of the step's first whole second: the records in
            # flight at the new rate (more than at the slower step before) are not growth
            "backlog_start": backlog.get(seconds[0] if len(seconds) > 1 else seconds[0] - 1, 0),
            "backlog_end": backlog.get(seconds[-1], 0),
            "producer_behind_s": n_behind, "producer_lag_s": round(lag, 3),
        })
    return steps, ""


def with_slo(capacity: Mapping[str, Any], p99_ms: float) -> dict[str, Any]:
    """``capacity`` with its steps judged against a p99 SLO of ``p99_ms``: each step's
    ``sustained`` and ``why``, ``max_sustainable_rate`` and ``max_sustainable_why``."""
    out = dict(capacity)
    steps = [dict(s) for s in capacity.get("steps") or []]
    out.update(steps=steps, slo_p99_ms=p99_ms)
    if not steps:
        out.update(max_sustainable_rate=None, max_sustainable_lower_bound=False,
                   max_sustainable_why=capacity.get("max_sustainable_why") or "no steps")
        return out
    for s in steps:
        allowed = STEP_GROWTH_PCT / 100.0 * s["offered_rate"] * (s["t1"] - s["t0"])
        reasons = []
        if s.get("producer_behind_s"):
            reasons.append(f"the producer was behind its schedule (up to {s.get('producer_lag_s')} s): "
                           "the rate was not offered")
        if s["p99_ms"] is None or s["p99_ms"] > p99_ms:
            reasons.append(f"p99 {s['p99_ms']} ms over the SLO of {p99_ms:g} ms")
        if s["backlog_end"] - s["backlog_start"] > allowed:
            reasons.append(f"the backlog grew by {s['backlog_end'] - s['backlog_start']:,} records (more than "
                           f"{STEP_GROWTH_PCT:g} % of the step's, {allowed:,.0f})")
        s["sustained"] = not reasons
        s["why"] = "; ".join(reasons)
    sustained = [s for s in steps if s["sustained"]]
    best = max(sustained, key=lambda s: s["offered_rate"], default=None)
    higher = [s for s in steps if best is None or s["offered_rate"] > best["offered_rate"]]
    lower_bound = best is not None and (not higher or all(s.get("producer_behind_s") for s in higher))
    if best is None:
        why = f"no step was sustained (the lowest: {steps[0]['why']})"
    elif not higher:
        why = (f"every step up to the highest, {best['offered_rate']:,.0f} records/s, was sustained: the knee is "
               "above it (a lower bound)")
    elif lower_bound:
        why = "the higher steps were not offered (the producer fell behind): a lower bound"
    else:
        first = min(higher, key=lambda s: s["offered_rate"])
        why = f"the step at {first['offered_rate']:,.0f} records/s was not sustained: {first['why']}"
    out.update(max_sustainable_rate=best["offered_rate"] if best else None, max_sustainable_lower_bound=lower_bound,
               max_sustainable_why=why)
    return out


def capacity_figures(rows: Iterable[Mapping[str, Any]], manifests: Sequence[Manifest],
                     producers: Sequence[Mapping[str, Any]], timeline: Sequence[Mapping[str, Any]],
                     status: Mapping[str, Any], slo_p99_ms: float = DEFAULT_SLO_P99_MS) -> dict[str, Any]:
    """The report's ``capacity`` (see the module docstring) from the rows of :func:`flow_query`."""
    sizes = {m.producer_id: m.message_size for m in manifests}
    flows = _flows(rows, sizes)
    every = flows.get(None) or _Flow()
    steps, why = _steps(every, manifests, timeline)
    capacity = {
        "all": _series_figures(every, None, manifests, producers, status),
        "topics": {t: _series_figures(f, t, manifests, producers, status) for t, f in sorted(
            (t, f) for t, f in flows.items() if t is not None)},
        "steps": steps,
        "max_sustainable_why": why,
    }
    return with_slo(capacity, slo_p99_ms)
