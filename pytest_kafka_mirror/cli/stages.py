"""``kafka-mirror produce`` and ``kafka-mirror capture``: the pipeline's stages as separate
commands, as the original tester's separate producer and consumer pods ran them.

They share nothing but a run directory (a shared volume, or copied afterwards)::

    host A:  kafka-mirror capture --bootstrap TARGET --run-dir /runs/r1 --topics orders --naming prefix:source.
    host B:  kafka-mirror produce --bootstrap SOURCE --run-dir /runs/r1 --topics orders --rate 5000 --duration 60
    any:     kafka-mirror verify /runs/r1

``produce`` writes one manifest per producer process and then ``produced-<id>.json``;
``capture`` stops once ``--producers`` such files exist and every acknowledged record
arrived (or nothing arrived for ``--drain-timeout`` seconds), so the two may start in
any order.  Both stop cleanly on Ctrl-C (SIGINT / SIGTERM), writing what they have.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import config

__all__ = ["add_stage_commands", "parse_rate", "parse_topics_map"]

DEFAULT_WARMUP = "kafka-mirror-warmup"


def parse_rate(text: str) -> float | list[tuple[float, float]] | None:
    """``5000`` (msg/s per topic), ``0:200,4:2000,7:200`` (a profile of steps) or
    ``unthrottled``."""
    text = text.strip()
    if text in ("unthrottled", "none"):
        return None
    try:
        if ":" not in text:
            rate = float(text)
            if not math.isfinite(rate) or rate <= 0:
                raise ValueError
            return rate
        steps = [tuple(float(x) for x in step.split(":")) for step in text.split(",")]
        if any(len(s) != 2 for s in steps):
            raise ValueError
        return [(s[0], s[1]) for s in steps]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a rate; accepted: MSG_PER_S (per topic) | SECONDS:MSG_PER_S,... (a profile "
            "starting at 0, e.g. 0:200,4:2000,7:200) | unthrottled"
        ) from None


def _topics(text: str) -> list[str]:
    topics = [t.strip() for t in text.split(",") if t.strip()]
    if not topics:
        raise argparse.ArgumentTypeError(f"{text!r} names no topic; give TOPIC[,TOPIC...]")
    return topics


def parse_topics_map(text: str) -> dict[str, str]:
    """``SRC=TGT[,SRC=TGT...]``; a bare ``SRC`` maps to itself."""
    out: dict[str, str] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        source, sep, target = item.partition("=")
        if not source.strip() or (sep and not target.strip()):
            raise argparse.ArgumentTypeError(f"{item!r} is not SOURCE=TARGET (or a bare SOURCE for the same name)")
        out[source.strip()] = target.strip() if sep else source.strip()
    if not out:
        raise argparse.ArgumentTypeError(f"{text!r} names no topic; give SOURCE=TARGET[,SOURCE=TARGET...]")
    return out


def _argument(parse: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    """A parser of the settings (``ValueError`` naming the value) as an argparse type,
    whose message argparse shows as it is."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = name
    return convert


def _naming(text: str) -> Any:
    from ..replicators import parse_naming

    return _argument(parse_naming, "naming")(text)


_positive_int = _argument(config._positive_int, "positive_int")
_seconds = _argument(config._non_negative_float, "seconds")


def _client_config_file(text: str) -> Any:
    from .._clientconf import read_properties_file

    return _argument(read_properties_file, "client_config")(text)


_client_property = _argument(config._client_property, "client_property")


def _add_client_options(parser: Any, cluster: str) -> None:
    parser.add_argument("--client-config", type=_client_config_file, metavar="FILE",
                        help=f"librdkafka properties of the {cluster} cluster's clients (security.protocol, sasl.*, "
                             "ssl.*): a .properties file, as --kafka-mirror-source-config (docs/secured-clusters.md)")
    parser.add_argument("--client-config-set", type=_client_property, action="append", default=[],
                        metavar="KEY=VALUE", help="one such property, over the file's; repeatable")


