"""Capture segments: rows to Parquet files in ``RUN_DIR/capture``, written by a thread of their own.

The consume loop adds a row per record to :attr:`SegmentWriter.rows` (a :class:`SegmentRows`)
and calls :meth:`SegmentWriter.cut` every ``SEGMENT_ROWS`` rows or ``SEGMENT_SECONDS``
seconds.  A cut hands the rows to the writer thread, which builds the Arrow table,
compresses it and renames it into place (``part-NNNNN.parquet``, numbered in cut order).
Writing a segment of 100,000 rows costs ~0.2 s; inline, that stalled the loop, so every
record behind a flush arrived late and a backlog was read more slowly.

Memory stays bounded: at most ``max_pending`` cut segments are not on disk yet; a cut
beyond that waits for the thread (back-pressure, only when the disk is slower than the
broker).  Small JSON files (the progress file) can be handed to the thread as well
(:meth:`SegmentWriter.write_json`): the loop does no file I/O of its own.

:meth:`SegmentWriter.close` cuts what is left, waits for every segment to be on disk and
joins the thread; call it on every way out (stop, error, Ctrl-C).  A write that fails
(disk full, directory gone) fails the capture: the next :meth:`~SegmentWriter.cut`,
:meth:`~SegmentWriter.check` or :meth:`~SegmentWriter.close` raises one
:class:`SegmentWriteError` naming the segment; the thread discards later segments rather
than blocking the loop.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..rundir import write_json_atomic

__all__ = ["SEGMENT_ROWS", "SEGMENT_SECONDS", "SegmentRows", "SegmentWriteError", "SegmentWriter"]

SEGMENT_ROWS = 100_000
SEGMENT_SECONDS = 5.0
#: Cut segments not on disk yet (being written or waiting; ~35 MB each at 100,000 rows):
#: with the one being filled, at most three segments are in memory.
MAX_PENDING = 2
#: Rows converted to Arrow per call (a call holds the GIL throughout).
CONVERT_ROWS = 2048
#: A cut or close that sees the writer make no progress this long gives up (a hung disk).
STALL_SECONDS = 300.0

#: How segments are encoded: the integer columns that grow record by record (offsets,
#: sequences, times) delta-encoded, without the dictionary Parquet tries first and drops
#: once it outgrows its page; dictionaries for the columns a run shares.  A 100,000-row
#: segment of body records: 129 ns a row to write and 0.4 B a row on disk, against 226 ns
#: and 7.9 B with the defaults (zstd both; Spark and pyarrow read either).
PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "use_dictionary": ["topic", "target_topic", "partition", "kind", "producer_id", "lane", "size", "evidence",
                       "damage"],
    "column_encoding": {name: "DELTA_BINARY_PACKED"
                        for name in ("offset", "seq", "produce_ts_us", "arrival_ts_us", "record_ts_ms")},
}

_STOP = object()  # end of the queue
_WAKE = object()  # JSON files to write, nothing else


#: The columns that change from record to record (a value tuple), and the ones a run of
#: records shares (a run tuple, after the index of the run's first row).
VALUE_FIELDS = ("offset", "seq", "produce_ts_us", "record_ts_ms", "size", "checksum_ok")
RUN_FIELDS = ("topic", "target_topic", "partition", "kind", "producer_id", "lane", "arrival_ts_us", "evidence",
              "damage")


class SegmentRows:
    """The rows of one segment: a value tuple per record and a run tuple per run of records
    that share the other columns (one lane of one partition in one consumed batch), or,
    for what the columnar fast path decoded (:mod:`.columns`), whole columns.

    Converting a row to Arrow costs the GIL, which the consume loop then waits for: a full
    14-field row took ~0.45 µs, a third of a bare consume loop's time per record; six
    fields take ~0.19 µs, and the shared columns are expanded from their runs in C.  The
    hot loop (:meth:`.rows.RowBuilder.add`) appends to :attr:`values` and :attr:`runs`
    itself; :meth:`append` takes a whole row in ``CAPTURE_SCHEMA_FIELDS`` order;
    :meth:`add_columns` a decoded chunk (numpy arrays: converted without a Python object
    per row).  Rows keep the order they were added in, whichever way.
    """

    __slots__ = ("closed", "closed_rows", "runs", "values")

    def __init__(self, rows: Iterable[tuple[Any, ...]] = ()) -> None:
        #: (offset, seq, produce_ts_us, record_ts_ms, size, checksum_ok) per row
        self.values: list[tuple[Any, ...]] = []
        #: (index of the run's first row, topic, target_topic, partition, kind, producer_id,
        #: lane, arrival_ts_us, evidence, damage); a run has at least one row
        self.runs: list[tuple[Any, ...]] = []
        #: the parts before ``values``, in order: ``(values, runs)`` of tuples, or
        #: ``(columns, runs)``: VALUE_FIELDS -> an array of the chunk's rows, run indices
        #: counted from the chunk's first row
        self.closed: list[tuple[Any, list[tuple[Any, ...]]]] = []
        self.closed_rows = 0
        for row in rows:
            self.append(row)

    def append(self, row: tuple[Any, ...]) -> None:
        """One whole row, in ``CAPTURE_SCHEMA_FIELDS`` order."""
        topic, target, part, off, kind, pid, lane, seq, pts, arrival, rts, size, ok, evidence, damage = row
        shared = (topic, target, part, kind, pid, lane, arrival, evidence, damage)
        runs = self.runs
        if evidence is not None or not runs or runs[-1][1:] != shared:
            runs.append((len(self.values), *shared))
        self.values.append((off, seq, pts, rts, size, ok))

    def add_columns(self, columns: dict[str, Any], runs: list[tuple[Any, ...]]) -> None:
        """A decoded chunk: ``columns`` (VALUE_FIELDS -> arrays of one length), ``runs`` as
        :attr:`runs`' tuples with their first rows counted from the chunk's start."""
        if self.values:
            self.closed.append((self.values, self.runs))
            self.closed_rows += len(self.values)
            self.values, self.runs = [], []
        self.closed.append((columns, runs))
        self.closed_rows += len(columns["offset"])

    def parts(self) -> list[tuple[Any, list[tuple[Any, ...]]]]:
        """Every part in order: ``(values, runs)`` of tuples or ``(columns, runs)``."""
        return [*self.closed, (self.values, self.runs)] if self.values else list(self.closed)

    def __iadd__(self, rows: Iterable[tuple[Any, ...]]) -> SegmentRows:  # noqa: PYI034 - Self: Python 3.11
        for row in rows:
            self.append(row)
        return self

    def __len__(self) -> int:
        return self.closed_rows + len(self.values)

    def __bool__(self) -> bool:
        return bool(self.closed_rows or self.values)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        """The whole rows, in ``CAPTURE_SCHEMA_FIELDS`` order."""
        for values, runs in self.parts():
            if isinstance(values, dict):  # columns: one tuple per row, as the tuple parts have them
                values = list(zip(*(values[name].tolist() for name in VALUE_FIELDS), strict=True))
            for i, (start, topic, target, part, kind, pid, lane, arrival, evidence, damage) in enumerate(runs):
                end = runs[i + 1][0] if i + 1 < len(runs) else len(values)
                for off, seq, pts, rts, size, ok in values[start:end]:
                    yield topic, target, part, off, kind, pid, lane, seq, pts, arrival, rts, size, ok, evidence, damage


def _merged(parts: list[tuple[Any, list[tuple[Any, ...]]]]) -> list[tuple[Any, list[tuple[Any, ...]]]]:
    """``parts`` with each stretch of column parts joined into one (the arrays concatenated,
    the runs' first rows shifted): one conversion per stretch instead of one per chunk."""
    import numpy as np

    out: list[tuple[Any, list[tuple[Any, ...]]]] = []
    stretch: list[tuple[Any, list[tuple[Any, ...]]]] = []
    for part in [*parts, ({}, [])]:  # a last empty stretch-ender
        if isinstance(part[0], dict) and part[0]:
            stretch.append(part)
            continue
        if len(stretch) == 1:
            out.append(stretch[0])
        elif stretch:
            at, runs = 0, []
            for columns, chunk_runs in stretch:
                runs += [(start + at, *rest) for start, *rest in chunk_runs]
                at += len(columns["offset"])
            out.append(({name: np.concatenate([c[name] for c, _ in stretch]) for name in VALUE_FIELDS}, runs))
        stretch = []
        if part[1]:
            out.append(part)
    return out


class SegmentWriteError(RuntimeError):
    """A capture segment (or file) could not be written; the message names its path."""


class SegmentWriter:
    """Rows to Parquet segments, written by a thread (module docstring)."""

    def __init__(self, out_dir: Path, prefix: str = "part", *, max_pending: int = MAX_PENDING) -> None:
        self.out_dir = out_dir
        self.prefix = prefix
        out_dir.mkdir(parents=True, exist_ok=True)
        self.rows = SegmentRows()
        #: Segments and rows on disk (the thread's counts: final once :meth:`close` returned).
        self.segments = 0
        self.written = 0
        self._cut = 0  # segments handed to the thread: the next one's number
        # Segments, JSON wake-ups and the end, in order; the segments in it are bounded
        # by the slots (a cut takes one, the thread gives it back once the segment is written).
        self._queue: queue.Queue[Any] = queue.Queue()
        self._slots = threading.Semaphore(max_pending)
        self._files: dict[Path, Any] = {}  # JSON files for the thread: the latest content per path
        self._wake = False  # a _WAKE is queued
        self._error: SegmentWriteError | None = None
        self._closed = False
        # pyarrow's import, the schema and the zstd writer cost ~0.3-0.6 s the first time:
        # paid here, before the capture reads anything, not in the first segment.
        import pyarrow as pa
        import pyarrow.parquet as pq

        from ..rundir import capture_schema

        self.schema = capture_schema()
        self._values = pa.struct([self.schema.field(name) for name in VALUE_FIELDS])
        self._run_types = [self.schema.field(name).type for name in RUN_FIELDS]
        # ... and so does the first conversion (pyarrow.compute's import among it)
        sample = SegmentRows([("t", "t", 0, 0, "headers", "p", 0, 0, 0, 0, 0, 0, True, None, None)])
        pq.write_table(self._table(sample), pa.BufferOutputStream(), **PARQUET_OPTIONS)
        self._thread = threading.Thread(target=self._work, name="capture-segments", daemon=True)
        self._thread.start()
        self.last_cut = time.monotonic()

    # -- the consume loop's side -------------------------------------------------------
    def cut(self) -> None:
        """Hand the rows so far to the thread as the next segment; raises a write error."""
        self.last_cut = time.monotonic()
        self.check()
        if not self.rows:
            return
        self._take_slot()
        path = self.out_dir / f"{self.prefix}-{self._cut:05d}.parquet"
        self._cut += 1
        rows, self.rows = self.rows, SegmentRows()
        self._queue.put((path, rows))

    def write_json(self, path: Path, data: Any) -> None:
        """Have the thread write ``data`` to ``path`` (atomically); a later call for the same
        path replaces a content not yet written.  Never blocks."""
        self.check()
        if self._closed:  # no thread any more: the caller's own write
            write_json_atomic(path, data)
            return
        self._files[path] = data  # before the flag: the thread clears the flag, then writes the files
        if not self._wake:
            self._wake = True
            self._queue.put(_WAKE)

    def check(self) -> None:
        """Raise the thread's write error, if any."""
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        """Cut the last rows, wait until every segment is on disk, join the thread.

        Idempotent; raises the write error if a segment could not be written.
        """
        if self._closed:
            self._join()
            self.check()
            return
        self._closed = True
        try:
            if self._error is None and self.rows:
                self.cut()
        finally:
            self.rows = SegmentRows()
            self._queue.put(_STOP)
            self._join()
        self.check()

    def _take_slot(self) -> None:
        """Wait while ``max_pending`` segments are not on disk yet (back-pressure), but
        never for a thread that is gone, failed or has not moved for ``STALL_SECONDS``."""
        progress, since = self._progress(), time.monotonic()
        while not self._slots.acquire(timeout=0.5):
            self.check()
            if not self._thread.is_alive():
                raise self._error or SegmentWriteError(f"the segment writer thread ended early ({self.out_dir})")
            if self._progress() != progress:
                progress, since = self._progress(), time.monotonic()
            elif time.monotonic() - since > STALL_SECONDS:
                raise SegmentWriteError(f"the segment writer made no progress for {STALL_SECONDS:g} s "
                                        f"(writing segments to {self.out_dir}; is the disk hung?)")

    def _progress(self) -> tuple[int, bool]:
        return self.segments, self._error is not None

    def _join(self) -> None:
        progress, since = self._progress(), time.monotonic()
        while self._thread.is_alive():
            self._thread.join(0.5)
            if self._progress() != progress:
                progress, since = self._progress(), time.monotonic()
            elif self._thread.is_alive() and time.monotonic() - since > STALL_SECONDS:
                raise SegmentWriteError(f"the segment writer did not finish within {STALL_SECONDS:g} s "
                                        f"(writing segments to {self.out_dir}; is the disk hung?)")

    # -- the thread --------------------------------------------------------------------
    def _work(self) -> None:
        # Ends at _STOP, which close() queues last: every segment before it is on disk then.
        while True:
            item = self._queue.get()
            if item is _STOP:
                self._write_files()
                return
            if item is _WAKE:
                self._wake = False
            else:
                if self._error is None:
                    self._segment(*item)
                self._slots.release()
            item = None  # a written (or discarded) segment's rows go now, not with the next one
            self._write_files()

    def _segment(self, path: Path, rows: SegmentRows) -> None:
        try:
            self._write(path, rows)
        except BaseException as exc:  # noqa: BLE001 - every failure must reach the loop
            self._fail(f"could not write capture segment {path}: {type(exc).__name__}: {exc}", exc)

    def _write(self, path: Path, rows: SegmentRows) -> None:
        import pyarrow.parquet as pq  # loaded by __init__: a dictionary lookup here

        tmp = path.with_name(f".{path.name}.tmp")
        try:
            pq.write_table(self._table(rows), tmp, **PARQUET_OPTIONS)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        self.segments += 1
        self.written += len(rows)

    def _table(self, rows: SegmentRows) -> Any:
        """The Arrow table of ``rows``, columns in ``CAPTURE_SCHEMA_FIELDS`` order: one
        table per part (:meth:`SegmentRows.parts`), concatenated."""
        import pyarrow as pa  # loaded by __init__: a dictionary lookup here

        tables = [self._part(values, runs) for values, runs in _merged(rows.parts())]
        if not tables:
            return self.schema.empty_table()
        return tables[0] if len(tables) == 1 else pa.concat_tables(tables)

    def _part(self, values: Any, runs: list[tuple[Any, ...]]) -> Any:
        """The Arrow table of one part.

        Value tuples convert to one struct array per ``CONVERT_ROWS`` slice: a conversion
        holds the GIL for its whole C call, and slices keep each hold short, so the consume
        loop waits ~1 ms at most.  Columns (numpy arrays) convert without a Python object
        per row.  The shared columns are run-end decoded.
        """
        import pyarrow as pa  # loaded by __init__: a dictionary lookup here
        import pyarrow.compute as pc

        if isinstance(values, dict):
            columns = {name: pa.array(values[name], self.schema.field(name).type) for name in VALUE_FIELDS}
            n = len(values["offset"])
        else:
            chunks = [pa.array(values[i : i + CONVERT_ROWS], type=self._values)
                      for i in range(0, len(values), CONVERT_ROWS)]
            columns = dict(zip(VALUE_FIELDS, pa.Table.from_struct_array(pa.chunked_array(chunks, type=self._values))
                               .columns, strict=True))
            n = len(values)
        ends = pa.array([run[0] for run in runs[1:]] + [n], pa.int32())
        for j, (name, type_) in enumerate(zip(RUN_FIELDS, self._run_types, strict=True), start=1):
            shared = pa.array([run[j] for run in runs], type_)
            columns[name] = pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(ends, shared))
        return pa.table([columns[name] for name in self.schema.names], schema=self.schema)

    def _write_files(self) -> None:
        while self._files and self._error is None:
            path, data = self._files.popitem()
            try:
                write_json_atomic(path, data)
            except BaseException as exc:  # noqa: BLE001
                self._fail(f"could not write {path}: {type(exc).__name__}: {exc}", exc)

    def _fail(self, message: str, exc: BaseException) -> None:
        error = SegmentWriteError(message)
        error.__cause__ = exc
        self._error = error
