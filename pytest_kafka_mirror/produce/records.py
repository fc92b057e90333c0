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
``km.warmup;SOURCE-PARTITION;TIMESTAMP-US;NONCE``, the key ``km.warmup`` (a compacted topic
refuses records without a key), no headers, in either format
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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FORMATS",
    "CHECKSUM_LEN",
    "HDR_PRODUCER",
    "HDR_LANE",
    "HDR_SEQ",
    "HDR_TS",
    "ALTERED",
    "MISSING",
    "Decoded",
    "FOREIGN",
    "Kind",
    "WARMUP",
    "WARMUP_KEY",
    "WARMUP_PREFIX",
    "RecordEncoder",
    "compact_ranges",
    "damage_names",
    "decode",
    "metadata_size",
    "parse_warmup",
    "payload_variants",
    "producer_id_of",
    "warmup_value",
]

FORMATS = ("headers", "body")

HDR_PRODUCER = "km.p"
HDR_LANE = "km.l"
HDR_SEQ = "km.s"
HDR_TS = "km.t"

SEQ_WIDTH = 10
TS_WIDTH = 16
#: Widest sequence or timestamp value a reader accepts (an int64 column holds 18 digits).
MAX_DIGITS = 18
CHECKSUM_LEN = 8
#: Distinct payload variants per message size; record ``seq`` uses variant ``seq % VARIANTS``.
VARIANTS = 256
#: Largest lane number we size keys for (keys are ASCII lane numbers).
MAX_LANE_DIGITS = 5
#: Producer ids are at most this long (they go into every record).
MAX_PRODUCER_ID = 16
#: Characters a producer id never holds (RecordEncoder): a value with one was re-encoded.
_NOT_IN_PRODUCER_ID = ';"\\ '

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


