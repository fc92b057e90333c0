"""The faultable link between a replicator and a cluster, against a real broker."""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_kafka_mirror.clusters.tansu import TansuCluster
from pytest_kafka_mirror.faults import FaultError, Link
from pytest_kafka_mirror.faults.netem import shaping_unavailable

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuCluster]:
    with TansuCluster("broker", tmp_path_factory.mktemp("broker")) as cluster:
        cluster.create_topic("t", 1)
        yield cluster


@pytest.fixture
def link(broker: TansuCluster, tmp_path: Path) -> Iterator[Link]:
    with Link("source", broker.bootstrap_servers, tmp_path) as lk:
        yield lk


def _produce_rtt_ms(bootstrap: str, n: int = 9) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all", "log_level": 0})
    p.produce("t", b"warm")
    assert p.flush(20) == 0
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        p.produce("t", b"x")
        assert p.flush(20) == 0
        out.append((time.perf_counter() - t0) * 1000)
    return statistics.median(out)


def test_every_connection_goes_through_the_link(link: Link) -> None:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": link.bootstrap_servers}).list_topics(timeout=10)
    # the Kafka-aware proxy advertises the link, so no client can bypass it after bootstrap
    assert [f"{b.host}:{b.port}" for b in md.brokers.values()] == [link.bootstrap_servers]


def test_delay_is_applied_and_removed(link: Link) -> None:
    link.set_delay(40)
    # request and response each cross the link: at least 2 x 40 ms per produce
    assert _produce_rtt_ms(link.bootstrap_servers) >= 80
    assert "delay 40 ms" in link.describe()
    link.clear()
    assert link.delay_ms == 0 and "clean" in link.describe()


def test_bad_delay_is_refused(link: Link) -> None:
    with pytest.raises(ValueError, match="must be >= 0 ms"):
        link.set_delay(-1)


def test_several_bootstrap_servers_are_refused(tmp_path: Path) -> None:
    with pytest.raises(FaultError, match="forwards to one broker"):
        Link("target", "127.0.0.1:1,127.0.0.1:2", tmp_path)


@pytest.mark.skipif(shaping_unavailable("loss") is not None, reason=str(shaping_unavailable("loss")))
def test_loss_rules_are_added_on_the_link_port_only_and_removed(link: Link) -> None:
    link.set_loss(1)
    rules = subprocess.run(["iptables", "-S", "INPUT"], capture_output=True, text=True, check=True).stdout
    mine = [r for r in rules.splitlines() if f"kafka-mirror port {link.port}" in r]
    assert len(mine) == 2 and all("--probability 0.0099999" in r for r in mine), rules  # 1 %, as iptables prints it
    link.clear()
    rules = subprocess.run(["iptables", "-S", "INPUT"], capture_output=True, text=True, check=True).stdout
    assert f"kafka-mirror port {link.port}" not in rules


@pytest.mark.skipif(shaping_unavailable("bandwidth") is not None, reason=str(shaping_unavailable("bandwidth")))
def test_bandwidth_cap_is_a_class_of_its_own_and_removed(link: Link) -> None:
    link.set_bandwidth(800)
    classes = subprocess.run(["tc", "class", "show", "dev", "lo"], capture_output=True, text=True).stdout
    filters = subprocess.run(["tc", "filter", "show", "dev", "lo"], capture_output=True, text=True).stdout
    assert "rate 800Kbit" in classes
    assert f"{link.port:04x}" in filters  # u32 matches the port (hex) in both directions
    link.clear()
    classes = subprocess.run(["tc", "class", "show", "dev", "lo"], capture_output=True, text=True).stdout
    assert "rate 800Kbit" not in classes
