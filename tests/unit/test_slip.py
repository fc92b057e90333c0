"""The schedule-slip histogram: arithmetic counting per send pass against counting each record."""

from __future__ import annotations

import math
import random

import pytest

from pytest_kafka_mirror.produce.slip import SlipHistogram, _index, _upper_edge


def _brute(passes: list[tuple[float, float, int]]) -> tuple[dict[int, int], list[float]]:
    counts: dict[int, int] = {}
    slips = []
    for first, spacing, n in passes:
        for j in range(n):
            s = max(first - j * spacing, 0.0)
            slips.append(s)
            counts[_index(s)] = counts.get(_index(s), 0) + 1
    return counts, sorted(slips)


@pytest.mark.parametrize("seed", range(5))
def test_passes_counted_arithmetically_equal_counting_each_record(seed: int) -> None:
    rng = random.Random(seed)
    passes = []
    for _ in range(300):
        spacing = rng.choice([0.0, 1.0, 10.0, 37.5, 1000.0, 20_000.0])
        passes.append((rng.choice([rng.uniform(-5, 300), rng.uniform(0, 2e5), rng.uniform(0, 2e7)]), spacing,
                       rng.randint(1, 400)))
    h = SlipHistogram()
    for p in passes:
        h.add_even(*p)
    counts, slips = _brute(passes)
    # bucket edges are exact in integer microseconds; float division may move a record sitting
    # exactly on an edge by one bucket, so compare the percentiles they give, which is what is reported
    assert h.count == len(slips) and h.max_us == pytest.approx(max(slips))
    for q in (0.5, 0.9, 0.99, 0.999):
        exact = slips[max(1, math.ceil(q * len(slips))) - 1]
        got = h.percentile_ms(q)
        assert got is not None
        assert exact / 1000 <= got + 0.0005  # figures are rounded to the microsecond
        assert got <= min(_upper_edge(_index(exact)), max(slips)) / 1000 + 0.1 + 1e-9
    assert sum(h.counts.values()) == sum(counts.values())


def test_stats_of_an_empty_histogram_and_merge() -> None:
    assert SlipHistogram().to_stats() is None
    a, b = SlipHistogram(), SlipHistogram()
    a.add_even(55.0, 0.0, 10)  # ten records 0.055 ms late: the 50-60 µs bucket
    b.add_even(2_450.0, 0.0, 1)  # one 2.45 ms late: the 2.4-2.5 ms bucket, capped by the maximum
    a.merge(b)
    assert a.to_stats() == {"p50": 0.06, "p99": 2.45, "max": 2.45, "records": 11}
