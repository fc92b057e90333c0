"""The clusters, replicator and links one test runs against.

Most tests share the session's clusters and the worker's replicator (fast: nothing to
start).  A test that injects faults gets a *private* environment instead: its own source
and target clusters, its own replicator, and a faultable :class:`~.faults.Link` between
the replicator and each cluster, all stopped when the test ends.  Killing that
replicator or restarting those brokers cannot disturb any other test, on this worker or
another.

A private environment can grow into a topology: :meth:`MirrorEnv.add_cluster`
starts a further cluster (``"third"``), :meth:`MirrorEnv.add_flow` a further replicator
between two of its clusters (the reverse flow ``target -> source`` of an active-active
pair, a second target of a fan-out, a second source of a fan-in).  Each flow's
replicator names the clusters by their roles, as MirrorMaker 2 names them by alias, and
its topic filter matches the remote topics too (``source.PREFIX-...``), so what keeps a
record from going back is the replicator's cycle detection, not the filter.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ._warnings import PytestKafkaMirrorWarning

if TYPE_CHECKING:
    from .clusters import Cluster
    from .faults.schedule import Link
    from .replicators import Replicator, ReplicatorSpec

__all__ = ["ClusterMaker", "Flow", "MirrorEnv", "ReplicatorMaker", "ViaLink", "build_private_env", "external_env",
           "external_lock", "link_limit"]

log = logging.getLogger("pytest_kafka_mirror.env")


class ViaLink:
    """A cluster as the replicator sees it: every attribute of the cluster, but the
    bootstrap address of the link in front of it."""

    def __init__(self, cluster: Cluster, link: Link) -> None:
        from ._clientconf import register

        self._cluster = cluster
        self._link = link
        # a client that bootstraps through the link needs the cluster's properties (security) too
        register(link.bootstrap_servers, dict(cluster.client_properties))

    @property
    def bootstrap_servers(self) -> str:
        return self._link.bootstrap_servers

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)


@dataclass(frozen=True)
class _Discarded:
    """A replicator an environment owns: its ``stop()`` at the close is a SIGKILL.

    Nothing reads what a graceful stop would save once the test is over (MM2's source
    offsets and Connect status; the reference mirror's positions), and MirrorMaker 2
    takes about 10 s to stop gracefully (Connect's task shutdown), which every scenario
    with a replicator of its own waited out at its teardown.  A test that stops a
    replicator on purpose (a restart, an upgrade) calls the replicator's own ``stop()``."""

    replicator: Replicator

    def stop(self) -> None:
        self.replicator.kill()

    def __repr__(self) -> str:
        return repr(self.replicator)


@dataclass(frozen=True)
class Flow:
    """One replication flow of an environment: ``source -> target`` (cluster roles) and the
    replicator that copies it."""

    source: str
    target: str
    source_cluster: Cluster
    target_cluster: Cluster
    replicator: Replicator

    def __str__(self) -> str:
        return f"{self.source} -> {self.target}"


@dataclass
class MirrorEnv:
    """What a test produces to, replicates with and captures from."""

    source: Cluster
    target: Cluster
    replicator: Replicator
    links: dict[str, Link] = field(default_factory=dict)
    private: bool = False
    #: topic prefix of the test's topics when its replicator mirrors a prefix of its own
    topic_prefix: str | None = None
    #: things to stop when the environment closes, in reverse order of start
    _owned: list[Any] = field(default_factory=list)
    #: builds a replicator of another release in this one's place (a private environment's),
    #: with further properties over the environment's
    _replacement: Callable[[ReplicatorSpec, tuple[tuple[str, str], ...]], Replicator] | None = None
    #: what the in-place upgrade scenarios switch between: "previous" and "current" specs
    releases: dict[str, ReplicatorSpec] = field(default_factory=dict)
    #: further clusters of a topology by role (``add_cluster``); source and target are the fields
    extra_clusters: dict[str, Cluster] = field(default_factory=dict)
    #: further flows (``add_flow``), by (source role, target role)
    extra_flows: dict[tuple[str, str], Flow] = field(default_factory=dict)
    #: starts a cluster of a role / a replicator between two clusters (a private environment's)
    _new_cluster: Callable[[str], Cluster] | None = None
    _new_flow: Callable[[Cluster, Cluster, tuple[str, str]], Replicator] | None = None
    #: what this environment cannot give, by need (``links``, ``topology``): a test asking for
    #: it skips with the reason (an external replicator's environment, :func:`external_env`)
    limits: dict[str, str] = field(default_factory=dict)

    def require(self, need: str) -> None:
        """Skip the calling test with the reason when this environment cannot give ``need``."""
        if need in self.limits:
            import pytest

            pytest.skip(self.limits[need])

    def own(self, thing: Any) -> Any:
        """Stop ``thing`` when the environment closes."""
        self._owned.append(thing)
        return thing

    def own_replicator(self, replicator: Replicator) -> Replicator:
        """Discard ``replicator`` when the environment closes (a SIGKILL, see :class:`_Discarded`), unless
        it is not the plugin's to stop (``controllable`` False: an external replicator)."""
        return self.own(_Discarded(replicator)).replicator if replicator.controllable else replicator  # type: ignore[no-any-return]

    def close(self) -> None:
        """Stop everything this environment started (a private one), its replicators
        discarded; errors are logged."""
        for thing in reversed(self._owned):
            try:
                thing.stop()
            except Exception as exc:
                log.error("stopping %r failed: %s", thing, exc)
        self._owned.clear()

    def switch_replicator(self, release: str, properties: dict[str, str] | None = None) -> Replicator:
        """Replace the replicator in place by ``release`` (``"previous"`` or ``"current"``,
        see :attr:`releases`): stop it (SIGTERM, waiting for its exit), then start the
        other on the same clusters, links and state (MM2: the same Connect group and
        internal topics; MM1: the same consumer group; the reference mirror: the same
        committed positions).  ``properties``: settings of the new one over the
        environment's (the same release reconfigured: e.g. MM2's ``tasks.max`` or its
        clients' batching, compared in one test).  Returns once the new one copies (its
        readiness probe)."""
        from .replicators import ReplicatorError

        if self._replacement is None or release not in self.releases:
            raise ReplicatorError(f"switch_replicator({release!r}): only a private environment switches, between "
                                  f"{sorted(self.releases) or 'no releases'}")
        old = self.replicator
        old.stop()
        new = self._replacement(self.releases[release], tuple((properties or {}).items()))
        self.own_replicator(new)
        self.replicator = new
        # no warm-up burst: a switch mid-stream measures the new one's cold start, as an
        # upgrade in production meets it
        new.warm_up_records = 0
        new.start()
        return new

    def roll_replicator(self, release: str) -> list[float]:
        """A rolling upgrade of a Connect cluster (``mm2-connect:``) onto ``release``
        (``"previous"`` or ``"current"``): its workers replaced one at a time, the others
        copying meanwhile (``MirrorMaker2Connect.roll_onto``).  Returns each step's seconds."""
        from .replicators import ReplicatorError

        old = self.replicator
        if self._replacement is None or release not in self.releases or not hasattr(old, "roll_onto"):
            raise ReplicatorError(f"roll_replicator({release!r}): a private environment's Connect cluster "
                                  f"(mm2-connect:) rolls, between {sorted(self.releases) or 'no releases'}; not {old.spec}")
        new = self._replacement(self.releases[release], ())
        took: list[float] = old.roll_onto(new)  # type: ignore[attr-defined]
        self.own_replicator(new)
        self.replicator = new
        return took

    @property
    def clusters(self) -> dict[str, Cluster]:
        """Every cluster by role: ``source``, ``target``, then the added ones."""
        return {"source": self.source, "target": self.target, **self.extra_clusters}

    def flow(self, source: str = "source", target: str = "target") -> Flow:
        """The flow ``source -> target``: the environment's own (its replicator) or an added one."""
        if (source, target) == ("source", "target"):
            return Flow(source, target, self.source, self.target, self.replicator)
        if (source, target) not in self.extra_flows:
            raise KeyError(f"no flow {source} -> {target} in this environment (add_flow({source!r}, {target!r}))")
        return self.extra_flows[(source, target)]

    def _topology(self, verb: str) -> None:
        from .replicators import ReplicatorError

        self.require("topology")
        if self._new_cluster is None or self._new_flow is None:
            raise ReplicatorError(f"{verb}: only a private environment grows into a topology; mark the test "
                                  "@pytest.mark.kafka_mirror(private=True)")

    def add_cluster(self, role: str) -> Cluster:
        """Start a further cluster named ``role`` (e.g. ``"third"``), of the kind of
        ``--kafka-mirror-target``, stopped with the environment (also when the test fails)."""
        self._topology(f"add_cluster({role!r})")
        if role in self.clusters:
            raise ValueError(f"add_cluster({role!r}): the environment has a {role} cluster already")
        if not role.replace("_", "").replace("-", "").isalnum():
            raise ValueError(f"add_cluster({role!r}): a role is a cluster alias for MM2: letters, digits, - and _")
        assert self._new_cluster is not None
        cluster = self._new_cluster(role)
        self.own(cluster)
        cluster.start()
        self.extra_clusters[role] = cluster
        return cluster

    def add_flow(self, source: str, target: str) -> Flow:
        """Start a replicator copying cluster ``source`` to cluster ``target`` (roles), of the
        kind and settings of the environment's own, owned by the environment.  Its cluster
        aliases are the roles (MM2: ``clusters = ROLE, ROLE``; a remote topic on ``target`` is
        ``SOURCE.TOPIC`` under DefaultReplicationPolicy), and it returns once it copies."""
        self._topology(f"add_flow({source!r}, {target!r})")
        clusters = self.clusters
        missing = [r for r in (source, target) if r not in clusters]
        if missing or source == target or (source, target) == ("source", "target") or (source, target) in self.extra_flows:
            raise ValueError(f"add_flow({source!r}, {target!r}): give two different clusters of {sorted(clusters)} "
                             f"without a flow between them yet (add_cluster() a further one first)")
        assert self._new_flow is not None
        replicator = self._new_flow(clusters[source], clusters[target], (source, target))
        self.own_replicator(replicator)
        if self._closes_loop(source, target) and not replicator.detects_cycles:
            warnings.warn(PytestKafkaMirrorWarning(
                f"add_flow({source!r}, {target!r}) closes a loop of flows and {replicator.spec} has no cycle detection "
                "(MM2 and the reference mirror have it under DefaultReplicationPolicy only): every record will go "
                "round for ever. Mark the test @pytest.mark.kafka_mirror(private=True, replicator_properties="
                "{'replication.policy.class': 'org.apache.kafka.connect.mirror.DefaultReplicationPolicy'})"),
                stacklevel=2)
        replicator.start()
        flow = self.extra_flows[(source, target)] = Flow(source, target, clusters[source], clusters[target], replicator)
        return flow

    def _closes_loop(self, source: str, target: str) -> bool:
        """Whether the flows already lead from ``target`` back to ``source``."""
        edges = {("source", "target"), *self.extra_flows}
        seen, todo = set(), [target]
        while todo:
            here = todo.pop()
            if here == source:
                return True
            if here not in seen:
                seen.add(here)
                todo += [b for a, b in edges if a == here]
        return False

    def describe(self) -> str:
        parts = [self.source.describe(), self.target.describe(), self.replicator.describe()]
        parts += [f"{role}: {c.describe()}" for role, c in self.extra_clusters.items()]
        parts += [f"{f}: {f.replicator.describe()}" for f in self.extra_flows.values()]
        parts += [link.describe() for link in self.links.values()]
        return "\n".join(parts)


class ClusterMaker(Protocol):
    """Builds (not starts) the cluster of a role (``source``, ``target``, an added one) in a work directory."""

    def __call__(self, role: str, workdir: Path) -> Cluster: ...


class ReplicatorMaker(Protocol):
    """Builds (not starts) a replicator between two clusters: the configured one, or the
    release ``spec``; ``instance``: the state of the one it replaces; ``aliases``: the
    flow's cluster names in a topology."""

    def __call__(self, source: Cluster, target: Cluster, workdir: Path, *,
                 extra_properties: tuple[tuple[str, str], ...] = (), spec: ReplicatorSpec | None = None,
                 instance: str | None = None, aliases: tuple[str, str] | None = None,
                 topic_prefix: str | None = None) -> Replicator: ...


def build_private_env(
    make_cluster: ClusterMaker,
    make_replicator: ReplicatorMaker,
    releases: dict[str, ReplicatorSpec],
    workdir: Path,
    *,
    links: bool = True,
    extra_properties: tuple[tuple[str, str], ...] = (),
    release: str = "current",
    topic_prefix: str | None = None,
    limits: dict[str, str] | None = None,
) -> MirrorEnv:
    """Start clusters, links and a replicator for one test (see the module docstring).

    ``make_cluster`` / ``make_replicator`` build them as the session's settings say
    (``KafkaMirrorSession.make_cluster`` / ``.make_replicator``).  ``releases``: the
    replicator specs of ``"current"`` (the one under test) and ``"previous"`` (the release of
    ``--kafka-mirror-upgrade-from``).  ``links``: put a faultable link between the
    replicator and each single-broker cluster.  ``release``: which of ``releases`` starts
    (the upgrade scenarios then switch with :meth:`MirrorEnv.switch_replicator`).
    ``topic_prefix``: the test's topics and its replicators' filter (clusters the session
    shares with its own replicator, ``bootstrap:``), None: the worker's.  ``limits``: what
    the environment cannot give (:attr:`MirrorEnv.limits`).
    Everything already started is stopped again when a later step fails.
    """
    from .faults.schedule import Link

    owned: list[Any] = []

    def own(thing: Any) -> Any:
        owned.append(thing)
        return thing

    try:
        source = make_cluster("source", workdir / "source")
        own(source).start()
        target = make_cluster("target", workdir / "target")
        own(target).start()
        via: dict[str, Any] = {"source": source, "target": target}
        made: dict[str, Link] = {}
        if links:
            for role, cluster in (("source", source), ("target", target)):
                if "," in cluster.bootstrap_servers:
                    log.warning("no %s link: the cluster has several bootstrap servers", role)
                    continue
                link = own(Link(role, cluster.bootstrap_servers, workdir / "links",
                                listener=cluster.link_listener())).start()
                made[role] = link
                via[role] = ViaLink(cluster, link)
        replicator = make_replicator(via["source"], via["target"], workdir / "replicator",
                                     extra_properties=extra_properties, spec=releases[release],
                                     aliases=("source", "target"), topic_prefix=topic_prefix)
        (own(_Discarded(replicator)).replicator if replicator.controllable else replicator).start()
    except BaseException:
        MirrorEnv(None, None, None, _owned=owned).close()  # type: ignore[arg-type]
        raise

    def replacement(spec: ReplicatorSpec, properties: tuple[tuple[str, str], ...] = ()) -> Replicator:
        # the same clusters, links, topics and workdir (the reference mirror's committed
        # positions live there), and the same state (MM2's Connect group, MM1's group)
        return make_replicator(via["source"], via["target"], workdir / "replicator",
                               extra_properties=extra_properties + properties, spec=spec,
                               instance=replicator.instance, aliases=("source", "target"), topic_prefix=topic_prefix)

    def new_cluster(role: str) -> Cluster:
        return make_cluster(role, workdir / role)

    def new_flow(src: Cluster, dst: Cluster, aliases: tuple[str, str]) -> Replicator:
        # no links: the further flows of a topology are not where the faults go
        return make_replicator(src, dst, workdir / f"flow-{aliases[0]}-{aliases[1]}",
                               extra_properties=extra_properties, spec=releases["current"], aliases=aliases,
                               topic_prefix=topic_prefix)

    return MirrorEnv(source, target, replicator, made, private=True, topic_prefix=topic_prefix, _owned=owned,
                     _replacement=replacement, releases=releases, _new_cluster=new_cluster, _new_flow=new_flow,
                     limits=dict(limits or {}))


class _Restarted:
    """At an external environment's close: the replicator runs again (resumed, or started
    with its start command and proven to copy) for the tests after this one."""

    def __init__(self, replicator: Replicator) -> None:
        self.replicator = replicator

    def stop(self) -> None:
        rep = self.replicator
        if rep.paused:
            rep.resume()
        if not rep.running:
            rep.start()


def link_limit(why: str) -> str:
    """The reason a scenario that faults a link skips (:attr:`MirrorEnv.limits`'s ``links``):
    ``why`` says what of the setup is not the plugin's."""
    return f"this scenario puts a faultable link (a proxy) between the replicator and a cluster, and {why}"


def external_env(source: Cluster, target: Cluster, replicator: Replicator, *, controls: bool) -> MirrorEnv:
    """The environment of a test when the replicator is someone else's (``external:``): the
    session's clusters and that replicator, for a test that asks for a private environment
    too (``controls``).  Links and a topology of further clusters and flows cannot be had
    (:attr:`MirrorEnv.limits`: the test skips saying so); a switch of release is a restart
    of the same replicator through its commands (``--kafka-mirror-replicator-command``)."""
    spec = replicator.spec
    limits = {
        "links": link_limit(f"{spec} is yours: it connects to the clusters itself"),
        "topology": (f"this scenario starts further clusters and replicators (a topology of flows), and {spec} is "
                     "yours: the plugin runs no replicator of its own beside it"),
    }

    def same(spec_: Any, properties: tuple[tuple[str, str], ...] = ()) -> Replicator:
        if properties:
            import pytest

            pytest.skip(f"this scenario reconfigures the replicator ({', '.join(f'{k}={v}' for k, v in properties)}), "
                        f"and {spec} is yours: the plugin does not configure it")
        return replicator

    env = MirrorEnv(source, target, replicator, private=controls, limits=limits,
                    _replacement=same if controls else None,
                    releases={"current": replicator.spec, "previous": replicator.spec} if controls else {})
    if controls:
        env.own(_Restarted(replicator))
    return env


@contextmanager
def external_lock(share: Path | None, *, exclusive: bool) -> Iterator[None]:
    """Across the xdist workers of a run (``share``: its share directory; None: one process,
    nothing to lock): a test that stops, crashes or pauses a replicator the workers share
    holds it alone (``exclusive``), every other test shares it.  A readers-writer lock of
    two ``fcntl.flock`` files (filelock has no shared mode): the gate, held a moment by a
    reader and for the whole test by a writer, lets no new reader in while a writer waits."""
    if share is None:
        yield
        return
    import fcntl

    share.mkdir(parents=True, exist_ok=True)
    with open(share / "external-replicator.gate", "a+b") as gate, open(share / "external-replicator.lock", "a+b") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            if not exclusive:
                fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            if exclusive:
                fcntl.flock(gate, fcntl.LOCK_UN)
