from __future__ import annotations

import pytest

from pytest_kafka_mirror.produce.records import (
    CHECKSUM_LEN,
    FORMATS,
    HDR_LANE,
    HDR_PRODUCER,
    HDR_SEQ,
    HDR_TS,
    Kind,
    RecordEncoder,
    damage_names,
    decode,
    metadata_size,
)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("size", [None, 100, 1000, 10_000])
@pytest.mark.parametrize("lanes", [1, 4, 128])
def test_every_record_has_exactly_the_requested_size(fmt: str, size: int | None, lanes: int) -> None:
    size = size or metadata_size(fmt, "p1234567", lanes)  # None: the smallest legal size
    enc = RecordEncoder(fmt, "p1234567", size, lanes)
    for lane in (0, lanes - 1):
        for seq in (0, 7, 99_999, 9_999_999_999):
            assert enc.size(lane, seq) == size


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip(fmt: str) -> None:
    enc = RecordEncoder(fmt, "pabc", 300, 12)
    value, headers = enc.encode(11, 12345, 1_700_000_000_123_456)
    d = decode(enc.key(11), value, headers)
    assert d.kind is (Kind.HEADERS if fmt == "headers" else Kind.BODY)
    assert (d.producer_id, d.lane, d.seq, d.ts_us, d.checksum_ok) == ("pabc", 11, 12345, 1_700_000_000_123_456, True)


def test_body_format_is_the_original_testers_layout() -> None:
    enc = RecordEncoder("body", "p1", 80, 1)
    value, headers = enc.encode(0, 42, 1_700_000_000_000_000)
    assert headers is None
    pid, seq, ts, payload = value.split(b";", 3)
    assert (pid, int(seq), int(ts)) == (b"p1", 42, 1_700_000_000_000_000)
    assert len(payload) >= CHECKSUM_LEN


@pytest.mark.parametrize("fmt", FORMATS)
def test_size_below_metadata_is_rejected_with_the_minimum(fmt: str) -> None:
    need = metadata_size(fmt, "p1", 3)
    with pytest.raises(ValueError, match=rf"message size {need - 1} B is below the metadata size {need} B"):
        RecordEncoder(fmt, "p1", need - 1, 3)
    RecordEncoder(fmt, "p1", need, 3)  # the minimum itself is fine


@pytest.mark.parametrize("fmt", FORMATS)
def test_corrupted_payload_is_detected(fmt: str) -> None:
    enc = RecordEncoder(fmt, "p1", 200, 2)
    value, headers = enc.encode(1, 5, 1)
    flipped = value[:-1] + bytes([value[-1] ^ 0x01])
    d = decode(enc.key(1), flipped, headers)
    assert d.seq == 5 and d.checksum_ok is False


def test_stripped_headers_are_recognised_as_headerless() -> None:
    enc = RecordEncoder("headers", "p1", 200, 4)
    value, _ = enc.encode(3, 9, 1)
    d = decode(enc.key(3), value, None)
    assert d.kind is Kind.HEADERLESS and d.lane == 3 and d.seq is None


@pytest.mark.parametrize(
    "key,value,headers",
    [
        (None, None, None),
        (b"k", b"hello world", None),
        (b"1", b"a;b;c;d", None),  # 4 fields but not numbers
        (None, b"x" * 50, [("other", b"1")]),
        (b"1", b"v", [("km.x", b"1")]),  # a km. name that is not one of ours
        (b"\xff\xfe", b"\xff;1;2;3", None),  # undecodable producer id
    ],
)
def test_anything_else_is_foreign_and_never_raises(key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]] | None) -> None:
    assert decode(key, value, headers).kind is Kind.FOREIGN


@pytest.mark.parametrize("pid", ["", "a;b", "x" * 17, 'a"b', "a b", "a\\b", "a\nb"])
def test_bad_producer_ids(pid: str) -> None:
    with pytest.raises(ValueError, match="producer id"):
        RecordEncoder("body", pid, 200, 1)


def test_header_names_are_namespaced() -> None:
    enc = RecordEncoder("headers", "p1", 200, 1)
    _, headers = enc.encode(0, 1, 1)
    assert headers is not None and all(k.startswith("km.") for k, _ in headers)
    assert dict(headers)[HDR_SEQ] == b"0000000001"


# -- damaged metadata: still ours, the damage named -----------------------------------------

TS = 1_700_000_000_123_456


