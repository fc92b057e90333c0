"""The capture's segment writer thread: nothing lost on stop, a write error that names the
segment and never hangs, the thread joined on every way out (stop, error, Ctrl-C).

No broker: the writer is driven directly, and the capture process runs its real loop on a
fake consumer for the ways out of :meth:`_CaptureProcess.run`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_kafka_mirror.capture import segments
from pytest_kafka_mirror.capture.process import _CaptureProcess
from pytest_kafka_mirror.capture.segments import SegmentRows, SegmentWriteError, SegmentWriter
from pytest_kafka_mirror.processes.managed import wait_until
from pytest_kafka_mirror.rundir import CAPTURE_DIR, CAPTURE_SCHEMA_FIELDS, CAPTURE_STATUS


def _row(i: int, topic: str = "t") -> tuple[Any, ...]:
    return (topic, topic, i % 3, i, "headers", "p1", i % 3, i, 1_000 + i, 2_000 + i, 3 + i, 100, True, None, None)


def _read(out_dir: Path) -> list[tuple[Any, ...]]:
    import pyarrow.parquet as pq

    rows: list[tuple[Any, ...]] = []
    for path in sorted(out_dir.glob("*.parquet")):
        table = pq.read_table(path)
        assert table.schema.names == [name for name, _ in CAPTURE_SCHEMA_FIELDS]
        rows += [tuple(r.values()) for r in table.to_pylist()]
    return rows


class _SlowWrites:
    """Makes every segment write wait for ``release`` (the disk is slower than the broker)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.release = threading.Event()
        self.started = 0
        real = SegmentWriter._write

        def write(writer: SegmentWriter, path: Path, rows: SegmentRows) -> None:
            self.started += 1
            assert self.release.wait(30), "the test never released the writer"
            real(writer, path, rows)

        monkeypatch.setattr(SegmentWriter, "_write", write)


def test_close_drains_every_cut_segment_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = _SlowWrites(monkeypatch)
    w = SegmentWriter(tmp_path / "capture", max_pending=3)
    expected = []
    for i in range(3):  # the thread holds one, two wait for it: nothing blocks yet
        w.rows += [_row(100 * i + j) for j in range(100)]
        expected += w.rows
        w.cut()
    w.rows += [_row(1000 + j) for j in range(7)]  # rows never cut: close() cuts them
    expected += w.rows
    assert w.segments == 0  # nothing on disk yet: the writer is held
    threading.Timer(0.2, slow.release.set).start()
    w.close()
    assert not w._thread.is_alive()
    assert (w.segments, w.written) == (4, len(expected))
    assert sorted(p.name for p in (tmp_path / "capture").iterdir()) == [f"part-0000{i}.parquet" for i in range(4)]
    assert _read(tmp_path / "capture") == expected


def test_a_cut_beyond_max_pending_waits_for_the_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = _SlowWrites(monkeypatch)
    w = SegmentWriter(tmp_path / "capture", max_pending=2)
    for i in range(2):  # one being written (held), one waiting
        w.rows.append(_row(i))
        w.cut()
    for i in range(20):  # progress files never take a segment's place
        w.write_json(tmp_path / "progress.json", {"records": i})
    done = threading.Event()

    def third() -> None:
        w.rows.append(_row(2))
        w.cut()
        done.set()

    t = threading.Thread(target=third)
    t.start()
    assert not done.wait(0.3), "a cut beyond max_pending must wait for the writer"
    slow.release.set()
    assert done.wait(10)
    t.join(10)
    w.close()
    assert _read(tmp_path / "capture") == [_row(0), _row(1), _row(2)]
    assert json.loads((tmp_path / "progress.json").read_text()) == {"records": 19}


