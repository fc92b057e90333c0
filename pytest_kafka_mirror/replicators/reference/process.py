"""The reference mirror process: consume the source, produce to the target (MM1 style).

Run as ``python -m pytest_kafka_mirror.replicators.reference --source BS --target BS
--topics REGEX [--prefix P] [--faults FILE --ledger FILE]``.  It is made of named parts:

* ``discovery.py`` — which topics it mirrors and when it starts copying them (with the
  ``behaviour.py`` knobs: discovery delay, rebalance pauses);
* ``loop.py`` — the copy loop;
* ``control.py`` + ``knobs.py`` — fault knobs read from ``--faults FILE`` at run time, and
  the ledger of what they did;
* ``positions.py`` — committed positions (``--offsets FILE``): a restart resumes there;
* ``groups.py`` — consumer groups as MirrorMaker 2 handles them (offset syncs,
  checkpoints, group offset sync, heartbeats), configured by MM2 property names in
  ``--properties FILE`` (others are ignored with a log line).

Like MirrorMaker 2's Java consumer, it reads the source ``read_uncommitted`` (records of
aborted transactions are copied) and from the beginning of a partition it has no position
for, unless ``source.consumer.isolation.level`` / ``source.consumer.auto.offset.reset``
(or ``consumer.*``) in ``--properties`` say otherwise (:data:`SOURCE_CONSUMER`).

``--restart-delay`` seconds pass before a start copies anything (a real replicator's
start-up); the ready file is written when it copies.  SIGTERM flushes, commits and exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]


def _log(msg: str) -> None:
    sys.stdout.write(f"{time.strftime('%H:%M:%S')} reference-mirror: {msg}\n")
    sys.stdout.flush()


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="reference-mirror")
    ap.add_argument("--source", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--topics", required=True, help="regex of source topics to mirror")
    ap.add_argument("--prefix", default="", help="target topic = PREFIX + source topic")
    ap.add_argument("--policy", default="none", choices=("none", "default", "identity"),
                    help="MM2's replication policy whose cycle detection it applies (policy.py)")
    ap.add_argument("--source-alias", default="source")
    ap.add_argument("--target-alias", default="target")
    ap.add_argument("--discovery-interval", type=float, default=0.25)
    ap.add_argument("--discovery-delay", type=float, default=0.0, help="a new topic is copied this much later")
    ap.add_argument("--rebalance-pause", type=float, default=0.0, help="a new topic stops every topic this long")
    ap.add_argument("--restart-delay", type=float, default=0.0, help="seconds before a start copies anything")
    ap.add_argument("--max-rate", type=float, default=0.0, help="records/s across the topics, at most (0: unthrottled)")
    ap.add_argument("--ready-file", type=Path)
    ap.add_argument("--warmup-topic", default="", help="target topic for one warm-up record ('' = none)")
    ap.add_argument("--faults", type=Path, help="JSON control file of fault knobs (re-read when it changes)")
    ap.add_argument("--ledger", type=Path, help="where to write the ledger of injected faults")
    ap.add_argument("--offsets", type=Path, help="committed positions: read at start, written as records are acked")
    ap.add_argument("--commit-interval", type=float, default=1.0, help="seconds between two commits")
    ap.add_argument("--properties", type=Path, help="MM2-style properties: checkpoints, offset syncs, heartbeats")
    ap.add_argument("--emitter-id", default="", help="this mirror's heartbeat id (default: from the pid)")
    return ap.parse_args(argv)


#: Settings of MM2's source consumer the reference mirror follows, with MM2's defaults and
#: the values it accepts; set as ``consumer.KEY`` or ``source.consumer.KEY`` (the source's
#: cluster alias is ``source``).  Like MM2's Java consumer it reads ``read_uncommitted``
#: (records of aborted transactions are copied) and starts a partition with no committed
#: position at its beginning (``latest``: at its end, what was there is never copied).
SOURCE_CONSUMER = {"isolation.level": ("read_uncommitted", "read_committed"),
                   "auto.offset.reset": ("earliest", "latest")}
SOURCE_CONSUMER_KEYS = tuple(f"{where}consumer.{key}" for key in SOURCE_CONSUMER for where in ("", "source."))


def source_consumer(props: dict[str, str]) -> dict[str, str]:
    """The :data:`SOURCE_CONSUMER` settings in ``props`` (``source.consumer.KEY`` winning),
    defaults for the rest; ValueError names a value it does not accept."""
    out = {}
    for key, accepted in SOURCE_CONSUMER.items():
        value = next((props[k].strip() for k in (f"source.consumer.{key}", f"consumer.{key}") if k in props),
                     accepted[0])
        if value not in accepted:
            raise ValueError(f"{key}={value!r}: {' or '.join(accepted)}")
        out[key] = value
    return out


def _clients(args: argparse.Namespace, isolation: str) -> tuple[Any, Any, Any, Any]:
    """Source consumer (assign only), target producer, source and target admin clients."""
    from confluent_kafka import Consumer, Producer

    from ..._kafkalog import admin_client, with_logger

    consumer = Consumer(with_logger({
        "bootstrap.servers": args.source,
        "group.id": f"reference-mirror-{os.getpid()}",  # required by librdkafka; never joined (assign only)
        "enable.auto.commit": False,
        "fetch.queue.backoff.ms": 1,
        "fetch.wait.max.ms": 10,
        "fetch.error.backoff.ms": 10,
        # Partitions are assigned at offset 0 rather than OFFSET_BEGINNING: resolving
        # BEGINNING costs ~0.5 s on Tansu, which would show up as latency of the first
        # records.  A log whose start moved past 0 is caught by the reset to earliest.
        "auto.offset.reset": "earliest",
        "topic.metadata.refresh.interval.ms": 1000,
        "isolation.level": isolation,
    }))
    producer = Producer(with_logger({
        "bootstrap.servers": args.target,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "queue.buffering.max.messages": 500000,
        # librdkafka refuses records over message.max.bytes (1 MB by default) before sending
        # them; a mirror must pass on whatever the source accepted.
        "message.max.bytes": 16 * 1024 * 1024,
    }))
    return consumer, producer, admin_client(args.source), admin_client(args.target)


def _configs_of(configs: Any, topic: str) -> dict[str, str]:
    """The configs a new remote topic gets; none (after a log line) when the source does not tell."""
    try:
        return configs.wanted(topic)  # type: ignore[no-any-return]
    except Exception as exc:
        _log(f"configs of {topic} unknown, its target topic gets the broker's defaults: {type(exc).__name__}: {exc}")
        return {}


def _settings(path: Path | None, aliases: tuple[str, str] = ("source", "target")) -> tuple[Any, Any, dict[str, str]] | None:
    """MM2-style consumer-group and topic-config settings of the flow between ``aliases``
    and the source consumer's (:func:`source_consumer`); None after logging an unreadable file."""
    from ..._clientconf import parse_properties
    from .._checkpoints import REFERENCE_DEFAULTS
    from .configs import ConfigSyncSettings

    defaults = REFERENCE_DEFAULTS.for_aliases(*aliases)
    if path is None:
        return defaults, ConfigSyncSettings(), source_consumer({})
    try:
        props = parse_properties(path.read_text())
        settings, ignored = defaults.with_properties(props, f"{aliases[0]}->{aliases[1]}")
        configs = ConfigSyncSettings.from_properties(props, f"{aliases[0]}->{aliases[1]}")
        consumer = source_consumer(props)
    except (OSError, ValueError) as exc:
        _log(f"bad --properties {path}: {exc}")
        return None
    # the policy reaches the process as --policy (ReferenceReplicator reads the property)
    ignored = [k for k in ignored if k not in ConfigSyncSettings.KEYS and k not in SOURCE_CONSUMER_KEYS
               and k != "replication.policy.class"]
    if ignored:
        _log(f"ignoring properties the reference mirror does not implement: {', '.join(sorted(ignored))}")
    for key in ConfigSyncSettings.FLOW_ONLY:
        if key in props:
            _log(f"ignoring {key}={props[key]} without its flow's prefix, as MirrorMaker 2 does: "
                 f"set {aliases[0]}->{aliases[1]}.{key}")
    return settings, configs, consumer


