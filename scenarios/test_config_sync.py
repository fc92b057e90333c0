"""Topic configuration sync: a config set on a source topic appears on its remote topic.

MirrorMaker 2 copies the configs set on each source topic to the remote topic every
``sync.topic.configs.interval.seconds`` (600 s by default; 2 s here, through the marker),
except those its config filter keeps back (``DefaultConfigPropertyFilter``:
``min.insync.replicas``, ``unclean.leader.election.enable``, ``message.timestamp.type``,
the replication throttles, ...), which are the target cluster's business.

What it expects: at 2 s into the run ``retention.ms`` and ``unclean.leader.election.enable``
are set on the source topic; ``retention.ms`` appears on the remote topic (the figure
``config_sync_s``: set -> seen on the target), ``unclean.leader.election.enable`` never
does (checked when ``retention.ms`` arrived, and again one sync interval later); the
records are mirrored as usual.

Why: retention and cleanup policy set on the source and not on the target make a
failover cluster keep too little (or too much) data; a release that changes the filter
or the sync (the incremental AlterConfigs of 3.x) shows it here.
"""

from __future__ import annotations

import time

import pytest

from pytest_kafka_mirror.faults import action, at

RATE = 200
INTERVAL_S = 2
RETENTION_MS = "3600123"  # an hour and a bit: a value no broker has as its default
SYNC_TIMEOUT_S = 60


def _topic_configs(cluster, topic: str) -> dict[str, str]:
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = cluster.admin().describe_configs([resource])[resource].result(timeout=15)
    return {name: e.value for name, e in entries.items() if e.value is not None}


def _set_configs(cluster, topic: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    cluster.admin().incremental_alter_configs([resource])[resource].result(timeout=15)


@pytest.mark.kafka_mirror(replicator_properties={"sync.topic.configs.interval.seconds": str(INTERVAL_S)})
def test_topic_config_sync(mirror_env, mirror_topics, mirror_producer, mirror_verifier):
    rep = mirror_env.replicator
    if getattr(rep, "no_config_sync", None):
        pytest.skip(f"topic config sync: {rep.no_config_sync}")
    [topic] = mirror_topics(1, partitions=2)
    remote = rep.target_topic(topic)
    set_at: list[float] = []

    def set_configs() -> None:
        _set_configs(mirror_env.source, topic, {"retention.ms": RETENTION_MS, "unclean.leader.election.enable": "true"})
        set_at.append(time.time())

    run = mirror_producer.new_run([topic])
    mirror_producer.produce(run, rate=RATE, duration=6,
                            faults=[at(2, action(f"set configs of {topic}", set_configs, kind="topology"))])
    assert set_at, f"setting the configs of {topic} failed: {run.fault_errors()}"
    seen, synced_at = {}, None
    deadline = time.monotonic() + SYNC_TIMEOUT_S
    while time.monotonic() < deadline:
        seen = _topic_configs(mirror_env.target, remote)
        if seen.get("retention.ms") == RETENTION_MS:
            synced_at = time.time()
            break
        time.sleep(0.25)
    run.record_figure("config_sync_s", None if synced_at is None else synced_at - set_at[0],
                      f"retention.ms set on {topic} -> seen on {remote}")
    time.sleep(INTERVAL_S + 1)  # one more sync: what it copies, it has copied by now
    later = _topic_configs(mirror_env.target, remote)

    report = mirror_verifier(run)

    report.assert_ok()
    assert synced_at is not None, (
        f"retention.ms={RETENTION_MS} set on {topic} did not reach {remote} in {SYNC_TIMEOUT_S} s; "
        f"it has retention.ms={seen.get('retention.ms')!r}")
    copied = {c: v.get("unclean.leader.election.enable") for c, v in (("at sync", seen), ("later", later))}
    assert all(v != "true" for v in copied.values()), (
        f"unclean.leader.election.enable=true was copied to {remote} ({copied}): MM2's filter keeps it back")
