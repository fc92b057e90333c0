"""The benchmark command (``python -m benchmarks``) runs its sections and writes well-formed
JSON that the next run compares with.  Smoke sizes: the figures mean nothing and are never
asserted (figures belong in benchmarks/, never in tests).  The verify section would start a
JVM of its own here; its Spark and numpy paths run in ``tests/unit/test_benchmark_tools.py``
on the suite's shared Spark session instead."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import processes_tagged

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
#: smoke mode measures one case of each code path (single and multi-process, both formats)
FIGURES = {
    "producer.rate[headers,100B]", "producer.rate[body,100B,processes=2]",
    "throttle.achieved_rate", "throttle.slip_p50", "throttle.slip_p99", "throttle.slip_max",
    "capture.rate[body,100B,processes=2]", "capture.rss_peak", "capture.rss_late_vs_early", "capture.rss_slope",
    "pipeline.rate[headers,100B]",
    "floor.latency_p50", "floor.latency_p99", "floor.kafka_latency_p50", "floor.kafka_latency_p99",
}
SECTIONS = ("producer", "throttle", "capture", "memory", "pipeline", "floor")


def test_the_benchmark_command_runs_its_sections_and_stores_the_figures(tmp_path, tagged_env, kafka_release):
    # kafka_release: the floor runs on Apache Kafka too (tests/kafka.py's release, in the cache)
    storage = tmp_path / "store"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--smoke", "--sections", ",".join(SECTIONS), "--storage", str(storage),
         "--json", str(tmp_path / "b.json"), "--workdir", str(tmp_path / "work")],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads((tmp_path / "b.json").read_text())
    assert (doc["kind"], doc["version"], doc["mode"]) == ("kafka-mirror-benchmarks", 1, "smoke")
    assert set(doc["figures"]) == FIGURES
    assert set(doc["load"]) == set(SECTIONS) and doc["sections"] == list(SECTIONS)
    assert doc["machine_info"]["machine_id"] and doc["commit_info"]["id"]
    for key, figure in doc["figures"].items():
        assert figure["section"] + "." + figure["name"] == key
        assert isinstance(figure["value"], (int, float)), key
        if figure["reference_value"]:
            assert figure["ratio"] == round(figure["value"] / figure["reference_value"], 4), key
    stored = list(storage.glob("*/0001_*.json"))
    assert len(stored) == 1 and json.loads(stored[0].read_text()) == doc
    # every figure is in the printed table, and the run left no process behind
    for key in FIGURES:
        assert key in proc.stdout
    assert processes_tagged(tagged_env) == []
