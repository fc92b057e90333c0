"""What the fixtures hand a test: plain-Python facades over one process's session.

``mirror_topics`` is a :class:`MirrorTopics`, ``mirror_producer`` a
:class:`MirrorProducerFactory`, ``mirror_verifier`` a :class:`MirrorVerifier` and
``mirror_failover`` a :class:`MirrorFailover`; ``plugin.py`` builds them per test, and
they are usable without pytest (``tests/integration`` drives them directly).  What they
share across tests lives in the :class:`~.session.KafkaMirrorSession`.
"""

from __future__ import annotations

import logging
import uuid
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._warnings import PytestKafkaMirrorWarning
from .report.storage import FAILOVER, TestResult
from .session import WARMUP_TOPIC, KafkaMirrorSession, slug, worker_id

if TYPE_CHECKING:
    import threading

    from .capture.witness import Witness
    from .clusters import Cluster
    from .env import Flow, MirrorEnv
    from .faults.schedule import Scheduled
    from .produce.producer import CountsCallback
    from .provisioning import TopicPool
    from .replicators import Replicator
    from .run import MirrorRun
    from .verify import MirrorReport
    from .verify.failover import FailoverReport

__all__ = ["MirrorFailover", "MirrorProducerFactory", "MirrorTopics", "MirrorVerifier", "topic_names"]

log = logging.getLogger("pytest_kafka_mirror")


def _end_offsets(cluster: Any) -> tuple[bool | None, str]:
    """Whether ``cluster`` reports accurate end offsets (its capability; probed once on a
    backend that probes), and why: the capture samples them for its own lag behind it."""
    try:
        caps = cluster.capabilities()
        return caps.accurate_watermarks, caps.reason("accurate_watermarks")
    except Exception as exc:  # noqa: BLE001 - not knowing is an answer: sampled, taken as accurate
        return None, f"not known ({exc!r})"


def topic_names(prefix: str, test_name: str, n: int, name: str | None = None) -> list[str]:
    """Unique names of ``n`` test topics: ``PREFIX-WORKER-TEST-uuid[-i]``."""
    base = f"{prefix}-{worker_id()}-{slug(name or test_name, 60)}-{uuid.uuid4().hex[:6]}"
    return [base if n == 1 else f"{base}-{i}" for i in range(n)]


class MirrorTopics:
    """Hands out uniquely named topics on the source cluster (prefix + worker + test + uuid).

    With a session :class:`~pytest_kafka_mirror.provisioning.TopicPool` (``pool``), a call
    the test declared (``@pytest.mark.kafka_mirror_topics``) gets topics created at the
    session's start; an undeclared one warns and creates its own.
    """

    def __init__(self, source: Cluster, prefix: str, test_name: str, *, pool: TopicPool | None = None,
                 nodeid: str = "") -> None:
        self.source = source
        self.prefix = prefix
        self.test_name = test_name
        self.pool = pool
        self.nodeid = nodeid
        self.created: dict[str, int] = {}

    def __call__(self, n: int = 1, *, partitions: int = 3, name: str | None = None,
                 config: dict[str, str] | None = None, create: bool = True) -> list[str]:
        """Create ``n`` topics with ``partitions`` partitions each and return their names.

        ``config``: topic configs (e.g. ``{"max.message.bytes": "4194304"}``).
        ``create=False`` only reserves unique names, for topics a fault creates mid-run.
        """
        from .provisioning import MARKER, TopicDeclaration

        decl = TopicDeclaration.of(n, partitions=partitions, config=config, name=name)
        if not create:
            return topic_names(self.prefix, self.test_name, n, name)
        if self.pool is not None:
            names = self.pool.take(self.nodeid, decl)
            if names is not None:
                self.created.update((t, partitions) for t in names)
                return names
            warnings.warn(PytestKafkaMirrorWarning(
                f"mirror_topics({n}, partitions={partitions}{', config=...' if config else ''}) was not declared: "
                f"the replicator discovers these topics mid-session (a rebalance for MirrorMaker 2, pausing "
                f"every test's replication); declare them with @pytest.mark.{MARKER}({n}, partitions={partitions}"
                f"{', config={...}' if config else ''})"), stacklevel=2)
        names = topic_names(self.prefix, self.test_name, n, name)
        for t in names:
            self.source.create_topic(t, partitions, config=config)
            self.created[t] = partitions
        return names


