"""Faults on a timeline: processes, brokers, the replication link, topology.

A scenario schedules faults at offsets from the start of production::

    run = mirror_producer(topics, rate=500, duration=20, faults=[
        at(5, kill(mirror_faults.replicator)),
        at(8, start(mirror_faults.replicator)),
    ])

Each fault is a small object with a ``label`` and an ``apply()``; :func:`at` pins it to a
time.  :class:`FaultSchedule` applies them from a background thread while the producer
runs and records a *marker* per fault (time, label, error), which the report's timeline
shows and the recovery figures start from.

The replication link
--------------------
:class:`Link` is the network path between the replicator and one cluster.  The replicator
connects to the link's address instead of the cluster's; the producer and the capture keep
their direct, clean connections (the cross-datacenter line is the only bad one)::

    replicator ──► link proxy (delay, jitter)  ──► tansu proxy ──► broker
                   └ iptables loss, HTB bandwidth on this port

``tansu proxy`` is Kafka-aware: it advertises the link's port in metadata, so every
connection the replicator's clients open goes through the link, not only the bootstrap
one.  Delay and jitter come from the userspace link proxy (this kernel has no netem);
loss from an iptables ``statistic`` match, bandwidth from an HTB class, both on the link
port only and both needing root (a scenario skips with the reason otherwise).  Every rule
is removed when the link stops, on failure and Ctrl-C too.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..processes.managed import ManagedProcess, ProcessFailed, wait_until
from .netem import PortShaper, ShapingError, shaping_unavailable

__all__ = [
    "Fault",
    "FaultError",
    "FaultSchedule",
    "Link",
    "Marker",
    "MirrorFaults",
    "Scheduled",
    "action",
    "add_partitions",
    "at",
    "bandwidth",
    "create_topic",
    "delay",
    "heal",
    "kill",
    "loss",
    "pause",
    "restart",
    "resume",
    "start",
    "terminate",
]

log = logging.getLogger("pytest_kafka_mirror.faults")


class FaultError(RuntimeError):
    """A fault could not be applied (or a link could not be set up)."""


class _Lifecycle(Protocol):
    def describe(self) -> str: ...


@dataclass(frozen=True)
class Fault:
    """One thing done to the system under test."""

    label: str
    apply: Callable[[], Any]
    #: Fault kind for figures: "outage" starts a recovery measurement, "heal" ends one.
    kind: str = "fault"

    def __call__(self) -> Any:
        return self.apply()


@dataclass(frozen=True)
class Scheduled:
    """A fault at ``seconds`` after production starts."""

    seconds: float
    fault: Fault


def at(seconds: float, fault: Fault) -> Scheduled:
    """Apply ``fault`` ``seconds`` after the producer starts its schedule."""
    if not isinstance(fault, Fault):
        raise TypeError(f"at({seconds!r}, ...) needs a fault such as kill(replicator), got {fault!r}")
    if not isinstance(seconds, (int, float)) or seconds < 0:
        raise ValueError(f"at(): the offset must be a number of seconds >= 0, got {seconds!r}")
    return Scheduled(float(seconds), fault)


def _name(obj: Any) -> str:
    """How a fault target reads in labels: "replicator (reference)", "target broker (tansu)"."""
    explicit = getattr(obj, "fault_name", None)
    if isinstance(explicit, str) and explicit:
        return explicit
    spec = getattr(obj, "spec", None)
    if callable(getattr(obj, "target_topic", None)):  # the Replicator protocol
        return f"replicator ({spec})" if spec else "replicator"
    name = getattr(obj, "name", None)
    if isinstance(name, str) and name and callable(getattr(obj, "capabilities", None)):  # a Cluster
        return f"{name} broker ({spec})" if spec else f"{name} broker"
    for v in (name, spec):
        if isinstance(v, str) and v:
            return v
    return type(obj).__name__


def _verb(obj: Any, verb: str, says: str | None = None) -> Callable[[], Any]:
    """``obj``'s lifecycle verb.  A replicator that says it cannot (``Replicator.missing``:
    an external one without the command for it) skips the calling test with its reason,
    now, before anything is produced: a fault scenario never runs without its fault."""
    fn = getattr(obj, verb, None)
    if not callable(fn):
        raise FaultError(f"{_name(obj)} cannot {verb}: it has no lifecycle control ({type(obj).__name__})")
    missing = getattr(obj, "missing", None) if callable(getattr(obj, "target_topic", None)) else None
    why = missing(says or verb) if missing is not None else None
    if why:
        import pytest

        pytest.skip(why)
    return fn  # type: ignore[no-any-return]


# -- process and broker faults ---------------------------------------------------------------


def kill(target: Any) -> Fault:
    """SIGKILL the replicator or broker: nothing is flushed, nothing committed."""
    return Fault(f"kill {_name(target)}", _verb(target, "kill"), "outage")


def terminate(target: Any) -> Fault:
    """SIGTERM (graceful stop) the replicator or broker."""
    return Fault(f"terminate {_name(target)}", _verb(target, "stop"), "outage")


def start(target: Any) -> Fault:
    """Start a stopped or killed replicator or broker again."""
    return Fault(f"start {_name(target)}", _verb(target, "start"), "heal")


def restart(target: Any) -> Fault:
    """Stop and start again (a rolling restart of one node)."""
    fn = _verb(target, "restart") if callable(getattr(target, "restart", None)) else None
    if fn is None:
        stop, begin = _verb(target, "stop"), _verb(target, "start")

        def fn() -> None:
            stop()
            begin()

    return Fault(f"restart {_name(target)}", fn, "outage")


def pause(target: Any) -> Fault:
    """SIGSTOP: the process keeps its connections but does nothing (a long GC pause)."""
    return Fault(f"pause {_name(target)}", _verb(target, "pause"), "outage")


def resume(target: Any) -> Fault:
    """SIGCONT a paused process."""
    return Fault(f"resume {_name(target)}", _verb(target, "resume"), "heal")


# -- link faults -------------------------------------------------------------------------------


def delay(link: Link, ms: float, jitter_ms: float = 0.0) -> Fault:
    """Add ``ms`` ± ``jitter_ms`` of one-way delay on the link (each direction)."""
    return Fault(f"{link.name}: delay {ms:g} ms" + (f" ± {jitter_ms:g}" if jitter_ms else ""),
                 lambda: link.set_delay(ms, jitter_ms), "outage" if ms else "heal")


def loss(link: Link, percent: float) -> Fault:
    """Drop ``percent`` % of the link's TCP segments (needs root)."""
    return Fault(f"{link.name}: loss {percent:g} %", lambda: link.set_loss(percent), "outage" if percent else "heal")


