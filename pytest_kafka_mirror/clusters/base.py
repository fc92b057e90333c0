"""The cluster protocol and what every Kafka-protocol cluster shares (admin verbs)."""

from __future__ import annotations

import atexit
import base64
import random
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from ..processes.managed import (
    tcp_reachable,  # re-exported: the backends' readiness probe
    wait_until,
)

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

__all__ = ["Capabilities", "Cluster", "ClusterAuthError", "ClusterError", "KafkaAdminMixin", "RunnerClusterMixin", "free_port", "kraft_cluster_id", "tcp_reachable",
           "topic_created_us"]

#: When this process created each topic (UTC epoch microseconds, when the broker confirmed
#: it): the start of a replicator's discovery time (``replicators/_readiness.py``).
#: Keyed by name alone: test topic names are unique, and a cluster seen through a
#: wrapper (a shared cluster, a faultable link) is the same cluster.
_CREATED_US: dict[str, int] = {}


def topic_created_us(topic: str) -> int | None:
    """When this process created ``topic`` (None: created elsewhere, or not at all)."""
    return _CREATED_US.get(topic)


class ClusterError(RuntimeError):
    """A cluster could not be started, reached or administered."""


class ClusterAuthError(ClusterError):
    """A cluster answered, but its clients could not authenticate (SASL, TLS): the message
    already says which properties to check (``_auth.failure_line``), not the address."""


@dataclass(frozen=True)
class Capabilities:
    """What a cluster can do, so scenarios skip with a reason instead of failing.

    ``True`` / ``False`` come from a runtime probe or from measured facts about the
    broker; ``None`` means "not probed" (e.g. a probe that could crash the broker).
    ``reasons`` says, per capability, how it was decided: that is the skip message.
    """

    add_partitions: bool | None = None
    log_append_time: bool | None = None
    transactions: bool | None = None
    delete_records: bool | None = None
    accurate_watermarks: bool | None = None
    restart_keeps_data: bool | None = None
    #: a log cleaner compacts topics with cleanup.policy=compact (known facts, never probed:
    #: a probe would wait for the cleaner)
    log_compaction: bool | None = None
    #: DescribeConfigs tells a topic's own configs (DYNAMIC_TOPIC_CONFIG) from the broker's
    #: defaults, and a config deleted from a topic falls back to the default (MM2's
    #: ``use.defaults.from`` depends on it)
    topic_config_defaults: bool | None = None
    lifecycle: bool = False  # the plugin can stop / restart it
    reasons: dict[str, str] = field(default_factory=dict, compare=False)

    NAMES = ("add_partitions", "log_append_time", "transactions", "delete_records", "accurate_watermarks",
             "restart_keeps_data", "log_compaction", "topic_config_defaults", "lifecycle")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def reason(self, name: str) -> str:
        """Why ``name`` is what it is (for skip messages and reports)."""
        self._check(name)
        value = getattr(self, name)
        why = self.reasons.get(name)
        if why:
            return why
        return {True: "supported", False: "not supported", None: "not probed"}[value]

    def missing(self, *names: str) -> list[str]:
        """The capabilities of ``names`` that are not known to be supported, with reasons."""
        return [f"{n}: {self.reason(n)}" for n in names if self._check(n) is not True]

    def require(self, *names: str) -> None:
        """``pytest.skip`` with the reason unless every capability of ``names`` is supported."""
        missing = self.missing(*names)
        if missing:
            import pytest

            pytest.skip("cluster lacks " + "; ".join(missing))

    def _check(self, name: str) -> bool | None:
        if name not in self.NAMES:
            raise ValueError(f"unknown capability {name!r}; known: {', '.join(self.NAMES)}")
        return getattr(self, name)  # type: ignore[no-any-return]


