"""Replicator backends, chosen by a spec string (``--kafka-mirror-replicator``).

==========================  ========================================================"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._checkpoints import MM2_DEFAULTS, CheckpointSettings
from .base import NamingPolicy, Replicator, ReplicatorError, parse_naming
from .reference.behaviour import PRESETS, Behaviour, split_behaviour
from .reference.knobs import FaultLedger, Knobs, parse_knobs

if TYPE_CHECKING:
    from ..clusters.base import Cluster

__all__ = [
    "MM2_DEFAULTS",
    "Behaviour",
    "CheckpointSettings",
    "FaultLedger",
    "Knobs",
    "NamingPolicy",
    "Replicator",
    "ReplicatorError",
    "ReplicatorOptions",
    "ReplicatorSpec",
    "make_replicator",
    "parse_knobs",
    "parse_naming",
    "parse_replicator_spec",
]

ACCEPTED = (
    "reference | mm2[:KAFKA_HOME] | mm2:container:IMAGE | command:TEMPLATE (placeholders {source} {target} "
    "{topics} {workdir}) | external:POLICY (identity | prefix:PREFIX) | reference:KNOBS (faults in every topic, "
    "e.g. reference:drop=0.01,seed=7; behaviour like a real replicator: like=mm2, discovery_delay=S, "
    "rebalance_pause=S, restart_delay=S, discovery_interval=S)"
)


@dataclass(frozen=True)
class ReplicatorSpec:
    kind: str
    arg: str = ""

    @property
    def faults(self) -> Knobs:
        """The fault knobs of a ``reference:KNOBS`` spec (none for other specs)."""
        rest = split_behaviour(self.arg)[1] if self.kind == "reference" else ""
        return parse_knobs(rest) if rest else Knobs()

    @property
    def behaviour(self) -> Behaviour:
        """How a ``reference:`` spec discovers, rebalances and restarts (``like=mm2``, ...)."""
        return split_behaviour(self.arg)[0] if self.kind == "reference" else Behaviour()

    def __str__(self) -> str:
        return f"{self.kind}:{self.arg}" if self.arg else self.kind


class _KnobsError(ValueError):
    """A bad fault knob: its message already says what is accepted (see Knobs)."""


def parse_replicator_spec(text: str) -> ReplicatorSpec:
    """Parse a replicator spec; raises ValueError naming the accepted forms."""
    text = text.strip()
    kind, _, arg = text.partition(":")
    try:
        if kind == "reference":
            if arg:
                try:
                    parse_knobs(split_behaviour(arg)[1])
                except ValueError as exc:
                    raise _KnobsError(f"replicator spec {text!r}: {exc}") from None
            return ReplicatorSpec("reference", arg)
        if kind == "mm2":
            if not arg:
                return ReplicatorSpec("mm2")  # the path comes from --kafka-mirror-kafka-home
            if arg.startswith("container:"):
                from .mm2 import mm2_container_script

                mm2_container_script(arg[len("container:"):].strip())
                return ReplicatorSpec("mm2", "container:" + arg[len("container:"):].strip())
            from ..clusters.kafka_home import check_kafka_home

            return ReplicatorSpec("mm2", str(check_kafka_home(arg, script="connect-mirror-maker.sh")))
        if kind == "command":
            from .command import check_template

            check_template(arg)
            return ReplicatorSpec("command", arg)
        if kind == "external":
            return ReplicatorSpec("external", str(parse_naming(arg)))
    except _KnobsError:
        raise
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}; accepted: {ACCEPTED}") from None
    raise ValueError(f"unknown replicator spec {text!r}; accepted: {ACCEPTED}")


@dataclass(frozen=True)
class ReplicatorOptions:
    """What a backend needs besides the two clusters; the fixtures fill it from Settings."""

    topic_prefix: str = "km"
    naming: NamingPolicy | None = None  # None: the backend's (MM2: from its policy; others: identity)
    startup_timeout: float | None = None  # None: the backend's default (MM2: 180 s, others: 60 s)
    properties: tuple[tuple[str, str], ...] = ()
    kafka_home: str = ""
    warmup_topic: str = "kafka-mirror-warmup"


def _startup(opts: ReplicatorOptions, default: float) -> float:
    return default if opts.startup_timeout is None else opts.startup_timeout


def _reference(spec: ReplicatorSpec, source: Cluster, target: Cluster, workdir: str, opts: ReplicatorOptions) -> Replicator:
    from .reference import ReferenceReplicator

    return ReferenceReplicator(
        source.bootstrap_servers,
        target.bootstrap_servers,
        workdir,
        topics=f"^{re.escape(opts.topic_prefix)}-",
        naming=opts.naming or NamingPolicy(),
        startup_timeout=_startup(opts, 60.0),
        warmup_topic=opts.warmup_topic,
        faults=spec.faults,
        behaviour=spec.behaviour,
        properties=opts.properties,
    )


def _mm2(spec: ReplicatorSpec, source: Cluster, target: Cluster, workdir: str, opts: ReplicatorOptions) -> Replicator:
    from ..clusters.kafka_home import check_kafka_home
    from .mm2 import STARTUP_TIMEOUT, MirrorMaker2

    image = spec.arg[len("container:"):] if spec.arg.startswith("container:") else None
    home = None
    if image is None:
        home = spec.arg or opts.kafka_home
        if not home:
            raise ReplicatorError(
                "the spec 'mm2' has no path and --kafka-mirror-kafka-home (env KAFKA_MIRROR_KAFKA_HOME) is not set; "
                "give mm2:KAFKA_HOME, mm2:container:IMAGE or set the option"
            )
        try:
            check_kafka_home(home, script="connect-mirror-maker.sh")
        except ValueError as exc:
            raise ReplicatorError(str(exc)) from None
    return MirrorMaker2(
        source, target, workdir, topic_prefix=opts.topic_prefix, home=home, image=image,
        overrides=opts.properties, naming=opts.naming, startup_timeout=_startup(opts, STARTUP_TIMEOUT),
    )


def _command(spec: ReplicatorSpec, source: Cluster, target: Cluster, workdir: str, opts: ReplicatorOptions) -> Replicator:
    from .command import CommandReplicator

    return CommandReplicator(
        source, target, workdir, template=spec.arg, topic_prefix=opts.topic_prefix,
        naming=opts.naming or NamingPolicy(), startup_timeout=_startup(opts, 60.0),
    )


def _external(spec: ReplicatorSpec, source: Cluster, target: Cluster, workdir: str, opts: ReplicatorOptions) -> Replicator:
    from .external import ExternalReplicator

    naming = parse_naming(spec.arg)
    if opts.naming is not None and opts.naming != naming:
        raise ReplicatorError(
            f"--kafka-mirror-naming {opts.naming} contradicts the spec external:{naming}; the spec names the policy"
        )
    return ExternalReplicator(
        source, target, naming=naming, topic_prefix=opts.topic_prefix, startup_timeout=_startup(opts, 60.0)
    )


BACKENDS: dict[str, Callable[[ReplicatorSpec, Cluster, Cluster, str, ReplicatorOptions], Replicator]] = {
    "reference": _reference,
    "mm2": _mm2,
    "command": _command,
    "external": _external,
}


def make_replicator(
    spec: ReplicatorSpec | str,
    source: Cluster,
    target: Cluster,
    workdir: str | os.PathLike[str],
    options: ReplicatorOptions | None = None,
) -> Replicator:
    """Build (not start) the replicator a spec names, between two started clusters."""
    if isinstance(spec, str):
        spec = parse_replicator_spec(spec)
    return BACKENDS[spec.kind](spec, source, target, os.fspath(workdir), options or ReplicatorOptions())
