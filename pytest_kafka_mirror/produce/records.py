"""Wire formats of test records: encode on the producer side, decode in the capture.

Two formats, as in the original mirror tester:

``headers``
    Metadata in Kafka record headers (``km.p`` producer id, ``km.l`` lane, ``km.s``
    sequence, ``km.t`` produce time in microseconds); the value is the payload only.
``body``
    Metadata in the value: ``producer-id;sequence;timestamp;payload`` (sequence zero-padded
    to 10 digits, timestamp in microseconds zero-padded to 16 digits), for replicators that
    drop headers.

Besides test records, *warm-up records* prove that a replicator copies a topic before
its schedule starts (``replicators/_readiness.py``): the value
``km.warmup;SOURCE-PARTITION;TIMESTAMP-US;NONCE``, no key, no headers, in either format
(a replicator that drops headers keeps them).  Every reader recognises them first
(:data:`Kind.WARMUP`) and counts them apart: they are never records of the run, foreign
records or phantoms.

In both formats the key is the lane number in ASCII, and the payload starts with the
CRC-32 of the rest of the payload as 8 hex digits, so a corrupted payload is detected
whatever the format.  The *message size* a user asks for includes all of that metadata:
key, header names and values (headers format) or the body prefix (body format).
"""

from __future__ import annotations

import enum
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "FORMATS",
    "CHECKSUM_LEN",
    "HDR_PRODUCER",
    "HDR_LANE",
    "HDR_SEQ",
    "HDR_TS",
    "Decoded",
    "FOREIGN",
    "Kind",
    "WARMUP",
    "WARMUP_PREFIX",
    "RecordEncoder",
    "compact_ranges",
    "decode",
    "metadata_size",
    "parse_warmup",
    "warmup_value",
]

FORMATS = ("headers", "body")

HDR_PRODUCER = "km.p"
HDR_LANE = "km.l"
HDR_SEQ = "km.s"
HDR_TS = "km.t"

SEQ_WIDTH = 10
TS_WIDTH = 16
CHECKSUM_LEN = 8
#: Distinct payload variants per message size; record ``seq`` uses variant ``seq % VARIANTS``.
VARIANTS = 256
#: Largest lane number we size keys for (keys are ASCII lane numbers).
MAX_LANE_DIGITS = 5
#: Producer ids are at most this long (they go into every record).
MAX_PRODUCER_ID = 16

_FILLER_ALPHABET = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


class Kind(str, enum.Enum):
    """How the capture classified a consumed record."""

    HEADERS = "headers"  # headers format, metadata intact
    BODY = "body"  # in-body format
    HEADERLESS = "headerless"  # looks like a headers-format payload but the km.* headers are gone
    FOREIGN = "foreign"  # not one of ours
    WARMUP = "warmup"  # a readiness warm-up record (never a record of the run)


def metadata_size(fmt: str, producer_id: str, lanes: int) -> int:
    """Bytes of metadata (key + headers or body prefix + checksum) in one record.

    Sequence and timestamp fields are fixed width in the body format; in the headers
    format the widest sequence (10 digits) and lane are assumed, so the figure is an upper
    bound that holds for every record of the run.
    """
    key_len = len(str(max(lanes - 1, 0)))
    if fmt == "headers":
        hdrs = (
            len(HDR_PRODUCER) + len(producer_id)
            + len(HDR_LANE) + key_len
            + len(HDR_SEQ) + SEQ_WIDTH
            + len(HDR_TS) + TS_WIDTH
        )
        return key_len + hdrs + CHECKSUM_LEN
    if fmt == "body":
        return key_len + len(producer_id) + 1 + SEQ_WIDTH + 1 + TS_WIDTH + 1 + CHECKSUM_LEN
    raise ValueError(f"unknown record format {fmt!r}; expected one of {', '.join(FORMATS)}")


