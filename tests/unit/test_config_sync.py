"""The reference mirror's topic-config sync settings: MM2's property names and filter."""

from __future__ import annotations

import pytest

from pytest_kafka_mirror.replicators.reference.configs import EXCLUDE_DEFAULT, ConfigSyncSettings

DYNAMIC, DYNAMIC_BROKER, STATIC, DEFAULT = 1, 2, 4, 5  # ConfigSource values


def test_mm2_defaults_and_properties() -> None:
    assert ConfigSyncSettings() == ConfigSyncSettings(True, 600.0, EXCLUDE_DEFAULT, "target")
    s = ConfigSyncSettings.from_properties({
        "sync.topic.configs.interval.seconds": "2", "source->target.sync.topic.configs.enabled": "false",
        "sync.topic.configs.enabled": "true", "config.properties.exclude": "retention\\..*, cleanup\\.policy",
        "source->target.use.defaults.from": "source", "tasks.max": "4",
    })
    assert s == ConfigSyncSettings(False, 2.0, ("retention\\..*", "cleanup\\.policy"), "source")  # FLOW.KEY wins
    # MM2's connectorBaseConfig drops a top-level use.defaults.from (not a connector config name)
    assert ConfigSyncSettings.from_properties({"use.defaults.from": "source"}).defaults_from == "target"
    assert ConfigSyncSettings.from_properties({"a->b.use.defaults.from": "source"}, "a->b").defaults_from == "source"