def _damaged(change: str) -> tuple[bytes | None, bytes, list[tuple[str, bytes]]]:
    """Record (lane 3, seq 42) of the headers format with one damage applied."""
    enc = RecordEncoder("headers", "p1", 200, 12)
    value, headers = enc.encode(3, 42, TS)
    assert headers is not None
    key: bytes | None = enc.key(3)
    name, _, how = change.partition(":")
    if name == "key":
        return {"drop": None, "replace": b"07", "text": b"lane-3"}[how], value, headers
    if how == "strip":
        headers = [(n, v) for n, v in headers if n != name]
    elif how == "text":  # re-encoded as text: a JSON string, or base64 (a converter's bytes)
        headers = [(n, b'"%s"' % v if n == name else v) for n, v in headers]
    elif how == "base64":
        import base64

        headers = [(n, base64.b64encode(v) if n == name else v) for n, v in headers]
    elif how == "truncate":
        headers = [(n, v[: len(v) // 2] if n == name else v) for n, v in headers]
    elif how == "twice":  # a second copy of the header, of another value
        headers = [*headers, (name, b"0000000099" if name == HDR_SEQ else b"7")]
    return key, value, headers


@pytest.mark.parametrize(
    ("change", "identity", "damage"),
    [
        (f"{HDR_TS}:strip", ("p1", 3, 42, None), "km.t=missing"),
        (f"{HDR_TS}:text", ("p1", 3, 42, None), "km.t=altered"),
        (f"{HDR_TS}:truncate", ("p1", 3, 42, None), "km.t=altered"),
        (f"{HDR_SEQ}:strip", ("p1", 3, None, TS), "km.s=missing"),
        (f"{HDR_SEQ}:base64", ("p1", 3, None, TS), "km.s=altered"),
        (f"{HDR_SEQ}:truncate", ("p1", 3, None, TS), "km.s=altered"),
        (f"{HDR_SEQ}:twice", ("p1", 3, None, TS), "km.s=altered"),
        (f"{HDR_LANE}:strip", ("p1", 3, 42, TS), "km.l=missing"),  # the lane from the key
        (f"{HDR_LANE}:text", ("p1", 3, 42, TS), "km.l=altered"),
        (f"{HDR_PRODUCER}:strip", (None, 3, 42, TS), "km.p=missing"),
        (f"{HDR_PRODUCER}:text", (None, 3, 42, TS), "km.p=altered"),
        ("key:drop", ("p1", 3, 42, TS), "key=missing"),  # the lane from km.l
        ("key:replace", ("p1", 3, 42, TS), "key=altered"),
        ("key:text", ("p1", 3, 42, TS), "key=altered"),
    ],
)
def test_damaged_metadata_is_ours_with_the_damage_named(change: str, identity: tuple[object, ...],
                                                        damage: str) -> None:
    d = decode(*_damaged(change))
    assert d.kind is Kind.HEADERS and d.checksum_ok is True
    assert (d.producer_id, d.lane, d.seq, d.ts_us) == identity
    assert d.damage == damage
    assert d.identified is (None not in identity[:3])


def test_lane_header_and_key_both_gone_leave_the_lane_unknown() -> None:
    _, value, headers = _damaged(f"{HDR_LANE}:strip")
    d = decode(None, value, headers)
    assert (d.kind, d.lane, d.identified) == (Kind.HEADERS, None, False)
    assert damage_names(d.damage) == [("key", "missing"), ("km.l", "missing")]


@pytest.mark.parametrize("change", ["added", "reordered", "added+reordered", "same-twice"])
def test_added_and_reordered_headers_are_harmless(change: str) -> None:
    enc = RecordEncoder("headers", "p1", 200, 12)
    value, headers = enc.encode(3, 42, TS)
    assert headers is not None
    if "reordered" in change:
        headers = list(reversed(headers))
    if "added" in change:
        headers = [("mirror.source", b"dc1"), *headers, ("km.x", b"not ours")]
    if change == "same-twice":  # a header copied twice, the same value: nothing lost
        headers = [*headers, (HDR_TS, b"%016d" % TS)]
    d = decode(enc.key(3), value, headers)
    assert (d.kind, d.producer_id, d.lane, d.seq, d.ts_us, d.damage) == (Kind.HEADERS, "p1", 3, 42, TS, None)


@pytest.mark.parametrize(("key", "damage"), [(None, "key=missing"), (b"", "key=missing"), (b"x1", "key=altered")])
def test_body_format_takes_its_lane_from_the_key(key: bytes | None, damage: str) -> None:
    enc = RecordEncoder("body", "p1", 200, 12)
    value, _ = enc.encode(3, 42, TS)
    d = decode(key, value, None)
    assert (d.kind, d.producer_id, d.lane, d.seq, d.ts_us, d.damage) == (Kind.BODY, "p1", None, 42, TS, damage)
    assert not d.identified
    intact = decode(enc.key(3), value, [("mirror.source", b"dc1")])  # an added header: harmless
    assert (intact.lane, intact.damage) == (3, None)
