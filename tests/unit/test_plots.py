"""SVG plots and the session page: well-formed, and showing the report's own numbers."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from itertools import pairwise
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pytest_kafka_mirror.report.compare import (
    FAILOVER_SUMMARY_COLUMNS,
    SUMMARY_COLUMNS,
    failover_summary_row,
    summary_row,
)
from pytest_kafka_mirror.report.plots import histogram_svg, latency_svg, nice_ticks, rate_svg, write_index, write_plots
from pytest_kafka_mirror.verify import LatencyStats, MirrorReport

SVG = "{http://www.w3.org/2000/svg}"
T0 = 1_741_944_000


def _report() -> MirrorReport:
    timeline = [
        {"t": T0, "sent": 500, "received": 500, "arrived": 480, "p50_ms": 10.0, "p99_ms": 40.0},
        {"t": T0 + 1, "sent": 500, "received": 0, "arrived": 0, "p50_ms": None, "p99_ms": None},  # outage
        {"t": T0 + 2, "sent": 500, "received": 500, "arrived": 1020, "p50_ms": 900.0, "p99_ms": 1800.0},
        {"t": T0 + 3, "sent": 200, "received": 200, "arrived": 200, "p50_ms": 12.0, "p99_ms": 30.0},
    ]
    return MirrorReport(
        run_dir="/r", expected=1700, received=1200, distinct=1200, lost=500,
        latency=LatencyStats(count=1200, p50_ms=12.0, p99_ms=1800.0, histogram=[0, 3, 1197, 0]),
        histogram_bounds_ms=[1.0, 50.0, 2000.0], timeline=timeline,
        markers=[{"time": T0 + 0.5, "label": "kill <replicator>"}, {"time": T0 + 1.5, "label": "restart"}],
    )


def _parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)  # well-formed XML, or this raises
    assert root.tag == f"{SVG}svg"
    return root


def _texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{SVG}text")]


def test_latency_plot_draws_p50_p99_with_a_gap_for_the_outage_and_the_markers() -> None:
    root = _parse(latency_svg(_report(), "tests/t.py::test_x[<a>]"))
    lines = root.findall(f"{SVG}polyline")
    # Each series is broken by the second without arrivals: two segments each.
    assert len(lines) == 4
    assert [len(p.get("points", "").split()) for p in lines] == [1, 2, 1, 2]
    texts = _texts(root)
    assert "latency: tests/t.py::test_x[<a>]" in texts  # escaped in the file, intact once parsed
    assert {"kill <replicator>", "restart", "p50 per second", "p99 per second"} <= set(texts)
    dashed = [ln for ln in root.iter(f"{SVG}line") if ln.get("stroke-dasharray")]
    assert len(dashed) == 2
    # The marker at 0.5 s lies between the ticks of 0 s and 1 s.
    x_tick = {t.text: float(t.get("x", 0)) for t in root.iter(f"{SVG}text") if t.get("text-anchor") == "middle"}
    x0, x1 = x_tick["0"], x_tick["1"]
    assert x0 < float(dashed[0].get("x1", 0)) < x1


def test_rate_plot_shows_sent_and_arrived() -> None:
    root = _parse(rate_svg(_report(), "t"))
    assert {"sent", "arrived"} <= set(_texts(root))
    assert len(root.findall(f"{SVG}polyline")) == 2
    # y axis reaches the highest rate (1020 arrived in one second).
    ticks = [float(t) for t in _texts(root) if re.fullmatch(r"\d+", t)]
    assert max(ticks) >= 1020


def test_histogram_labels_buckets_and_counts() -> None:
    root = _parse(histogram_svg(_report(), "t"))
    texts = _texts(root)
    assert ["≤1ms", "≤50ms", "≤2s", ">2s"] == [t for t in texts if t[:1] in "≤>"]
    assert {"3", "1197"} <= set(texts)
    assert len(root.findall(f"{SVG}rect")) == 1 + 4  # background + one bar per bucket


def test_an_empty_report_says_so() -> None:
    empty = MirrorReport(run_dir="/r")
    assert "no record arrived" in _texts(_parse(latency_svg(empty, "t")))
    assert "no record arrived" in _texts(_parse(histogram_svg(empty, "t")))
    assert "no records sent" in _texts(_parse(rate_svg(empty, "t")))


def test_write_plots_and_index_link_them(tmp_path: Path) -> None:
    report = _report()
    plots = write_plots(report, tmp_path, "tests.t.py.test_x", "tests/t.py::test_x")
    assert sorted(plots) == ["capacity", "histogram", "latency", "rate"]  # no steps: no step plots
    for path in plots.values():
        _parse(Path(path).read_text())
    result = {"key": "tests/t.py::test_x", "outcome": "failed", "report_path": str(tmp_path / "tests.t.py.test_x.json"),
              "plots": plots}
    index = write_index(tmp_path, [summary_row("tests/t.py::test_x", {"expected": 1700, "missing": 500})],
                        SUMMARY_COLUMNS, [result], comparison="baseline: 0001 <x>")
    page = index.read_text()
    for kind in ("latency", "histogram", "rate", "capacity"):
        assert f"<img src='tests.t.py.test_x.{kind}.svg'" in page
    assert "<a href='tests.t.py.test_x.json'>report JSON</a>" in page
    assert "<tr class='failed'><td><a href='#r0'>tests/t.py::test_x</a></td><td>1700</td><td>500</td>" in page
    assert "baseline: 0001 &lt;x&gt;" in page


def test_index_lists_failover_checks_in_a_table_of_their_own(tmp_path: Path) -> None:
    verified = {"key": "t.py::test_x", "kind": "verification", "outcome": "passed", "report_path": None, "plots": {}}
    check = {"key": "t.py::test_x#failover", "kind": "failover", "outcome": "failed",
             "report_path": str(tmp_path / "t.py.test_x-failover.json"), "plots": {}}
    row = failover_summary_row("t.py::test_x#failover", {"failover_rereads_max": 297}, {"entries": [{"group": "g"}]})
    index = write_index(tmp_path, [summary_row("t.py::test_x", {"expected": 10})], SUMMARY_COLUMNS, [verified],
                        more=[("failover checks", [row], FAILOVER_SUMMARY_COLUMNS, [check])])
    page = index.read_text()
    assert "<h1>pytest-kafka-mirror: 1 verified run and 1 failover check</h1>" in page
    assert "<h2>failover checks</h2>" in page
    assert "<tr class='failed'><td><a href='#r1'>t.py::test_x#failover</a></td><td>1 / 1</td>" in page
    assert "<h2 id='r1'>t.py::test_x#failover (failed)</h2>" in page
    assert "<a href='t.py.test_x-failover.json'>report JSON</a>" in page


@given(st.floats(-1e6, 1e6), st.floats(0.001, 1e6), st.integers(2, 10))
def test_nice_ticks_cover_the_range_in_round_steps(lo: float, span: float, target: int) -> None:
    ticks = nice_ticks(lo, lo + span, target)
    assert ticks[0] <= lo + 1e-6 * span and ticks[-1] >= lo + span - 1e-6 * span
    steps = {round(b - a, 6) for a, b in pairwise(ticks)}
    assert len(steps) <= 1 or max(steps) - min(steps) < 1e-6 * max(abs(lo), span)
    assert len(ticks) <= 2 * target + 3


def test_capacity_plots_show_the_copy_rate_the_backlog_and_the_steps(tmp_path: Path) -> None:
    from tests.unit.test_capacity import figures, manifest, stepped_run

    flow, timeline = stepped_run(3000)
    cap = figures(flow, [manifest(rate=[[0, 1000.0], [5, 2000.0], [10, 4000.0]], seconds=15.0)], timeline=timeline)
    assert cap["all"]["copy_rate"] == 3000.0
    produced = {r["t"]: r["n"] for r in flow if r["kind"] == "produced"}
    arrived = {r["t"]: r["n"] for r in flow if r["kind"] == "arrived"}
    report = MirrorReport(run_dir="/r", capacity=cap, timeline=[
        {**e, "sent": produced.get(e["t"], 0), "received": produced.get(e["t"], 0), "arrived": arrived.get(e["t"], 0)}
        for e in timeline])
    plots = write_plots(report, tmp_path, "t", "t.py::test_knee")
    assert sorted(plots) == ["capacity", "histogram", "latency", "rate", "steps", "steps_latency"]
    texts = _texts(_parse(Path(plots["capacity"]).read_text()))
    assert "copy rate 3,000/s" in texts and "backlog (records)" in texts and "offered (sent/s)" in texts
    assert "max sustainable 2,000/s" in _texts(_parse(Path(plots["steps"]).read_text()))
    assert "p99 SLO 1000 ms" in _texts(_parse(Path(plots["steps_latency"]).read_text()))
    # four lines: offered, arrived, backlog and the copy rate across its window
    assert len(list(_parse(Path(plots["capacity"]).read_text()).iter(f"{SVG}polyline"))) == 4
