"""Real Prometheus components for the metrics tests: scraping, and Debian's push gateway."""

from __future__ import annotations

import shutil
import socket
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pytest_kafka_mirror.processes.managed import ManagedProcess, wait_until

PUSHGATEWAY_BIN = "prometheus-pushgateway"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def free_port() -> int:
    """A port nothing listens on right now (for programs that cannot report the one they bound)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(url: str) -> Samples:
    """GET a Prometheus text exposition and parse it: (sample name, labels) -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    """The value of the sample ``name`` whose labels include ``labels`` (exactly one must match)."""
    found = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls]
    assert len(found) <= 1, f"{len(found)} samples {name}{labels}"
    return found[0] if found else None


@contextmanager
def pushgateway(workdir: Path) -> Iterator[str]:
    """Start ``prometheus-pushgateway`` on a free loopback port, memory only; yields its URL.

    Skips the test when the binary is not installed (``.ci/run`` installs the Debian package).
    """
    binary = shutil.which(PUSHGATEWAY_BIN)
    if binary is None:
        pytest.skip(f"{PUSHGATEWAY_BIN} is not installed (apt-get install prometheus-pushgateway)")
    for attempt in range(3):  # the free port may be taken between the check and the bind
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = ManagedProcess("pushgateway", [binary, f"--web.listen-address=127.0.0.1:{port}",
                                              "--persistence.file=", "--log.level=warn"],
                              workdir / f"pushgateway-{attempt}.log").start()
        try:
            wait_until(lambda p=proc, u=url: _ready(u) or not p.running, 20, "the push gateway to answer /-/ready")
            if proc.running:
                yield url
                return
        finally:
            proc.stop()
    raise RuntimeError(f"the push gateway did not start: {proc.log_tail()}")


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/-/ready", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False