@pytest.mark.parametrize("props,message", [
    ({"sync.topic.configs.enabled": "yes"}, "sync.topic.configs.enabled='yes': true or false"),
    ({"sync.topic.configs.interval.seconds": "0"}, r"sync.topic.configs.interval.seconds='0': seconds > 0"),
    ({"sync.topic.configs.interval.seconds": "soon"}, "seconds > 0"),
    ({"source->target.use.defaults.from": "both"}, "use.defaults.from='both': source or target"),
])
def test_bad_properties_name_the_property(props: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ConfigSyncSettings.from_properties(props)


def test_what_is_copied() -> None:
    s = ConfigSyncSettings()
    assert s.copies("retention.ms", DYNAMIC)
    assert not s.copies("retention.ms", DEFAULT)  # use.defaults.from=target: the target's default stays
    for kept_back in ("min.insync.replicas", "unclean.leader.election.enable", "message.timestamp.type",
                      "leader.replication.throttled.replicas"):
        assert not s.copies(kept_back, DYNAMIC), kept_back
    from_source = ConfigSyncSettings.from_properties({"source->target.use.defaults.from": "source"})
    assert from_source.copies("retention.ms", DEFAULT) and not from_source.copies("min.insync.replicas", DEFAULT)


def test_a_sync_round_sets_or_deletes_as_mm2_incremental_alter_configs() -> None:
    """MirrorSourceConnector.targetConfig(config, true) + incrementalAlterConfigs (MM2 3.5+)."""
    target, source = ConfigSyncSettings(), ConfigSyncSettings.from_properties({"source->target.use.defaults.from": "source"})
    assert target.operation("retention.bytes", DYNAMIC) == source.operation("retention.bytes", DYNAMIC) == "set"
    # a default on the source: deleted on the remote topic (target's default), or set to the source's
    assert target.operation("retention.bytes", DEFAULT) == "delete"
    assert source.operation("retention.bytes", DEFAULT) == "set"
    assert target.operation("retention.bytes", DYNAMIC_BROKER) == "set"  # only DEFAULT_CONFIG counts as a default
    for s in (target, source):
        assert s.operation("unclean.leader.election.enable", DEFAULT) is None  # kept back: never touched
        assert s.operation("unclean.leader.election.enable", DYNAMIC) is None
        assert s.operation("segment.bytes", STATIC) is None
        assert s.operation("retention.ms", DYNAMIC, read_only=True) is None
        assert s.operation("retention.ms", DYNAMIC, sensitive=True) is None


def test_every_round_is_applied_so_an_altered_remote_config_is_put_back() -> None:
    from types import SimpleNamespace

    from pytest_kafka_mirror.replicators.reference.configs import ConfigSync

    def entry(value, source):
        return SimpleNamespace(value=value, source=source, is_read_only=False, is_sensitive=False)

    class Admin:
        def __init__(self, described=None):
            self.described, self.altered = described, []

        def describe_configs(self, resources):
            return {resources[0]: SimpleNamespace(result=lambda timeout: self.described)}

        def incremental_alter_configs(self, resources):
            self.altered.append({e.name: (e.value, str(e.incremental_operation)) for e in resources[0].incremental_configs})
            return {resources[0]: SimpleNamespace(result=lambda timeout: None)}

    src = Admin({"retention.bytes": entry("-1", DEFAULT), "retention.ms": entry("7", DYNAMIC),
                 "min.insync.replicas": entry("1", DEFAULT)})
    logged: list[str] = []
    for defaults_from, retention_bytes in (("target", "DELETE"), ("source", "SET")):
        dst = Admin()
        settings = ConfigSyncSettings.from_properties({"source->target.use.defaults.from": defaults_from})
        sync = ConfigSync(settings, src_admin=src,
                          dst_admin=dst, topics=lambda: {"t": "source.t"}, log=logged.append)
        assert (sync.sync_once(), sync.sync_once()) == (1, 0)  # the second round changes nothing ...
        assert len(dst.altered) == 2 and dst.altered[0] == dst.altered[1]  # ... and is applied all the same
        ops = dst.altered[0]
        assert retention_bytes in ops["retention.bytes"][1] and "SET" in ops["retention.ms"][1]
        assert "min.insync.replicas" not in ops
        assert sync.wanted("t") == ({"retention.ms": "7"} if defaults_from == "target"
                                    else {"retention.ms": "7", "retention.bytes": "-1"})


@pytest.mark.parametrize(("lines", "isolation"), [
    ("", "read_uncommitted"),  # MM2's Java consumer default: aborted records are copied
    ("source.consumer.isolation.level = read_committed", "read_committed"),
    ("consumer.isolation.level = read_committed", "read_committed"),
    ("consumer.isolation.level = read_committed\nsource.consumer.isolation.level = read_uncommitted", "read_uncommitted"),
])
def test_reference_mirror_reads_the_source_consumer_isolation_like_mm2(tmp_path, capsys, lines, isolation):
    from pytest_kafka_mirror.replicators.reference.process import _settings

    path = tmp_path / "mm2.properties"
    path.write_text(lines + "\n")
    assert _settings(path)[2]["isolation.level"] == isolation
    assert "ignoring" not in capsys.readouterr().out


def test_reference_mirror_refuses_an_unknown_isolation_level(tmp_path, capsys):
    from pytest_kafka_mirror.replicators.reference.process import _settings

    path = tmp_path / "mm2.properties"
    path.write_text("source.consumer.isolation.level = committed\n")
    assert _settings(path) is None
    assert "isolation.level='committed': read_uncommitted or read_committed" in capsys.readouterr().out


def test_reference_mirror_starts_where_mm2_would(tmp_path):
    """A partition it has no position for: offset 0, or its end with auto.offset.reset=latest."""
    from confluent_kafka import OFFSET_END

    from pytest_kafka_mirror.replicators.reference.positions import DeliveryStats, Positions
    from pytest_kafka_mirror.replicators.reference.process import _settings

    path = tmp_path / "mm2.properties"
    path.write_text("source.consumer.auto.offset.reset = latest\n")
    reset = _settings(path)[2]["auto.offset.reset"]
    assert reset == "latest"
    latest = Positions(None, "source.", DeliveryStats(), print, reset=reset)
    latest.committed[("t", 1)] = 7
    assert (latest.start("t", 0), latest.start("t", 1)) == (OFFSET_END, 7)
    assert Positions(None, "source.", DeliveryStats(), print).start("t", 0) == 0
