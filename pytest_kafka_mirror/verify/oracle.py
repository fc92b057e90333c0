"""The verifier's report computed the obvious way, in plain Python: a test oracle.

:func:`oracle_report` reads the same run directory as :func:`verify_run
<pytest_kafka_mirror.verify.verify_run>` and returns the same :class:`MirrorReport`, every
figure, missing range, example row and latency percentile included, built from sets and
loops over every row, with none of the job's shortcuts (range arithmetic, top-K queries,
bucketed percentiles).  The plugin's tests check that the two agree exactly on thousands
of generated histories; users can run it on small runs (everything is held in memory) to
cross-check a surprising report without Spark::

    from pytest_kafka_mirror.verify.oracle import oracle_report
    assert oracle_report(run_dir) == verify_run(run_dir)   # up to the float mean latency

Only input parsing (manifests, the capture schema, the producers' per-second counts) and
the wording of a phantom's reason are shared with the Spark job.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_kafka_mirror.rundir import (
    CAPTURE_DIR,
    SOURCE_DIR,
    load_capture_status,
    load_discovery,
    load_engine,
    load_manifests,
    load_scenario_figures,
)
from pytest_kafka_mirror.verify._latency import PERCENTILES, nearest_rank
from pytest_kafka_mirror.verify.job import DEFAULT_BOUNDS, manifest_lanes, phantom_reason, record_kinds
from pytest_kafka_mirror.verify.report import LaneStats, LatencyStats, MirrorReport, MissingRange, compact_ranges

__all__ = ["oracle_report"]

LaneKey = tuple[str, str, int]
_MAX_COPIES_SHOWN = 5


def _read_rows(capture_dir: Path) -> list[dict[str, Any]]:
    """Every row of the capture segments (none when the directory is absent or empty)."""
    if not capture_dir.is_dir():
        return []
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = []
    for path in sorted(capture_dir.rglob("*.parquet")):
        rows += pq.read_table(path).to_pylist()
    for r in rows:  # segments written before the damage column
        r.setdefault("damage", None)
    return rows


def _identified(r: dict[str, Any]) -> bool:
    return r["kind"] in ("headers", "body") and None not in (r["producer_id"], r["lane"], r["seq"])


def _ours(rows: Iterable[dict[str, Any]]) -> dict[LaneKey, list[dict[str, Any]]]:
    """Identified rows (producer, lane and seq known) by lane, each lane in (partition, offset) order."""
    lanes: dict[LaneKey, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if _identified(r):
            lanes[(r["topic"], r["producer_id"], r["lane"])].append(r)
    for got in lanes.values():
        got.sort(key=lambda r: (r["partition"], r["offset"]))
    return lanes


def _by_arrival(r: dict[str, Any]) -> tuple[int, int, int]:
    return (r["arrival_ts_us"], r["partition"], r["offset"])


def _nulls_first(*values: Any) -> tuple[Any, ...]:
    """A sort key that orders None first, as Spark's ascending orderBy does."""
    return tuple((v is not None, v) for v in values)


def _acked(run: Path) -> tuple[dict[LaneKey, set[int]], dict[LaneKey, int]]:
    """Per lane: the acknowledged seqs and how many were sent, from the manifests."""
    acked: dict[LaneKey, set[int]] = defaultdict(set)
    sent: dict[LaneKey, int] = defaultdict(int)
    for m in load_manifests(run):
        for lm in m.lanes:
            key = (lm.topic, m.producer_id, lm.lane)
            sent[key] = max(sent[key], lm.sent)
            for a, b in lm.acked:
                acked[key].update(range(a, b + 1))
    return acked, sent


def _duplicates(got: Iterable[dict[str, Any]]) -> list[MissingRange]:
    """The ranges of seqs that arrived more than once."""
    twice = Counter(r["seq"] for r in got)
    return [MissingRange(a, b, "duplicated") for a, b in compact_ranges(q for q, n in twice.items() if n > 1)]


