"""Stand-ins for the tests that build a replicator without starting anything."""

from __future__ import annotations

from collections.abc import Mapping

from pytest_kafka_mirror.clusters.bootstrap import BootstrapCluster


def unstarted_cluster(bootstrap: str, *, spec: str = "kafka:4.3.1", flavour: str = "", replication_factor: int = -1,
                      client_properties: Mapping[str, str] | None = None, name: str = "source") -> BootstrapCluster:
    """A real cluster object at ``bootstrap`` that is never started (nothing listens there),
    with the given spec, flavour, replication factor and client properties: what a
    replicator's configuration is rendered from."""
    cluster = BootstrapCluster(name, bootstrap)
    cluster.spec, cluster.flavour, cluster.replication_factor = spec, flavour, replication_factor
    if client_properties:
        cluster.set_client_properties(client_properties)
    return cluster