class MirrorProducerFactory:
    """``mirror_producer(topics, rate=..., duration=...)`` → a produced :class:`MirrorRun`."""

    def __init__(
        self,
        session: KafkaMirrorSession,
        source: Cluster,
        target: Cluster,
        replicator: Replicator,
        run_root: Path,
        topics: MirrorTopics,
        overrides: dict[str, Any] | None = None,
        test_id: str = "",
        env: MirrorEnv | None = None,
        verifies: bool = False,
    ) -> None:
        self.session = session
        self.test_id = test_id
        #: the test verifies its runs (it has ``mirror_verifier``): a run starts the Spark session early
        self.verifies = verifies
        self.source = source
        self.target = target
        self._replicator = replicator
        #: the test's environment: a run made after ``env.switch_replicator`` waits for the new one
        self.env = env
        self.run_root = run_root
        self.topics = topics
        self.overrides = overrides or {}
        self.runs: list[MirrorRun] = []
        #: factories of the test's other flows (:meth:`for_flow`), closed with this one
        self.flows: dict[str, MirrorProducerFactory] = {}

    @property
    def replicator(self) -> Replicator:
        """The replicator new runs go through: the environment's now (after
        ``mirror_env.switch_replicator``: the new one), else the one given."""
        return self.env.replicator if self.env is not None else self._replicator

    def for_flow(self, flow: Flow) -> MirrorProducerFactory:
        """The same factory for another flow of the test's environment
        (``mirror_env.add_flow(...)``): ``.topics(...)`` creates topics on that flow's source,
        its runs produce there and capture that flow's target (in ``RUN_ROOT/SOURCE-TARGET``)."""
        key = f"{flow.source}-{flow.target}"
        if key not in self.flows:
            topics = MirrorTopics(flow.source_cluster, self.topics.prefix, self.topics.test_name, nodeid=self.topics.nodeid)
            self.flows[key] = MirrorProducerFactory(self.session, flow.source_cluster, flow.target_cluster,
                                                    flow.replicator, self.run_root / key, topics, self.overrides,
                                                    self.test_id, verifies=self.verifies)
        return self.flows[key]

    def also_capture(self, run: MirrorRun, flow: Flow) -> MirrorRun:
        """``run``'s records captured on ``flow``'s target too (a fan-out: ``flow`` has the
        run's source; see :meth:`MirrorRun.also_capture`); verify it on its own."""
        if flow.source_cluster.bootstrap_servers != self.source.bootstrap_servers:
            raise ValueError(f"also_capture: the flow {flow} does not start at this run's source cluster")
        sibling = run.also_capture(run.run_dir.with_name(f"{run.run_dir.name}-{flow.target}"),
                                   flow.target_cluster.bootstrap_servers,
                                   {t: flow.replicator.target_topic(t) for t in run.topics}, replicator=flow.replicator,
                                   end_offsets=_end_offsets(flow.target_cluster))
        self.session.runs.append((self.test_id, sibling.run_dir))
        return sibling

    def new_run(
        self,
        topics: Sequence[str],
        *,
        lanes: dict[str, int] | int | None = None,
        partitions: dict[str, int] | None = None,
        capture_source: bool = False,
        capture_processes: int = 1,
        compacted: Sequence[str] = (),
    ) -> MirrorRun:
        """A run over ``topics`` without producing yet (several producers in one run).

        ``partitions`` gives the partition count of topics that do not exist yet (created
        mid-run by a fault); the others are looked up on the source.
        ``capture_source=True`` also captures the source topics, for three-log reconciliation.
        ``capture_processes=N`` splits the target partitions between N capture processes.
        ``compacted``: those of ``topics`` that are compacted (``cleanup.policy=compact``): the
        verifier expects the latest record of each lane (a key) there, not every one.
        """
        from .run import MirrorRun

        if isinstance(topics, str):
            topics = [topics]
        if not topics:
            raise ValueError("mirror_producer needs at least one topic (see the mirror_topics fixture)")
        counts: dict[str, int] = {}
        for t in topics:
            n = (partitions or {}).get(t) or self.topics.created.get(t) or self.source.partitions(t)
            if n is None:
                raise ValueError(
                    f"topic {t!r} does not exist on the source cluster; create it with mirror_topics(), or give "
                    f"its partition count in partitions={{...}} when a fault creates it mid-run"
                )
            counts[t] = n
        s = self.session.settings
        run = MirrorRun(
            self.run_root / f"run-{len(self.runs)}",
            self.source.bootstrap_servers,
            self.target.bootstrap_servers,
            {t: self.replicator.target_topic(t) for t in topics},
            partitions=counts,
            lanes=lanes,
            drain_timeout=float(self.overrides.get("drain_timeout", s.drain_timeout)),
            settle=float(self.overrides.get("settle", s.settle)),
            topic_timeout=float(self.overrides.get("topic_timeout", s.startup_timeout)),
            warmup_topic=self._warmup_topic(),
            capture_source=capture_source,
            capture_processes=capture_processes,
            replicator=self.replicator,
            provisioned=self.topics.pool.readiness if self.topics.pool is not None else None,
            compacted=compacted,
            end_offsets=_end_offsets(self.target),
            engine=self.session.engine,
            store=self.session.store_uri(self.run_root / f"run-{len(self.runs)}"),
        )
        self.runs.append(run)
        self.session.runs.append((self.test_id, run.run_dir))
        if self.verifies or self.session.engine is not None:
            self.session.prestart_spark()  # the JVM starts while the run produces
        if self.session.metrics_spool is not None:
            self.session.metrics_spool.capture_started(self.test_id, run.run_dir)
        if self.session.progress_spool is not None:
            run.on_phase = self.session.progress_spool.for_run(self.test_id, run.run_dir).on_phase
        return run

    def _warmup_topic(self) -> str | None:
        try:
            return self.source.ensure_topic(WARMUP_TOPIC)  # type: ignore[attr-defined, no-any-return]
        except Exception as exc:
            log.warning("no warm-up topic on the source (%s); the first records carry client start-up latency", exc)
            return None

    def __call__(
        self,
        topics: Sequence[str] | str,
        *,
        rate: float | Sequence[tuple[float, float]] | None,
        duration: float | None = None,
        count: int | None = None,
        format: str | None = None,
        message_size: int | None = None,
        lanes: dict[str, int] | int | None = None,
        wait_for_target: bool = True,
        config: dict[str, Any] | None = None,
        faults: Sequence[Scheduled] = (),
        capture_source: bool = False,
        producer_id: str | None = None,
        witnesses: Sequence[Witness] = (),
        processes: int = 1,
        capture_processes: int = 1,
        compacted: Sequence[str] = (),
    ) -> MirrorRun:
        """Produce to ``topics`` at ``rate`` msg/s per topic for ``duration`` s or ``count`` records,
        applying ``faults`` (``at(SECONDS, fault)``, see :mod:`pytest_kafka_mirror.faults`) on the way.

        ``capture_source=True`` also captures the source topics, so the report tells records
        lost by the replicator from records the source cluster lost.  ``witnesses``
        (:func:`~pytest_kafka_mirror.capture.witness.witness`) are consumer groups on the source
        that consume and commit at chosen points, for ``mirror_failover(run)``.
        ``processes=N`` produces from N processes sharing the schedule, each at ``rate / N``
        with its own producer id (for rates one core cannot reach); ``capture_processes=N``
        reads the target with N capture processes, each taking a share of the partitions.
        ``compacted``: the topics with ``cleanup.policy=compact`` (see :meth:`new_run`).
        """
        run = self.new_run(topics if not isinstance(topics, str) else [topics], lanes=lanes,
                           capture_source=capture_source, capture_processes=capture_processes,
                           compacted=compacted)
        self.produce(run, rate=rate, duration=duration, count=count, format=format, message_size=message_size,
                     wait_for_target=wait_for_target, config=config, faults=faults, producer_id=producer_id,
                     witnesses=witnesses, processes=processes)
        return run

    def witness_groups(self, witnesses: Sequence[Witness]) -> list[tuple[Witness, str]]:
        """Test-unique group ids (``PREFIX-WORKER-TEST-uuid-NAME``): named like the test's
        topics, so the replicator's group filter (its topic filter, or MM2's rendered
        ``groups``) takes them, and no other test's replicator does."""
        base = f"{self.topics.prefix}-{worker_id()}-{slug(self.topics.test_name, 40)}-{uuid.uuid4().hex[:6]}"
        pairs = [(w, f"{base}-{w.name}") for w in witnesses]
        self.session.created_groups.extend(group for _, group in pairs)
        return pairs

    def produce(self, run: MirrorRun, *, flow: Flow | None = None, **kwargs: Any) -> Any:
        """``run.produce(...)`` with this session's default format and message size.

        ``flow``: produce on that flow's source, carried by its replicator into the run's
        target topics (a fan-in onto one topic, IdentityReplicationPolicy)."""
        return run.produce(**self._produce_kwargs(flow, kwargs, run))

    def produce_in_background(self, run: MirrorRun, *, flow: Flow | None = None, **kwargs: Any) -> threading.Thread:
        """:meth:`produce` in a thread (``run.produce_in_background``): the verification of
        ``run`` waits for it and raises its error.  E.g. both directions of an active-active
        pair at once, or the second source of a fan-in."""
        return run.produce_in_background(**self._produce_kwargs(flow, kwargs, run))

    def _produce_kwargs(self, flow: Flow | None, kwargs: dict[str, Any], run: MirrorRun) -> dict[str, Any]:
        if flow is not None:
            kwargs.update(source_bootstrap=flow.source_cluster.bootstrap_servers, replicator=flow.replicator)
            try:  # the producer warms its connection up there (see _warmup_topic)
                flow.source_cluster.ensure_topic(WARMUP_TOPIC)  # type: ignore[attr-defined]
            except Exception as exc:
                log.warning("no warm-up topic on %s (%s)", flow.source, exc)
        s = self.session.settings
        kwargs["format"] = kwargs.get("format") or s.format
        kwargs["message_size"] = kwargs.get("message_size") or s.message_size
        if kwargs.get("witnesses"):
            kwargs["witnesses"] = self.witness_groups(kwargs["witnesses"])
        kwargs["on_counts"] = self._counts_callback(kwargs.get("on_counts"), run)
        return kwargs

    def _counts_callback(self, given: CountsCallback | None, run: MirrorRun) -> CountsCallback | None:
        """The producer's ``on_counts``: the test's own (``given``), the metrics' and the
        progress display's, each called in turn."""
        spool, progress = self.session.metrics_spool, self.session.progress_spool
        callbacks = [c for c in (given, spool.producer_counts if spool else None,
                                 progress.for_run(self.test_id, run.run_dir).on_counts if progress else None) if c]
        if len(callbacks) <= 1:
            return callbacks[0] if callbacks else None

        def each(producer_id: str, counts: dict[str, dict[str, float]]) -> None:
            for callback in callbacks:
                callback(producer_id, counts)

        return each

    def close(self) -> None:
        for run in self.runs:
            run.close()
        for factory in self.flows.values():
            factory.close()


