"""MirrorRun: one produce → replicate → capture → verify pass over a set of topics.

This is the plain-Python API the fixtures wrap::

    run = MirrorRun(run_dir, source.bootstrap_servers, target.bootstrap_servers,
                    {"orders": "orders"}, partitions={"orders": 4})
    run.produce(rate=1000, duration=10)          # starts the capture first
    report = run.verify()                        # waits for the capture, runs Spark
    report.assert_ok(p99_ms=500)

``compacted``: the topics with ``cleanup.policy=compact``; their manifests say so, and the
verifier and the capture expect only the latest record of each lane (a key) there.

With ``capture_source=True`` the source topics are captured too (into ``RUN_DIR/source``),
and the report reconciles the three logs: every acknowledged record that never arrived
is either lost by the replicator (it is in the source log) or missing in the source.

Before a schedule starts, every partition of its topics carries a warm-up record through
the replicator (``replicators/_readiness.py``): latency is measured from readiness, and
the replicator's discovery time is a figure of its own (``RUN_DIR/readiness.json``, the
report's ``discovery``).

Topologies: :meth:`MirrorRun.also_capture` captures the same records on a
second target (a fan-out: one producer, one run directory and one verification per
target); ``produce(source_bootstrap=..., replicator=...)`` adds a producer on another
source cluster whose replicator writes into the same target topics (a fan-in under
IdentityReplicationPolicy: lanes of two sources on one target topic).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .capture.target import Capture
from .produce.group import ProducerGroup
from .produce.producer import CountsCallback, MirrorProducer, TopicLanes
from .processes.spark_tasks import SparkEngine
from .processes.store import DirMirror, StoreError
from .rundir import ENGINE_FILE, REPORT_FILE, SOURCE_DIR, STORE_FILE, Manifest, write_json_atomic, write_readiness

if TYPE_CHECKING:
    from .capture.witness import Witness, WitnessLog, WitnessMonitor
    from .faults.schedule import Marker, Scheduled
    from .replicators import Replicator
    from .replicators._checkpoints import CheckpointSettings
    from .replicators._readiness import TopicReadiness
    from .verify import MirrorReport
    from .verify.failover import FailoverReport

__all__ = ["MirrorRun"]

log = logging.getLogger("pytest_kafka_mirror.run")


#: the features whose settings a verification's failures quote (``MirrorReport.replicator``)
VERIFIED_FEATURES = ("duplicates", "transactions", "headers")


def replicator_says(replicator: Replicator | None, *, state: bool = True) -> dict[str, Any]:
    """What ``replicator`` says about itself: the settings behind the verified features as
    it applies them (a replicator the plugin configures) and, with ``state`` (a report with
    missing records), its health (it exited, a FAILED task) and its status (MirrorMaker 2:
    connectors and tasks); never raises."""
    if replicator is None:
        return {}
    out: dict[str, Any] = {"spec": replicator.spec or type(replicator).__name__}
    try:
        settings = replicator.effective_settings()
    except Exception:  # a report must not fail for a replicator's settings
        settings = None
    if settings is not None:
        out["settings"] = {feature: settings.quote(feature) for feature in VERIFIED_FEATURES}
    for what, ask in (("health", replicator.health), ("status", replicator.status)) if state else ():
        try:
            out[what] = str(ask() or "")
        except Exception as exc:
            out[what] = f"cannot tell: {type(exc).__name__}: {exc}"
    return out


def _log_producing(p: dict[str, Any], capture: Capture) -> None:
    """The producer's progress (every 10 s) as a sentence, with the arrivals so far."""
    try:
        arrived = f"{int(sum(capture.progress().get('by_topic', {}).values())):,}"
    except Exception:  # no progress file yet: say so rather than fail the producer
        arrived = "none yet"
    log.info("producer %s: %s records sent in %.0f s; arrived on the target so far (this run): %s",
             p.get("producer_id"), f"{int(p.get('sent', 0)):,}", float(p.get("elapsed", 0.0)), arrived)


