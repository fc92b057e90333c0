"""Cluster backends, chosen by a spec string (``--kafka-mirror-source`` / ``-target``).

=========================  ==================================================
``tansu``                  embedded Tansu broker process (default)
``container:IMAGE``        a broker container (Docker, host networking)
``kafka-home[:PATH]``      single-node KRaft Kafka from an unpacked
                           distribution (PATH defaults to --kafka-mirror-kafka-home)
``kafka:VERSION[,brokers=N][,security=sasl_ssl]``  the same Apache Kafka release
                           resolved from Maven Central into the plugin's cache
                           (``kafka_dist.py``); N combined nodes, replication factor
                           min(N, 3); sasl_ssl: clients connect with SASL_SSL
                           (SCRAM-SHA-512, a generated CA), see docs/secured-clusters.md
``bootstrap:HOST:PORT,…``  an existing cluster, no lifecycle
=========================  ==================================================

A backend is one module implementing :class:`~.base.Cluster`; adding one means adding
a module and one entry in :data:`BACKENDS`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from .base import Capabilities, Cluster, ClusterError

__all__ = ["BackendOptions", "Capabilities", "Cluster", "ClusterError", "ClusterSpec", "kafka_spec_parts", "kafka_spec_security",
           "make_cluster", "parse_cluster_spec"]

_HOSTPORT = re.compile(r"^[A-Za-z0-9._\-]+:\d{1,5}$|^\[[0-9a-fA-F:]+\]:\d{1,5}$")

ACCEPTED = (
    "tansu | container:IMAGE (e.g. container:kafka-mirror/tansu:local, container:apache/kafka:3.9.0) | "
    "kafka-home[:PATH] | kafka:VERSION[,brokers=N][,security=sasl_ssl] (e.g. kafka:4.3.1, kafka:4.3.1,brokers=3) | "
    "bootstrap:HOST:PORT[,HOST:PORT...]"
)
MAX_BROKERS = 5


@dataclass(frozen=True)
class ClusterSpec:
    kind: str
    arg: str = ""

    def __str__(self) -> str:
        return f"{self.kind}:{self.arg}" if self.arg else self.kind


def parse_cluster_spec(text: str) -> ClusterSpec:
    """Parse a cluster spec; raises ValueError naming the accepted forms."""
    text = text.strip()
    kind, _, arg = text.partition(":")
    if kind == "tansu" and not arg:
        return ClusterSpec("tansu")
    if kind == "bootstrap":
        servers = [s.strip() for s in arg.split(",") if s.strip()]
        if not servers:
            raise ValueError(f"{text!r}: bootstrap needs at least one HOST:PORT; accepted: {ACCEPTED}")
        for s in servers:
            if not _HOSTPORT.match(s) or not 0 < int(s.rsplit(":", 1)[1]) < 65536:
                raise ValueError(f"{text!r}: {s!r} is not HOST:PORT; accepted: {ACCEPTED}")
        return ClusterSpec("bootstrap", ",".join(servers))
    if kind == "container":
        from .container import image_flavour

        try:
            image_flavour(arg.strip())
        except ValueError as exc:
            raise ValueError(f"{text!r}: {exc}; accepted: {ACCEPTED}") from None
        return ClusterSpec("container", arg.strip())
    if kind == "kafka":
        return _kafka_spec(text, arg)
    if kind == "kafka-home":
        if not arg:
            return ClusterSpec("kafka-home")  # the path comes from --kafka-mirror-kafka-home
        from .kafka_home import check_kafka_home

        try:
            return ClusterSpec("kafka-home", str(check_kafka_home(arg)))
        except ValueError as exc:
            raise ValueError(f"{text!r}: {exc}; accepted: {ACCEPTED}") from None
    raise ValueError(f"unknown cluster spec {text!r}; accepted: {ACCEPTED}")


def _kafka_spec(text: str, arg: str) -> ClusterSpec:
    """``kafka:VERSION[,brokers=N]``, normalised (``brokers=1`` is left out)."""
    from .kafka_dist import KRAFT_SINCE, format_version, parse_version

    version, *options = [part.strip() for part in arg.split(",")]
    if not version:
        raise ValueError(f"{text!r}: kafka needs a release version, e.g. kafka:4.3.1; accepted: {ACCEPTED}")
    try:
        v = parse_version(version)
    except ValueError as exc:
        hint = "" if "." in version else " (for a running cluster at a host and port: bootstrap:HOST:PORT)"
        raise ValueError(f"{text!r}: {exc}{hint}; accepted: {ACCEPTED}") from None
    if v < KRAFT_SINCE:
        raise ValueError(f"{text!r}: kafka: runs KRaft brokers, Apache Kafka {format_version(KRAFT_SINCE)} or later "
                         f"(for an older cluster use bootstrap:HOST:PORT); accepted: {ACCEPTED}")
    from .kafka_home import SECURITIES

    brokers, security = 1, "plaintext"
    for option in options:
        key, sep, value = option.partition("=")
        if key == "security" and sep and value in SECURITIES:
            security = value
            continue
        if key != "brokers" or not sep or not value.isdigit() or not 1 <= int(value) <= MAX_BROKERS:
            raise ValueError(f"{text!r}: {option!r} is not brokers=N (N from 1 to {MAX_BROKERS}) or "
                             f"security={'|'.join(SECURITIES)}; accepted: {ACCEPTED}")
        brokers = int(value)
    return ClusterSpec("kafka", version + (f",brokers={brokers}" if brokers > 1 else "")
                       + (f",security={security}" if security != "plaintext" else ""))


def kafka_spec_parts(spec: ClusterSpec) -> tuple[str, int]:
    """(version, brokers) of a ``kafka:`` spec."""
    version, *options = spec.arg.split(",")
    brokers = next((int(o.partition("=")[2]) for o in options if o.startswith("brokers=")), 1)
    return version, brokers


def kafka_spec_security(spec: ClusterSpec) -> str:
    """``plaintext`` or ``sasl_ssl``: the clients' listener of a ``kafka:`` spec."""
    return next((o.partition("=")[2] for o in spec.arg.split(",")[1:] if o.startswith("security=")), "plaintext")


