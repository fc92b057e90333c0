"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_kafka_mirror.clusters import Cluster
from pytest_kafka_mirror.clusters.tansu import TansuCluster


def _running(src: Cluster, dst: Cluster) -> Iterator[tuple[Cluster, Cluster]]:
    """Start a source and a target cluster, yield them, stop both (also after a failed start)."""
    try:
        src.start()
        dst.start()
        yield src, dst
    finally:
        src.stop()
        dst.stop()


@pytest.fixture(scope="module")
def tansu_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TansuCluster, TansuCluster]]:
    """Two embedded Tansu brokers (source, target) for one test module, stopped after it."""
    d = tmp_path_factory.mktemp("pair")
    yield from _running(TansuCluster("source", d), TansuCluster("target", d))  # type: ignore[misc]


@pytest.fixture(scope="module")
def kafka_pair(tmp_path_factory: pytest.TempPathFactory, kafka_release: object) -> Iterator[tuple[Cluster, Cluster]]:
    """Two single-broker Apache Kafka clusters (tests/kafka.py's release) for one test
    module, stopped after it: where MirrorMaker 2 restarts, whose Connect group needs a real
    group coordinator (on Tansu, a worker that rejoins after SIGTERM + start can go on
    rebalancing for minutes under load: seen in this suite under -n 2)."""
    from pytest_kafka_mirror.clusters import make_cluster
    from tests.kafka import KAFKA_VERSION

    d = tmp_path_factory.mktemp("kafka-pair")
    yield from _running(make_cluster("source", f"kafka:{KAFKA_VERSION}", d),
                        make_cluster("target", f"kafka:{KAFKA_VERSION}", d))