class MirrorVerifier:
    """``mirror_verifier(run)`` → :class:`MirrorReport`, saved as JSON in the report dir,
    with its plots (``plots.py``) beside it."""

    def __init__(self, session: KafkaMirrorSession, nodeid: str, params: dict[str, Any] | None = None) -> None:
        self.session = session
        self.nodeid = nodeid
        self.params = params or {}
        self.reports: list[MirrorReport] = []
        #: one per verification, for the stored run and the summary (plugin.py attaches them
        #: to the test's report so that they reach the xdist controller)
        self.results: list[TestResult] = []

    def __call__(self, run: MirrorRun, *, examples: int = 20) -> MirrorReport:
        __tracebackhide__ = True
        # End the capture before Spark starts: a cold JVM takes seconds, and the capture
        # would keep waiting for the "producers done" signal all that time.
        run.finish()
        from .verify.job import large_capture

        spark = self.session.get_spark(large=large_capture(run.run_dir))
        report = run.verify(spark=spark, master=self.session.settings.spark_master, examples=examples)
        self.session.verified.add(run.run_dir)
        self.record(report)
        failed = run.fault_errors()
        if failed:
            from .faults.schedule import FaultError

            raise FaultError(
                "scheduled faults failed (the run was verified and its report saved):\n"
                + "\n".join(f"  at {m.t:.2f} s: {m.label}: {m.error}" for m in failed)
            )
        return report

    def record(self, report: MirrorReport) -> MirrorReport:
        """Take a report verified elsewhere (``kafka-mirror verify`` on another host, then
        ``MirrorReport.load``) into this test's results, as ``mirror_verifier(run)`` does
        with its own: JSON and plots in the report directory, the summary, the stored run
        and the comparison, JUnit properties and metrics.  Returns ``report``."""
        from .report.compare import figures

        index = len(self.reports)
        path = self.session.report_path(self.nodeid, index)
        self.session.report_files()  # the first report of the session replaces the earlier session's
        report.write(path)
        self.session.report_files(path)
        self.reports.append(report)
        self.session.reports.append((self.nodeid, report, path))
        key = TestResult.key_of(self.nodeid, index)
        result = TestResult(key=key, nodeid=self.nodeid, index=index, params=self.params, figures=figures(report),
                            report=report.to_dict(), report_path=str(path))
        try:
            from .report.plots import write_plots

            result.plots = write_plots(report, path.parent, path.stem, key)
        except Exception as exc:
            warnings.warn(PytestKafkaMirrorWarning(f"plots of {key} were not written: {exc!r}"), stacklevel=2)
        self.session.report_files(*result.plots.values())
        self.results.append(result)
        self.session.results.append(result)
        if self.session.metrics_spool is not None:
            from .report.compare import lower_bounds

            self.session.metrics_spool.verified(key, result.figures, [
                name for name in lower_bounds(result.report) if result.figures.get(name) is not None])
        return report


