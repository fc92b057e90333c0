from __future__ import annotations

from pytest_kafka_mirror.capture.target import CHUNK_BITS, SeenBitmap


def test_add_counts_distinct_and_reports_duplicates() -> None:
    bm = SeenBitmap()
    assert bm.add(5) and not bm.add(5) and bm.add(6)
    assert bm.distinct == 2 and 5 in bm and 7 not in bm


def test_covers_whole_chunks_and_edges() -> None:
    bm = SeenBitmap()
    n = 3 * CHUNK_BITS + 17
    for s in range(1, n):
        bm.add(s)
    assert bm.covers([[1, n - 1]])
    assert not bm.covers([[0, n - 1]])
    assert not bm.covers([[1, n]])
    assert bm.covers([[CHUNK_BITS, 2 * CHUNK_BITS - 1], [5, 9]])


def test_a_hole_inside_a_full_chunk_is_found() -> None:
    bm = SeenBitmap()
    for s in range(2 * CHUNK_BITS):
        if s != CHUNK_BITS + 1234:
            bm.add(s)
    assert not bm.covers([[0, 2 * CHUNK_BITS - 1]])
    assert bm.covers([[0, CHUNK_BITS + 1233]])


def test_memory_is_sparse() -> None:
    bm = SeenBitmap()
    bm.add(10**12)
    bm.add(3)
    assert len(bm.chunks) == 2


def test_covers_agrees_with_checking_every_sequence() -> None:
    import random

    rng = random.Random(3)
    for _ in range(300):
        bm = SeenBitmap()
        top = rng.choice([40, 300, CHUNK_BITS + 100])
        holes = set(rng.sample(range(top), rng.randint(0, 3)))
        for s in range(top):
            if s not in holes:
                bm.add(s)
        a = rng.randrange(top)
        b = rng.randrange(a, top)
        assert bm.covers([[a, b]]) == all(s not in holes for s in range(a, b + 1)), (a, b, sorted(holes))
