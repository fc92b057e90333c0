"""Topologies end to end on the embedded default (Tansu + the reference mirror): the README's example.

The scenarios (``scenarios/test_multi_cluster.py``) run the three shapes on every backend;
this proves the README's own example of ``add_flow`` / ``for_flow`` as printed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from tests.docs import section_example

if TYPE_CHECKING:
    from pytest_kafka_mirror.env import MirrorEnv
    from pytest_kafka_mirror.facades import MirrorProducerFactory, MirrorTopics, MirrorVerifier

pytestmark = pytest.mark.integration

SECTION = "Several clusters: active-active, fan-out, fan-in"
DEFAULT_POLICY = {"replication.policy.class": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"}


def _readme_example() -> str:
    return section_example("scenarios", SECTION)


@pytest.mark.kafka_mirror(private=True, replicator_properties=DEFAULT_POLICY)  # the example's marker, repeated
def test_readme_both_ways_example(mirror_env: MirrorEnv, mirror_topics: MirrorTopics,
                                  mirror_producer: MirrorProducerFactory, mirror_verifier: MirrorVerifier) -> None:
    namespace: dict[str, Any] = {"pytest": pytest}
    exec(compile(_readme_example(), "docs/scenarios.md", "exec"), namespace)
    assert namespace["DEFAULT_POLICY"] == DEFAULT_POLICY
    namespace["test_both_ways"](mirror_env, mirror_topics, mirror_producer, mirror_verifier)
    ab, ba = mirror_verifier.reports
    assert ab.expected == ba.expected == 800 and list(mirror_env.extra_flows) == [("target", "source")]
    remote = {t for t in mirror_env.source.topics() if t.startswith("target.km-")}  # B's topics, copied back to A
    assert len(remote) == 1, remote  # the topic the example made on the target, none copied back twice
