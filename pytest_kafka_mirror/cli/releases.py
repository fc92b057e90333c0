"""``kafka-mirror kafka install VERSION`` and ``kafka-mirror kafka list``: the cached Apache
Kafka releases behind ``kafka:VERSION``, ``mm2:VERSION`` and ``mm1:VERSION``
(``clusters/kafka_dist.py``)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from ..config import OPTIONS_BY_NAME

__all__ = ["add_kafka_commands"]


def _cache(args: argparse.Namespace) -> Any:
    from ..clusters.kafka_dist import cache_dir

    return cache_dir(args.cache)


#: exit status of bad input (commands.EXIT_BAD_INPUT; not imported: commands imports this module)
EXIT_BAD_INPUT = 2


def _cmd_install(args: argparse.Namespace) -> int:
    from ..clusters.kafka_dist import KafkaInstallError, format_version, parse_version, release

    try:
        parse_version(args.version)
    except ValueError as exc:
        print(f"kafka-mirror kafka install: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    cache = _cache(args)
    t0 = time.monotonic()
    try:
        rel = release(args.version, cache, log=lambda text: print(f"kafka-mirror: {text}", file=sys.stderr, flush=True))
    except KafkaInstallError as exc:
        print(f"kafka-mirror kafka install: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    took = time.monotonic() - t0
    have = ", ".join(name for name, what in (("broker", "broker"), ("MirrorMaker 2", "mm2"), ("MirrorMaker 1", "mm1"))
                     if rel.has(what))
    print(f"Apache Kafka {format_version(rel.version)} in {rel.home} ({have}) ({took:.1f} s)")
    missing = [rel.why_missing(c) for c in ("mm2",) if not rel.has(c)]
    for why in missing:
        print(f"  {why}")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    from ..clusters.kafka_dist import cached_releases

    cache = _cache(args)
    rows = cached_releases(cache)
    if not rows:
        print(f"no Apache Kafka release cached in {cache} (kafka-mirror kafka install VERSION)")
        return 0
    print(f"{cache}:")
    for rel, manifest in rows:
        parts = [c for c in ("broker", "mm2", "mm1") if rel.has(c)]
        size = manifest.get("bytes", 0) / 1e6
        print(f"  {rel.version_text:<8} {', '.join(parts):<17} {manifest.get('jars', '?')} jars, {size:.0f} MB, "
              f"installed {manifest.get('installed', '?')} in {manifest.get('seconds', '?')} s")
    return 0


def add_kafka_commands(sub: Any, add_option: Callable[..., None]) -> None:
    """The ``kafka`` command and its subcommands, on ``kafka-mirror``'s subparsers
    (``add_option``: how ``commands`` adds one of the plugin's options to a command)."""
    k = sub.add_parser("kafka", help="Apache Kafka releases from Maven Central, cached for kafka:/mm2:/mm1:VERSION",
                       description="Apache Kafka releases resolved from Maven Central with mvn (broker, Connect, "
                                   "MirrorMaker 2), cached per version and used offline afterwards.")
    ksub = k.add_subparsers(dest="kafka_command", required=True)
    i = ksub.add_parser("install", help="resolve a release into the cache (nothing to do when it is there)")
    i.add_argument("version", metavar="VERSION", help="an Apache Kafka release, e.g. 4.3.1")
    add_option(i, "--cache", OPTIONS_BY_NAME["kafka-cache"])
    i.set_defaults(func=_cmd_install)
    ls = ksub.add_parser("list", help="the cached releases")
    add_option(ls, "--cache", OPTIONS_BY_NAME["kafka-cache"])
    ls.set_defaults(func=_cmd_list)
