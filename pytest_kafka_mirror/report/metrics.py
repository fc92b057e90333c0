"""Prometheus metrics of mirror runs: live while scenarios run, final figures after verification.

Who knows what, and where it is read:

* the producer (in the pytest process that runs the test, an xdist worker or the only
  one) counts records sent / acknowledged / failed per topic, per batch, and hands the
  totals to :class:`MetricsSpool` about once a second;
* the capture process extends its ``capture-progress.json`` (written about once a
  second) with identified arrivals per topic and a cumulative latency histogram, counted
  per consumed batch;
* after verification the spool records every figure of the report.

Each pytest process writes its spool to one small JSON file in a directory the
controller created (xdist workers get its path through ``workerinput``).  The controller
serves and pushes one registry whose :class:`MirrorCollector` reads those files and the
progress files of the captures they list on every scrape, so all workers appear as one
source and the worker processes never import prometheus_client.

Metrics (``test`` is the pytest node id, ``topic`` the source topic)::

    kafka_mirror_records_sent_total{topic}        counter  handed to the producer client
    kafka_mirror_records_acked_total{topic}       counter  acknowledged by the source
    kafka_mirror_records_failed_total{topic}      counter  delivery failed
    kafka_mirror_send_rate{topic}                 gauge    records/s over the last second (0 when done)
    kafka_mirror_records_arrived_total{topic}     counter  identified records read from the target, copies included
    kafka_mirror_arrival_latency_seconds{test}    histogram  produce -> capture, every copy, as they arrive
    kafka_mirror_report_<figure>{test}            gauge    after verification: missing, lost, unseen,
                                                           duplicated, reordered, phantom, corrupted, ...
    kafka_mirror_report_latency_seconds{test,figure}  gauge  min, mean, p50, p90, p99, p999, max
    kafka_mirror_report_rate{test}                gauge    achieved messages/s per topic
    kafka_mirror_report_copy_rate{test}           gauge    records/s copied while the replicator had a backlog;
                                                           also ..._copy_rate_mb, ..._max_sustainable_rate,
                                                           ..._backlog_max, ..._caught_up_s, ..._offered_rate
    kafka_mirror_report_lower_bound{test,figure}  gauge    1: that capacity figure is only a lower bound

prometheus_client is imported only by :class:`MetricsService`, i.e. only when
``--kafka-mirror-metrics-port`` or ``--kafka-mirror-pushgateway`` is given.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..capture.target import merge_progress
from ..rundir import write_json_atomic

__all__ = [
    "JOB",
    "ListenAddress",
    "MetricsService",
    "MetricsSpool",
    "MirrorCollector",
    "parse_listen_address",
    "parse_pushgateway",
]

log = logging.getLogger("pytest_kafka_mirror.metrics")

#: The ``job`` label of pushed metrics.
JOB = "kafka_mirror"
#: Seconds between pushes to the gateway while the session runs.
PUSH_INTERVAL = 5.0
#: a verified run's entry in the spool: the names of its figures that are only lower bounds
LOWER_BOUNDS_KEY = "_lower_bounds"
#: The capture progress file (capture.py writes it).
PROGRESS_FILE = "capture-progress.json"
PROGRESS_GLOB = "capture-progress*.json"


@dataclass(frozen=True)
class ListenAddress:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_listen_address(text: str) -> ListenAddress:
    """``PORT`` (on 127.0.0.1) or ``HOST:PORT``; port 0 picks a free port."""
    host, sep, port = text.strip().rpartition(":")
    if not sep:
        host = "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535 or (sep and not host):
        raise ValueError(f"{text!r} is not a port; accepted: PORT | HOST:PORT (e.g. 9464 or 0.0.0.0:9464; 0 = a free port)")
    return ListenAddress(host.strip("[]"), number)


def parse_pushgateway(text: str) -> str:
    """``http(s)://HOST:PORT[/PATH]`` or ``HOST:PORT`` (http); returns the URL with its scheme."""
    url = text.strip()
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    try:
        port_ok = parts.port is None or 0 < parts.port < 65536
    except ValueError:
        port_ok = False
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise ValueError(f"{text!r} is not a push gateway URL; accepted: http://HOST:PORT | https://HOST:PORT | HOST:PORT")
    return url.rstrip("/")


# -- the side that runs tests ------------------------------------------------------------------


