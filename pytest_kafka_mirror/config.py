"""One settings object built from command-line options, ini keys and environment.

Precedence: ``--kafka-mirror-*`` option > ``kafka_mirror_*`` ini key > ``KAFKA_MIRROR_*``
environment variable > default.  Every value is validated by the same parser whatever its
source, and an error names the source it came from and the accepted forms.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .clusters import ClusterSpec, parse_cluster_spec
from .records import FORMATS
from .replicators import NamingPolicy, ReplicatorSpec, parse_naming, parse_replicator_spec

__all__ = ["OPTIONS", "Option", "Settings", "SettingsError", "resolve_settings"]


class SettingsError(ValueError):
    """A setting has a value that cannot be used; the message names where it came from."""


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{text!r} must be a positive number")
    return v


def _non_negative_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{text!r} must be zero or a positive number")
    return v


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None
    if v <= 0:
        raise ValueError(f"{text!r} must be a positive whole number")
    return v


def _format(text: str) -> str:
    if text not in FORMATS:
        raise ValueError(f"{text!r} is not a record format; accepted: {' | '.join(FORMATS)}")
    return text


def _topic_prefix(text: str) -> str:
    if not text or not all(c.isalnum() or c in "._-" for c in text) or len(text) > 40:
        raise ValueError(f"{text!r} must be 1-40 characters of letters, digits, '.', '_' or '-'")
    return text


def _spark_master(text: str) -> str:
    text = text.strip()
    if not (text.startswith(("local", "spark://", "yarn", "k8s://", "mesos://")) or text == "yarn"):
        raise ValueError(f"{text!r} is not a Spark master URL; e.g. local[2], spark://HOST:7077, yarn, k8s://URL")
    return text


@dataclass(frozen=True)
class Option:
    """One setting: its flag, ini key and environment variable derive from ``name``."""

    name: str  # e.g. "source" -> --kafka-mirror-source, kafka_mirror_source, KAFKA_MIRROR_SOURCE
    metavar: str
    default: str
    help: str
    parse: Callable[[str], Any]

    @property
    def flag(self) -> str:
        return f"--kafka-mirror-{self.name}"

    @property
    def ini(self) -> str:
        return f"kafka_mirror_{self.name.replace('-', '_')}"

    @property
    def env(self) -> str:
        return f"KAFKA_MIRROR_{self.name.replace('-', '_').upper()}"

    @property
    def dest(self) -> str:
        return f"kafka_mirror_{self.name.replace('-', '_')}"

    def argparse_type(self, text: str) -> Any:
        """``type=`` for argparse: bad values fail while options are parsed."""
        try:
            return self.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None


OPTIONS: list[Option] = [
    Option("source", "SPEC", "tansu", "Source cluster: tansu (embedded broker) | bootstrap:HOST:PORT[,...].",
           parse_cluster_spec),
    Option("target", "SPEC", "tansu", "Target cluster, same forms as the source.", parse_cluster_spec),
    Option("replicator", "SPEC", "reference",
           "Replicator under test: reference (built-in mirror process) | reference:KNOBS, the same injecting "
           "faults into every topic (e.g. reference:drop=0.01,seed=7).",
           parse_replicator_spec),
    Option("naming", "POLICY", "identity",
           "Target topic naming: identity | prefix:PREFIX (e.g. prefix:source. as MM2's default policy).",
           parse_naming),
    Option("spark-master", "MASTER", "local[2]", "Spark master for the verification job.", _spark_master),
    Option("report-dir", "DIR", ".kafka-mirror/reports", "Directory for per-test JSON reports (relative to rootdir).",
           str),
    Option("drain-timeout", "SECONDS", "30",
           "After producing, stop capturing when no record arrived for this long.", _positive_float),
    Option("settle", "SECONDS", "0.5",
           "Keep capturing this long after every acknowledged record arrived (late duplicates).",
           _non_negative_float),
    Option("startup-timeout", "SECONDS", "60",
           "Limit for clusters and replicator to become ready and for target topics to appear.", _positive_float),
    Option("topic-prefix", "PREFIX", "km", "Prefix of every test topic; the replicator mirrors ^PREFIX-.*.",
           _topic_prefix),
    Option("format", "FORMAT", "headers", "Default record format of mirror_producer: headers | body.", _format),
    Option("message-size", "BYTES", "200",
           "Default record size of mirror_producer, metadata included.", _positive_int),
]

OPTIONS_BY_NAME = {o.name: o for o in OPTIONS}


@dataclass(frozen=True)
class Settings:
    source: ClusterSpec
    target: ClusterSpec
    replicator: ReplicatorSpec
    naming: NamingPolicy
    spark_master: str
    report_dir: Path
    drain_timeout: float
    settle: float
    startup_timeout: float
    topic_prefix: str
    format: str
    message_size: int
    #: option name -> where its value came from ("default", "--flag", "ini key", "env VAR")
    sources: dict[str, str] = field(default_factory=dict)

    def non_default(self) -> dict[str, str]:
        return {k: v for k, v in self.sources.items() if v != "default"}


def resolve_settings(
    cli: dict[str, Any],
    ini: Callable[[str], str | None],
    env: dict[str, str] | None = None,
    rootdir: Path | None = None,
) -> Settings:
    """Build Settings from parsed CLI values (already validated, None when absent), an ini
    getter (None/empty when absent) and the environment."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for opt in OPTIONS:
        value = cli.get(opt.dest)
        if value is not None:
            values[opt.dest], sources[opt.name] = value, opt.flag
            continue
        for origin, raw in ((f"ini key {opt.ini}", ini(opt.ini)), (f"env {opt.env}", env.get(opt.env))):
            if raw is not None and str(raw).strip() != "":
                try:
                    values[opt.dest] = opt.parse(str(raw).strip())
                except ValueError as exc:
                    raise SettingsError(f"{origin}: {exc}") from None
                sources[opt.name] = origin
                break
        else:
            values[opt.dest], sources[opt.name] = opt.parse(opt.default), "default"
    report_dir = Path(values["kafka_mirror_report_dir"])
    if rootdir is not None and not report_dir.is_absolute():
        report_dir = rootdir / report_dir
    return Settings(
        source=values["kafka_mirror_source"],
        target=values["kafka_mirror_target"],
        replicator=values["kafka_mirror_replicator"],
        naming=values["kafka_mirror_naming"],
        spark_master=values["kafka_mirror_spark_master"],
        report_dir=report_dir,
        drain_timeout=values["kafka_mirror_drain_timeout"],
        settle=values["kafka_mirror_settle"],
        startup_timeout=values["kafka_mirror_startup_timeout"],
        topic_prefix=values["kafka_mirror_topic_prefix"],
        format=values["kafka_mirror_format"],
        message_size=values["kafka_mirror_message_size"],
        sources=sources,
    )