def payload_variants(n: int) -> list[bytes]:
    """``VARIANTS`` payloads of exactly ``n`` bytes, each ``crc32hex + filler``: record
    ``seq`` carries ``payload_variants(n)[seq % VARIANTS]`` (the capture checks a payload
    against it before computing its checksum)."""
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
        if (not producer_id or len(producer_id) > MAX_PRODUCER_ID or not producer_id.isprintable()
                or any(c in producer_id for c in _NOT_IN_PRODUCER_ID)):
            raise ValueError(
                f"producer id {producer_id!r} must be 1-{MAX_PRODUCER_ID} printable characters without "
                f"';', '\"', '\\' or spaces"
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
        self.variants = self._variants = payload_variants(payload_len)

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
    #: what is missing or altered in the metadata (``"key=missing,km.t=altered"``: see
    #: :func:`damage_names`); None when it arrived as the producer wrote it
    damage: str | None = None

    @property
    def identified(self) -> bool:
        """Producer, lane and sequence known: the record counts for delivery."""
        return self.producer_id is not None and self.lane is not None and self.seq is not None


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


MISSING, ALTERED = "missing", "altered"

FOREIGN = Decoded(Kind.FOREIGN, None, None, None, None, None)
WARMUP = Decoded(Kind.WARMUP, None, None, None, None, None)
WARMUP_PREFIX = b"km.warmup;"
#: The key of every warm-up record: a broker refuses records without a key on a compacted topic.
WARMUP_KEY = b"km.warmup"


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
    """Classify and parse one consumed record.  Never raises: unknown data is FOREIGN.

    A headers-format record with *some* of its ``km.*`` headers, or a record of either
    format whose key is gone or rewritten, is still ours: whatever identifies it is used
    (the lane from the key when ``km.l`` is unusable) and :attr:`Decoded.damage` says what
    is missing or altered (:func:`damage_names`).  Extra headers and their order are
    harmless: they are not damage.
    """
    if value is not None and value.startswith(WARMUP_PREFIX) and parse_warmup(value) is not None:
        return WARMUP
    if headers:
        meta: dict[str, list[bytes | None]] = {}
        for k, v in headers:
            if k in _HEADER_CHECKS:
                meta.setdefault(k, []).append(v)
        if meta:
            return _decode_headers(key, value, meta)
    if not value:
        return FOREIGN
    parts = value.split(b";", 3)
    if len(parts) == 4 and parts[1].isdigit() and parts[2].isdigit():
        try:
            pid = parts[0].decode()
        except UnicodeDecodeError:
            return FOREIGN
        lane, key_damage = _key_lane(key)
        return Decoded(Kind.BODY, pid, lane, int(parts[1]), int(parts[2]), _checksum_ok(parts[3]),
                       _damage_text({"key": key_damage} if key_damage else {}))
    if _checksum_ok(value) and _lane_of(key) is not None:
        # Our payload (valid checksum) without any metadata: a headers-format record
        # whose headers the replicator dropped.
        return Decoded(Kind.HEADERLESS, None, _lane_of(key), None, None, True)
    return FOREIGN


def producer_id_of(v: bytes) -> str | None:
    """The producer id a ``km.p`` header holds, or None when it is not one RecordEncoder
    writes (re-encoded, truncated to nothing, ...)."""
    try:
        text = v.decode()
    except UnicodeDecodeError:
        return None
    ok = 0 < len(text) <= MAX_PRODUCER_ID and text.isprintable() and not any(c in text for c in _NOT_IN_PRODUCER_ID)
    return text if ok else None


def _digits(low: int, high: int) -> Callable[[bytes], int | None]:
    def parse(v: bytes) -> int | None:
        return int(v) if low <= len(v) <= high and v.isdigit() else None  # bytes: ASCII digits only
    return parse


#: header name -> parser of its value (None: altered).  Widths are the producer's: a
#: sequence is 10 digits or more, a timestamp 16 digits or more, a lane 1-5 digits (and at
#: most 18 digits: a capture column is an int64).
_HEADER_CHECKS: dict[str, Callable[[bytes], Any]] = {
    HDR_PRODUCER: producer_id_of,
    HDR_LANE: _digits(1, MAX_LANE_DIGITS),
    HDR_SEQ: _digits(SEQ_WIDTH, MAX_DIGITS),
    HDR_TS: _digits(TS_WIDTH, MAX_DIGITS),
}


def _header_value(values: list[bytes | None] | None, parse: Callable[[bytes], Any]) -> tuple[Any, str | None]:
    """``(parsed value, damage)`` of one metadata header from its values in the record."""
    if not values:
        return None, MISSING
    parsed = {parse(v) if isinstance(v, bytes) else None for v in values}
    if len(parsed) != 1 or None in parsed:  # unparsable, or copies that disagree
        return None, ALTERED
    return parsed.pop(), None


def _key_lane(key: bytes | None) -> tuple[int | None, str | None]:
    """The lane a key names, and the key's damage (missing, altered: not a lane number)."""
    if key is None or key == b"":
        return None, MISSING
    lane = _lane_of(key)
    return lane, None if lane is not None else ALTERED


def _decode_headers(key: bytes | None, value: bytes | None, meta: dict[str, list[bytes | None]]) -> Decoded:
    """A record with at least one ``km.*`` header: ours, with what survived of its metadata."""
    found: dict[str, Any] = {}
    damage: dict[str, str] = {}
    for name, parse in _HEADER_CHECKS.items():
        found[name], how = _header_value(meta.get(name), parse)
        if how:
            damage[name] = how
    lane, key_damage = _key_lane(key)
    if key_damage:
        damage["key"] = key_damage
    elif found[HDR_LANE] is not None and lane != found[HDR_LANE]:
        damage["key"] = ALTERED  # the key no longer names the lane its km.l header names
    if found[HDR_LANE] is not None:
        lane = found[HDR_LANE]
    return Decoded(Kind.HEADERS, found[HDR_PRODUCER], lane, found[HDR_SEQ], found[HDR_TS],
                   _checksum_ok(value or b""), _damage_text(damage))


def _damage_text(damage: dict[str, str]) -> str | None:
    """``{"km.t": "missing", "key": "altered"}`` -> ``"key=altered,km.t=missing"`` (None: intact)."""
    return ",".join(f"{name}={how}" for name, how in sorted(damage.items())) or None


def damage_names(text: str | None) -> list[tuple[str, str]]:
    """``(name, how)`` pairs of a :attr:`Decoded.damage` text (a capture row's ``damage``):
    name is a metadata header (``km.p``, ``km.l``, ``km.s``, ``km.t``) or ``key``, how is
    ``missing`` or ``altered``."""
    if not text:
        return []
    return [(name, how) for name, _, how in (part.partition("=") for part in text.split(","))]


def compact_ranges(seqs: Iterable[int]) -> list[tuple[int, int]]:
    """Compact integers into sorted inclusive ``(first, last)`` ranges (duplicates ignored)."""
    out: list[tuple[int, int]] = []
    for s in sorted(set(seqs)):
        if out and s == out[-1][1] + 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return out
