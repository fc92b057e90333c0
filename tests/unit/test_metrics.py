"""Prometheus metrics: counting per batch, collecting over processes, and real HTTP: a scrape
of the exporter and a push to Debian's prometheus-pushgateway."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from pytest_kafka_mirror.capture.target import LiveFigures
from pytest_kafka_mirror.produce.producer import MirrorProducer, TopicLanes
from pytest_kafka_mirror.report.metrics import (
    ListenAddress,
    MetricsService,
    MetricsSpool,
    MirrorCollector,
    parse_listen_address,
    parse_pushgateway,
)
from pytest_kafka_mirror.rundir import write_json_atomic
from tests.promtools import pushgateway, scrape, value
from tests.unit.test_producer import FakeClient

NODE = "tests/t.py::test_x"


def test_live_latency_histogram_is_exact_per_batch() -> None:
    live = LiveFigures([1.0, 5.0, 50.0])
    arrival = 10_000_000
    # latencies 0.5, 1, 3, 5, 7, 60 ms; a foreign record (None) counts nowhere
    pts = [arrival - us for us in (500, 1000, 3000, 5000, 7000, 60000)] + [None]
    live.add_batch(["a", "a", "b", "b", "b", "b", "c"], pts, arrival)
    live.add_batch(["a"], [arrival + 5_000_000 - 2000], arrival + 5_000_000)  # 2 ms
    d = live.to_dict()
    assert d["by_topic"] == {"a": 3, "b": 4}
    assert d["latency"] == {"bounds_ms": [1.0, 5.0, 50.0], "cumulative": [2, 5, 6], "count": 7,
                            "sum_us": 500 + 1000 + 3000 + 5000 + 7000 + 60000 + 2000}


def test_producer_counts_per_topic_and_per_second() -> None:
    calls: list[tuple[str, dict]] = []
    p = MirrorProducer("x:1", producer_id="pcounts", client_factory=lambda cfg: FakeClient(cfg, fail={3, 4}))
    manifest = p.run([TopicLanes("a", 2), TopicLanes("b", 1)], rate=None, count=50,
                     on_counts=lambda pid, counts: calls.append((pid, counts)))
    pid, final = calls[-1]
    assert pid == "pcounts"
    assert final["a"]["sent"] == 50 and final["b"]["sent"] == 50
    assert final["a"]["acked"] + final["b"]["acked"] == 98 and final["a"]["failed"] + final["b"]["failed"] == 2
    assert final["a"]["rate"] == 0.0  # done
    per_second = manifest.stats["sent_per_second"]
    assert sum(n for _, n in per_second) == 100
    assert all(manifest.started_us // 1_000_000 <= t <= manifest.finished_us // 1_000_000 for t, _ in per_second)


def _two_workers(tmp_path: Path) -> Path:
    spool = tmp_path / "spool"
    spool.mkdir()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    live = LiveFigures([1.0, 5.0])
    live.add_batch(["orders"] * 3, [9_999_000, 9_998_000, 9_990_000], 10_000_000)  # 1, 2, 10 ms
    write_json_atomic(run_dir / "capture-progress.json", {"records": 3, **live.to_dict()})
    gw0 = MetricsSpool(spool, "gw0")
    gw0.producer_counts("p1", {"orders": {"sent": 10, "acked": 9, "failed": 1, "rate": 5.0}})
    gw0.capture_started(NODE, run_dir)
    gw1 = MetricsSpool(spool, "gw1")
    gw1.producer_counts("p2", {"orders": {"sent": 4, "acked": 4, "failed": 0, "rate": 2.0},
                               "refunds": {"sent": 7, "acked": 7, "failed": 0, "rate": 0.0}})
    gw1.verified(NODE, {"missing": 3, "duplicated": 1, "latency_p99": 12.5, "rate": 480.0, "copy_rate": 3900.0,
                        "backlog_max": 20_000, "max_sustainable_rate": None}, ["copy_rate"])
    return spool


def test_collector_sums_every_process(tmp_path: Path) -> None:
    snap = MirrorCollector(_two_workers(tmp_path)).snapshot()
    assert snap["sent"] == {"orders": 14, "refunds": 7}
    assert snap["acked"] == {"orders": 13, "refunds": 7}
    assert snap["failed"] == {"orders": 1, "refunds": 0}
    assert snap["rate"] == {"orders": 7.0, "refunds": 0.0}
    assert snap["arrived"] == {"orders": 3}
    assert snap["latency"][NODE]["cumulative"] == [1, 2] and snap["latency"][NODE]["count"] == 3


def test_exporter_serves_the_collected_metrics_over_http(tmp_path: Path) -> None:
    service = MetricsService(_two_workers(tmp_path), listen=ListenAddress("127.0.0.1", 0))
    service.start()
    try:
        assert service.url is not None and service.url.startswith("http://127.0.0.1:")
        samples = scrape(service.url)
    finally:
        service.stop()
    assert value(samples, "kafka_mirror_records_sent_total", topic="orders") == 14
    assert value(samples, "kafka_mirror_records_acked_total", topic="refunds") == 7
    assert value(samples, "kafka_mirror_records_failed_total", topic="orders") == 1
    assert value(samples, "kafka_mirror_send_rate", topic="orders") == 7.0
    assert value(samples, "kafka_mirror_records_arrived_total", topic="orders") == 3
    assert value(samples, "kafka_mirror_arrival_latency_seconds_bucket", test=NODE, le="0.001") == 1
    assert value(samples, "kafka_mirror_arrival_latency_seconds_bucket", test=NODE, le="0.005") == 2
    assert value(samples, "kafka_mirror_arrival_latency_seconds_bucket", test=NODE, le="+Inf") == 3
    assert value(samples, "kafka_mirror_arrival_latency_seconds_sum", test=NODE) == pytest.approx(0.013)
    assert value(samples, "kafka_mirror_report_missing", test=NODE) == 3
    assert value(samples, "kafka_mirror_report_duplicated", test=NODE) == 1
    assert value(samples, "kafka_mirror_report_rate", test=NODE) == 480.0
    assert value(samples, "kafka_mirror_report_copy_rate", test=NODE) == 3900.0
    assert value(samples, "kafka_mirror_report_backlog_max", test=NODE) == 20_000
    assert value(samples, "kafka_mirror_report_lower_bound", test=NODE, figure="copy_rate") == 1.0
    assert value(samples, "kafka_mirror_report_max_sustainable_rate", test=NODE) is None  # not measured: absent
    assert [dict(labels) for name, labels in samples if name == "kafka_mirror_report_lower_bound"] == [
        {"test": NODE, "figure": "copy_rate"}]
    assert value(samples, "kafka_mirror_report_latency_seconds", test=NODE, figure="p99") == pytest.approx(0.0125)
    with pytest.raises(OSError):  # stopped: nothing listens any more
        urllib.request.urlopen(service.url, timeout=2)


def test_a_busy_port_is_an_oserror_at_start(tmp_path: Path) -> None:
    first = MetricsService(tmp_path, listen=ListenAddress("127.0.0.1", 0))
    first.start()
    try:
        port = int(first.url.rsplit(":", 1)[1].split("/")[0])  # type: ignore[union-attr]
        with pytest.raises(OSError):
            MetricsService(tmp_path, listen=ListenAddress("127.0.0.1", port)).start()
    finally:
        first.stop()


def test_push_to_a_real_pushgateway(tmp_path: Path) -> None:
    with pushgateway(tmp_path) as url:
        service = MetricsService(_two_workers(tmp_path), pushgateway=url, push_interval=0.2,
                                 grouping_key={"instance": "unit"})
        service.start()  # first push
        try:
            samples = scrape(url + "/metrics")
            assert value(samples, "kafka_mirror_records_sent_total", job="kafka_mirror", instance="unit",
                         topic="orders") == 14
            # Later state reaches the gateway with the next push (the loop) and the final one.
            MetricsSpool(tmp_path / "spool", "gw2").verified("tests/t.py::test_y", {"missing": 0})
            assert service.finish() is None
            samples = scrape(url + "/metrics")
        finally:
            service.stop()
        assert value(samples, "kafka_mirror_report_missing", job="kafka_mirror", test="tests/t.py::test_y") == 0
        assert value(samples, "kafka_mirror_report_missing", job="kafka_mirror", test=NODE) == 3
        assert service.push_errors == 0
        with urllib.request.urlopen(url + "/api/v1/metrics", timeout=5) as response:
            groups = json.loads(response.read())["data"]
        assert [g["labels"] for g in groups] == [{"instance": "unit", "job": "kafka_mirror"}]


@pytest.mark.parametrize(
    "text,parsed",
    [("9464", ListenAddress("127.0.0.1", 9464)), ("0", ListenAddress("127.0.0.1", 0)),
     ("0.0.0.0:9464", ListenAddress("0.0.0.0", 9464)), ("[::1]:80", ListenAddress("::1", 80))],
)
def test_listen_addresses(text: str, parsed: ListenAddress) -> None:
    assert parse_listen_address(text) == parsed


@pytest.mark.parametrize("text", ["", "abc", "70000", "host:", ":80", "-1"])
def test_bad_listen_addresses(text: str) -> None:
    with pytest.raises(ValueError, match="is not a port; accepted: PORT | HOST:PORT"):
        parse_listen_address(text)


def test_pushgateway_urls() -> None:
    assert parse_pushgateway("127.0.0.1:9091") == "http://127.0.0.1:9091"
    assert parse_pushgateway("https://gw.example:443/prefix/") == "https://gw.example:443/prefix"
    for bad in ("ftp://gw:1", "http://", "http://gw:99999"):
        with pytest.raises(ValueError, match="is not a push gateway URL"):
            parse_pushgateway(bad)
