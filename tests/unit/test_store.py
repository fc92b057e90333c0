"""The run store's mirror (processes/store.py): two working copies kept in step through a
store (a shared path here; the S3 bucket in tests/integration/test_spark_engine.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pytest_kafka_mirror.config import _run_store
from pytest_kafka_mirror.processes.store import DirMirror, arrow_uri, list_files, spark_uri
from pytest_kafka_mirror.rundir import STORE_FILE, store_uri_of
from pytest_kafka_mirror.verify.segments import capture_segments, read_segment, segment_rows


def _pair(tmp_path: Path) -> tuple[DirMirror, DirMirror, str]:
    store = str(tmp_path / "store")
    return DirMirror(tmp_path / "driver", store), DirMirror(tmp_path / "task", store), store


def test_each_side_pushes_what_it_writes_and_pulls_what_the_other_writes(tmp_path: Path) -> None:
    driver, task, store = _pair(tmp_path)
    driver.local.mkdir()
    (driver.local / "producers-0").mkdir()
    (driver.local / "producers-0" / "spec.json").write_text('{"count": 5}')
    (driver.local / "spec.json.tmp").write_text("half")  # a temporary file: never copied
    driver.sync()
    task.local.mkdir()
    task.sync()
    assert (task.local / "producers-0" / "spec.json").read_text() == '{"count": 5}'
    assert not (task.local / "spec.json.tmp").exists()
    (task.local / "manifest-p1.json").write_text('{"acked": 1}')
    task.sync()
    driver.sync()
    assert (driver.local / "manifest-p1.json").read_text() == '{"acked": 1}'
    # a pulled file is not pushed back, and the writer's next version replaces it
    (task.local / "manifest-p1.json").write_text('{"acked": 2}')
    task.sync()
    driver.sync()
    assert (driver.local / "manifest-p1.json").read_text() == '{"acked": 2}'
    assert sorted(p.rsplit("/", 1)[-1] for p in list_files(store)) == ["manifest-p1.json", "spec.json"]


def test_a_same_size_rewrite_within_the_stores_second_is_pulled_and_a_removed_file_is_removed(tmp_path: Path) -> None:
    driver, task, _ = _pair(tmp_path)
    task.local.mkdir()
    driver.local.mkdir()
    for n in range(3):  # the same size each time, faster than a store's one-second dates
        (task.local / "capture-progress.json").write_text(json.dumps({"n": n}))
        task.sync()
        driver.sync()
        assert json.loads((driver.local / "capture-progress.json").read_text()) == {"n": n}
        time.sleep(0.05)
    (driver.local / "stop").touch()
    driver.sync()
    task.sync()
    assert (task.local / "stop").exists()
    (driver.local / "stop").unlink()
    driver.sync()
    assert not (Path(driver.base) / "stop").exists()


def test_segments_are_pushed_never_pulled_and_are_read_where_they_are(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    driver, task, store = _pair(tmp_path)
    task.local.mkdir()
    (task.local / "capture").mkdir()
    pq.write_table(pa.table({"seq": [1, 2, 3]}), task.local / "capture" / "part-00000.parquet")
    task.close()
    driver.local.mkdir()
    driver.sync()
    assert not (driver.local / "capture").exists()
    (driver.local / STORE_FILE).write_text(json.dumps({"uri": store}))
    assert store_uri_of(driver.local / "capture") == f"{store}/capture"
    segments = capture_segments(driver.local / "capture")
    assert [Path(s.spark_path).name for s in segments] == ["part-00000.parquet"] and segments[0].size > 0
    assert read_segment(segments[0], ["seq"]).column("seq").to_pylist() == [1, 2, 3]
    assert segment_rows(segments[0]) == 3  # its footer, read in the store


def test_a_close_pushes_the_last_writes_and_reports_a_store_it_cannot_write(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    mirror = DirMirror(tmp_path / "here", str(blocker / "store")).start()
    (mirror.local / "done-0.json").write_text("{}")
    with pytest.raises(RuntimeError, match=r"could not be kept in step with .*/file/store"):
        mirror.close()


def test_uris_as_pyarrow_and_spark_name_them_and_the_setting_refuses_an_unknown_scheme(tmp_path: Path) -> None:
    assert arrow_uri("s3a://bucket/runs") == "s3://bucket/runs"
    assert spark_uri("s3://bucket/runs/x.parquet") == "s3a://bucket/runs/x.parquet"
    assert spark_uri("hdfs://nn/runs") == "hdfs://nn/runs"
    assert _run_store("s3a://bucket/runs/") == "s3a://bucket/runs"
    assert _run_store("relative/dir") == str(Path("relative/dir").absolute())
    with pytest.raises(ValueError, match=r"the scheme ftp:// is not one pyarrow and Spark both read"):
        _run_store("ftp://host/runs")


def test_kafka_mirror_verify_reads_a_run_in_its_store_and_writes_the_report_back(
        tmp_path: Path, spark: object, capsys: pytest.CaptureFixture[str]) -> None:
    """A run kept only in a store (``file://`` here, ``s3a://`` in a bucket): ``kafka-mirror
    verify URI`` verifies it there, with the exact count of what is missing."""
    from pytest_kafka_mirror.cli import main
    from tests.synthetic import SyntheticRun

    run = SyntheticRun(tmp_path / "run")
    run.lane("orders", pid="p1", lane=0, acked=range(10)).deliver([s for s in range(10) if s != 3])
    run.write(segments=2)
    store = f"file://{tmp_path / 'store' / 'run-0'}"
    DirMirror(run.run_dir, store).close()
    assert main(["verify", store]) == 1
    out = capsys.readouterr()
    assert f"report: {store}/report.json" in out.out
    report = json.loads((tmp_path / "store" / "run-0" / "report.json").read_text())
    assert report["lost"] == 1 and report["expected"] == 10, report
    assert main(["verify", f"file://{tmp_path / 'nothing'}"]) == 2
    assert "nothing has no manifest-*.json: not a run directory" in capsys.readouterr().err