@runtime_checkable
class Cluster(Protocol):
    """A Kafka-protocol cluster the plugin produces to or consumes from.

    Every backend inherits :class:`KafkaAdminMixin`, which gives the defaults of the
    attributes and methods below (each says its own); the plugin reads them directly.
    """

    name: str
    spec: str

    @property
    def flavour(self) -> str:
        """The broker implementation when it matters to a client (``tansu``: MM2 and the
        reference mirror bound their fetch waits and take topic configs from the source);
        default ``""``."""
        ...

    @property
    def replication_factor(self) -> int:
        """Of every topic the plugin (or a replicator) creates here; default -1: the
        broker's ``default.replication.factor``."""
        ...

    @property
    def client_properties(self) -> Mapping[str, str]:
        """librdkafka properties of every client of it besides ``bootstrap.servers``
        (security); default none."""
        ...

    @property
    def client_origins(self) -> Mapping[str, str]:
        """Where each of :attr:`client_properties` was given (what an authentication
        failure's hint names); default none known."""
        ...

    @property
    def created_topics(self) -> list[str] | None:
        """The topics this process created here, kept by clusters the plugin did not start
        (``bootstrap:``), whose session deletes them at its end; default None: not kept."""
        ...

    def set_client_properties(self, props: Mapping[str, str] | None,
                              origins: Mapping[str, str] | None = None) -> None:
        """Put the user's client properties over the backend's own (before it starts);
        ``origins``: where each was given (key -> e.g. ``FILE via ini key ...``), for the
        hint of an authentication failure."""
        ...

    def client_config(self) -> dict[str, Any]:
        """The whole librdkafka configuration of a client of it: bootstrap servers and
        :attr:`client_properties`."""
        ...

    def link_listener(self) -> tuple[int, int] | None:
        """(P, Q) when a faultable link in front of it needs a listener of the broker's own:
        the broker listens on Q for the link and advertises P, where the link listens
        (``kafka:V``); default None: the link forwards to the bootstrap address as it is."""
        ...

    @property
    def bootstrap_servers(self) -> str: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def capabilities(self) -> Capabilities: ...

    def create_topic(self, name: str, partitions: int = 1, *, config: dict[str, str] | None = None) -> str: ...

    def ensure_topic(self, name: str, partitions: int = 1) -> str:
        """Create ``name`` unless it exists (any partition count)."""
        if self.partitions(name) is None:
            try:
                self.create_topic(name, partitions)
            except ClusterError:
                if self.partitions(name) is None:  # lost a creation race: fine; else re-raise
                    raise
        return name

    def partitions(self, topic: str) -> int | None: ...

    def describe(self) -> str: ...

    def require(self, *names: str) -> None:
        """Skip the calling test with the reason unless the cluster supports ``names``."""
        self.capabilities().require(*names)


#: Where free_port() looks, below the kernel's ephemeral range (read at first use).
_PORT_FLOOR = 20000


def _ephemeral_floor() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


#: ports held by :func:`free_port` (``hold=True``) for as long as this process lives
_HELD: list[socket.socket] = []


@atexit.register
def _release_held() -> None:
    while _HELD:
        _HELD.pop().close()


def free_port(*, hold: bool = False) -> int:
    """A free loopback TCP port for a process that binds it later (a broker that must
    advertise it before it listens, a link in front of it).

    ``hold``: for a port bound long after it is chosen (the link port a broker advertises
    from its start, bound by the link proxy when a test puts a link in front of it, if
    ever): this process keeps it bound with ``SO_REUSEADDR`` and never listens on it, so
    every other choice of this function (a plain bind) finds it taken, while the process
    it is meant for (which binds with ``SO_REUSEADDR``, as asyncio's servers, Java's and
    Rust's listeners do) binds and listens on it.  (CI saw another process's choice take a
    broker's link port before the link started: "address already in use".)

    Chosen at random below the kernel's ephemeral range and checked by binding it: a port
    the kernel hands out itself (port 0, or the source port of any outgoing connection)
    is never one of these, so nothing but another such choice can take it before its
    owner binds it (with ports from the ephemeral range, a client connection of another
    process took a link's port in between: "address already in use").  Falls back to a
    kernel-chosen port when the range below is unusable.
    """
    top = _ephemeral_floor()
    if top - _PORT_FLOOR >= 1000:
        for _ in range(50):
            port = random.randrange(_PORT_FLOOR, top)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            if not hold:
                return port
            held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                held.bind(("127.0.0.1", port))
            except OSError:  # taken in between
                held.close()
                continue
            _HELD.append(held)
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kraft_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, base64url without padding (22 characters).

    Like Kafka's own ``Uuid.randomUuid()``, never one that starts with ``-``: command
    lines (``tansu broker --cluster-id``, ``kafka-storage.sh format -t``) would read it
    as an option (1 id in 64 did, and failed a CI run).
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


_C = TypeVar("_C", bound="KafkaAdminMixin")


