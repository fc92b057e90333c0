"""Topic-configuration sync, as MirrorMaker 2 does it (``MirrorSourceConnector.syncTopicConfigs``).

Every ``sync.topic.configs.interval.seconds`` (MM2: 600 s) the mirror reads the configs of
each topic it copies and sets them on the remote topic: the configs set on the source
topic (DescribeConfigs source ``DYNAMIC_TOPIC_CONFIG``; with ``use.defaults.from=source``
every config the source reports), minus the ones MM2's ``DefaultConfigPropertyFilter``
never copies (``config.properties.exclude``, its default list below).  Settings are MM2's
property names (``FLOW.KEY`` wins over ``KEY``), read from the same ``--properties`` file
as the consumer-group settings; ``sync.topic.configs.enabled=false`` turns it off.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._periodic import Periodic

__all__ = ["EXCLUDE_DEFAULT", "ConfigSync", "ConfigSyncSettings"]

#: MM2 4.3's ``CONFIG_PROPERTIES_EXCLUDE_DEFAULT`` (regexes; 3.x has the same less the two
#: ``log.message.timestamp.*`` ones)
EXCLUDE_DEFAULT = (
    r"follower\.replication\.throttled\.replicas", r"leader\.replication\.throttled\.replicas",
    r"message\.timestamp\.difference\.max\.ms", r"log\.message\.timestamp\.before\.max\.ms",
    r"log\.message\.timestamp\.after\.max\.ms", r"message\.timestamp\.type", r"unclean\.leader\.election\.enable",
    r"min\.insync\.replicas",
)
_DYNAMIC_TOPIC_CONFIG = 1  # ConfigSource.DYNAMIC_TOPIC_CONFIG


@dataclass(frozen=True)
class ConfigSyncSettings:
    enabled: bool = True  # sync.topic.configs.enabled
    interval: float = 600.0  # sync.topic.configs.interval.seconds
    exclude: tuple[str, ...] = EXCLUDE_DEFAULT  # config.properties.exclude
    defaults_from: str = "target"  # use.defaults.from

    KEYS = ("sync.topic.configs.enabled", "sync.topic.configs.interval.seconds", "config.properties.exclude",
            "use.defaults.from")

    @classmethod
    def from_properties(cls, props: Mapping[str, str], flow: str = "source->target") -> ConfigSyncSettings:
        """ValueError names the property and what it accepts."""
        get = {k: props[k] for k in cls.KEYS if k in props} | {
            k[len(flow) + 1:]: v for k, v in props.items() if k.startswith(flow + ".") and k[len(flow) + 1:] in cls.KEYS}
        s = cls()
        if "sync.topic.configs.enabled" in get:
            value = get["sync.topic.configs.enabled"].strip().lower()
            if value not in ("true", "false"):
                raise ValueError(f"sync.topic.configs.enabled={value!r}: true or false")
            s = cls(value == "true", s.interval, s.exclude, s.defaults_from)
        if "sync.topic.configs.interval.seconds" in get:
            try:
                interval = float(get["sync.topic.configs.interval.seconds"])
            except ValueError:
                interval = -1.0
            if interval <= 0:
                raise ValueError(f"sync.topic.configs.interval.seconds={get['sync.topic.configs.interval.seconds']!r}: "
                                 "seconds > 0")
            s = cls(s.enabled, interval, s.exclude, s.defaults_from)
        if "config.properties.exclude" in get:
            s = cls(s.enabled, s.interval, tuple(x.strip() for x in get["config.properties.exclude"].split(",")
                                                 if x.strip()), s.defaults_from)
        if "use.defaults.from" in get:
            where = get["use.defaults.from"].strip()
            if where not in ("source", "target"):
                raise ValueError(f"use.defaults.from={where!r}: source or target")
            s = cls(s.enabled, s.interval, s.exclude, where)
        return s

    def copies(self, name: str, source: int) -> bool:
        """Whether a source config ``name`` (reported with ConfigSource ``source``) is copied."""
        if any(re.fullmatch(x, name) for x in self.exclude):
            return False
        return self.defaults_from == "source" or source == _DYNAMIC_TOPIC_CONFIG


class ConfigSync:
    """A thread that syncs the configs of the mirrored topics (``topics()``: source -> remote)."""

    def __init__(self, settings: ConfigSyncSettings, *, src_admin: Any, dst_admin: Any,
                 topics: Callable[[], Mapping[str, str]], log: Callable[[str], None]) -> None:
        self.settings = settings
        self.src_admin = src_admin
        self.dst_admin = dst_admin
        self.topics = topics
        self.log = log
        self.synced: dict[str, dict[str, str]] = {}  # remote topic -> what was last set on it
        self._thread = Periodic("config-sync", settings.interval, self.sync_once,
                                lambda exc: log(f"topic config sync failed: {type(exc).__name__}: {exc}"),
                                wait_first=True)

    def start(self) -> None:
        if self.settings.enabled:
            self._thread.start()

    def stop(self) -> None:
        self._thread.stop()

    def wanted(self, source_topic: str) -> dict[str, str]:
        """The configs of ``source_topic`` its remote topic gets (also when it is created,
        as MM2's ``createNewTopics`` does, whether the periodic sync is on or not)."""
        from confluent_kafka.admin import ConfigResource

        resource = ConfigResource(ConfigResource.Type.TOPIC, source_topic)
        entries = self.src_admin.describe_configs([resource])[resource].result(timeout=15)
        return {name: e.value for name, e in entries.items()
                if e.value is not None and self.settings.copies(name, int(e.source))}

    def sync_once(self) -> int:
        """One round over every mirrored topic; returns how many remote topics changed."""
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

        changed = 0
        for source_topic, remote in dict(self.topics()).items():
            wanted = self.wanted(source_topic)
            if not wanted or self.synced.get(remote) == wanted:
                continue
            alter = ConfigResource(ConfigResource.Type.TOPIC, remote, incremental_configs=[
                ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in wanted.items()])
            self.dst_admin.incremental_alter_configs([alter])[alter].result(timeout=15)
            self.synced[remote] = wanted
            changed += 1
            self.log(f"synced topic configs of {remote}: {', '.join(f'{k}={v}' for k, v in sorted(wanted.items()))}")
        return changed