class MetricsSpool:
    """What one pytest process knows, written to ``directory/<worker>.json`` for the collector.

    Plain Python, cheap: the producer calls :meth:`producer_counts` about once a second.
    """

    def __init__(self, directory: str | Path, worker: str) -> None:
        self.path = Path(directory) / f"{worker}.json"
        self.state: dict[str, Any] = {"producers": {}, "captures": {}, "verified": {}}
        self._lock = threading.Lock()
        self._write()

    def _write(self) -> None:
        with self._lock:
            write_json_atomic(self.path, self.state)

    def producer_counts(self, producer_id: str, counts: Mapping[str, Mapping[str, float]]) -> None:
        """Cumulative counts of one producer: ``{topic: {sent, acked, failed, rate}}``."""
        self.state["producers"][producer_id] = {t: dict(c) for t, c in counts.items()}
        self._write()

    def capture_started(self, test: str, run_dir: str | Path) -> None:
        self.state["captures"][str(run_dir)] = test
        self._write()

    def verified(self, key: str, figures: Mapping[str, Any], lower_bounds: Sequence[str] = ()) -> None:
        """A verified run's figures; ``lower_bounds``: those that are only lower bounds."""
        self.state["verified"][key] = {**figures, LOWER_BOUNDS_KEY: sorted(lower_bounds)}
        self._write()


# -- the side that serves -----------------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # not written yet, or being replaced: the next scrape reads it
    return data if isinstance(data, dict) else {}


class MirrorCollector:
    """A prometheus_client collector over the spool directory (see the module docstring)."""

    def __init__(self, spool_dir: str | Path) -> None:
        self.spool_dir = Path(spool_dir)

    def snapshot(self) -> dict[str, Any]:
        """Everything the collector would export, as plain data (summed over processes)."""
        sent: dict[str, float] = defaultdict(float)
        acked: dict[str, float] = defaultdict(float)
        failed: dict[str, float] = defaultdict(float)
        rate: dict[str, float] = defaultdict(float)
        arrived: dict[str, float] = defaultdict(float)
        latency: dict[str, dict[str, Any]] = {}
        verified: dict[str, dict[str, Any]] = {}
        for spool in sorted(self.spool_dir.glob("*.json")):
            state = _read_json(spool)
            for counts in state.get("producers", {}).values():
                for topic, c in counts.items():
                    sent[topic] += c.get("sent", 0)
                    acked[topic] += c.get("acked", 0)
                    failed[topic] += c.get("failed", 0)
                    rate[topic] += c.get("rate", 0.0)
            for run_dir, test in state.get("captures", {}).items():
                # one file per capture process (capture-progress-gI.json when there are several)
                progress = merge_progress([_read_json(p) for p in sorted(Path(run_dir).glob(PROGRESS_GLOB))] or [{}])
                for topic, n in progress.get("by_topic", {}).items():
                    arrived[topic] += n
                hist = progress.get("latency")
                if hist and hist.get("count"):
                    _merge_histogram(latency.setdefault(test, {}), hist)
            verified.update(state.get("verified", {}))
        return {"sent": sent, "acked": acked, "failed": failed, "rate": rate, "arrived": arrived,
                "latency": latency, "verified": verified}

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        from .compare import FIGURES
        from .storage import VERIFICATION

        snap = self.snapshot()
        for name, help in (
            ("sent", "Records handed to the producer client, per source topic."),
            ("acked", "Records the source cluster acknowledged, per source topic."),
            ("failed", "Records whose delivery failed, per source topic."),
            ("arrived", "Identified records the capture read from the target (copies included), per source topic."),
        ):
            family = CounterMetricFamily(f"kafka_mirror_records_{name}", help, labels=["topic"])
            for topic, value in sorted(snap[name].items()):
                family.add_metric([topic], value)
            yield family
        rate = GaugeMetricFamily("kafka_mirror_send_rate", "Records/s sent over the last second, per source topic.",
                                 labels=["topic"])
        for topic, value in sorted(snap["rate"].items()):
            rate.add_metric([topic], value)
        yield rate

        hist = HistogramMetricFamily(
            "kafka_mirror_arrival_latency_seconds",
            "Produce to capture latency of identified records as they arrive (every copy).", labels=["test"],
        )
        for test, h in sorted(snap["latency"].items()):
            buckets = [(_le(b / 1000.0), float(c)) for b, c in zip(h["bounds_ms"], h["cumulative"], strict=True)]
            buckets.append(("+Inf", float(h["count"])))
            hist.add_metric([test], buckets, sum_value=h["sum_us"] / 1e6)
        yield hist

        verified = snap["verified"]
        # The figures of verified runs (failover checks are not exported).
        report_figures = {name: f for name, f in FIGURES.items() if f.kind == VERIFICATION}
        for name, figure in report_figures.items():
            if figure.unit == "ms":
                continue
            gauge = GaugeMetricFamily(f"kafka_mirror_report_{name}", f"After verification: {figure.help} ({figure.unit}).",
                                      labels=["test"])
            for key, figures in sorted(verified.items()):
                if figures.get(name) is not None:
                    gauge.add_metric([key], float(figures[name]))
            yield gauge
        lat = GaugeMetricFamily("kafka_mirror_report_latency_seconds",
                                "After verification: latency of the first arrival of each acknowledged record.",
                                labels=["test", "figure"])
        for key, figures in sorted(verified.items()):
            for name, figure in report_figures.items():
                if figure.unit == "ms" and figures.get(name) is not None:
                    lat.add_metric([key, name.removeprefix("latency_")], figures[name] / 1000.0)
        yield lat
        lower = GaugeMetricFamily("kafka_mirror_report_lower_bound",
                                  "After verification: 1 for a capacity figure that is only a lower bound (the "
                                  "producer or the capture set the pace).", labels=["test", "figure"])
        for key, figures in sorted(verified.items()):
            for name in figures.get(LOWER_BOUNDS_KEY) or []:
                if figures.get(name) is not None:
                    lower.add_metric([key, name], 1.0)
        yield lower