def _wait(seconds: float, loop: Any) -> None:
    """A start-up that takes ``seconds`` (a real replicator's), cut short by SIGTERM."""
    if seconds > 0:
        from ...processes.managed import wait_until

        _log(f"starting: copying in {seconds:g} s (restart delay)")
        with contextlib.suppress(TimeoutError):  # the delay is over: start copying
            wait_until(lambda: loop.stopping, seconds, "a SIGTERM during the restart delay")


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    from ..._kafkalog import admin_client, log_to

    log_to(sys.stdout, "reference-mirror")  # librdkafka's messages into the log file, deduplicated
    both = _settings(args.properties, (args.source_alias, args.target_alias))
    if both is None:
        return 2
    settings, config_settings, source_settings = both
    from ...capture.gaps import GapGuard
    from .behaviour import Behaviour
    from .configs import ConfigSync
    from .control import FaultControl
    from .discovery import Discovery
    from .groups import GroupSync
    from .loop import CopyLoop
    from .policy import AliasPolicy
    from .positions import DeliveryStats, Positions

    behaviour = Behaviour(args.discovery_interval, args.discovery_delay, args.rebalance_pause, args.restart_delay,
                          args.max_rate)
    consumer, producer, src_admin, dst_admin = _clients(args, source_settings["isolation.level"])
    # A broker showing a later record of a partition first (Tansu with several producers on
    # one partition) must not make the mirror skip the earlier one: re-read the gap.
    gaps = GapGuard(consumer, log=_log)
    names = settings.names

    def internal(topic: str) -> bool:
        """MM2's internal topics (``*.internal``, ``__*``, ``.*``) and heartbeats are not data."""
        return (topic.endswith((".internal", names.separator + names.heartbeats)) or topic.startswith(("__", "."))
                or topic == names.heartbeats)

    stats = DeliveryStats()
    groups = GroupSync(settings, source=args.source, target=args.target, offsets_path=args.offsets,
                       emitter_id=args.emitter_id or f"reference-mirror-{os.getpid()}", log=_log)
    positions = Positions(args.offsets, args.prefix, stats, _log, track=groups.track, save_with=groups.save,
                          reset=source_settings["auto.offset.reset"])
    loop: CopyLoop
    control = FaultControl(args.faults, args.ledger, lambda rec: loop.send(rec), _log)
    configs = ConfigSync(config_settings, src_admin=admin_client(args.source), dst_admin=admin_client(args.target),
                         topics=lambda: {t: args.prefix + t for t in list(discovery.assigned)}, log=_log)
    discovery = Discovery(consumer=consumer, gaps=gaps, src_admin=src_admin, dst_admin=dst_admin, topics=args.topics,
                          prefix=args.prefix, internal=internal, start_offset=positions.start,
                          on_partitions=control.set_engine, behaviour=behaviour, log=_log,
                          topic_config=lambda topic: _configs_of(configs, topic),
                          cycle=AliasPolicy(args.policy, args.source_alias, args.target_alias, names.separator,
                                            names.heartbeats).is_cycle)
    loop = CopyLoop(consumer=consumer, gaps=gaps, producer=producer, prefix=args.prefix, discovery=discovery,
                    control=control, positions=positions, groups=groups, stats=stats,
                    commit_interval=args.commit_interval, log=_log, max_rate=behaviour.max_rate)

    def on_term(signum: int, frame: Any) -> None:
        loop.stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    _wait(behaviour.restart_delay, loop)
    control.read(discovery.assigned)
    discovery.tick(time.monotonic())
    groups.setup(src_admin=src_admin, dst_admin=dst_admin, consumer=consumer, gaps=gaps, start_offset=positions.start,
                 topic_ok=discovery.mirrors, topics=args.topics, rename=lambda t: args.prefix + t,
                 knob_view=lambda: control.view)
    _warm_up(args, producer, dst_admin)
    groups.start()
    configs.start()
    if args.ready_file:
        args.ready_file.write_text(str(os.getpid()))
    _log(f"ready: {args.source} -> {args.target}, topics /{args.topics}/, prefix {args.prefix!r}, "
         f"policy {args.policy} ({args.source_alias} -> {args.target_alias})"
         + (f"; behaves like a replicator: {behaviour}" if behaviour != Behaviour() else ""))
    loop.run()
    configs.stop()
    left = loop.finish()
    _log(f"stopped: read {loop.read} records, produced {loop.produced}{loop.control.dropped_words()}, "
         f"{stats.errors} delivery errors, "
         f"{left} unflushed")
    return 0


def _warm_up(args: argparse.Namespace, producer: Any, dst_admin: Any) -> None:
    """Acquire the idempotent producer id now (~0.5 s on Tansu) rather than on the first
    mirrored record, which would otherwise carry that delay as latency."""
    from .discovery import create_topic

    if args.warmup_topic:
        create_topic(dst_admin, args.warmup_topic, 1)
        producer.produce(args.warmup_topic, b"reference-mirror warm-up")
        if producer.flush(15):
            _log("warning: warm-up record not acknowledged within 15 s")


if __name__ == "__main__":
    sys.exit(main())