def _payloads(n: int) -> list[bytes]:
    """``VARIANTS`` payloads of exactly ``n`` bytes, each ``crc32hex + filler``."""
    filler_len = n - CHECKSUM_LEN
    alphabet = _FILLER_ALPHABET * (filler_len // len(_FILLER_ALPHABET) + 2)
    out = []
    for v in range(VARIANTS):
        start = v % len(_FILLER_ALPHABET)
        filler = alphabet[start : start + filler_len]
        out.append(b"%08x" % zlib.crc32(filler) + filler)
    return out


class RecordEncoder:
    """Builds key, value and headers for one producer in one format and size.

    Payload variants are precomputed so the per-record work is a few byte operations.
    """

    def __init__(self, fmt: str, producer_id: str, message_size: int, lanes: int) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"unknown record format {fmt!r}; expected one of {', '.join(FORMATS)}")
        if not producer_id or ";" in producer_id or len(producer_id) > MAX_PRODUCER_ID:
            raise ValueError(
                f"producer id {producer_id!r} must be 1-{MAX_PRODUCER_ID} characters without ';'"
            )
        if lanes < 1 or lanes >= 10**MAX_LANE_DIGITS:
            raise ValueError(f"lanes must be between 1 and {10**MAX_LANE_DIGITS - 1}, got {lanes}")
        meta = metadata_size(fmt, producer_id, lanes)
        if message_size < meta:
            raise ValueError(
                f"message size {message_size} B is below the metadata size {meta} B of the "
                f"{fmt} format (producer id {producer_id!r}, {lanes} lanes); use a message size >= {meta}"
            )
        self.fmt = fmt
        self.producer_id = producer_id
        self.message_size = message_size
        self.lanes = lanes
        self._pid = producer_id.encode()
        self._keys = [str(lane).encode() for lane in range(lanes)]
        key_len = len(self._keys[-1])
        if fmt == "headers":
            hdr_overhead = len(HDR_PRODUCER) + len(self._pid) + len(HDR_LANE) + len(HDR_SEQ) + len(HDR_TS)
            # The sequence header and the lane header vary in width; pad the payload so the
            # *upper bound* holds and every record is exactly message_size with max widths.
            payload_len = message_size - key_len - hdr_overhead - key_len - SEQ_WIDTH - TS_WIDTH
            self._lane_hdr = [b"%0*d" % (key_len, lane) for lane in range(lanes)]
        else:
            payload_len = message_size - key_len - (len(self._pid) + 1 + SEQ_WIDTH + 1 + TS_WIDTH + 1)
            self._lane_hdr = []
        self._keys = [b"%0*d" % (key_len, lane) for lane in range(lanes)]
        #: the payload of record ``seq`` is ``variants[seq % VARIANTS]``
        self.variants = self._variants = _payloads(payload_len)

    def key(self, lane: int) -> bytes:
        return self._keys[lane]

    def lane_headers(self) -> list[bytes]:
        """Value of the lane header per lane (headers format; empty in the body format)."""
        return list(self._lane_hdr)

    def encode(self, lane: int, seq: int, ts_us: int) -> tuple[bytes, list[tuple[str, bytes]] | None]:
        """Return ``(value, headers)`` for one record; headers is None in the body format."""
        payload = self._variants[seq % VARIANTS]
        if self.fmt == "headers":
            return payload, [
                (HDR_PRODUCER, self._pid),
                (HDR_LANE, self._lane_hdr[lane]),
                (HDR_SEQ, b"%010d" % seq),
                (HDR_TS, b"%016d" % ts_us),
            ]
        return b"%s;%010d;%016d;%s" % (self._pid, seq, ts_us, payload), None

    def size(self, lane: int, seq: int) -> int:
        """Exact on-the-wire size of record ``seq`` (key + value + header names and values)."""
        value, headers = self.encode(lane, seq, 0)
        n = len(self._keys[lane]) + len(value)
        if headers:
            n += sum(len(k) + len(v) for k, v in headers)
        return n


@dataclass(frozen=True)
class Decoded:
    kind: Kind
    producer_id: str | None
    lane: int | None
    seq: int | None
    ts_us: int | None
    checksum_ok: bool | None


def _checksum_ok(payload: bytes) -> bool:
    if len(payload) < CHECKSUM_LEN:
        return False
    try:
        return int(payload[:CHECKSUM_LEN], 16) == zlib.crc32(payload[CHECKSUM_LEN:])
    except ValueError:
        return False


def _lane_of(key: bytes | None) -> int | None:
    if key is None or not key.isdigit() or len(key) > MAX_LANE_DIGITS:
        return None
    return int(key)


FOREIGN = Decoded(Kind.FOREIGN, None, None, None, None, None)
WARMUP = Decoded(Kind.WARMUP, None, None, None, None, None)
WARMUP_PREFIX = b"km.warmup;"


def warmup_value(source_partition: int, nonce: str, ts_us: int) -> bytes:
    """The value of a warm-up record for ``source_partition`` (see the module docstring)."""
    return b"%s%d;%d;%s" % (WARMUP_PREFIX, source_partition, ts_us, nonce.encode())


def parse_warmup(value: bytes | None) -> tuple[int, int, str] | None:
    """``(source partition, timestamp us, nonce)`` of a warm-up record's value, else None."""
    if not value or not value.startswith(WARMUP_PREFIX):
        return None
    parts = value[len(WARMUP_PREFIX):].split(b";", 2)
    if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    try:
        return int(parts[0]), int(parts[1]), parts[2].decode()
    except UnicodeDecodeError:
        return None


def decode(key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]] | None) -> Decoded:
    """Classify and parse one consumed record.  Never raises: unknown data is FOREIGN."""
    if value is not None and value.startswith(WARMUP_PREFIX) and parse_warmup(value) is not None:
        return WARMUP
    if headers:
        meta = {}
        for k, v in headers:
            if k.startswith("km."):
                meta[k] = v
        if meta:
            try:
                return Decoded(
                    Kind.HEADERS,
                    meta[HDR_PRODUCER].decode(),
                    int(meta[HDR_LANE]),
                    int(meta[HDR_SEQ]),
                    int(meta[HDR_TS]),
                    _checksum_ok(value or b""),
                )
            except (KeyError, ValueError, UnicodeDecodeError, TypeError):
                return FOREIGN
    if not value:
        return FOREIGN
    parts = value.split(b";", 3)
    if len(parts) == 4 and parts[1].isdigit() and parts[2].isdigit():
        try:
            return Decoded(
                Kind.BODY,
                parts[0].decode(),
                _lane_of(key),
                int(parts[1]),
                int(parts[2]),
                _checksum_ok(parts[3]),
            )
        except UnicodeDecodeError:
            return FOREIGN
    if _checksum_ok(value) and _lane_of(key) is not None:
        # Our payload (valid checksum) without any metadata: a headers-format record
        # whose headers the replicator dropped.
        return Decoded(Kind.HEADERLESS, None, _lane_of(key), None, None, True)
    return FOREIGN


def compact_ranges(seqs: Iterable[int]) -> list[tuple[int, int]]:
    """Compact integers into sorted inclusive ``(first, last)`` ranges (duplicates ignored)."""
    out: list[tuple[int, int]] = []
    for s in sorted(set(seqs)):
        if out and s == out[-1][1] + 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return out