def _register_client_config(args: argparse.Namespace, command: str) -> bool:
    """Give every client of ``--bootstrap`` (of each, when it is repeated; here and in the
    stage's child processes) the ``--client-config`` properties; False (after one line on
    stderr) when librdkafka refuses them."""
    from .._clientconf import ClientProperties, check_librdkafka_keys, register

    props = ClientProperties(args.client_config or {}).merged(dict(args.client_config_set))
    if props:
        try:
            check_librdkafka_keys(props)
        except ValueError as exc:
            print(f"kafka-mirror {command}: --client-config / --client-config-set: {exc}", file=sys.stderr)
            return False
        register(args.bootstrap if isinstance(args.bootstrap, str) else ",".join(args.bootstrap), props)
    return True


def _interrupt_on_sigterm() -> None:
    """SIGTERM ends a stage as Ctrl-C does: cleanly, keeping what was measured (the
    last-resort handler of ``_process`` would SIGKILL the stage's processes)."""
    import signal

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def _cmd_produce(args: argparse.Namespace) -> int:
    from ..clusters.base import ClusterError
    from ..clusters.bootstrap import BootstrapCluster
    from ..produce.group import ProducerGroup
    from ..produce.producer import MirrorProducer, ProducerError, TopicLanes
    from ..rundir import write_json_atomic

    if args.duration is None and args.count is None:
        print("kafka-mirror produce: give --duration SECONDS or --count RECORDS (per topic)", file=sys.stderr)
        return 2
    unknown = [t for t in args.compacted or [] if t not in args.topics]
    if unknown:
        print(f"kafka-mirror produce: --compacted {','.join(unknown)}: not among --topics {','.join(args.topics)}",
              file=sys.stderr)
        return 2
    need = config.min_message_size(args.format)
    if args.message_size < need:
        print(f"kafka-mirror produce: --message-size {args.message_size} cannot hold a record of the {args.format} "
              f"format: its metadata takes {need} B; give --message-size {need} or more", file=sys.stderr)
        return 2
    if not _register_client_config(args, "produce"):
        return 2
    run_dir = Path(args.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    source = BootstrapCluster("source", args.bootstrap, connect_timeout=args.connect_timeout,
                              given_by="--bootstrap (HOST:PORT[,...])")
    source.client_options = "--client-config, --client-config-set"  # what an authentication failure names
    try:
        source.start()
        topics = []
        for topic in args.topics:
            n = source.partitions(topic)
            if n is None:
                if not args.partitions:
                    print(f"kafka-mirror produce: topic {topic!r} does not exist on {args.bootstrap}; create it, or "
                          f"give --partitions N to create missing topics", file=sys.stderr)
                    return 2
                source.create_topic(topic, args.partitions)
                n = args.partitions
            topics.append(TopicLanes(topic, n, args.lanes))
        warmup = None
        if args.warmup_topic:
            try:
                warmup = source.ensure_topic(args.warmup_topic)
            except ClusterError as exc:
                print(f"kafka-mirror produce: no warm-up topic ({exc}); the first records carry client start-up "
                      f"latency", file=sys.stderr)
    except ClusterError as exc:
        print(f"kafka-mirror produce: {exc}", file=sys.stderr)
        return 2
    targets = {t.topic: args.naming.target(t.topic) for t in topics}
    _interrupt_on_sigterm()
    producer: MirrorProducer | ProducerGroup
    try:
        if args.processes == 1:
            producer = MirrorProducer(args.bootstrap, format=args.format, message_size=args.message_size,
                                      producer_id=args.producer_id)
        else:
            producer = ProducerGroup(args.bootstrap, processes=args.processes, format=args.format,
                                     message_size=args.message_size, producer_id=args.producer_id,
                                     work_dir=run_dir / f"producers-{int(time.time() * 1000)}")
        result = producer.run(
            topics, rate=args.rate, duration=args.duration, count=args.count, target_names=targets,
            warmup_topic=warmup, progress=lambda p: print(f"producing: {p}", flush=True),
        )
    except ProducerError as exc:
        print(f"kafka-mirror produce: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kafka-mirror produce: interrupted; no manifest written", file=sys.stderr)
        return 130
    manifests = result if isinstance(result, list) else [result]
    for m in manifests:
        m.compacted = [t for t in args.compacted or [] if t in m.topics]
        m.write(run_dir)
        st = m.stats
        slip = st.get("schedule_slip_ms") or {}
        print(f"producer {m.producer_id}: sent {st['sent']}, acked {st['acked']}, failed {st['failed']}, "
              f"{st['achieved_rate_per_topic']} msg/s per topic"
              + (f", schedule slip p50 {slip['p50']} ms p99 {slip['p99']} ms max {slip['max']} ms" if slip else ""))
    write_json_atomic(run_dir / f"produced-{manifests[0].producer_id}.json",
                      {"producers": [m.producer_id for m in manifests], "finished": time.time()})
    print(f"manifests: {', '.join(str(run_dir / f'manifest-{m.producer_id}.json') for m in manifests)}")
    return 0


def _cmd_capture(args: argparse.Namespace) -> int:
    from ..capture.target import Capture, CaptureError

    if args.topics_map:
        mapping = args.topics_map
    elif args.topics:
        mapping = {t: args.naming.target(t) for t in args.topics}
    else:
        print("kafka-mirror capture: give --topics TOPIC[,...] (with --naming) or --topics-map SOURCE=TARGET[,...]",
              file=sys.stderr)
        return 2
    if not _register_client_config(args, "capture"):
        return 2
    capture = Capture(args.bootstrap, args.run_dir, mapping, drain_timeout=args.drain_timeout, settle=args.settle,
                      startup_timeout=args.startup_timeout, processes=args.processes, producers=args.producers)
    _interrupt_on_sigterm()
    try:
        capture.start()
        print(f"capturing {', '.join(f'{t} (from {s})' for s, t in mapping.items())} from {args.bootstrap} into "
              f"{args.run_dir}; waiting for {args.producers} producer(s) to finish", flush=True)
        status = capture.wait(timeout=args.timeout or None)
    except CaptureError as exc:
        print(f"kafka-mirror capture: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        capture.stop()
        print("kafka-mirror capture: interrupted; the segments written so far are kept", file=sys.stderr)
        return 130
    print(f"capture ended ({status['reason']}): {status['records']} records, {status['ours']} ours, "
          f"{status['foreign']} foreign, {status['segments']} segments")
    return 0


def add_stage_commands(sub: Any) -> None:
    """Add ``produce`` and ``capture`` to the ``kafka-mirror`` subcommands."""
    from ..produce.records import FORMATS
    from ..replicators import NamingPolicy

    p = sub.add_parser("produce", help="produce test records to a source cluster; writes manifests to a run directory",
                       description="Produce sequence-numbered test records and write the manifests (what the "
                                   "source acknowledged) into RUN_DIR, for 'kafka-mirror capture' and "
                                   "'kafka-mirror verify'.")
    p.add_argument("--bootstrap", required=True, metavar="HOST:PORT[,...]", help="source cluster")
    p.add_argument("--topics", required=True, type=_topics, metavar="TOPIC[,...]", help="source topics")
    p.add_argument("--run-dir", required=True, metavar="DIR", help="the run directory (shared with capture / verify)")
    p.add_argument("--rate", required=True, type=parse_rate, metavar="RATE",
                   help="msg/s per topic | SECONDS:RATE,... (a profile) | unthrottled")
    p.add_argument("--duration", type=_seconds, metavar="SECONDS", help="how long (with --rate: rate x duration "
                   "records per topic)")
    p.add_argument("--count", type=int, metavar="RECORDS", help="records per topic")
    p.add_argument("--format", choices=FORMATS, default="headers", help="record format. Default: %(default)r")
    p.add_argument("--message-size", type=_positive_int, default=200, metavar="BYTES",
                   help="record size, metadata included. Default: %(default)r")
    p.add_argument("--compacted", type=_topics, default=None, metavar="TOPIC[,...]",
                   help="those of --topics with cleanup.policy=compact, recorded in the manifests: the capture and "
                        "the verifier expect the latest record of each lane (a key) there, not every one")
    p.add_argument("--lanes", type=_positive_int, default=None, metavar="N",
                   help="lanes per topic (default: one per partition)")
    p.add_argument("--processes", type=_positive_int, default=1, metavar="N",
                   help="producer processes sharing the schedule, each at RATE / N. Default: %(default)r")
    p.add_argument("--producer-id", default=None, metavar="ID", help="producer id (ID-0.. with --processes)")
    p.add_argument("--partitions", type=_positive_int, default=None, metavar="N",
                   help="create missing topics with N partitions (default: missing topics are an error)")
    p.add_argument("--naming", type=_naming, default=NamingPolicy(), metavar="POLICY",
                   help="target topic names, recorded in the manifests: identity | prefix:PREFIX. Default: identity")
    p.add_argument("--warmup-topic", default=DEFAULT_WARMUP, metavar="TOPIC",
                   help="a topic outside the mirrored set for one warm-up record ('' for none). Default: %(default)r")
    p.add_argument("--connect-timeout", type=_seconds, default=10.0, metavar="SECONDS",
                   help="limit for the source to answer. Default: %(default)r")
    _add_client_options(p, "source")
    p.set_defaults(func=_cmd_produce)

    c = sub.add_parser("capture", help="capture the target topics into a run directory until the producers are done",
                       description="Read the target topics into Parquet segments in RUN_DIR; stop once --producers "
                                   "'kafka-mirror produce' commands finished and every acknowledged record arrived, "
                                   "or nothing arrived for --drain-timeout seconds.")
    c.add_argument("--bootstrap", required=True, metavar="HOST:PORT[,...]", help="target cluster")
    c.add_argument("--run-dir", required=True, metavar="DIR", help="the run directory (shared with produce / verify)")
    c.add_argument("--topics", type=_topics, metavar="TOPIC[,...]", help="source topics, named on the target by --naming")
    c.add_argument("--naming", type=_naming, default=NamingPolicy(), metavar="POLICY",
                   help="target topic names: identity | prefix:PREFIX. Default: identity")
    c.add_argument("--topics-map", type=parse_topics_map, metavar="SRC=TGT[,...]",
                   help="source topic = target topic pairs (instead of --topics / --naming)")
    c.add_argument("--producers", type=_positive_int, default=1, metavar="N",
                   help="'kafka-mirror produce' commands to wait for. Default: %(default)r")
    c.add_argument("--processes", type=_positive_int, default=1, metavar="N",
                   help="capture processes, each reading the partitions P with P %% N == its number. "
                        "Default: %(default)r")
    c.add_argument("--drain-timeout", type=_seconds, default=30.0, metavar="SECONDS",
                   help="after the producers finished, stop when nothing arrived for this long. Default: %(default)r")
    c.add_argument("--settle", type=_seconds, default=0.5, metavar="SECONDS",
                   help="keep capturing this long after every acknowledged record arrived. Default: %(default)r")
    c.add_argument("--startup-timeout", type=_seconds, default=30.0, metavar="SECONDS",
                   help="limit for the capture processes to start. Default: %(default)r")
    c.add_argument("--timeout", type=_seconds, default=0.0, metavar="SECONDS",
                   help="stop after this long whatever happens (0: no limit). Default: %(default)r")
    _add_client_options(c, "target")
    c.set_defaults(func=_cmd_capture)