class KafkaAdminMixin:
    """Admin verbs over confluent-kafka's AdminClient, shared by every backend; a backend
    is also a context manager (``with make_cluster(...) as c:`` starts and stops it)."""

    name: str
    admin_timeout: float = 10.0
    #: of every topic the plugin creates here: -1 is the broker's ``default.replication.factor``
    #: (an existing cluster); the backends the plugin starts say theirs (3 on ``kafka:V,brokers=3``)
    replication_factor: int = -1
    _admin: AdminClient | None = None

    @property
    def bootstrap_servers(self) -> str:  # pragma: no cover - provided by the backend
        raise NotImplementedError

    #: librdkafka properties of every client of this cluster besides ``bootstrap.servers``:
    #: the backend's own (``kafka:V,security=sasl_ssl``), then the user's
    #: (``--kafka-mirror-source-config`` ...) over them; see :mod:`.._clientconf`
    client_properties: Mapping[str, str] = {}
    #: where each of :attr:`client_properties` was given (key -> "FILE via ini key ...",
    #: "--kafka-mirror-source-config-set", "kafka:V,security=sasl_ssl, which generated them"), for the
    #: hint of an authentication failure; a key missing here: not known
    client_origins: Mapping[str, str] = {}
    #: the options that give this cluster's client properties (None: the role's
    #: ``--kafka-mirror-ROLE-config`` and ``-config-set``; the stages outside pytest: theirs)
    client_options: str | None = None
    #: the authentication failure a client of this cluster reported (see :mod:`._auth`):
    #: its text, its kind (sasl, tls, protocol) and rank
    _auth_error: str | None = None
    _auth_kind: str = "sasl"
    _auth_rank: int = 0
    #: the topics this process created here, kept only by clusters the plugin did not start
    #: (``bootstrap:``, which sets a list): the session deletes them at its end
    created_topics: list[str] | None = None
    #: the broker implementation when it matters to a client (``tansu``); "" otherwise
    flavour: str = ""

    def link_listener(self) -> tuple[int, int] | None:
        """None: a link in front of this cluster forwards to its bootstrap address as it is
        (see :meth:`Cluster.link_listener`)."""
        return None

    def set_client_properties(self, props: Mapping[str, str] | None,
                              origins: Mapping[str, str] | None = None) -> None:
        """Put the user's properties over the backend's own (before the cluster starts);
        ``origins``: where each was given."""
        from .._clientconf import ClientProperties

        self.client_properties = ClientProperties(self.client_properties).merged(props)
        given = origins or {}
        self.client_origins = {**self.client_origins, **{k: given.get(k, "") for k in props or {}}}

    def client_config(self) -> dict[str, Any]:
        """The full librdkafka configuration of a client of this cluster: its bootstrap
        servers and :attr:`client_properties`.  Registers them, so that every client of
        the package (and of its child processes) built for this address gets the same."""
        from .._clientconf import register

        props = dict(self.client_properties)
        bootstrap = self.bootstrap_servers
        register(bootstrap, props)
        return {"bootstrap.servers": bootstrap, **props}

    def _on_error(self, err: Any) -> None:
        """The admin client's ``error_cb``: keeps an authentication failure (SASL, TLS; see
        :mod:`._auth`), the most telling one when several came."""
        from ._auth import failure_kind, rank

        code, text = err.code(), err.str()
        kind = failure_kind(code, text)
        if kind is not None and rank(kind, code) >= self._auth_rank:
            self._auth_error, self._auth_kind, self._auth_rank = text, kind, rank(kind, code)

    def auth_failure(self, *, definite: bool = False) -> str | None:
        """One line naming this cluster, the authentication failure its clients met and the
        client properties to check, or None.  ``definite``: only a failure no retry cures
        (not librdkafka's guess of a wrong ``security.protocol``)."""
        if self._admin is not None:
            from .._kafkalog import serve

            serve(self._admin)
        if not self._auth_error:
            return None
        from .._clientconf import properties_for, redact
        from ._auth import DEFINITE, failure_line

        if definite and self._auth_kind not in DEFINITE:
            return None
        role = "source" if self.name == "source" else "target"  # a cluster of add_cluster takes the target's
        # what its clients use: the registry's (the stages outside pytest register theirs), its own over them
        props = {**properties_for(self.bootstrap_servers), **self.client_properties}
        return failure_line(self._auth_kind, redact(self._auth_error), name=self.name, address=self.bootstrap_servers,
                            props=props, origins=self.client_origins,
                            options=self.client_options
                            or f"--kafka-mirror-{role}-config, --kafka-mirror-{role}-config-set")

    def admin(self) -> AdminClient:
        from .. import _kafkalog

        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._auth_error = None
            self._admin = AdminClient(_kafkalog.with_logger(
                {**self.client_config(), "socket.connection.setup.timeout.ms": 5000, "error_cb": self._on_error}))
        else:
            _kafkalog.serve(self._admin)  # its librdkafka messages, deduplicated (see _kafkalog)
        return self._admin

    def ping(self, timeout: float = 5.0) -> int:
        """Number of brokers in the cluster metadata; raises ClusterError when unreachable."""
        from confluent_kafka import KafkaException

        from .._kafkalog import serve

        admin = self.admin()
        try:
            md = admin.list_topics(timeout=timeout)
        except KafkaException as exc:
            serve(admin)  # log why (e.g. "Connection refused") once, before the admin client is dropped
            failure = self.auth_failure()
            if failure:
                raise ClusterAuthError(failure) from None
            raise ClusterError(
                f"{self.name}: no answer from bootstrap servers {self.bootstrap_servers} within {timeout:g} s "
                f"({exc.args[0] if exc.args else exc})"
            ) from None
        return len(md.brokers)

    def create_topic(self, name: str, partitions: int = 1, *, config: dict[str, str] | None = None) -> str:
        """Create ``name`` and wait until its metadata shows every partition."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import NewTopic

        futures = self.admin().create_topics(
            [NewTopic(name, partitions, self.replication_factor, config=config or {})], operation_timeout=self.admin_timeout
        )
        try:
            futures[name].result(timeout=self.admin_timeout)
        except KafkaException as exc:
            raise ClusterError(f"{self.name}: cannot create topic {name!r} with {partitions} partitions: {exc}") from None
        _CREATED_US[name] = time.time_ns() // 1000
        if self.created_topics is not None:
            self.created_topics.append(name)
        try:
            wait_until(lambda: self.partitions(name) == partitions, self.admin_timeout,
                       f"topic {name!r} to show its partitions", interval=0.02)
        except TimeoutError:
            raise ClusterError(f"{self.name}: topic {name!r} did not show {partitions} partitions in metadata") from None
        return name

    def ensure_topic(self, name: str, partitions: int = 1) -> str:
        """Create ``name`` unless it exists (any partition count)."""
        if self.partitions(name) is None:
            try:
                self.create_topic(name, partitions)
            except ClusterError:
                if self.partitions(name) is None:  # lost a creation race: fine; else re-raise
                    raise
        return name

    def add_partitions(self, topic: str, total: int) -> None:
        """Grow ``topic`` to ``total`` partitions and wait until metadata shows them."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import NewPartitions

        futures = self.admin().create_partitions([NewPartitions(topic, total)], operation_timeout=self.admin_timeout)
        try:
            futures[topic].result(timeout=self.admin_timeout)
        except KafkaException as exc:
            raise ClusterError(f"{self.name}: cannot grow topic {topic!r} to {total} partitions: {exc}") from None
        try:
            wait_until(lambda: (self.partitions(topic) or 0) >= total, self.admin_timeout,
                       f"topic {topic!r} to show its new partitions", interval=0.02)
        except TimeoutError:
            raise ClusterError(f"{self.name}: topic {topic!r} did not show {total} partitions in metadata") from None

    def partitions(self, topic: str) -> int | None:
        """Partition count of ``topic``, or None when it does not exist."""
        # Ask for all topics: a metadata request naming an unknown topic makes some brokers
        # (Tansu among them, whatever allow.auto.create.topics says) create it.
        md = self.admin().list_topics(timeout=self.admin_timeout)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            return None
        return len(t.partitions)

    def topics(self) -> list[str]:
        return sorted(self.admin().list_topics(timeout=self.admin_timeout).topics)

    def capabilities(self) -> Capabilities:  # pragma: no cover - provided by the backend
        raise NotImplementedError

    def require(self, *names: str) -> None:
        """Skip the calling test (with the reason) unless this cluster supports ``names``,
        e.g. ``source_cluster.require("add_partitions")``."""
        self.capabilities().require(*names)

    def start(self) -> None:  # pragma: no cover - provided by the backend
        raise NotImplementedError

    def stop(self) -> None:  # pragma: no cover - provided by the backend
        raise NotImplementedError

    def __enter__(self: _C) -> _C:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RunnerClusterMixin(KafkaAdminMixin):
    """Lifecycle verbs of a cluster run by one *runner* in ``self.runner``: a
    ManagedProcess or a ManagedContainer, which share stop / kill / pause / resume / logs."""

    runner: Any = None
    stop_timeout: float = 30.0

    def _started(self, verb: str) -> Any:
        if self.runner is None:
            raise ClusterError(f"cannot {verb} {self.name}: it is not started")
        return self.runner

    def stop(self) -> None:
        """SIGTERM (a controlled shutdown), SIGKILL after ``stop_timeout``."""
        if self.runner is not None:
            self.runner.stop(timeout=self.stop_timeout)
        self._admin = None

    def kill(self) -> None:
        if self.runner is not None:
            self.runner.kill()
        self._admin = None

    def pause(self) -> None:
        """SIGSTOP (a container: the cgroup freezer): connections stay open, nothing answers."""
        self._started("pause").pause()

    def resume(self) -> None:
        self._started("resume").resume()

    def logs(self, lines: int = 50) -> str:
        return str(self.runner.log_tail(lines)) if self.runner is not None else ""

