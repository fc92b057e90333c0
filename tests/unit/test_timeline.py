"""The report's per-second timeline, against a brute-force oracle over the synthetic rows."""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_kafka_mirror.verify import verify_run
from pytest_kafka_mirror.verify._latency import nearest_rank
from tests.synthetic import BASE_TS_US, SyntheticRun

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T0 = BASE_TS_US // 1_000_000


def _oracle(run: SyntheticRun) -> dict[int, dict[str, Any]]:
    """Per second: received / arrived counts and exact nearest-rank p50 / p99 (ms), from the rows."""
    acked = {(m.producer_id, lm.topic, lm.lane, s) for m in run.manifests.values() for lm in m.lanes
             for a, b in lm.acked for s in range(a, b + 1)}
    first: dict[tuple[str, str, int, int], dict[str, Any]] = {}
    for r in run.rows:
        key = (r["producer_id"], r["topic"], r["lane"], r["seq"])
        if key in acked and (key not in first or r["arrival_ts_us"] < first[key]["arrival_ts_us"]):
            first[key] = r
    lat_by_second: dict[int, list[int]] = defaultdict(list)
    arrived: dict[int, int] = defaultdict(int)
    for r in first.values():
        lat_by_second[r["produce_ts_us"] // 1_000_000].append(r["arrival_ts_us"] - r["produce_ts_us"])
        arrived[r["arrival_ts_us"] // 1_000_000] += 1
    out = {}
    for t in set(lat_by_second) | set(arrived):
        lats = sorted(lat_by_second.get(t, []))
        out[t] = {
            "received": len(lats), "arrived": arrived.get(t, 0),
            "p50_ms": lats[nearest_rank(0.5, len(lats)) - 1] / 1000 if lats else None,
            "p99_ms": lats[nearest_rank(0.99, len(lats)) - 1] / 1000 if lats else None,
        }
    return out


def test_timeline_per_second_against_the_oracle(spark: SparkSession, tmp_path: Path) -> None:
    """One Spark verification, two parts: seconds 0-2 designed so every figure is known by
    hand, seconds 10-16 random (checked against the oracle within the documented 1%)."""
    run = SyntheticRun(tmp_path / "run")
    lane = run.lane("orders", pid="p1", lane=0, acked=range(3000))
    lane.deliver(range(1000), latency_ms=5)  # second 0: all at 5 ms
    lane.deliver(range(1000, 2000), latency_ms=lambda s: 10 * (1 + s % 100))  # second 1: 10..1000 ms, 10 each
    lane.deliver(range(2000, 2500), latency_ms=3)  # second 2: half of it never arrives
    lane.deliver([10, 11], latency_ms=2000)  # late duplicates: only first copies count
    run.lane("orders", pid="p9", lane=0, in_manifest=False).deliver(range(5), latency_ms=1)  # phantoms: not counted
    run.manifests["p1"].stats["sent_per_second"] = [[T0, 1000], [T0 + 1, 1000], [T0 + 2, 1000]]
    # Produce time of seq s is s ms after T0: seqs 10000-13999 are seconds 10-13.
    rnd = random.Random(6)
    lats = {s: rnd.choice([rnd.uniform(0.5, 20), rnd.uniform(20, 3000)]) for s in range(10_000, 14_000)}
    noisy = run.lane("refunds", pid="p2", lane=0, acked=range(10_000, 14_000))
    noisy.deliver([s for s in lats if s % 97], latency_ms=lambda s: lats[s])
    run.write()

    report = verify_run(run.run_dir, spark=spark, write_report=False)

    seconds = {e["t"]: e for e in report.timeline}
    assert [seconds[T0 + i] for i in range(3)] == [
        # seqs 995-999 arrive (5 ms) in the next second; 505 of second 1 arrive in second 2
        {"t": T0, "sent": 1000, "received": 1000, "arrived": 995, "p50_ms": 5.0, "p99_ms": 5.0, "missing_so_far": 0},
        {"t": T0 + 1, "sent": 1000, "received": 1000, "arrived": 500, "p50_ms": 500.0, "p99_ms": 990.0,
         "missing_so_far": 0},
        # half of second 2 never arrives: missing_so_far steps up by 500
        {"t": T0 + 2, "sent": 1000, "received": 500, "arrived": 1005, "p50_ms": 3.0, "p99_ms": 3.0,
         "missing_so_far": 500},
    ]
    # Seconds without records are filled in: the timeline is contiguous (plots show gaps as zeros).
    assert sorted(seconds) == list(range(T0, max(seconds) + 1))
    assert seconds[T0 + 5] == {"t": T0 + 5, "sent": 0, "received": 0, "arrived": 0, "p50_ms": None, "p99_ms": None,
                               "missing_so_far": 500}

    oracle = _oracle(run)
    assert {t for t, e in seconds.items() if e["received"] or e["arrived"]} == set(oracle)
    all_latencies = {round(ms * 1000) / 1000 for ms in lats.values()}
    for t, want in oracle.items():
        got = seconds[t]
        assert (got["received"], got["arrived"]) == (want["received"], want["arrived"]), t
        for name in ("p50_ms", "p99_ms"):
            if t < T0 + 10:  # the designed part: every bucket holds one value, so exact
                assert got[name] == want[name], (t, name)
            elif want[name] is None:
                assert got[name] is None
            else:  # never below exact, at most 1% above, and a latency that occurred
                assert want[name] <= got[name] <= want[name] * 1.01 + 1e-9, (t, name)
                assert got[name] in all_latencies
    assert [p["producer_id"] for p in report.producers] == ["p1", "p2"]
    assert report.markers == []