def _missing(want: set[int], have: set[int], top: int | None, tail: bool) -> list[MissingRange]:
    """Compacted ranges of ``want - have``; kind lost/unseen by ``top`` (the lane max), else "source"."""
    out = []
    for a, b in compact_ranges(want - have):
        kind = ("lost" if top is not None and top > b else "unseen") if tail else "source"
        out.append(MissingRange(a, b, kind))
    return out


def _delivery(s: LaneStats, want: set[int], seqs: set[int], top: int | None, compacted: bool, max_ranges: int) -> None:
    """Lost / unseen and the missing ranges of lane ``s``; of a lane of a compacted topic (a
    key), whether its latest acknowledged record arrived, the older ones being allowed to
    have been compacted away."""
    if compacted:
        s.compacted, s.latest_seq = True, max(want, default=None)
        s.latest_missing = int(s.latest_seq is not None and s.latest_seq not in seqs)
        s.compacted_away = len(want - seqs) - s.latest_missing
        return
    missing = _missing(want, seqs, top, tail=True)
    s.lost = sum(r.count for r in missing if r.kind == "lost")
    s.unseen = sum(r.count for r in missing if r.kind == "unseen")
    s.missing_ranges, s.missing_range_count = missing[:max_ranges], len(missing)


def _latency(values: list[int], bounds: Sequence[float]) -> LatencyStats:
    histogram = [0] * (len(bounds) + 1)
    for v in values:
        histogram[next((i for i, b in enumerate(bounds) if v <= b * 1000.0), len(bounds))] += 1
    if not values:
        return LatencyStats(histogram=histogram)
    ordered = sorted(values)
    return LatencyStats(
        count=len(ordered),
        min_ms=ordered[0] / 1000.0,
        mean_ms=sum(ordered) / len(ordered) / 1000.0,
        max_ms=ordered[-1] / 1000.0,
        histogram=histogram,
        **{figure: ordered[nearest_rank(q, len(ordered)) - 1] / 1000.0 for q, figure in PERCENTILES},
    )