@dataclass(frozen=True)
class BackendOptions:
    """Settings a backend may use; the defaults suit a use outside pytest."""

    #: None: the backend's own default (tansu 20 s, JVM brokers 120 s, bootstrap 10 s to answer)
    startup_timeout: float | None = None
    kafka_home: str = ""  # for a bare ``kafka-home`` spec
    kafka_cache: str = ""  # where ``kafka:VERSION`` releases are cached ("" = the default, kafka_dist.cache_dir)


def _timeout(opts: BackendOptions, default: float) -> float:
    return default if opts.startup_timeout is None else opts.startup_timeout


def _tansu(name: str, spec: ClusterSpec, workdir: str, opts: BackendOptions) -> Cluster:
    from .tansu import TansuCluster

    return TansuCluster(name, workdir, startup_timeout=_timeout(opts, 20.0))


def _bootstrap(name: str, spec: ClusterSpec, workdir: str, opts: BackendOptions) -> Cluster:
    from .bootstrap import BootstrapCluster

    # --kafka-mirror-startup-timeout applies to every backend: here, how long the cluster may take to answer
    return BootstrapCluster(name, spec.arg, connect_timeout=_timeout(opts, 10.0))


def _container(name: str, spec: ClusterSpec, workdir: str, opts: BackendOptions) -> Cluster:
    from .container import ContainerCluster

    return ContainerCluster(name, spec.arg, workdir, startup_timeout=_timeout(opts, 120.0))


def _kafka_home(name: str, spec: ClusterSpec, workdir: str, opts: BackendOptions) -> Cluster:
    from .kafka_dist import release_at
    from .kafka_home import KafkaCluster

    home = spec.arg or opts.kafka_home
    if not home:
        raise ClusterError(
            f"{name}: the spec 'kafka-home' has no path and --kafka-mirror-kafka-home (env KAFKA_MIRROR_KAFKA_HOME) "
            "is not set; give kafka-home:PATH, kafka:VERSION or set the option"
        )
    try:
        release = release_at(home)
    except ValueError as exc:
        raise ClusterError(f"{name}: {exc} (from --kafka-mirror-kafka-home)") from None
    return KafkaCluster(name, release, workdir, startup_timeout=_timeout(opts, 120.0))


def _kafka(name: str, spec: ClusterSpec, workdir: str, opts: BackendOptions) -> Cluster:
    from .kafka_dist import KafkaInstallError, cache_dir, release
    from .kafka_home import KafkaCluster

    version, brokers = kafka_spec_parts(spec)
    try:
        rel = release(version, cache_dir(opts.kafka_cache or None))
    except KafkaInstallError as exc:
        raise ClusterError(f"{name}: {exc}") from None
    return KafkaCluster(name, rel, workdir, spec=f"kafka:{spec.arg}", brokers=brokers,
                        startup_timeout=_timeout(opts, 120.0), security=kafka_spec_security(spec))


BACKENDS: dict[str, Callable[[str, ClusterSpec, str, BackendOptions], Cluster]] = {
    "tansu": _tansu,
    "bootstrap": _bootstrap,
    "container": _container,
    "kafka-home": _kafka_home,
    "kafka": _kafka,
}


def make_cluster(
    name: str, spec: ClusterSpec | str, workdir: str | os.PathLike[str], options: BackendOptions | None = None
) -> Cluster:
    """Build (not start) the cluster a spec names."""
    if isinstance(spec, str):
        spec = parse_cluster_spec(spec)
    return BACKENDS[spec.kind](name, spec, os.fspath(workdir), options or BackendOptions())