def bandwidth(link: Link, kbit: float | None) -> Fault:
    """Cap the link at ``kbit`` kbit/s each way; None lifts the cap (needs root)."""
    label = f"{link.name}: bandwidth {kbit:g} kbit/s" if kbit else f"{link.name}: bandwidth uncapped"
    return Fault(label, lambda: link.set_bandwidth(kbit), "outage" if kbit else "heal")


def heal(link: Link) -> Fault:
    """Remove every fault from the link."""
    return Fault(f"{link.name}: healed", link.clear, "heal")


# -- topology ---------------------------------------------------------------------------------


def create_topic(cluster: Any, name: str, partitions: int = 1) -> Fault:
    """Create a topic on ``cluster`` (the replicator must discover it)."""
    return Fault(f"create topic {name} ({partitions} partitions)", lambda: cluster.create_topic(name, partitions))


def add_partitions(cluster: Any, topic: str, total: int) -> Fault:
    """Grow ``topic`` to ``total`` partitions (skip first where the cluster cannot)."""
    return Fault(f"add partitions to {topic} (now {total})", lambda: _verb(cluster, "add_partitions")(topic, total))


def action(label: str, fn: Callable[[], Any], kind: str = "fault") -> Fault:
    """Any callable as a fault, e.g. ``action("start producer 2", lambda: ...)``."""
    return Fault(label, fn, kind)


