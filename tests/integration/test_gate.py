"""``kafka-mirror gate OLD NEW``: the baseline session stored, the candidate compared with
it and gated, on the embedded brokers with the reference mirror (its fault knobs stand in
for a release that loses records)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import processes_tagged

pytestmark = pytest.mark.integration

SCENARIO = """
def test_steady(mirror_topics, mirror_producer, mirror_verifier):
    run = mirror_producer(mirror_topics(1, partitions=2), rate=None, count=400)
    mirror_verifier(run)  # figures only: the gate judges them
"""


def test_the_gate_stores_the_baseline_and_fails_a_candidate_that_loses_records(pytester: pytest.Pytester,
                                                                                tagged_env: str) -> None:
    pytester.makepyfile(test_x=SCENARIO)
    storage = pytester.path / "gate"
    out = subprocess.run(
        [sys.executable, "-m", "pytest_kafka_mirror.cli", "gate", "reference", "reference:drop=0.1,seed=3",
         "--storage", str(storage), "--", "test_x.py", "-p", "no:cacheprovider", "--kafka-mirror-drain-timeout=5"],
        cwd=pytester.path, capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    assert "kafka-mirror gate: 1/2: the baseline, reference:" in out.stderr
    assert "kafka-mirror gate: baseline stored: " in out.stderr and "(every test passed" in out.stderr
    assert "gated by missing:0 failover_skipped:0 failover_beyond_end_max:0 failover_rewinds:0" in out.stderr
    assert "test_x.py::test_steady: missing " in out.stdout and "more than missing:0 allows" in out.stdout
    assert "reference -> reference:drop=0.1,seed=3: FAILED: a test failed or a figure regressed" in out.stderr
    stored = sorted(p.name for p in storage.glob("*/*.json"))
    assert [name.split("_", 1)[1].rsplit("-", 1)[0] for name in stored] == ["gate-reference",
                                                                          "gate-reference-drop-0.1-seed-3"]
    assert processes_tagged(tagged_env) == []
