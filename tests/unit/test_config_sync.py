"""The reference mirror's topic-config sync settings: MM2's property names and filter."""

from __future__ import annotations

import pytest

from pytest_kafka_mirror.replicators.reference.configs import EXCLUDE_DEFAULT, ConfigSyncSettings

DYNAMIC, DEFAULT = 1, 5  # ConfigSource.DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG


def test_mm2_defaults_and_properties() -> None:
    assert ConfigSyncSettings() == ConfigSyncSettings(True, 600.0, EXCLUDE_DEFAULT, "target")
    s = ConfigSyncSettings.from_properties({
        "sync.topic.configs.interval.seconds": "2", "source->target.sync.topic.configs.enabled": "false",
        "sync.topic.configs.enabled": "true", "config.properties.exclude": "retention\\..*, cleanup\\.policy",
        "use.defaults.from": "source", "tasks.max": "4",
    })
    assert s == ConfigSyncSettings(False, 2.0, ("retention\\..*", "cleanup\\.policy"), "source")  # FLOW.KEY wins


@pytest.mark.parametrize("props,message", [
    ({"sync.topic.configs.enabled": "yes"}, "sync.topic.configs.enabled='yes': true or false"),
    ({"sync.topic.configs.interval.seconds": "0"}, r"sync.topic.configs.interval.seconds='0': seconds > 0"),
    ({"sync.topic.configs.interval.seconds": "soon"}, "seconds > 0"),
    ({"use.defaults.from": "both"}, "use.defaults.from='both': source or target"),
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
    from_source = ConfigSyncSettings.from_properties({"use.defaults.from": "source"})
    assert from_source.copies("retention.ms", DEFAULT) and not from_source.copies("min.insync.replicas", DEFAULT)


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