def _planned_seconds(rate: Any, duration: float | None, count: int | None) -> float | None:
    """How long a producer's schedule lasts, when the arguments say it."""
    if duration:
        return float(duration)
    if count and isinstance(rate, (int, float)) and rate > 0:
        return count / rate
    return None


class MirrorRun:
    """Produce to ``topics`` on the source and verify their copies on the target."""

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        source_bootstrap: str,
        target_bootstrap: str,
        topics: dict[str, str],
        *,
        partitions: dict[str, int],
        lanes: dict[str, int] | int | None = None,
        drain_timeout: float = 30.0,
        settle: float = 0.5,
        topic_timeout: float = 60.0,
        warmup_topic: str | None = None,
        capture_source: bool = False,
        capture_processes: int = 1,
        replicator: Replicator | None = None,
        provisioned: dict[str, TopicReadiness] | None = None,
        compacted: Sequence[str] = (),
        end_offsets: tuple[bool | None, str] = (None, ""),
        engine: SparkEngine | None = None,
        store: str | None = None,
    ) -> None:
        compacted = [compacted] if isinstance(compacted, str) else list(compacted)
        unknown = sorted(set(compacted) - set(topics))
        if unknown:
            raise ValueError(f"compacted={unknown}: not topics of this run ({sorted(topics)})")
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.source_bootstrap = source_bootstrap
        self.target_bootstrap = target_bootstrap
        self.topics = dict(topics)  # source -> target
        #: source topics with cleanup.policy=compact (recorded in every manifest of the run)
        self.compacted = sorted(compacted)
        self.partitions = partitions
        self.lanes = lanes
        self.drain_timeout = drain_timeout
        self.settle = settle
        self.topic_timeout = topic_timeout
        self.warmup_topic = warmup_topic
        self.target_wait_seconds: float | None = None
        #: the replicator under test, for what it says when a topic never becomes ready
        #: (its log, its status); None: only the clusters are known
        self.replicator = replicator
        #: readiness rounds of this run, in order (``provisioned`` ones: from the session's start)
        self.readiness: list[TopicReadiness] = [r for t, r in (provisioned or {}).items() if t in self.topics]
        # capture_processes > 1 splits the target's partitions between capture processes
        # (capture.py), for targets one process cannot keep up with.
        # end_offsets: whether the target reports accurate end offsets, and why (its
        # capability): the capture samples them for its own lag behind the target
        self.end_offsets = end_offsets
        #: the spark engine: the captures and producers as tasks of its Spark application
        #: (None: processes on this host)
        self.engine = engine
        #: the run store's URI of this run (``--kafka-mirror-run-store``) and the mirror that keeps
        #: this working copy in step with it; None: the run is kept only here
        self.store = store
        self.mirror: DirMirror | None = None
        if store is not None:
            write_json_atomic(self.run_dir / STORE_FILE, {"uri": store})
            self.mirror = DirMirror(self.run_dir, store).start()
        launcher = engine.launcher(self.run_dir, mirror=self.mirror) if engine is not None else None
        self.capture = Capture(target_bootstrap, self.run_dir, self.topics, drain_timeout=drain_timeout, settle=settle,
                               processes=capture_processes, end_offsets=end_offsets, launcher=launcher)
        #: the p99 SLO (ms) the steps of a stepped rate profile are judged by (``max_sustainable_rate``);
        #: None: ``verify/_capacity.py``'s DEFAULT_SLO_P99_MS
        self.capacity_slo_ms: float | None = None
        self.source_capture: Capture | None = None
        if capture_source:
            self.source_capture = Capture(source_bootstrap, self.run_dir / SOURCE_DIR, {t: t for t in self.topics},
                                          drain_timeout=drain_timeout, settle=settle, manifest_dir=self.run_dir,
                                          processes=capture_processes, launcher=launcher)
        self.source_capture_status: dict[str, Any] | None = None
        self.manifests: list[Manifest] = []
        self.capture_status: dict[str, Any] | None = None
        self.report: MirrorReport | None = None
        #: faults as they happened, over every produce() of the run (see faults.py)
        self.markers: list[Marker] = []
        self._capture_started = False
        #: witness consumer groups of each produce() call (see witness.py)
        self.witnesses: list[WitnessMonitor] = []
        self._background: list[tuple[threading.Thread, list[BaseException]]] = []
        self._lock = threading.Lock()
        #: runs capturing the same records on other targets (:meth:`also_capture`)
        self.siblings: list[MirrorRun] = []
        #: the run whose records this one captures too (None: its own producers)
        self.parent: MirrorRun | None = None
        self._capture_processes = capture_processes
        #: ``on_phase(phase, expected_s, limit_s)`` at each phase of the run: readiness,
        #: producing (``expected_s``: its planned length, when known), draining (``limit_s``:
        #: the drain timeout), verifying, done; for live progress (``report/progress.py``)
        self.on_phase: Callable[[str, float | None, float | None], None] | None = None

    def _phase(self, phase: str, expected_s: float | None = None, limit_s: float | None = None) -> None:
        """Tell :attr:`on_phase`; a progress display that fails never fails the run."""
        if self.on_phase is not None:
            try:
                self.on_phase(phase, expected_s, limit_s)
            except Exception as exc:
                log.debug("progress of %s: %s", self.run_dir, exc)

    def also_capture(self, run_dir: str | os.PathLike[str], target_bootstrap: str, topics: dict[str, str], *,
                     replicator: Replicator | None = None,
                     end_offsets: tuple[bool | None, str] = (None, "")) -> MirrorRun:
        """A sibling run: the records this run produces, captured on another target
        (``topics``: source topic -> its name there, e.g. from that flow's replicator).

        It gets the same manifests and fault markers as this run, waits for its own
        replicator's readiness before each schedule starts, and is verified on its own
        (``mirror_verifier(sibling)``: one report per target).  Call it before producing."""
        if self.manifests or self._capture_started:
            raise RuntimeError("also_capture() after the run started producing: call it before produce()")
        missing = sorted(set(self.topics) - set(topics))
        if missing:
            raise ValueError(f"also_capture: no target name for {missing}")
        sibling = MirrorRun(run_dir, self.source_bootstrap, target_bootstrap, {t: topics[t] for t in self.topics},
                            partitions=self.partitions, lanes=self.lanes, drain_timeout=self.drain_timeout,
                            settle=self.settle, topic_timeout=self.topic_timeout, warmup_topic=self.warmup_topic,
                            capture_processes=self._capture_processes, replicator=replicator,
                            end_offsets=end_offsets)
        sibling.parent = self
        self.siblings.append(sibling)
        return sibling

    def _topic_lanes(self, topics: Sequence[str] | None = None,
                     lanes: dict[str, int] | int | None = None) -> list[TopicLanes]:
        out = []
        given = self.lanes if lanes is None else lanes
        for topic in topics or self.topics:
            n = given.get(topic) if isinstance(given, dict) else given
            out.append(TopicLanes(topic, self.partitions[topic], n))
        return out

    def _refresh_partitions(self, topics: Sequence[str], source_bootstrap: str | None = None) -> None:
        """Take the source's partition counts of ``topics`` that grew since the run began
        (a topic that does not exist yet keeps the count it was declared with)."""
        from ._kafkalog import admin_client

        try:
            md = admin_client(source_bootstrap or self.source_bootstrap).list_topics(timeout=10)
        except Exception as exc:  # the readiness round and the producer report an unreachable source
            log.info("no partition counts from the source (%s)", exc)
            return
        for t in topics:
            meta = md.topics.get(t)
            if meta is not None and meta.error is None and len(meta.partitions) > self.partitions.get(t, 0):
                self.partitions[t] = len(meta.partitions)

    def start_capture(self) -> None:
        # under the lock: two producers of one run may start at once (a fan-in's two sources)
        with self._lock:
            if not self._capture_started:
                self.capture.start()
                if self.source_capture is not None:
                    self.source_capture.start()
                self._capture_started = True
        for sibling in self.siblings:
            sibling.start_capture()

    def produce(
        self,
        *,
        rate: float | Sequence[tuple[float, float]] | None,
        duration: float | None = None,
        count: int | None = None,
        format: str = "headers",
        message_size: int = 200,
        producer_id: str | None = None,
        config: dict[str, Any] | None = None,
        wait_for_target: bool = True,
        topics: Sequence[str] | None = None,
        faults: Sequence[Scheduled] = (),
        on_counts: CountsCallback | None = None,
        witnesses: Sequence[tuple[Witness, str]] = (),
        processes: int = 1,
        lanes: dict[str, int] | int | None = None,
        source_bootstrap: str | None = None,
        replicator: Replicator | None = None,
    ) -> Manifest | list[Manifest]:
        """Produce one batch of records (blocking) and record its manifest.

        ``processes=N`` (N > 1) produces from N processes sharing one schedule, each with
        its own producer id at ``rate / N`` (see :mod:`~pytest_kafka_mirror.produce.group`),
        and returns their N manifests; ``producer_id`` then names them ``ID-0`` .. ``ID-N-1``.

        Argument errors are raised before anything is started.  With ``wait_for_target``
        (the default) production starts only once a warm-up record of every partition
        crossed the replicator (:meth:`await_ready`) and the capture reads the target
        topics, so the replicator's topic discovery is not counted as record latency (it
        is the report's ``discovery_s``); False starts at once.

        ``topics``: a subset of the run's topics (default: all of them), e.g. a topic that
        only exists from the middle of the run on.  ``lanes``: this producer's lanes (default:
        the run's), e.g. more after partitions were added.  A topic that has grown since the
        run began (``add_partitions``) is produced to with its partitions of now.  ``faults``: ``at(SECONDS, fault)``
        entries applied while producing, timed from the start of the schedule; what
        happened is kept in :attr:`markers` (a fault that fails is recorded, and
        :meth:`fault_errors` reports it after the run: nothing measured is lost).
        ``on_counts`` receives live producer counts (see
        :data:`~pytest_kafka_mirror.produce.producer.CountsCallback`).  ``witnesses``:
        ``(Witness, group id)`` pairs, consumer groups on the source that read these
        topics while they are produced and commit at their points (see
        :mod:`~pytest_kafka_mirror.capture.witness`, and :meth:`failover`).

        ``source_bootstrap`` + ``replicator``: this producer writes to another source
        cluster, whose replicator copies its topics into this run's target topics (a fan-in
        onto one topic: every topic must have the same target name through it); its
        readiness round goes through that replicator.
        """
        from .faults.schedule import FaultSchedule

        chosen = self._chosen(topics)
        origin = self._origin(chosen, source_bootstrap, replicator, witnesses)
        schedule = FaultSchedule(list(faults))
        producer = self._producer(processes, format=format, message_size=message_size, producer_id=producer_id,
                                  config=config, source_bootstrap=origin[0])
        self._refresh_partitions(chosen, origin[0])
        topic_lanes = self._topic_lanes(chosen, lanes)
        producer.check_size(topic_lanes)
        monitor = self._witness_monitor(witnesses, chosen) if witnesses else None
        self._start_capture_and_wait(chosen, origin, wait_for_target)
        if monitor is not None:
            self.witnesses.append(monitor.start())

        def on_start() -> None:
            self._phase("producing", _planned_seconds(rate, duration, count))
            schedule.start()
            if monitor is not None:
                monitor.start_clock()

        try:
            result = producer.run(topic_lanes, rate=rate, duration=duration, count=count, target_names=self.topics,
                                  progress=lambda p: _log_producing(p, self.capture), warmup_topic=self.warmup_topic,
                                  on_start=on_start, on_counts=on_counts)
        except BaseException as exc:
            if monitor is not None:
                monitor.stop()
            cut = getattr(producer, "interrupted", None) if isinstance(exc, KeyboardInterrupt) else None
            if cut is not None:
                # what the source acknowledged until Ctrl-C (a group: per process that stopped in
                # time): `kafka-mirror verify RUN_DIR` verifies it
                cut = cut if isinstance(cut, list) else [cut]
                for manifest in cut:
                    manifest.write(self.run_dir)
                with self._lock:
                    self.manifests.extend(cut)
            raise
        finally:
            # Faults still due after the last record (e.g. a restart at the end) happen
            # before the capture is told the producers are done.
            markers = schedule.finish()
            with self._lock:
                self.markers.extend(markers)
                self.markers.sort(key=lambda m: m.at_us)
        self._record(result if isinstance(result, list) else [result], markers, monitor)
        self._phase("produced")
        if isinstance(result, list) and processes == 1:  # the spark engine's group of one
            return result[0]
        return result

    def produce_transactions(self, *, transactions: int, records: int, abort_every: int = 3, interval: float = 0.2,
                             format: str = "headers", message_size: int = 200, producer_id: str | None = None,
                             config: dict[str, Any] | None = None, topics: Sequence[str] | None = None,
                             wait_for_target: bool = True) -> Manifest:
        """Produce in transactions (blocking), committing them but every ``abort_every``-th,
        which is aborted (:class:`~pytest_kafka_mirror.produce.transactions.TransactionalProducer`),
        and record the manifest: the committed records are expected, the aborted ones must
        never arrive (``report.aborted_arrived``).  Readiness and the capture as in :meth:`produce`."""
        from .produce.transactions import TransactionalProducer

        chosen = self._chosen(topics)
        producer = TransactionalProducer(self.source_bootstrap, format=format, message_size=message_size,
                                         producer_id=producer_id, config=config, timeout=self.topic_timeout)
        self._refresh_partitions(chosen)
        topic_lanes = self._topic_lanes(chosen)
        self._start_capture_and_wait(chosen, (self.source_bootstrap, self.replicator), wait_for_target)
        self._phase("producing")
        manifest = producer.run(topic_lanes, transactions=transactions, records=records, abort_every=abort_every,
                                interval=interval, target_names=self.topics)
        self._record([manifest], [], None)
        self._phase("produced")
        return manifest

    def _chosen(self, topics: Sequence[str] | None) -> list[str]:
        """The topics of one produce() call: ``topics``, or all the run's."""
        chosen = list(topics) if topics else list(self.topics)
        unknown = [t for t in chosen if t not in self.topics]
        if unknown:
            raise ValueError(f"topics {unknown} are not topics of this run ({sorted(self.topics)})")
        return chosen

    def _origin(self, chosen: Sequence[str], source_bootstrap: str | None, replicator: Replicator | None,
                witnesses: Sequence[Any]) -> tuple[str, Replicator | None]:
        """(source bootstrap, replicator) of one produce() call: the run's, or another
        source's whose replicator names ``chosen`` as this run's target topics."""
        if source_bootstrap is None or source_bootstrap == self.source_bootstrap:
            return self.source_bootstrap, self.replicator
        if witnesses or self.source_capture is not None or self.siblings:
            raise ValueError("a producer on another source cluster takes no witnesses, capture_source or also_capture: "
                             "they read the run's own source")
        if replicator is not None:
            names = {t: replicator.target_topic(t) for t in chosen}
            wrong = {t: n for t, n in names.items() if n != self.topics[t]}
            if wrong:
                raise ValueError(f"the replicator from {source_bootstrap} names these topics {wrong} on the target, "
                                 f"not as this run captures them ({ {t: self.topics[t] for t in wrong} }): under "
                                 "DefaultReplicationPolicy each source has remote topics of its own, so a run per source")
        return source_bootstrap, replicator

    def _producer(self, processes: int, *, format: str, message_size: int, producer_id: str | None,
                  config: dict[str, Any] | None, source_bootstrap: str | None = None) -> MirrorProducer | ProducerGroup:
        """One producer, or a group of ``processes`` (each produce() call's group in its own
        directory); with the spark engine always a group: its processes are Spark tasks."""
        if processes == 1 and self.engine is None:
            return MirrorProducer(source_bootstrap or self.source_bootstrap, format=format, message_size=message_size,
                                  producer_id=producer_id, config=config)
        return ProducerGroup(
            source_bootstrap or self.source_bootstrap, processes=processes, work_dir=self.run_dir / f"producers-{len(self.manifests)}",
            format=format, message_size=message_size, producer_id=producer_id, config=config,
            startup_timeout=self.topic_timeout,
            launcher=self.engine.launcher(self.run_dir, mirror=self.mirror) if self.engine is not None else None,
        )

    def _witness_monitor(self, witnesses: Sequence[tuple[Witness, str]], chosen: Sequence[str]) -> WitnessMonitor:
        from .capture.witness import WitnessMonitor

        return WitnessMonitor(self.source_bootstrap, self.run_dir, witnesses, {t: self.partitions[t] for t in chosen},
                              end_timeout=self.drain_timeout)

    def _start_capture_and_wait(self, chosen: Sequence[str], origin: tuple[str, Replicator | None],
                                wait_for_target: bool) -> None:
        """Before a producer starts: the captures (this run's and its siblings') run and,
        with ``wait_for_target``, the topics are ready through ``origin``'s replicator and
        through each sibling's."""
        self.start_capture()
        if wait_for_target:
            self._phase("readiness", None, self.topic_timeout)
            self._wait_for_target(chosen, *origin)
            for sibling in self.siblings:
                sibling._wait_for_target(chosen)

    def _wait_for_target(self, chosen: Sequence[str], source_bootstrap: str | None = None, replicator: Replicator | None = None) -> None:
        """Readiness through the replicator, then the capture assigned every target partition."""
        self.await_ready(chosen, source_bootstrap=source_bootstrap, replicator=replicator)
        waited = self.capture.wait_assigned(
            {self.topics[t]: self.partitions[t] for t in chosen},
            self.topic_timeout,
            hint="Hint: is the replicator running and does it mirror these topics (its topic filter)?",
        )
        if self.target_wait_seconds is None:
            self.target_wait_seconds = waited

    def _record(self, manifests: list[Manifest], markers: list[Marker], monitor: WitnessMonitor | None) -> None:
        """Write the manifests of one produce() call, with the faults that happened during it."""
        for manifest in manifests:
            manifest.stats["faults"] = [m.to_dict() for m in markers]
            manifest.compacted = [t for t in self.compacted if t in manifest.topics]
            manifest.write(self.run_dir)
            for sibling in self.siblings:  # the same records, captured on another target
                manifest.write(sibling.run_dir)
        for sibling in self.siblings:
            with sibling._lock:
                sibling.manifests.extend(manifests)
                sibling.markers = sorted([*sibling.markers, *markers], key=lambda m: m.at_us)
        with self._lock:
            self.manifests.extend(manifests)
        if monitor is not None:
            monitor.production_done(self.manifests)

    def await_ready(self, topics: Sequence[str], *, source_bootstrap: str | None = None,
                    replicator: Replicator | None = None) -> list[TopicReadiness]:
        """Warm up every partition of ``topics`` through the replicator and wait until each
        warm-up record arrived (``replicators/_readiness.py``); the rounds are kept in
        ``RUN_DIR/readiness.json``.  Raises ReadinessError naming the partitions.
        ``source_bootstrap`` / ``replicator``: another source and its replicator (a fan-in)."""
        from .clusters.base import topic_created_us
        from .replicators._readiness import await_ready, replicator_hooks
        from .replicators.settings import readiness_hint

        rounds = await_ready(
            source_bootstrap or self.source_bootstrap, self.target_bootstrap,
            {t: (self.topics[t], self.partitions[t]) for t in topics}, timeout=self.topic_timeout,
            created_us={t: topic_created_us(t) for t in topics}, **replicator_hooks(replicator or self.replicator),
            hint=lambda found: readiness_hint(replicator or self.replicator, {t: self.topics[t] for t in topics},
                                              found),
        )
        with self._lock:
            self.readiness.extend(rounds.values())
            write_readiness(self.run_dir, self.readiness)
        for r in rounds.values():
            discovery = "not measured" if r.discovery_s is None else f"{r.discovery_s:.2f} s"
            log.info("ready: %s after %.2f s (discovery %s)", r.topic, r.warmup_s or 0.0, discovery)
        return list(rounds.values())

    def produce_in_background(self, **kwargs: Any) -> threading.Thread:
        """:meth:`produce` in a thread (same arguments); :meth:`finish` waits for it.

        For a second producer that starts mid-run, e.g. on a topic created by a fault.
        An error in the thread is raised again by :meth:`finish`.
        """
        errors: list[BaseException] = []

        def target() -> None:
            try:
                self.produce(**kwargs)
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=target, name="kafka-mirror-producer", daemon=True)
        thread.start()
        with self._lock:
            self._background.append((thread, errors))
        return thread

    def witness_logs(self) -> list[WitnessLog]:
        """The witness groups' logs (what each consumed and committed on the source), once
        their remaining ``"end"`` commits are made: for a scenario that works with those
        groups before the verification (``finish()`` waits for them too)."""
        return [log for monitor in self.witnesses for log in monitor.finish()]

    def record_figure(self, name: str, value: float | None, note: str = "") -> None:
        """Keep a figure the scenario measured itself (``scenario.json`` of the run
        directory): the verification's report, summary, stored run and comparison carry
        it, and ``--kafka-mirror-compare-fail NAME:N`` gates on it.  ``value`` None: it
        could not be measured (``note`` says why).  ``name`` is one of
        ``report.compare.SCENARIO_FIGURES``."""
        from .report.compare import FIGURES, SCENARIO_FIGURES
        from .rundir import record_scenario_figure

        if name not in SCENARIO_FIGURES:
            raise ValueError(f"record_figure: {name!r} is not a scenario figure; known: {', '.join(SCENARIO_FIGURES)}")
        if self.report is not None:
            raise RuntimeError(f"record_figure({name!r}) after the run was verified: its report, summary row and "
                               "stored result are made then; record it before mirror_verifier(run)")
        if value is not None:
            value = round(float(value), 3) if FIGURES[name].unit == "s" else int(value)
        with self._lock:
            record_scenario_figure(self.run_dir, name, value, note)

    def fault_errors(self) -> list[Marker]:
        """Faults that could not be applied."""
        return [m for m in self.markers if m.error]

    def _join_background(self) -> None:
        for thread, errors in self._background:
            thread.join()
            if errors:
                raise errors[0]

    def finish(self, timeout: float | None = None) -> dict[str, Any]:
        """Tell the captures the producers are done and wait for them to end (a sibling of
        :meth:`also_capture`: once its parent's producers are done)."""
        if self.capture_status is None:
            if self.parent is not None:
                self.parent._join_background()
            self._join_background()
            self.start_capture()
            self.capture.producers_done()
            if self.source_capture is not None:
                self.source_capture.producers_done()
            for monitor in self.witnesses:  # their "end" commits, while the capture drains
                monitor.finish()
            t0 = time.monotonic()
            self._phase("draining", None, self.drain_timeout)
            log.info("draining %s: the capture ends once every acknowledged record arrived, or %g s after the last "
                     "arrival", self.run_dir.name, self.drain_timeout)
            self.capture_status = self.capture.wait(timeout)
            log.info("capture of %s ended (%s) after %.1f s of draining: %s records of this run arrived",
                     self.run_dir.name, self.capture_status.get("reason"), time.monotonic() - t0,
                     f"{int(self.capture_status.get('ours', 0)):,}")
            if self.source_capture is not None:
                self.source_capture_status = self.source_capture.wait(timeout)
            self._write_engine()
            if self.mirror is not None:  # every file of the run at its URI before it is verified there
                self.mirror.flush()
            # next: the verification, or the failover checks (both start with Spark, seconds of a cold JVM)
            self._phase("verifying")
        return self.capture_status

    def _write_engine(self) -> None:
        """``engine.json``: where this run's producers and captures ran and the largest
        offset of their clocks to this host's (0 when they all ran here)."""
        tasks = self.engine.tasks(self.run_dir) if self.engine is not None else []
        worst = max(tasks, key=lambda t: abs(float(t.get("offset_ms") or 0.0)), default=None)
        clock = ({"max_offset_ms": 0.0, "uncertainty_ms": 0.0} if worst is None else
                 {"max_offset_ms": float(worst.get("offset_ms") or 0.0),
                  "uncertainty_ms": float(worst.get("uncertainty_ms") or 0.0), "task": worst.get("name"),
                  "host": worst.get("host")})
        write_json_atomic(self.run_dir / ENGINE_FILE, {"engine": "spark" if self.engine is not None else "local",
                                                       "tasks": tasks, "clock": clock})

    def verify(self, *, spark: Any = None, master: str = "local[2]", examples: int = 20) -> MirrorReport:
        """Finish the capture, run the Spark verification, write ``report.json``."""
        from .verify import verify_run

        self.finish()  # says "verifying" once the capture ended
        self.report = verify_run(self.run_dir, spark=spark, master=master, examples=examples, write_report=False)
        if self.capacity_slo_ms is not None:
            from .verify._capacity import with_slo

            self.report.capacity = with_slo(self.report.capacity, float(self.capacity_slo_ms))
        self.report.markers = [m.to_dict() for m in self.markers]
        missing = bool(self.report.lost or self.report.unseen or self.report.latest_missing)
        self.report.replicator = replicator_says(self.replicator, state=missing)
        self.report.write(self.run_dir / REPORT_FILE)
        self._phase("done")
        return self.report

    def failover(self, settings: CheckpointSettings, *, wait: float | None = None, reset: str = "latest",
                 emitter: str | None = None, leave_out: Mapping[str, str] | None = None) -> FailoverReport:
        """Fail the witness groups over to the target and check their translated offsets
        (:func:`pytest_kafka_mirror.verify.failover.check_failover`; ``settings``: the replicator's
        ``checkpoints``; ``leave_out``: parts not to check, with the reasons).  Finishes the
        capture first: the checks compare with it."""
        from .verify.failover import check_failover

        self.finish()
        return check_failover(self.run_dir, self.target_bootstrap, settings, self.topics, wait=wait, reset=reset,
                              emitter=emitter, source_bootstrap=self.source_bootstrap, leave_out=leave_out)

    def close(self) -> None:
        """Stop the captures if they still run (a test failed before verifying)."""
        self._phase("done")
        for monitor in self.witnesses:
            monitor.stop()
        self.capture.stop()
        if self.source_capture is not None:
            self.source_capture.stop()
        for sibling in self.siblings:
            sibling.close()
        if self.mirror is not None:
            mirror, self.mirror = self.mirror, None
            try:
                mirror.close()  # the report and the last logs
            except StoreError as exc:
                log.warning("%s (the run's files are all in %s)", exc, self.run_dir)

    def __enter__(self) -> MirrorRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
