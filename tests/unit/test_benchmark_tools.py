"""The benchmarks' own pieces that need no broker: the numpy reference against the oracle,
and the comparison with the previous run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("numpy")

from benchmarks._common import Figure, slope
from benchmarks.bench_verify import COUNTED, _child, agree, figures, generate, numpy_verify, spark_figures
from benchmarks.run import DOC_KIND, _previous, render
from pytest_kafka_mirror.report.storage import FileStorage
from pytest_kafka_mirror.verify.oracle import oracle_report


def test_the_numpy_reference_computes_the_oracle_s_report(tmp_path: Path) -> None:
    shape = generate(tmp_path, 30_000, seed=3)
    got = numpy_verify(tmp_path)
    report = oracle_report(tmp_path)
    assert got["counts"] == {name: getattr(report, name) for name in COUNTED}
    # every anomaly the generator injects is there
    assert all(got["counts"][name] for name in ("lost", "unseen", "duplicated", "reordered", "phantom", "corrupted"))
    lat = report.latency
    assert got["latency"] == {"p50_ms": lat.p50_ms, "p90_ms": lat.p90_ms, "p99_ms": lat.p99_ms,
                              "p999_ms": lat.p999_ms, "max_ms": lat.max_ms}
    assert shape["rows"] == report.received


def test_the_table_shows_each_figure_against_its_reference_and_the_previous_run(tmp_path: Path) -> None:
    storage = FileStorage(tmp_path)
    old = Figure("producer", "rate[headers,100B]", 100_000, "records/s", "bare loop", 200_000)
    storage.save({"kind": DOC_KIND, "mode": "quick", "figures": {old.key: old.to_dict()}}, "a")
    storage.save({"kind": DOC_KIND, "mode": "full", "figures": {}}, "b")
    path, previous = _previous(storage, "quick")
    assert path is not None and path.name.startswith("0001_")
    new = Figure("producer", "rate[headers,100B]", 120_000, "records/s", "bare loop", 240_000)
    lines = render([new, Figure("capture", "rss_slope", -0.5, "MB/min")], previous).splitlines()
    assert lines[0].split() == ["figure", "value", "reference", "ratio", "previous", "change"]
    assert "120,000 records/s" in lines[1] and "240,000 records/s (bare loop)" in lines[1]
    assert lines[1].split()[-3:] == ["100,000", "records/s", "+20.0%"]  # the previous run, and the change
    assert " 0.50 " in lines[1]
    assert lines[2].startswith("capture.rss_slope") and "-0.500 MB/min" in lines[2]
    assert json.loads(json.dumps(new.to_dict()))["ratio"] == 0.5


def test_slope_of_flat_and_growing_memory() -> None:
    assert slope([(0, 100.0), (1, 100.0), (2, 100.0)]) == 0
    assert slope([(0, 100.0), (1, 102.0), (2, 104.0)]) == pytest.approx(2.0)
    assert slope([(0, 1.0)]) is None


def test_the_verify_section_s_spark_and_numpy_runs_agree(tmp_path: Path, spark: object) -> None:
    # what `python -m benchmarks --sections verify` runs in its child processes, here on the
    # suite's shared Spark session; numpy through the command-line child, as the benchmark does
    shape = _child("generate", str(tmp_path / "run"), "20000")
    ref = _child("numpy", str(tmp_path / "run"))
    got = spark_figures(spark, tmp_path / "run", None)
    assert agree(got, ref), (got, ref)
    assert got["jvm_peak_mb"] > 0 and ref["peak_mb"] > 0
    rate, memory = figures(20_000, shape["rows"], shape["lanes"], got, ref)
    assert (rate.key, memory.key) == ("verify.rate[20k]", "verify.peak_memory[20k]")
    assert rate.params["agree"] is True and rate.ratio is not None and memory.ratio is not None


def test_large_runs_are_timed_after_a_warm_up_of_the_large_capture_job(tmp_path: Path) -> None:
    """The large runs' warm-up takes the job's large-capture way (code generation), which the
    small warm-up does not; the benchmark's own runs are classified the same way."""
    from benchmarks.bench_verify import _large, _large_warmup

    warm = _large_warmup(tmp_path)
    assert _large(warm)
    generate(tmp_path / "small", 20_000, seed=1)
    assert not _large(tmp_path / "small")
