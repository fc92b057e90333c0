"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_kafka_mirror.clusters.tansu import TansuCluster


@pytest.fixture(scope="module")
def tansu_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TansuCluster, TansuCluster]]:
    """Two embedded Tansu brokers (source, target) for one test module, stopped after it."""
    d = tmp_path_factory.mktemp("pair")
    src, dst = TansuCluster("source", d), TansuCluster("target", d)
    try:
        src.start()
        dst.start()
        yield src, dst
    finally:
        src.stop()
        dst.stop()