def oracle_report(
    run_dir: str | os.PathLike[str],
    *,
    examples: int = 20,
    histogram_bounds_ms: Sequence[float] = DEFAULT_BOUNDS,
    max_ranges: int = 100,
) -> MirrorReport:
    """The :class:`MirrorReport` of a run directory, by brute force (see the module docstring)."""
    run = Path(run_dir)
    if not load_manifests(run):
        raise FileNotFoundError(f"no manifest-*.json in run directory {run}")
    bounds = sorted(float(b) for b in histogram_bounds_ms if float(b) != float("inf"))
    examples, max_ranges = max(examples, 0), max(max_ranges, 0)
    meta, topics = manifest_lanes(run)

    acked, sent = _acked(run)
    rows = _read_rows(run / CAPTURE_DIR)
    ours = _ours(rows)
    reconciled = (run / SOURCE_DIR).is_dir()
    source = {key: {r["seq"] for r in got} for key, got in _ours(_read_rows(run / SOURCE_DIR / CAPTURE_DIR)).items()}

    lanes: list[LaneStats] = []
    first_copy: dict[tuple[LaneKey, int], list[dict[str, Any]]] = {}  # copies in arrival order
    reordered_at: list[dict[str, Any]] = []
    latencies: dict[str, list[int]] = defaultdict(list)
    untimed: dict[str, int] = defaultdict(int)
    for key in sorted(meta.keys() | ours.keys()):
        want, got = acked.get(key, set()), ours.get(key, [])
        lane_meta = meta.get(key)
        aborted = {q for a, b in (lane_meta.aborted if lane_meta else []) for q in range(a, b + 1)}
        seqs = {r["seq"] for r in got}
        top = max(seqs, default=None)
        s = LaneStats(
            topic=key[0], producer_id=key[1], lane=key[2],
            target_topic=lane_meta.target_topic if lane_meta else topics.get(key[0]),
            source_partition=lane_meta.partition if lane_meta else None,
            partitions=sorted({r["partition"] for r in got}),
            expected=len(want), received=len(got), distinct=len(seqs),
            phantom=sum(1 for r in got if r["seq"] not in want),
            corrupted=sum(1 for r in got if r["checksum_ok"] is False),
            never_acked=len(set(range(sent.get(key, 0))) - want - seqs - aborted),
            aborted_arrived=sum(1 for r in got if r["seq"] in aborted),
        )
        s.duplicated = s.received - s.distinct
        dups = _duplicates(got)
        s.duplicate_ranges, s.duplicate_range_count = dups[:max_ranges], len(dups)
        _delivery(s, want, seqs, top, lane_meta is not None and lane_meta.compacted, max_ranges)
        if reconciled and not s.compacted:
            gone = _missing(want, seqs | source.get(key, set()), top, tail=False)
            s.missing_in_source = sum(r.count for r in gone)
            s.lost_by_replicator = s.lost + s.unseen - s.missing_in_source
            s.source_missing_ranges, s.source_missing_range_count = gone[:max_ranges], len(gone)

        by_seq: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for r in got:
            by_seq[r["seq"]].append(r)
        for seq, copies in by_seq.items():
            copies.sort(key=_by_arrival)
            first_copy[(key, seq)] = copies
            if seq in want and copies[0]["produce_ts_us"] is not None:
                latencies[key[0]].append(copies[0]["arrival_ts_us"] - copies[0]["produce_ts_us"])
            elif seq in want:
                untimed[key[0]] += 1
        # Reordered: per target partition, in offset order, the first copy of a seq behind
        # a higher seq that came first.
        late: dict[int, list[tuple[int, int, int]]] = defaultdict(list)  # seq -> (partition, offset, after)
        for p in s.partitions:
            highest, first_seen = None, set()
            for r in (r for r in got if r["partition"] == p):
                if r["seq"] in first_seen:
                    continue
                first_seen.add(r["seq"])
                if highest is not None and r["seq"] < highest:
                    late[r["seq"]].append((p, r["offset"], highest))
                highest = r["seq"] if highest is None else max(highest, r["seq"])
        s.reordered = sum(len(v) for v in late.values())
        for seq, where in late.items():
            p, o, after = min(where)
            reordered_at.append({"topic": key[0], "producer_id": key[1], "lane": key[2], "seq": seq,
                                 "after_seq": after, "partition": p, "offset": o})
        lanes.append(s)

    kinds: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        kinds["damaged" if r["damage"] is not None else r["kind"]].append(r)
    damaged = record_kinds([{"kind": r["kind"], "damage": r["damage"], "identified": _identified(r), "count": 1}
                            for r in kinds["damaged"]])
    latency_by_topic = {t: _latency(latencies.get(t, []), bounds) for t in sorted(latencies.keys() | untimed.keys())}
    for t, n in untimed.items():
        latency_by_topic[t].untimed = n
    report = MirrorReport(
        run_dir=str(run),
        headers_lost=len(kinds["headerless"]),
        foreign=len(kinds["foreign"]),
        metadata_damaged=damaged.damaged,
        damaged_unmatched=damaged.unmatched,
        damage=damaged.damage,
        lane_split=sum(1 for s in lanes if len(s.partitions) > 1),
        aborted=sum(m.aborted_count for m in meta.values()),
        reconciled=reconciled,
        lanes=lanes,
        latency=replace(_latency([v for vs in latencies.values() for v in vs], bounds), untimed=sum(untimed.values())),
        latency_by_topic=latency_by_topic,
        histogram_bounds_ms=bounds,
        capture=load_capture_status(run),
        discovery=load_discovery(run),
        engine=load_engine(run),
        scenario=load_scenario_figures(run),
    )
    for name in ("expected", "received", "distinct", "lost", "unseen", "duplicated", "reordered", "phantom",
                 "corrupted", "never_acked", "lost_by_replicator", "missing_in_source", "aborted_arrived",
                 "latest_missing", "compacted_away"):
        setattr(report, name, sum(getattr(s, name) for s in lanes))
    if examples:
        report.examples = _examples(report, ours, acked, meta, first_copy, reordered_at, kinds, examples)
    _figures_over_time(report, run, acked, first_copy)
    return report


