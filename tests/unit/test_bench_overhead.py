"""The overhead benchmark's arithmetic, on a JUnit XML and a stored run written here (the
session it reads them from needs brokers and Spark: ``python -m benchmarks --sections overhead``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.bench_overhead import SCENARIO, SCENARIOS, figures, per_test, session_end

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="3">
<testcase classname="test_overhead" name="test_scenario[0]" time="40.5" />
<testcase classname="test_overhead" name="test_scenario[1]" time="9.0" />
<testcase classname="test_overhead" name="test_scenario[2]" time="7.0" />
<testcase classname="test_overhead" name="test_session_end" time="6.25" />
</testsuite></testsuites>"""


def _result(i: int, produce: float, discovery: float, provisioned: str = "test") -> dict[str, Any]:
    report = {
        "producers": [{"produce_seconds": produce - 0.5}, {"produce_seconds": produce}],
        "capture": {"settle": 0.5, "reason": "satisfied"},
        "discovery": {f"km-t{i}": {"discovery_s": discovery, "provisioned": provisioned, "warmup_s": 0.1}},
    }
    return {"nodeid": f"test_overhead.py::test_scenario[{i}]", "index": 0, "report": report}


def test_overhead_is_wall_time_less_produce_and_settle_per_test_in_run_order(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    # the stored run lists results by node id, not in run order
    stored = {"results": {f"r{i}": _result(i, 2.0, d, p) for i, d, p in
                          [(2, 1.0, "session"), (0, 3.0, "test"), (1, 2.0, "test")]}}
    rows = per_test(junit, stored)
    assert [r["test"] for r in rows] == ["test_scenario[0]", "test_scenario[1]", "test_scenario[2]"]
    assert rows[0] == {"test": "test_scenario[0]", "wall": 40.5, "produce": 2.0, "settle": 0.5, "overhead": 38.0,
                       "discovery": 3.0}
    assert [r["overhead"] for r in rows] == [38.0, 6.5, 4.5]
    assert rows[2]["discovery"] == 0.0  # a pooled topic was discovered before the test
    first, warm = figures(rows, SCENARIOS["quick"])
    assert (first.key, first.value, first.reference_value, first.better) == ("overhead.first_test", 38.0, 2.5, "lower")
    assert (warm.key, warm.value, warm.reference_value) == ("overhead.warm_test", 5.5, 2.5)
    assert warm.ratio == pytest.approx(2.2)
    assert warm.params["per_test"] == rows
    # the session's teardown (the last test's, with no fixture) is no scenario test's overhead
    end = session_end(junit)
    assert end == 6.25
    [*_, last] = figures(rows, SCENARIOS["quick"], end)
    assert (last.key, last.value, last.reference_value) == ("overhead.session_end", 6.25, None)


def test_a_test_without_a_stored_result_is_an_error(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    with pytest.raises(RuntimeError, match=r"test_scenario\[1\] has no stored result"):
        per_test(junit, {"results": {"a": _result(0, 2.0, 1.0)}})
    with pytest.raises(RuntimeError, match="a first and a warm test"):
        figures(per_test(junit, {"results": {f"r{i}": _result(i, 2.0, 1.0) for i in range(3)}})[:1],
                SCENARIOS["smoke"])


def test_the_scenario_file_is_valid_python_for_every_mode() -> None:
    for scenario in SCENARIOS.values():
        code = SCENARIO.format(tests=scenario.tests, partitions=scenario.partitions, rate=scenario.rate,
                               duration=scenario.duration)
        compile(code, "test_overhead.py", "exec")
        assert f"range({scenario.tests})" in code
