"""Topic-configuration sync, as MirrorMaker 2 does it (``MirrorSourceConnector.syncTopicConfigs``).

Every ``sync.topic.configs.interval.seconds`` (MM2: 600 s) the mirror reads the configs of
each topic it copies and alters the remote topic with one incremental AlterConfigs, as MM2
3.5+ does (KIP-894, ``incrementalAlterConfigs`` + ``targetConfig(config, true)``): of the
configs the source reports, every one that is not read-only, not sensitive, not a static
broker config and not kept back by MM2's ``DefaultConfigPropertyFilter``
(``config.properties.exclude``, its default list below) is

- SET to the source's value when the source reports it as set (any source but
  ``DEFAULT_CONFIG``), or when ``use.defaults.from=source``;
- DELETEd on the remote topic when the source reports its default and
  ``use.defaults.from=target`` (MM2's default): the remote topic falls back to the target
  cluster's default, whatever was set on it, so a config deleted on the source is deleted
  on the target too.

The round is applied every interval, changed or not, as MM2 does: a config altered on the
remote topic is put back at the next round unless the filter keeps it back.  A remote topic
is created with the configs the source reports as set (and with ``use.defaults.from=source``
its defaults too: ``targetConfig(config, false)``).  Settings are MM2's property names
(``FLOW.KEY`` wins over ``KEY``; ``use.defaults.from`` counts only as ``FLOW.KEY``, as in
MM2, which drops it at the top level), read from the same ``--properties`` file as the
consumer-group settings; ``sync.topic.configs.enabled=false`` turns it off.
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
_STATIC_BROKER_CONFIG, _DEFAULT_CONFIG = 4, 5  # ConfigSource.STATIC_BROKER_CONFIG, DEFAULT_CONFIG


@dataclass(frozen=True)
class ConfigSyncSettings:
    enabled: bool = True  # sync.topic.configs.enabled
    interval: float = 600.0  # sync.topic.configs.interval.seconds
    exclude: tuple[str, ...] = EXCLUDE_DEFAULT  # config.properties.exclude
    defaults_from: str = "target"  # use.defaults.from

    KEYS = ("sync.topic.configs.enabled", "sync.topic.configs.interval.seconds", "config.properties.exclude",
            "use.defaults.from")
    #: keys MM2 reads only with the flow's prefix (``source->target.use.defaults.from``)
    FLOW_ONLY = ("use.defaults.from",)

    @classmethod
    def from_properties(cls, props: Mapping[str, str], flow: str = "source->target") -> ConfigSyncSettings:
        """ValueError names the property and what it accepts."""
        # MM2's connectorBaseConfig keeps top-level keys only if they are connector config
        # names: config.properties.exclude is one (MirrorSourceConfig), use.defaults.from is
        # not (the filter's own), so MM2 ignores a top-level use.defaults.from (measured, 4.3.1)
        get = {k: props[k] for k in cls.KEYS if k in props and k not in cls.FLOW_ONLY} | {
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

    def operation(self, name: str, source: int, *, read_only: bool = False, sensitive: bool = False) -> str | None:
        """What a sync round does on the remote topic with a source config ``name`` reported
        with ConfigSource ``source``: ``"set"`` (the source's value), ``"delete"`` (back to the
        target's default) or None (left alone), as MM2's ``targetConfig`` and
        ``incrementalAlterConfigs`` decide."""
        if read_only or sensitive or source == _STATIC_BROKER_CONFIG:
            return None
        if any(re.fullmatch(x, name) for x in self.exclude):
            return None
        if source == _DEFAULT_CONFIG and self.defaults_from != "source":
            return "delete"
        return "set"

    def copies(self, name: str, source: int) -> bool:
        """Whether a new remote topic is created with the source config ``name``."""
        return self.operation(name, source) == "set"


class ConfigSync:
    """A thread that syncs the configs of the mirrored topics (``topics()``: source -> remote)."""

    def __init__(self, settings: ConfigSyncSettings, *, src_admin: Any, dst_admin: Any,
                 topics: Callable[[], Mapping[str, str]], log: Callable[[str], None]) -> None:
        self.settings = settings
        self.src_admin = src_admin
        self.dst_admin = dst_admin
        self.topics = topics
        self.log = log
        self.synced: dict[str, dict[str, str | None]] = {}  # remote topic -> the last round's ops (None: delete)
        self._thread = Periodic("config-sync", settings.interval, self.sync_once,
                                lambda exc: log(f"topic config sync failed: {type(exc).__name__}: {exc}"),
                                wait_first=True)

    def start(self) -> None:
        if self.settings.enabled:
            self._thread.start()

    def stop(self) -> None:
        self._thread.stop()

    def _described(self, source_topic: str) -> dict[str, Any]:
        from confluent_kafka.admin import ConfigResource

        resource = ConfigResource(ConfigResource.Type.TOPIC, source_topic)
        return self.src_admin.describe_configs([resource])[resource].result(timeout=15)  # type: ignore[no-any-return]

    def wanted(self, source_topic: str) -> dict[str, str]:
        """The configs of ``source_topic`` a new remote topic is created with (as MM2's
        ``createNewTopics`` does, whether the periodic sync is on or not)."""
        return {name: e.value for name, e in self._described(source_topic).items()
                if e.value is not None and self.settings.copies(name, int(e.source))
                and not e.is_read_only and not e.is_sensitive}

    def round_of(self, source_topic: str) -> dict[str, str | None]:
        """One sync round's operations on the remote topic of ``source_topic``: name -> the
        value to set, or None to delete (see :meth:`ConfigSyncSettings.operation`)."""
        ops: dict[str, str | None] = {}
        for name, e in self._described(source_topic).items():
            op = self.settings.operation(name, int(e.source), read_only=e.is_read_only, sensitive=e.is_sensitive)
            if op == "delete":
                ops[name] = None
            elif op == "set" and e.value is not None:
                ops[name] = e.value
        return ops

    def sync_once(self) -> int:
        """One round over every mirrored topic, applied whether it changed or not (a config
        altered on the remote topic is put back); returns how many remote topics got other
        operations than the round before."""
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

        changed = 0
        for source_topic, remote in dict(self.topics()).items():
            ops = self.round_of(source_topic)
            if not ops:
                continue
            alter = ConfigResource(ConfigResource.Type.TOPIC, remote, incremental_configs=[
                ConfigEntry(name, "" if value is None else value, incremental_operation=(
                    AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET))
                for name, value in ops.items()])
            self.dst_admin.incremental_alter_configs([alter])[alter].result(timeout=15)
            if self.synced.get(remote) != ops:
                changed += 1
                sets = ", ".join(f"{k}={v}" for k, v in sorted(ops.items()) if v is not None)
                deletes = sorted(k for k, v in ops.items() if v is None)
                self.log(f"synced topic configs of {remote}: set {sets or '-'}; "
                         f"deleted (target's default) {len(deletes)}: {', '.join(deletes[:8])}"
                         f"{', ...' if len(deletes) > 8 else ''}")
            self.synced[remote] = ops
        return changed