def _le(seconds: float) -> str:
    return f"{seconds:g}"


def _merge_histogram(into: dict[str, Any], h: Mapping[str, Any]) -> None:
    """Add histogram ``h`` (bounds_ms, cumulative, count, sum_us) into ``into`` (same bounds)."""
    if not into:
        into.update(bounds_ms=list(h["bounds_ms"]), cumulative=list(h["cumulative"]), count=h["count"], sum_us=h["sum_us"])
        return
    if list(into["bounds_ms"]) != list(h["bounds_ms"]):
        return  # a capture of another version: never mix buckets
    into["cumulative"] = [a + b for a, b in zip(into["cumulative"], h["cumulative"], strict=True)]
    into["count"] += h["count"]
    into["sum_us"] += h["sum_us"]


class MetricsService:
    """The controller's registry, HTTP exporter and push loop.

    >>> service = MetricsService(spool_dir, listen=ListenAddress("127.0.0.1", 0))  # doctest: +SKIP
    >>> service.start(); service.url                                              # doctest: +SKIP
    'http://127.0.0.1:40123/metrics'
    """

    def __init__(self, spool_dir: str | Path, *, listen: ListenAddress | None = None, pushgateway: str | None = None,
                 push_interval: float = PUSH_INTERVAL, grouping_key: Mapping[str, str] | None = None) -> None:
        from prometheus_client import CollectorRegistry

        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = MirrorCollector(spool_dir)
        self.registry.register(self.collector)
        self.listen = listen
        self.pushgateway = pushgateway
        self.push_interval = push_interval
        self.grouping_key = dict(grouping_key or {"instance": socket.gethostname()})
        self.url: str | None = None
        self.push_errors = 0
        self.last_push_error: str | None = None
        self._server: Any = None
        self._stop = threading.Event()
        self._pusher: threading.Thread | None = None

    def start(self) -> None:
        """:meth:`serve`, then :meth:`start_pushing`; on a push error the exporter is stopped."""
        self.serve()
        try:
            self.start_pushing()
        except BaseException:
            self.stop()
            raise

    def serve(self) -> None:
        """Bind the HTTP exporter (when ``listen`` is set); OSError when the address is taken."""
        from prometheus_client import start_http_server

        if self.listen is not None:
            self._server, _thread = start_http_server(self.listen.port, addr=self.listen.host, registry=self.registry)
            host, port = self._server.server_address[:2]
            self.url = f"http://{host if ':' not in host else f'[{host}]'}:{port}/metrics"

    def start_pushing(self) -> None:
        """Push once (errors reach the caller: a wrong URL fails fast), then every ``push_interval``."""
        if self.pushgateway is not None:
            self.push()
            self._pusher = threading.Thread(target=self._push_loop, name="kafka-mirror-push", daemon=True)
            self._pusher.start()

    def push(self) -> None:
        from prometheus_client import push_to_gateway

        assert self.pushgateway is not None
        push_to_gateway(self.pushgateway, job=JOB, registry=self.registry, grouping_key=self.grouping_key, timeout=10)

    def _push_loop(self) -> None:
        while not self._stop.wait(self.push_interval):
            try:
                self.push()
            except Exception as exc:
                self.push_errors += 1
                self.last_push_error = str(exc)
                log.warning("push to %s failed: %s", self.pushgateway, exc)

    def finish(self) -> str | None:
        """Final push (after the last verification); returns an error message or None."""
        self._stop.set()
        if self._pusher is not None:
            self._pusher.join(timeout=15)
        if self.pushgateway is None:
            return None
        try:
            self.push()
        except Exception as exc:
            self.push_errors += 1
            self.last_push_error = str(exc)
            return f"the final push to {self.pushgateway} failed: {exc}"
        return None

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

