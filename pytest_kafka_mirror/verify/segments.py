"""Where a run's capture segments are: this host's run directory, or its run store.

A run kept in a run store (``--kafka-mirror-run-store``, ``store.json`` in its directory)
has its ``capture/part-*.parquet`` at the store's URI only: Spark reads them there (its
Hadoop file systems: ``s3a://``, ``hdfs://``, ...), and the driver's own reads (the failover
checks) go through pyarrow's file system of the same URI.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..processes.store import StoreError, list_files, open_store, spark_uri
from ..rundir import store_uri_of

__all__ = ["Segment", "capture_segments", "read_segment", "segment_rows"]


@dataclass(frozen=True)
class Segment:
    #: the path or URI Spark reads it at
    spark_path: str
    size: int
    #: the URI or local path pyarrow reads it at
    location: str


def capture_segments(capture_dir: Path, pattern_prefix: str = "") -> list[Segment]:
    """Every ``*.parquet`` segment under ``capture_dir`` (a capture directory), sorted; in a
    run store, those of the store (an unreadable store is a :class:`StoreError`)."""
    uri = store_uri_of(capture_dir)
    if uri is None:
        if not capture_dir.is_dir():
            return []
        return [Segment(str(p), p.stat().st_size, str(p)) for p in sorted(capture_dir.rglob("*.parquet"))
                if p.name.startswith(pattern_prefix)]
    fs, base = open_store(uri)
    out = []
    for location in sorted(list_files(uri, ".parquet")):
        if not location.rsplit("/", 1)[-1].startswith(pattern_prefix):
            continue
        info = fs.get_file_info(base + location[len(uri):])
        out.append(Segment(spark_uri(location) if "://" in location else location, int(info.size or 0), location))
    return out


def segment_rows(segment: Segment) -> int:
    """The rows of one segment, from its Parquet footer, wherever it is."""
    import pyarrow.parquet as pq

    return int(_read(segment, lambda where, fs: pq.read_metadata(where, filesystem=fs)).num_rows)


def read_segment(segment: Segment, columns: list[str]) -> Any:
    """The pyarrow table of ``columns`` of one segment, wherever it is."""
    import pyarrow.parquet as pq

    return _read(segment, lambda where, fs: pq.read_table(where, columns=columns, filesystem=fs))


def _read(segment: Segment, read: Callable[[str, Any], Any]) -> Any:
    """``read(where, filesystem)`` of one segment: its local path (no filesystem), or its
    path in its run store; a store's error names the segment."""
    if "://" not in segment.location:
        return read(segment.location, None)
    fs, path = open_store(segment.location)
    try:
        return read(path, fs)
    except OSError as exc:
        raise StoreError(f"cannot read capture segment {segment.location}: {exc}") from None
