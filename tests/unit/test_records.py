from __future__ import annotations

import pytest

from pytest_kafka_mirror.produce.records import (
    CHECKSUM_LEN,
    FORMATS,
    HDR_SEQ,
    Kind,
    RecordEncoder,
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
        (b"1", b"v", [("km.s", b"not-a-number"), ("km.p", b"p"), ("km.l", b"1"), ("km.t", b"1")]),
        (b"1", b"v", [("km.s", b"1")]),  # incomplete metadata
        (b"\xff\xfe", b"\xff;1;2;3", None),  # undecodable producer id
    ],
)
def test_anything_else_is_foreign_and_never_raises(key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]] | None) -> None:
    assert decode(key, value, headers).kind is Kind.FOREIGN


@pytest.mark.parametrize("pid", ["", "a;b", "x" * 17])
def test_bad_producer_ids(pid: str) -> None:
    with pytest.raises(ValueError, match="producer id"):
        RecordEncoder("body", pid, 200, 1)


def test_header_names_are_namespaced() -> None:
    enc = RecordEncoder("headers", "p1", 200, 1)
    _, headers = enc.encode(0, 1, 1)
    assert headers is not None and all(k.startswith("km.") for k, _ in headers)
    assert dict(headers)[HDR_SEQ] == b"0000000001"