def _figures_over_time(report: MirrorReport, run: Path, acked: dict[LaneKey, set[int]],
                       first_copy: dict[tuple[LaneKey, int], list[dict[str, Any]]]) -> None:
    """``timeline`` (exact nearest-rank percentiles per second), ``producers``, ``topic_firsts``,
    ``capacity`` (from the same per-second counts as the job's), ``stall`` (from the timeline
    and the first and last arrivals, counted here).

    The job's per-second percentiles come from 1 % buckets (``verify/_timeline.py``): they
    are never below these exact values and at most 1 % above them.
    """
    from pytest_kafka_mirror.verify._capacity import capacity_figures
    from pytest_kafka_mirror.verify._stall import stall_figures
    from pytest_kafka_mirror.verify._timeline import complete_timeline, producer_figures

    manifests = load_manifests(run)
    report.producers = producer_figures(manifests)
    by_produce: dict[int, list[int]] = defaultdict(list)
    arrived: dict[int, int] = defaultdict(int)
    flow: dict[tuple[str, str, str, int], int] = defaultdict(int)  # the job's flow rows, counted
    last: dict[str, list[int]] = {}
    firsts: dict[str, dict[str, int]] = {}
    for (key, seq), copies in first_copy.items():
        first = copies[0]
        if seq not in acked.get(key, ()) or first["produce_ts_us"] is None or first["arrival_ts_us"] is None:
            continue
        produce, arrival = first["produce_ts_us"], first["arrival_ts_us"]
        by_produce[produce // 1_000_000].append(arrival - produce)
        arrived[arrival // 1_000_000] += 1
        flow[("produced", key[0], key[1], produce // 1_000_000)] += 1
        flow[("arrived", key[0], key[1], arrival // 1_000_000)] += 1
        ends = last.setdefault(key[0], [produce, arrival])
        ends[:] = [max(ends[0], produce), max(ends[1], arrival)]
        f = firsts.setdefault(key[0], {"first_produce_us": produce, "first_arrival_us": arrival})
        f["first_produce_us"] = min(f["first_produce_us"], produce)
        f["first_arrival_us"] = min(f["first_arrival_us"], arrival)
    report.topic_firsts = firsts
    seconds: dict[int, dict[str, Any]] = {}

    def second(t: int) -> dict[str, Any]:
        return seconds.setdefault(t, {"t": t, "sent": 0, "received": 0, "arrived": 0, "p50_ms": None, "p99_ms": None})

    for t, lats in by_produce.items():
        lats.sort()
        e = second(t)
        e["received"] = len(lats)
        e["p50_ms"] = lats[nearest_rank(0.5, len(lats)) - 1] / 1000.0
        e["p99_ms"] = lats[nearest_rank(0.99, len(lats)) - 1] / 1000.0
    for t, n in arrived.items():
        second(t)["arrived"] = n
    report.timeline = complete_timeline(seconds, manifests, second)
    rows = [{"kind": kind, "topic": topic, "producer_id": pid, "t": t, "n": n, "last_produce_us": None,
             "last_arrival_us": None} for (kind, topic, pid, t), n in flow.items()]
    rows += [{"kind": "ends", "topic": topic, "producer_id": None, "t": None, "n": None, "last_produce_us": p,
              "last_arrival_us": a} for topic, (p, a) in last.items()]
    report.capacity = capacity_figures(rows, manifests, report.producers, report.timeline, report.capture)
    report.stall = stall_figures(report.timeline, manifests,
                                 first_arrival_us=min((f["first_arrival_us"] for f in firsts.values()), default=None),
                                 last_arrival_us=max((a for _, a in last.values()), default=None), unseen=report.unseen)


def _examples(
    report: MirrorReport,
    ours: dict[LaneKey, list[dict[str, Any]]],
    acked: dict[LaneKey, set[int]],
    meta: dict[LaneKey, Any],
    first_copy: dict[tuple[LaneKey, int], list[dict[str, Any]]],
    reordered_at: list[dict[str, Any]],
    kinds: dict[str, list[dict[str, Any]]],
    n: int,
) -> dict[str, list[dict[str, Any]]]:
    ex: dict[str, list[dict[str, Any]]] = {}

    def ident(key: LaneKey, seq: int) -> dict[str, Any]:
        return {"topic": key[0], "producer_id": key[1], "lane": key[2], "seq": seq}

    def where(key: LaneKey, seq: int | None) -> tuple[int | None, int | None]:
        copies = first_copy.get((key, seq)) if seq is not None else None
        return (copies[0]["partition"], copies[0]["offset"]) if copies else (None, None)

    for kind in ("lost", "unseen"):
        rows = []
        for s in report.lanes:
            key = (s.topic, s.producer_id, s.lane)
            top = max((r["seq"] for r in ours.get(key, [])), default=None)
            for r in s.missing_ranges:
                if r.kind == kind:
                    p, o = where(key, top)
                    rows.append({**ident(key, r.first), "last_seq": r.last, "count": r.count, "arrived_seq": top,
                                 "partition": p, "offset": o})
        if rows:
            ex[kind] = rows[:n]

    dup, phantom = [], []
    for (key, seq), copies in sorted(first_copy.items()):
        p, o = where(key, seq)
        if len(copies) > 1:
            at = ", ".join(f"{c['partition']}:{c['offset']}" for c in copies[:_MAX_COPIES_SHOWN])
            dup.append({**ident(key, seq), "copies": len(copies), "partition": p, "offset": o,
                        "at": at + (", ..." if len(copies) > _MAX_COPIES_SHOWN else "")})
        if seq not in acked.get(key, set()):
            phantom.append({**ident(key, seq), "copies": len(copies), "partition": p, "offset": o,
                            "why": phantom_reason(meta, key, seq)})
    corrupted = sorted(
        ({**ident((r["topic"], r["producer_id"], r["lane"]), r["seq"]), "partition": r["partition"],
          "offset": r["offset"]} for rows in ours.values() for r in rows if r["checksum_ok"] is False),
        key=lambda r: (r["topic"], r["producer_id"], r["lane"], r["seq"], r["partition"], r["offset"]),
    )
    reordered = sorted(reordered_at, key=lambda r: (r["topic"], r["producer_id"], r["lane"], r["partition"],
                                                    r["offset"]))
    headers_lost = sorted(
        ({k: r[k] for k in ("topic", "target_topic", "lane", "partition", "offset")} for r in kinds["headerless"]),
        key=lambda r: _nulls_first(r["topic"], r["lane"], r["partition"], r["offset"]),
    )
    foreign = sorted(
        ({k: r[k] for k in ("target_topic", "partition", "offset", "evidence")} for r in kinds["foreign"]),
        key=lambda r: _nulls_first(r["target_topic"], r["partition"], r["offset"]),
    )
    damaged = sorted(
        ({k: r[k] for k in ("topic", "target_topic", "partition", "offset", "producer_id", "lane", "seq", "damage")}
         for r in kinds["damaged"]),
        key=lambda r: _nulls_first(r["target_topic"], r["partition"], r["offset"]),
    )
    split = []
    for s in report.lanes:
        if len(s.partitions) > 1:
            key = (s.topic, s.producer_id, s.lane)
            for p in s.partitions:
                there = [r for r in ours[key] if r["partition"] == p]
                head = min(there, key=lambda r: r["offset"])
                split.append({**ident(key, head["seq"]), "partition": p, "offset": head["offset"],
                              "records": len(there)})
    for name, rows, total in (
        ("duplicated", dup, report.duplicated), ("phantom", phantom, report.phantom),
        ("corrupted", corrupted, report.corrupted), ("reordered", reordered, report.reordered),
        ("headers_lost", headers_lost, report.headers_lost), ("foreign", foreign, report.foreign),
        ("metadata_damaged", damaged, report.metadata_damaged),
        ("lane_split", split, report.lane_split),
    ):
        if total:
            ex[name] = rows[:n]
    return ex
