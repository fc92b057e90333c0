"""Replicator backends, chosen by a spec string (``--kafka-mirror-replicator``).

==============================  ======================================================
``reference[:KNOBS]``           the built-in mirror process (``reference/``), the default
``mm2:VERSION``                 MirrorMaker 2 of an Apache Kafka release the plugin resolves
                                from Maven Central into its cache (``clusters/kafka_dist.py``)
``mm2[:KAFKA_HOME]``            MirrorMaker 2 from an unpacked distribution (``mm2.py``)
``mm2:container:IMAGE``         MirrorMaker 2 in a container
``mm2:...,properties=FILE``     any of the three with your own mm2.properties as the base
                                of the rendered one (``mm2_user.py``)
``mm1:VERSION`` / ``mm1:PATH``  the legacy MirrorMaker of Kafka <= 3.9 (``mm1.py``)
``command:TEMPLATE``            any replicator started by a command (``command.py``)
``external:POLICY``             already running (``external.py``)
==============================  ======================================================

A backend is one module; adding one means adding it and one entry in :data:`BACKENDS`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._checkpoints import MM2_DEFAULTS, CheckpointSettings
from .base import NamingPolicy, Replicator, ReplicatorError, parse_naming
from .commits import DuplicatesBound, duplicates_bound
from .mm2_user import PROPERTIES_SUFFIX, split_properties_suffix
from .reference.behaviour import PRESETS, Behaviour, split_behaviour
from .reference.knobs import FaultLedger, Knobs, parse_knobs

if TYPE_CHECKING:
    from ..clusters.base import Cluster
    from ..clusters.kafka_dist import KafkaRelease

__all__ = [
    "MM2_DEFAULTS",
    "Behaviour",
    "CheckpointSettings",
    "DuplicatesBound",
    "FaultLedger",
    "Knobs",
    "NamingPolicy",
    "Replicator",
    "ReplicatorError",
    "ReplicatorOptions",
    "ReplicatorSpec",
    "duplicates_bound",
    "make_replicator",
    "parse_knobs",
    "parse_naming",
    "parse_replicator_spec",
]

ACCEPTED = (
    "reference | mm2:VERSION (e.g. mm2:4.3.1, resolved from Maven Central) | mm2[:KAFKA_HOME] | mm2:container:IMAGE | "
    "mm2:VERSION|KAFKA_HOME|container:IMAGE,properties=FILE (your mm2.properties as the base) | "
    "mm2-connect:VERSION|KAFKA_HOME[,workers=N][,strimzi=FILE] (MM2's connectors on a Kafka Connect cluster of N "
    "workers; FILE: your Strimzi KafkaMirrorMaker2 resource, run as written) | "
    "mm1:VERSION (the legacy MirrorMaker, Kafka <= 3.9) | command:TEMPLATE (placeholders {source} {target} "
    "{topics} {workdir}) | external:POLICY (identity | prefix:PREFIX) | reference:KNOBS (faults in every topic, "
    "e.g. reference:drop=0.01,seed=7; behaviour like a real replicator: like=mm2, discovery_delay=S, "
    "rebalance_pause=S, restart_delay=S, discovery_interval=S)"
)


#: the workers of a Strimzi resource that does not say (the operator's default ``spec.replicas``)
STRIMZI_REPLICAS = 3


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

    @property
    def release_arg(self) -> str:
        """An ``mm2:`` spec's release (``4.3.1``, a KAFKA_HOME, ``container:IMAGE``) without
        its ``,properties=FILE``; an ``mm2-connect:`` one's without its ``,workers=N``; the
        whole argument of other specs."""
        if self.kind == "mm2-connect":
            return self.arg.partition(",")[0]
        return split_properties_suffix(self.arg)[0] if self.kind == "mm2" else self.arg

    @property
    def strimzi_file(self) -> str | None:
        """Your KafkaMirrorMaker2 resource of an ``mm2-connect:...,strimzi=FILE`` spec (an absolute path), else None."""
        return connect_options(self.arg.partition(",")[2])[1] if self.kind == "mm2-connect" else None

    @property
    def properties_file(self) -> str | None:
        """Your mm2.properties of an ``mm2:...,properties=FILE`` spec (an absolute path), else None."""
        return split_properties_suffix(self.arg)[1] if self.kind == "mm2" else None

    def __str__(self) -> str:
        return f"{self.kind}:{self.arg}" if self.arg else self.kind


class _KnobsError(ValueError):
    """A bad fault knob: its message already says what is accepted (see Knobs)."""


class _FileError(ValueError):
    """Your mm2.properties cannot be read or mapped: its message names the file and why."""


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
            return _mm2_spec(arg)
        if kind.startswith("mm2" + PROPERTIES_SUFFIX):
            raise ValueError(f"give the release before {PROPERTIES_SUFFIX}: mm2:VERSION{PROPERTIES_SUFFIX}FILE or "
                             f"mm2:KAFKA_HOME{PROPERTIES_SUFFIX}FILE")
        if kind == "mm2-connect":
            return _mm2_connect_spec(arg)
        if kind == "mm1":
            if not arg:
                raise ValueError("mm1 needs a release: mm1:VERSION (e.g. mm1:3.9.1) or mm1:KAFKA_HOME")
            if PROPERTIES_SUFFIX in arg:
                raise ValueError(f"{PROPERTIES_SUFFIX}FILE is for mm2: specs (your mm2.properties); the legacy "
                                 "MirrorMaker's settings go to --kafka-mirror-replicator-properties")
            return ReplicatorSpec("mm1", _release_arg(arg, "mm1"))
        if kind == "command":
            from .command import check_template

            check_template(arg)
            return ReplicatorSpec("command", arg)
        if kind == "external":
            return ReplicatorSpec("external", str(parse_naming(arg)))
    except _KnobsError:
        raise
    except _FileError as exc:
        raise _FileError(f"{text!r}: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}; accepted: {ACCEPTED}") from None
    raise ValueError(f"unknown replicator spec {text!r}; accepted: {ACCEPTED}")


def _mm2_spec(arg: str) -> ReplicatorSpec:
    """``mm2[:VERSION|:KAFKA_HOME|:container:IMAGE][,properties=FILE]``, normalised: a
    resolved KAFKA_HOME, the absolute path of FILE, which is read now (a file that cannot
    be read or mapped onto the session's flow fails before anything starts)."""
    if not arg:
        return ReplicatorSpec("mm2")  # the path comes from --kafka-mirror-kafka-home
    release, path = split_properties_suffix(arg)
    if path is not None and not release.strip():
        raise ValueError(f"give the release before {PROPERTIES_SUFFIX}: mm2:VERSION{PROPERTIES_SUFFIX}FILE or "
                         f"mm2:KAFKA_HOME{PROPERTIES_SUFFIX}FILE")
    if release.startswith("container:"):
        from .mm2 import mm2_container_script

        mm2_container_script(release[len("container:"):].strip())
        release = "container:" + release[len("container:"):].strip()
    else:
        release = _release_arg(release, "mm2")
    if path is None:
        return ReplicatorSpec("mm2", release)
    if not path.strip():
        raise ValueError(f"{PROPERTIES_SUFFIX} needs a file: your mm2.properties")
    from .mm2_user import read_user_properties

    try:
        user = read_user_properties(path.strip())
    except ValueError as exc:
        raise _FileError(str(exc)) from None
    return ReplicatorSpec("mm2", f"{release}{PROPERTIES_SUFFIX}{user.path}")


def _mm2_connect_spec(arg: str) -> ReplicatorSpec:
    """``mm2-connect:VERSION|KAFKA_HOME[,workers=N][,strimzi=FILE]``, normalised (a resolved
    KAFKA_HOME and FILE); the resource is read now, so that a bad one fails before anything starts."""
    release, _, options = arg.partition(",")
    if not release.strip():
        raise ValueError("mm2-connect needs a release: mm2-connect:VERSION (e.g. mm2-connect:4.3.1) or "
                         "mm2-connect:KAFKA_HOME")
    if release.strip().startswith("container:"):
        raise ValueError("mm2-connect runs a release's Connect workers (mm2-connect:VERSION or KAFKA_HOME), not an image")
    workers, strimzi = connect_options(options)
    normalised = _release_arg(release, "mm2") + (f",workers={workers}" if workers is not None else "")
    if strimzi is not None:
        from .strimzi import read_strimzi

        try:
            normalised += f",strimzi={read_strimzi(strimzi).user.path}"
        except ValueError as exc:
            raise _FileError(str(exc)) from None
    return ReplicatorSpec("mm2-connect", normalised)


def connect_options(options: str) -> tuple[int | None, str | None]:
    """``(N, FILE)`` of ``workers=N`` and ``strimzi=FILE`` (the last option: a file name may
    hold commas), each None when not given; ValueError naming the option otherwise."""
    workers = None
    head, sep, strimzi = options.partition("strimzi=")
    if sep and head.strip() and not head.rstrip().endswith(","):
        raise ValueError(f"unknown mm2-connect option {options!r} (accepted: workers=N, strimzi=FILE)")
    if sep and not strimzi.strip():
        raise ValueError("strimzi=: give the file of your KafkaMirrorMaker2 resource, e.g. strimzi=mm2.yaml")
    for item in filter(None, (o.strip() for o in head.split(","))):
        key, eq, value = item.partition("=")
        if key.strip() != "workers" or not eq:
            raise ValueError(f"unknown mm2-connect option {item!r} (accepted: workers=N, strimzi=FILE)")
        try:
            workers = int(value)
        except ValueError:
            raise ValueError(f"workers={value!r}: give a whole number of Connect workers, e.g. workers=3") from None
        if not 1 <= workers <= 9:
            raise ValueError(f"workers={workers}: between 1 and 9 Connect workers (each a JVM on this machine)")
    return workers, (strimzi.strip() if sep else None)


def _release_arg(arg: str, component: str) -> str:
    """A release version as it is (``4.3.1``, checked), or the resolved path of an
    unpacked distribution that has ``component``."""
    from ..clusters.kafka_dist import MM1_UNTIL, format_version, parse_version, release_at

    arg = arg.strip()
    if arg[:1].isdigit():
        version = parse_version(arg)
        if component == "mm1" and version >= MM1_UNTIL:
            raise ValueError(f"the legacy MirrorMaker (kafka.tools.MirrorMaker) ended with Kafka 3.9, "
                             f"{format_version(version)} has none: use mm2:{arg}")
        return arg
    return str(release_at(arg, need=component).home)


def _release(spec: ReplicatorSpec, opts: ReplicatorOptions, component: str) -> KafkaRelease:
    """The release a ``mm2:`` / ``mm1:`` spec names: a cached version (installed on first
    use), an unpacked distribution, or ``--kafka-mirror-kafka-home``."""
    from ..clusters.kafka_dist import KafkaInstallError, cache_dir, release, release_at

    arg = spec.release_arg or opts.kafka_home
    if not arg:
        raise ReplicatorError(
            f"the spec '{spec.kind}' has no release and --kafka-mirror-kafka-home (env KAFKA_MIRROR_KAFKA_HOME) is "
            f"not set; give {spec.kind}:VERSION (e.g. {spec.kind}:{'3.9.1' if component == 'mm1' else '4.3.1'}), "
            f"{spec.kind}:KAFKA_HOME or set the option"
        )
    try:
        if arg[:1].isdigit():
            return release(arg, cache_dir(opts.kafka_cache or None), need=component)
        return release_at(arg, need=component)
    except (KafkaInstallError, ValueError) as exc:
        raise ReplicatorError(str(exc)) from None


@dataclass(frozen=True)
class ReplicatorOptions:
    """What a backend needs besides the two clusters; the fixtures fill it from Settings."""

    topic_prefix: str = "km"
    #: the session's topic prefix (--kafka-mirror-topic-prefix), which ``topic_prefix`` (a
    #: worker's) starts with: what a replicator the plugin does not configure must take
    #: (``external:``'s readiness hint); None: ``topic_prefix``
    session_prefix: str | None = None
    naming: NamingPolicy | None = None  # None: the backend's (MM2: from its policy; others: identity)
    startup_timeout: float | None = None  # None: the backend's default (MM2: 180 s, others: 60 s)
    properties: tuple[tuple[str, str], ...] = ()
    #: where each of ``properties`` was given (the key as written -> e.g. "the test's
    #: marker", "--kafka-mirror-replicator-properties"); failure messages quote it
    origins: tuple[tuple[str, str], ...] = ()
    kafka_home: str = ""
    kafka_cache: str = ""  # where mm2:VERSION / mm1:VERSION releases are cached ("" = the default)
    warmup_topic: str = "kafka-mirror-warmup"
    #: the largest record the session may produce (mm2 / mm1 size their clients for it); None: Kafka's default
    max_record_bytes: int | None = None
    #: the state of the replicator this one replaces (an in-place upgrade): MM2's Connect
    #: group and internal topics, MM1's consumer group; None: a new one
    instance: str | None = None
    #: (source alias, target alias) of the flow, as MM2 names its clusters; a remote topic
    #: on the target is ``SOURCE_ALIAS.TOPIC`` under DefaultReplicationPolicy (mm2, reference)
    aliases: tuple[str, str] = ("source", "target")
    #: the topic filter (a regex matched in full) instead of ``^PREFIX-.*``; a topology of
    #: several flows gives :func:`~.mm2.remote_aware_regex` (mm2, reference)
    topics: str | None = None
    #: an ``external:`` replicator's lifecycle commands, ``(verb, shell command)`` (``external.VERBS``)
    commands: tuple[tuple[str, str], ...] = ()
    #: where an ``external:`` replicator's Connect states are read: a status topic on the target, or a REST URL
    status: str | None = None


def _startup(opts: ReplicatorOptions, default: float) -> float:
    return default if opts.startup_timeout is None else opts.startup_timeout


def _reference(spec: ReplicatorSpec, source: Cluster, target: Cluster, workdir: str, opts: ReplicatorOptions) -> Replicator:
    from .mm2 import is_tansu
    from .reference import ReferenceReplicator

    return ReferenceReplicator(
        source.bootstrap_servers,
        target.bootstrap_servers,
        workdir,
        topics=opts.topics or f"^{re.escape(opts.topic_prefix)}-",
        naming=opts.naming,
        aliases=opts.aliases,
        startup_timeout=_startup(opts, 60.0),
        warmup_topic=opts.warmup_topic,
        faults=spec.faults,
        behaviour=spec.behaviour,
        # as for MM2 (mm2.render_mm2_properties): Tansu reports every topic config as a
        # default, so the topic-config sync takes the source's reported configs
        properties=(((f"{opts.aliases[0]}->{opts.aliases[1]}.use.defaults.from", "source"),) if is_tansu(source)
                    else ()) + tuple(opts.properties),
        origins=dict(opts.origins),
    )


def _mm2(spec: ReplicatorSpec, source: Cluster, target: Cluster, workdir: str, opts: ReplicatorOptions) -> Replicator:
    from .mm2 import KAFKA_MESSAGE_MAX_BYTES, STARTUP_TIMEOUT, MirrorMaker2
    from .mm2_user import read_user_properties

    arg = spec.release_arg
    image = arg[len("container:"):] if arg.startswith("container:") else None
    base = None
    if spec.properties_file is not None:
        try:
            base = read_user_properties(spec.properties_file)  # read again: it may have changed since the parse
        except ValueError as exc:
            raise ReplicatorError(f"the spec {spec}: {exc}") from None
    return MirrorMaker2(
        source, target, workdir, topic_prefix=opts.topic_prefix, image=image,
        release=None if image else _release(spec, opts, "mm2"),
        overrides=opts.properties, naming=opts.naming, startup_timeout=_startup(opts, STARTUP_TIMEOUT),
        max_record_bytes=opts.max_record_bytes or KAFKA_MESSAGE_MAX_BYTES, instance=opts.instance,
        aliases=opts.aliases, topics=opts.topics, origins=dict(opts.origins), base=base,
    )


def _mm2_connect(spec: ReplicatorSpec, source: Cluster, target: Cluster, workdir: str,
                 opts: ReplicatorOptions) -> Replicator:
    from .mm2 import KAFKA_MESSAGE_MAX_BYTES, STARTUP_TIMEOUT
    from .mm2_connect import MirrorMaker2Connect

    workers, path = connect_options(spec.arg.partition(",")[2])
    strimzi = None
    if path is not None:
        from .strimzi import read_strimzi

        try:
            strimzi = read_strimzi(path)  # read again: it may have changed since the parse
        except ValueError as exc:
            raise ReplicatorError(str(exc)) from None
        # Strimzi's replicas (its default: 3) unless the spec says workers=N
        workers = workers or strimzi.replicas or STRIMZI_REPLICAS
    return MirrorMaker2Connect(
        source, target, workdir, workers=workers or 1, strimzi=strimzi, topic_prefix=opts.topic_prefix,
        release=_release(spec, opts, "mm2"), overrides=opts.properties, naming=opts.naming,
        startup_timeout=_startup(opts, STARTUP_TIMEOUT), max_record_bytes=opts.max_record_bytes or KAFKA_MESSAGE_MAX_BYTES,
        instance=opts.instance, aliases=opts.aliases, topics=opts.topics, origins=dict(opts.origins),
    )


def _mm1(spec: ReplicatorSpec, source: Cluster, target: Cluster, workdir: str, opts: ReplicatorOptions) -> Replicator:
    from .mm1 import LegacyMirrorMaker
    from .mm2 import KAFKA_MESSAGE_MAX_BYTES

    return LegacyMirrorMaker(
        source, target, workdir, _release(spec, opts, "mm1"), topic_prefix=opts.topic_prefix,
        overrides=opts.properties, naming=opts.naming, startup_timeout=_startup(opts, 60.0),
        max_record_bytes=opts.max_record_bytes or KAFKA_MESSAGE_MAX_BYTES, instance=opts.instance,
        origins=dict(opts.origins),
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
        source, target, naming=naming, topic_prefix=opts.topic_prefix, startup_timeout=_startup(opts, 60.0),
        commands=opts.commands, status_source=opts.status, session_prefix=opts.session_prefix,
    )


BACKENDS: dict[str, Callable[[ReplicatorSpec, Cluster, Cluster, str, ReplicatorOptions], Replicator]] = {
    "reference": _reference,
    "mm2": _mm2,
    "mm2-connect": _mm2_connect,
    "mm1": _mm1,
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
