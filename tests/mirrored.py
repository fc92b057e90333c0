"""Two embedded Tansu clusters with the reference mirror between them, for module fixtures
of pipeline tests that need real brokers and a real replicator."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from pytest_kafka_mirror.clusters import make_cluster
from pytest_kafka_mirror.clusters.base import Cluster
from pytest_kafka_mirror.replicators import parse_naming
from pytest_kafka_mirror.replicators.reference import ReferenceReplicator

WARMUP = "kafka-mirror-warmup"


@contextlib.contextmanager
def mirrored_clusters(workdir: Path, topics: str, naming: str = "prefix:source.") -> Iterator[
        tuple[Cluster, Cluster, ReferenceReplicator]]:
    """Source, target and a reference mirror copying ``topics`` (a regex); the source has
    the warm-up topic.  Everything is stopped at the end."""
    src, dst = make_cluster("source", "tansu", workdir), make_cluster("target", "tansu", workdir)
    try:
        src.start()
        dst.start()
        src.ensure_topic(WARMUP)  # type: ignore[attr-defined]
        with ReferenceReplicator(src.bootstrap_servers, dst.bootstrap_servers, workdir / "mirror", topics=topics,
                                 naming=parse_naming(naming)) as rep:
            yield src, dst, rep
    finally:
        src.stop()
        dst.stop()