class MirrorFailover:
    """``mirror_failover(run)`` → :class:`~pytest_kafka_mirror.verify.failover.FailoverReport`.

    Fails the run's witness groups over to the target and checks their translated offsets
    (:mod:`pytest_kafka_mirror.verify.failover`), with what the replicator says it does about
    consumer groups (``replicator.checkpoints``: the reference mirror's and MM2's
    properties).  A replicator that does not say (``command:``, ``external:``) skips the
    test with the reason unless ``settings=`` is given.  The report is saved beside the
    test's other reports as ``...-failover.json``, and each check is a result of the test
    (key ``NODEID#failover``, ``NODEID#failover#N`` for its N-th further check) in the
    summary, the stored run and the comparison, as a verification is.
    """

    def __init__(self, session: KafkaMirrorSession, replicator: Replicator, nodeid: str,
                 on_report: Callable[[int, FailoverReport], None] | None = None,
                 params: dict[str, Any] | None = None, env: MirrorEnv | None = None,
                 leave_out: dict[str, str] | None = None) -> None:
        self.session = session
        #: checks left out on purpose, with the reasons (the marker's ``leave_out``, ``--kafka-mirror-leave-out``)
        self.leave_out = dict(leave_out or {})
        self._replicator = replicator
        #: the test's environment: its replicator is the one to ask, also after a switch
        self.env = env
        self.nodeid = nodeid
        self.params = params or {}
        self.reports: list[FailoverReport] = []
        #: one per failover check, as MirrorVerifier.results (plugin.py attaches them to the test's report)
        self.results: list[TestResult] = []
        #: called with (index, report) after each failover check (the plugin adds JUnit properties)
        self.on_report = on_report

    @property
    def replicator(self) -> Replicator:
        """The test's replicator now (after ``mirror_env.switch_replicator``: the new one)."""
        return self.env.replicator if self.env is not None else self._replicator

    def replicator_of(self, run: MirrorRun) -> Replicator:
        """The replicator that translated ``run``'s groups: the one of the flow it was
        produced on (``mirror_producer.for_flow(flow)``, e.g. the reverse flow of an
        active-active pair), else the test's replicator now."""
        flows = self.env.extra_flows.values() if self.env is not None else ()
        return next((f.replicator for f in flows if f.replicator is run.replicator), self.replicator)

    def __call__(self, run: MirrorRun, *, wait: float | None = None, reset: str = "latest",
                 settings: Any = None) -> FailoverReport:
        __tracebackhide__ = True
        replicator = self.replicator_of(run)
        settings = settings or replicator.checkpoints
        if settings is None:
            import pytest

            if replicator.no_translation:
                pytest.skip(f"failover checks: {replicator.no_translation}")
            pytest.skip(f"failover checks: the replicator {replicator.spec} does not say how it translates "
                        "consumer-group offsets; pass mirror_failover(run, settings=MM2_DEFAULTS.with_properties("
                        "{...})[0]) (from pytest_kafka_mirror.replicators import MM2_DEFAULTS)")
        from .run import replicator_says
        from .verify.failover import PARTS

        # the parts a replicator cannot give by its design (MM2 on a Connect cluster: no
        # replicated heartbeats), then the test's and the session's
        leave_out = dict(getattr(replicator, "failover_leaves_out", {}))
        leave_out.update({part: why for part, why in self.leave_out.items() if part in PARTS})
        if "checkpoints" in leave_out and ("synced offsets" in leave_out or settings.no_group_sync()):
            import pytest

            pytest.skip(f"failover checks: checkpoints {leave_out['checkpoints']}, and no synced offsets to check "
                        f"({leave_out.get('synced offsets') or settings.no_group_sync()})")
        report = run.failover(settings, wait=wait, reset=reset, leave_out=leave_out,
                              emitter=replicator.heartbeat_emitter)
        if report.not_run.keys() - {"offset syncs"} or report.explain or not report.entries:
            said = replicator_says(replicator)
            state = said.get("health") or said.get("status")
            if state:
                report.notes.append(f"the replicator ({said['spec']}) says: {state}")
        index = len(self.reports)
        path = self.session.report_path(self.nodeid, index)
        path = path.with_name(path.stem + "-failover.json")
        self.session.report_files()
        report.write(path)
        self.session.report_files(path)
        self.reports.append(report)
        self._record(index, report, path)
        if self.on_report is not None:
            self.on_report(index, report)
        return report

    def _record(self, index: int, report: FailoverReport, path: Path) -> None:
        """The check as a result of the test: figures, the whole report, where it was written."""
        from .report.compare import failover_figures

        result = TestResult(key=TestResult.key_of(self.nodeid, index, FAILOVER), nodeid=self.nodeid, index=index,
                            kind=FAILOVER, params=self.params, figures=failover_figures(report),
                            report=report.to_dict(), report_path=str(path))
        self.results.append(result)
        self.session.results.append(result)