# -- schedule ---------------------------------------------------------------------------------


@dataclass
class Marker:
    """A fault as it happened: seconds after production start, wall-clock time, outcome."""

    t: float
    at_us: int
    label: str
    kind: str = "fault"
    planned: float | None = None
    took: float = 0.0
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The report's marker shape: ``time`` (UTC epoch seconds) and ``label`` for plots,
        plus what the recovery figures and messages use."""
        d = {k: getattr(self, k) for k in ("t", "at_us", "label", "kind", "planned", "took", "error")}
        d["time"] = self.at_us / 1e6
        return d


@dataclass
class FaultSchedule:
    """Applies scheduled faults from a background thread, relative to a start time."""

    faults: Sequence[Scheduled]
    markers: list[Marker] = field(default_factory=list)
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _t0: float = 0.0

    def __post_init__(self) -> None:
        for s in self.faults:
            if not isinstance(s, Scheduled):
                raise TypeError(f"faults=[...] takes at(SECONDS, fault) entries, got {s!r}")
        self.faults = sorted(self.faults, key=lambda s: s.seconds)

    def start(self) -> None:
        """Start the clock now (call when the producer starts its schedule)."""
        if self._thread is not None or not self.faults:
            return
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="kafka-mirror-faults", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for s in self.faults:
            wait = self._t0 + s.seconds - time.monotonic()
            if wait > 0 and self._stop.wait(wait):
                return
            t = time.monotonic() - self._t0
            at_us = time.time_ns() // 1000
            t1 = time.monotonic()
            error = None
            try:
                s.fault()
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                log.error("fault %r at %.2f s failed: %s", s.fault.label, t, error)
            took = time.monotonic() - t1
            log.info("fault at %.2f s: %s (%.2f s)", t, s.fault.label, took)
            self.markers.append(Marker(round(t, 4), at_us, s.fault.label, s.fault.kind, s.seconds,
                                       round(took, 4), error))

    def finish(self, timeout: float | None = None) -> list[Marker]:
        """Wait for the faults still due (the producer may end before the last one)."""
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                self._stop.set()
                self._thread.join(30)
        return self.markers

    def cancel(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def errors(self) -> list[Marker]:
        return [m for m in self.markers if m.error]


# -- the link ---------------------------------------------------------------------------------


class Link:
    """The network path from the replicator to one cluster, where link faults are injected.

    ``origin`` is the cluster's ``HOST:PORT`` (a single broker: the Kafka-aware proxy
    forwards to one origin).  :attr:`bootstrap_servers` is what the replicator is given.

    Two ways to make every connection of the replicator's clients cross the link (the
    broker's metadata must name the link, not the broker):

    * a broker with a listener for the link (``listener=(P, Q)``: Apache Kafka's ``LINK``
      listener on port Q advertises 127.0.0.1:P, see ``clusters/kafka_home.py``): the delay
      proxy listens on P and forwards to Q, nothing else;
    * any other broker: Tansu's Kafka-aware ``tansu proxy`` rewrites the metadata to
      advertise the link's port, behind the delay proxy.  (It cannot parse Apache Kafka
      4.3's responses: "maximum tagged fields exceeded".)
    """

    def __init__(self, name: str, origin: str, workdir: str | Path, *, startup_timeout: float = 20.0,
                 listener: tuple[int, int] | None = None) -> None:
        if "," in origin:
            raise FaultError(
                f"link {name}: a faultable link forwards to one broker, but the cluster has several "
                f"bootstrap servers ({origin}); use a single-broker cluster for link faults"
            )
        self.name = name
        self.fault_name = f"{name} link"
        self.origin = origin
        self.workdir = Path(workdir)
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self._proxy: ManagedProcess | None = None
        self._delayer: ManagedProcess | None = None
        self._shaper: PortShaper | None = None
        self._generation = 0
        self.delay_ms = 0.0
        self.jitter_ms = 0.0
        self.listener = listener

    @property
    def bootstrap_servers(self) -> str:
        if self.port is None:
            raise FaultError(f"link {self.name} is not started")
        return f"127.0.0.1:{self.port}"

    @property
    def control_file(self) -> Path:
        return self.workdir / f"{self.name}-link.json"

    def start(self) -> Link:
        from ..clusters.base import free_port, tcp_reachable
        from ..clusters.tansu import tansu_binary

        self.workdir.mkdir(parents=True, exist_ok=True)
        port, inner = self.listener or (free_port(hold=True), free_port())
        self._write_control()
        ready = Path(f"{self.control_file}.ready")
        ready.unlink(missing_ok=True)
        try:
            if self.listener is None:
                self._proxy = ManagedProcess(
                    f"{self.name} link (tansu proxy :{inner})",
                    [tansu_binary(), "proxy", "--listener-url", f"tcp://127.0.0.1:{inner}",
                     "--advertised-listener-url", f"tcp://127.0.0.1:{port}", "--origin-url", f"tcp://{self.origin}"],
                    self.workdir / f"{self.name}-link-proxy.log", stop_signal=signal.SIGINT,  # as the broker
                ).start()
            self._delayer = ManagedProcess(
                f"{self.name} link (delay :{port})",
                [sys.executable, "-m", "pytest_kafka_mirror.faults.linkproxy", "--listen", str(port),
                 "--upstream", f"127.0.0.1:{inner}", "--control", str(self.control_file)],
                self.workdir / f"{self.name}-link-delay.log",
            ).start()
            processes = [p for p in (self._proxy, self._delayer) if p is not None]
            wait_until(
                lambda: (ready.exists() and tcp_reachable("127.0.0.1", inner)) or not all(p.running for p in processes),
                self.startup_timeout,
                f"the {self.name} link to listen on 127.0.0.1:{port}",
            )
            for p in processes:
                if not p.running:
                    raise ProcessFailed(p.describe_exit())
        except (ProcessFailed, TimeoutError) as exc:
            self.stop()
            raise FaultError(f"link {self.name}: {exc}") from None
        self.port = port
        self._shaper = PortShaper(port)
        return self

    def _write_control(self) -> None:
        self._generation += 1
        tmp = self.control_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"delay_ms": self.delay_ms, "jitter_ms": self.jitter_ms,
                                   "seed": 0, "generation": self._generation}))
        tmp.replace(self.control_file)

    def set_delay(self, ms: float, jitter_ms: float = 0.0) -> None:
        """One-way delay each direction; returns once the link proxy applies it."""
        if ms < 0 or jitter_ms < 0:
            raise ValueError(f"delay and jitter must be >= 0 ms, got {ms!r} ± {jitter_ms!r}")
        if self._delayer is None or not self._delayer.running:
            raise FaultError(f"link {self.name} is not running")
        self.delay_ms, self.jitter_ms = float(ms), float(jitter_ms)
        self._write_control()
        ack = Path(f"{self.control_file}.ack")
        gen = str(self._generation)
        self._delayer.send_signal(signal.SIGHUP)
        try:
            wait_until(lambda: ack.exists() and ack.read_text() == gen, 10, f"the {self.name} link to apply the delay",
                       interval=0.01)
        except TimeoutError as exc:
            raise FaultError(str(exc)) from None

    def _require_shaping(self, kind: str) -> PortShaper:
        why = shaping_unavailable(kind)
        if why:
            raise FaultError(why)
        if self._shaper is None:
            raise FaultError(f"link {self.name} is not started")
        return self._shaper

    def set_loss(self, percent: float) -> None:
        try:
            self._require_shaping("loss").set_loss(percent)
        except ShapingError as exc:
            raise FaultError(f"link {self.name}: {exc}") from None

    def set_bandwidth(self, kbit: float | None) -> None:
        try:
            self._require_shaping("bandwidth").set_bandwidth(kbit)
        except ShapingError as exc:
            raise FaultError(f"link {self.name}: {exc}") from None

    def clear(self) -> None:
        """Remove every fault: no delay, no loss, no cap."""
        if self._shaper is not None:
            self._shaper.clear()
        if self.delay_ms or self.jitter_ms:
            self.set_delay(0, 0)

    def describe(self) -> str:
        parts = []
        if self.delay_ms or self.jitter_ms:
            parts.append(f"delay {self.delay_ms:g} ms ± {self.jitter_ms:g}")
        if self._shaper is not None and self._shaper.describe() != "clean":
            parts.append(self._shaper.describe())
        return f"{self.name} link {self.bootstrap_servers if self.port else '-'} -> {self.origin}: " + (
            ", ".join(parts) or "clean")

    def stop(self) -> None:
        """Remove kernel rules, stop both proxies (idempotent)."""
        if self._shaper is not None:
            try:
                self._shaper.clear()
            except ShapingError as exc:
                log.error("link %s: could not remove its rules: %s", self.name, exc)
        if self._delayer is not None:
            self._delayer.stop(timeout=3.0)
        if self._proxy is not None:  # tansu proxy: its stop signal, SIGINT (see TansuCluster.stop)
            self._proxy.stop(timeout=3.0)

    def __enter__(self) -> Link:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- the fixture's facade -------------------------------------------------------------------------


class MirrorFaults:
    """What the ``mirror_faults`` fixture gives a test: the fault targets of its private
    environment, and the clean-up that heals them afterwards."""

    def __init__(self, env: Any) -> None:
        self.env = env

    @property
    def replicator(self) -> Any:
        return self.env.replicator

    @property
    def source(self) -> Any:
        return self.env.source

    @property
    def target(self) -> Any:
        return self.env.target

    def link(self, role: str) -> Link:
        """The link between the replicator and the ``source`` or ``target`` cluster (a test
        whose environment cannot have one skips, saying why: ``MirrorEnv.limits``)."""
        self.env.require("links")
        try:
            return self.env.links[role]  # type: ignore[no-any-return]
        except KeyError:
            raise FaultError(
                f"no {role} link in this environment (links: {sorted(self.env.links) or 'none'}); links need "
                f"single-broker clusters"
            ) from None

    @property
    def source_link(self) -> Link:
        return self.link("source")

    @property
    def target_link(self) -> Link:
        return self.link("target")

    def require(self, *what: str) -> None:
        """Skip the test, with the reason, unless every named ability is there.

        Abilities: capability names of the clusters (``add_partitions``,
        ``restart_keeps_data``, ``lifecycle``, ...) checked on both clusters, prefixed
        ``source.`` / ``target.`` for one; ``link_loss`` and ``link_bandwidth`` (root and
        the tools).
        """
        import pytest

        __tracebackhide__ = True
        for name in what:
            if name in ("link_loss", "link_bandwidth"):
                why = shaping_unavailable(name.split("_", 1)[1])
                if why:
                    pytest.skip(why)
                continue
            roles = ("source", "target")
            if "." in name:
                role, name = name.split(".", 1)
                roles = (role,)
            for role in roles:
                cluster = getattr(self.env, role)
                missing = cluster.capabilities().missing(name)
                if missing:
                    pytest.skip(f"the {role} cluster ({cluster.spec}) lacks {missing[0]}")

    def close(self) -> None:
        """Heal links and resume a paused replicator (the environment stops the rest)."""
        for link in self.env.links.values():
            try:
                link.clear()
            except (FaultError, ShapingError) as exc:
                log.error("healing %s failed: %s", link.name, exc)
        rep = self.env.replicator
        if rep.paused:
            try:
                rep.resume()
            except Exception as exc:
                log.error("resuming the replicator failed: %s", exc)