def test_a_write_error_names_the_segment_and_never_hangs(tmp_path: Path) -> None:
    out = tmp_path / "capture"
    w = SegmentWriter(out, max_pending=1)
    shutil.rmtree(out)  # the directory goes away (a cleaned-up tmp dir, an unmounted disk)
    w.rows.append(_row(0))
    w.cut()
    wait_until(lambda: w._error is not None, 10, "the writer thread's error", interval=0.01)
    # every later cut fails at once, with the same error: the loop neither blocks nor goes on
    for i in range(5):
        w.rows.append(_row(i))
        with pytest.raises(SegmentWriteError, match=r"could not write capture segment .*part-00000\.parquet"):
            w.cut()
    with pytest.raises(SegmentWriteError, match=r"part-00000\.parquet: FileNotFoundError") as info:
        w.close()
    assert str(out) in str(info.value)
    assert isinstance(info.value.__cause__, OSError)
    assert not w._thread.is_alive()
    with pytest.raises(SegmentWriteError):  # closing again says so again, and returns
        w.close()


def test_an_error_in_the_last_segment_surfaces_from_close(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def disk_full(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    import pyarrow.parquet as pq

    w = SegmentWriter(tmp_path / "capture")
    monkeypatch.setattr(pq, "write_table", disk_full)
    w.rows.append(_row(0))
    with pytest.raises(SegmentWriteError, match=r"capture segment .*part-00000\.parquet: OSError: .*No space left"):
        w.close()
    assert not w._thread.is_alive()
    assert list((tmp_path / "capture").iterdir()) == []  # no temporary file left behind


def test_json_files_are_written_by_the_thread_and_after_close_directly(tmp_path: Path) -> None:
    w = SegmentWriter(tmp_path / "capture")
    for i in range(50):  # the latest content wins
        w.write_json(tmp_path / "progress.json", {"records": i})
    w.close()
    assert json.loads((tmp_path / "progress.json").read_text()) == {"records": 49}
    w.write_json(tmp_path / "progress.json", {"records": 50})
    assert json.loads((tmp_path / "progress.json").read_text()) == {"records": 50}


def test_a_writer_stuck_on_a_hung_disk_is_reported_not_waited_for(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    slow = _SlowWrites(monkeypatch)
    monkeypatch.setattr(segments, "STALL_SECONDS", 0.3)
    w = SegmentWriter(tmp_path / "capture", max_pending=1)
    w.rows.append(_row(0))
    w.cut()
    w.rows.append(_row(1))
    with pytest.raises(SegmentWriteError, match="no progress for 0.3 s"):
        w.cut()
    slow.release.set()
    w.close()
    assert not w._thread.is_alive()


# --------------------------------------------------------------------------- the process's ways out
class _Msg:
    def __init__(self, topic: str, partition: int, offset: int, key: bytes, value: bytes, headers: Any) -> None:
        self._t, self._p, self._o = topic, partition, offset
        self._key, self._value, self._headers = key, value, headers

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes:
        return self._value

    def headers(self) -> Any:
        return list(self._headers)

    def timestamp(self) -> tuple[int, int]:
        return (1, 5)


class _FakeConsumer:
    """Serves ``batches`` batches of 100 records of topic ``t``, then raises ``then`` or
    calls ``drained`` (the test's SIGTERM) and serves nothing."""

    def __init__(self, batches: int, then: BaseException | None = None) -> None:
        from pytest_kafka_mirror.produce.records import RecordEncoder

        enc = RecordEncoder("headers", "p1", 100, 1)
        self.msgs = []
        for seq in range(100 * batches):
            value, headers = enc.encode(0, seq, 1_000_000 + seq)
            self.msgs.append(_Msg("t", 0, seq, enc.key(0), value, headers))
        self.then = then
        self.drained = lambda: None
        self.served = self.closed = 0
        self.assigned: list[Any] = []

    def list_topics(self, timeout: float) -> Any:
        topic = argparse.Namespace(error=None, partitions={0: None})
        return argparse.Namespace(topics={"t": topic})

    def incremental_assign(self, tps: list[Any]) -> None:
        self.assigned += tps

    def consume(self, n: int, timeout: float) -> list[Any]:
        if self.assigned and self.served < len(self.msgs):
            self.served += 100
            return self.msgs[self.served - 100 : self.served]
        if self.assigned:
            if self.then is not None:
                raise self.then
            self.drained()
        time.sleep(0.005)
        return []

    def close(self) -> None:
        self.closed += 1


def _process(tmp_path: Path, consumer: _FakeConsumer, monkeypatch: pytest.MonkeyPatch) -> _CaptureProcess:
    import confluent_kafka

    from pytest_kafka_mirror.capture import process

    monkeypatch.setattr(confluent_kafka, "Consumer", lambda config: consumer)
    monkeypatch.setattr(process, "admin_client", lambda bootstrap, config=None: consumer)  # answers list_topics too
    args = argparse.Namespace(bootstrap="127.0.0.1:9", run_dir=str(tmp_path), topics=json.dumps({"t": "t"}),
                              drain_timeout=30.0, settle=0.0, max_runtime=60.0, manifest_dir="", producers=0,
                              group=0, groups=1, end_offsets="skip", end_offsets_why="a fake consumer")
    proc = _CaptureProcess(args)

    def stop() -> None:
        proc.stopping = True

    consumer.drained = stop
    return proc


def test_stop_writes_every_record_before_the_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    consumer = _FakeConsumer(batches=30)
    proc = _process(tmp_path, consumer, monkeypatch)
    assert proc.run() == 0
    status = json.loads((tmp_path / CAPTURE_STATUS).read_text())
    assert (status["reason"], status["records"], status["rows"]) == ("terminated", 3000, 3000)
    assert len(_read(tmp_path / CAPTURE_DIR)) == 3000
    progress = json.loads((tmp_path / "capture-progress.json").read_text())
    assert progress["records"] == 3000 and progress["partitions"] == {"t": 1}
    assert not proc.writer._thread.is_alive() and consumer.closed == 1
    assert proc.partitions is not None and not proc.partitions._thread.is_alive()


def test_ctrl_c_still_drains_and_joins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    consumer = _FakeConsumer(batches=5, then=KeyboardInterrupt())
    proc = _process(tmp_path, consumer, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        proc.run()
    assert not proc.writer._thread.is_alive() and consumer.closed == 1
    assert len(_read(tmp_path / CAPTURE_DIR)) == 500  # what was consumed is on disk


def test_a_write_error_fails_the_process_with_one_line_naming_the_segment(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_kafka_mirror.capture import process

    consumer = _FakeConsumer(batches=3)
    proc = _process(tmp_path, consumer, monkeypatch)
    monkeypatch.setattr(process, "_CaptureProcess", lambda args: proc)
    monkeypatch.setattr(process, "SEGMENT_ROWS", 100)  # a segment per batch: the first cut fails
    shutil.rmtree(tmp_path / CAPTURE_DIR)
    monkeypatch.setattr(process.signal, "signal", lambda *a: None)  # keep pytest's own handlers
    assert process._run_or_fail(proc.args) == 1
    out = capsys.readouterr().out
    errors = [line for line in out.splitlines() if line.startswith("capture: error: ")]
    assert len(errors) == 1 and "could not write capture segment" in errors[0]
    assert str(tmp_path / CAPTURE_DIR / "part-00000.parquet") in errors[0]
    assert not (tmp_path / CAPTURE_STATUS).exists()  # the controller reports the failure
    assert not proc.writer._thread.is_alive() and consumer.closed == 1


def test_the_loop_checks_offsets_itself_and_the_guard_resumes_after_a_gap() -> None:
    from pytest_kafka_mirror.capture.gaps import GapGuard
    from pytest_kafka_mirror.capture.rows import LiveFigures, RowBuilder

    consumer = _FakeConsumer(batches=1)
    seeks: list[Any] = []
    consumer.seek = seeks.append  # type: ignore[attr-defined]
    msgs = consumer.msgs[:10]
    del msgs[4]  # offset 4 is missing: the broker showed 5 first
    gaps = GapGuard(consumer)
    gaps.start("t", 0, 0)
    rb = RowBuilder({"t": "t"}, LiveFigures([1.0]))
    rows = SegmentRows()
    handled = rb.add(msgs, 1, rows, gaps.next)
    assert handled == 4 and [r[3] for r in rows] == [0, 1, 2, 3]
    assert rb.add(gaps.resume(msgs, handled), 1, rows) == 0  # the rest waits for the re-read
    assert [(tp.topic, tp.partition, tp.offset) for tp in seeks] == [("t", 0, 4)]
    assert rb.counts["records"] == 4 and rb.seen[("t", "p1", 0)].distinct == 4
    assert gaps.open  # the next batch (the re-read) goes through the guard
    assert rb.add(gaps.filter(consumer.msgs[4:10]), 1, rows) == 6
    assert [r[3] for r in rows] == list(range(10)) and gaps.refetched == 1 and not gaps.open
    assert rb.add(consumer.msgs[10:12], 1, rows, gaps.next) == 2  # and the loop checks again


def test_the_controller_puts_the_process_s_error_line_first(tmp_path: Path) -> None:
    from pytest_kafka_mirror.capture.target import ERROR_PREFIX, Capture, CaptureError

    class _Ended:
        def log_tail(self) -> str:
            return f"rdkafka noise\n{ERROR_PREFIX}could not write capture segment /x/part-00003.parquet: OSError: full\n"

        def describe_exit(self) -> str:
            return "capture (pid 1) exited with code 1; log /x/capture.log"

    cap = Capture("127.0.0.1:9", tmp_path, {"t": "t"})
    cap.procs = [_Ended()]
    with pytest.raises(CaptureError, match=r"without writing capture-status.json: could not write capture segment "
                                           r"/x/part-00003.parquet: OSError: full \(capture \(pid 1\) exited"):
        cap.status()


class _Metadata:
    def __init__(self, topics: dict[str, Any]) -> None:
        self.topics = topics


class _Topic:
    def __init__(self, partitions: int, error: Any = None) -> None:
        self.partitions = dict.fromkeys(range(partitions))
        self.error = error


def test_a_missing_target_topic_is_reported_with_what_the_metadata_said() -> None:
    from pytest_kafka_mirror.capture.process import _Partitions

    release = threading.Event()  # the second and later answers wait for it: the first is looked at

    class _Consumer:
        calls = 0

        def list_topics(self, timeout: float) -> _Metadata:
            self.calls += 1
            if self.calls == 1:
                return _Metadata({"other": _Topic(1), "b": _Topic(0, error="LEADER_NOT_AVAILABLE")})
            release.wait(timeout)
            return _Metadata({"a": _Topic(3), "b": _Topic(2)})

    lines: list[str] = []
    parts = _Partitions(_Consumer(), ["a", "b"], lines.append)
    try:
        wait_until(lambda: parts.answered_at is not None, 5, "the first metadata answer")
        said = parts.missing(parts.answered_at + 2.5)
        assert said == "last metadata answer 2.5 s ago: a: absent (2 topics listed); b: LEADER_NOT_AVAILABLE"
        release.set()
        wait_until(lambda: parts.counts == {"a": 3, "b": 2}, 5, "both topics' partitions")
        assert parts.missing(time.monotonic()) is None
    finally:
        release.set()
        parts.close()
    assert lines == []


def test_missing_says_when_the_metadata_never_answered() -> None:
    from pytest_kafka_mirror.capture.process import _Partitions

    parts = _Partitions.__new__(_Partitions)
    parts.topics, parts.counts, parts.absent, parts.answered_at = ["a"], {}, {}, None
    assert parts.missing(5.0) == "last metadata answer never: nothing yet"
    parts.answered_at, parts.absent = 2.0, {"a": "absent (7 topics listed)"}
    assert parts.missing(5.0) == "last metadata answer 3.0 s ago: a: absent (7 topics listed)"

