"""The state of one pytest process's mirror runs, shared by the fixtures.

One :class:`KafkaMirrorSession` per pytest process (controller or xdist worker), created
in ``pytest_configure`` and kept in ``config.stash``: the settings, what the process
started and verified, how it verifies (``verify/spark.py``), and how it builds clusters
and replicators.  The fixtures in ``plugin.py`` hand out the facades of ``facades.py``,
which use it.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import Settings
from .processes.spark_tasks import SparkEngine
from .rundir import note_report_files
from .verify.spark import ProcessSpark

if TYPE_CHECKING:
    from .clusters import Cluster
    from .clusters.shared import ShareDir
    from .provisioning import TopicPool
    from .replicators import Replicator, ReplicatorSpec
    from .report.metrics import MetricsSpool
    from .report.progress import ProgressSpool
    from .report.storage import TestResult
    from .verify import MirrorReport

__all__ = ["WARMUP_TOPIC", "KafkaMirrorSession", "slug", "worker_id"]

log = logging.getLogger("pytest_kafka_mirror")

#: A topic outside the mirrored set, for warm-up records (see MirrorProducer.run).
WARMUP_TOPIC = "kafka-mirror-warmup"


def worker_id() -> str:
    """The xdist worker id (gw0, gw1, ...), or "master" when not distributed."""
    return os.environ.get("PYTEST_XDIST_WORKER", "master")


def slug(text: str, limit: int) -> str:
    """``text`` as a file or topic name part: letters, digits, ``._-``, at most ``limit`` characters."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:limit] or "test"


class KafkaMirrorSession:
    """Everything one pytest process knows about mirror runs."""

    def __init__(self, settings: Settings, basetemp: Path | None = None, session_id: str | None = None) -> None:
        self.settings = settings
        self.basetemp = basetemp
        #: the same in every process of one pytest run (xdist's testrunuid), unique per run
        self.session_id = session_id or uuid.uuid4().hex
        self.reports: list[tuple[str, MirrorReport, Path]] = []  # (nodeid, report, json path)
        #: every verification of this process, as the controller gets it (for an interrupted
        #: test, whose results never reach a test report)
        self.results: list[TestResult] = []
        #: (nodeid, run directory) of every run this process started; verified ones in ``verified``
        self.runs: list[tuple[str, Path]] = []
        self.verified: set[Path] = set()
        #: how this process verifies, and the SparkSession it verifies with once started
        # the spark engine's tasks need an application of this process's own: no shared Connect server
        self.spark = ProcessSpark(settings.spark_master, remote=settings.spark_remote,
                                  master_given=self._explicit("spark-master") or settings.engine == "spark",
                                  startup_timeout=settings.startup_timeout)
        #: the spark engine (producers and captures as Spark tasks), None for the local one
        self.engine: SparkEngine | None = SparkEngine(self.get_spark) if settings.engine == "spark" else None
        #: lines for the end of the terminal summary (e.g. the test topics deleted from bootstrap: clusters)
        self.closing_notes: list[str] = []
        #: the failover witnesses' consumer groups this process committed for (deleted with the
        #: session's topics on ``bootstrap:`` clusters, see provisioning.delete_session_topics)
        self.created_groups: list[str] = []
        #: live metrics of this process, when --kafka-mirror-metrics-port / -pushgateway is given
        self.metrics_spool: MetricsSpool | None = None
        #: live progress of this process's runs, unless --kafka-mirror-progress off (report/progress.py)
        self.progress_spool: ProgressSpool | None = None
        #: the shared replicator's topics, provisioned at its start (session topic provisioning)
        self.pool: TopicPool | None = None
        #: in an xdist worker, the run's share directory (the shared Spark Connect server's URL)
        self.share: ShareDir | None = None
        #: the largest record the collected tests may produce (provisioning.largest_record);
        #: None until collection (replicators then assume Kafka's default)
        self.max_record_bytes: int | None = None
        #: (test node id, what was wrong, why a restart failed or '') when a test left the
        #: shared replicator broken: the next test restarts it (plugin.py ``_revive``)
        self.broken_replicator: tuple[str, str, str] | None = None

    # -- infrastructure ----------------------------------------------------------------
    def _explicit(self, name: str) -> bool:
        """True when the setting ``name`` was given (option, ini or env), not defaulted."""
        return self.settings.sources.get(name, "default") != "default"

    def make_cluster(self, role: str, workdir: Path) -> Cluster:
        """The cluster of ``role``: ``source`` per ``--kafka-mirror-source``, ``target`` and
        any further one of a topology (``MirrorEnv.add_cluster``) per ``--kafka-mirror-target``."""
        from .clusters import BackendOptions, make_cluster

        s = self.settings
        spec = s.source if role == "source" else s.target
        options = BackendOptions(
            startup_timeout=s.startup_timeout if self._explicit("startup-timeout") else None, kafka_home=s.kafka_home,
            kafka_cache=s.kafka_cache,
        )
        cluster = make_cluster(role, spec, workdir, options)
        client = s.source_client if role == "source" else s.target_client
        if client:
            origins = s.source_client_origins if role == "source" else s.target_client_origins
            cluster.set_client_properties(client, origins)
        return cluster

    def worker_topic_prefix(self) -> str:
        """Prefix of this process's test topics: ``PREFIX-WORKER``.  Its replicator mirrors
        only topics that start with it, so xdist workers sharing clusters never copy each
        other's records."""
        return f"{self.settings.topic_prefix}-{worker_id()}"

    def make_replicator(
        self,
        source: Cluster,
        target: Cluster,
        workdir: Path,
        *,
        topic_prefix: str | None = None,
        extra_properties: tuple[tuple[str, str], ...] = (),
        spec: ReplicatorSpec | None = None,
        instance: str | None = None,
        aliases: tuple[str, str] | None = None,
    ) -> Replicator:
        """The configured replicator; ``topic_prefix`` / ``extra_properties`` make a
        dedicated one (marker ``replicator_properties``); ``spec`` another release (the
        in-place upgrade scenarios), ``instance`` the state of the one it replaces.
        ``aliases``: the flow's (source, target) cluster names in a topology of several
        flows (``MirrorEnv.add_flow``); its topic filter then also matches remote topics
        (:func:`~.replicators.mm2.remote_aware_regex`), so that only the replicator's own
        cycle detection keeps a copy from going back."""
        from .replicators import ReplicatorOptions, make_replicator
        from .replicators.mm2 import remote_aware_regex

        s = self.settings
        options = ReplicatorOptions(
            topic_prefix=topic_prefix or self.worker_topic_prefix(),
            session_prefix=s.topic_prefix,
            naming=s.naming if self._explicit("naming") else None,
            startup_timeout=s.startup_timeout if self._explicit("startup-timeout") else None,
            properties=s.replicator_properties + tuple(extra_properties),
            origins=tuple((k, s.sources.get("replicator-properties") or "--kafka-mirror-replicator-properties")
                          for k, _ in s.replicator_properties)
            + tuple((k, "the test's marker") for k, _ in extra_properties),
            kafka_home=s.kafka_home,
            kafka_cache=s.kafka_cache,
            commands=s.replicator_commands,
            status=s.replicator_status,
            warmup_topic=WARMUP_TOPIC,
            max_record_bytes=self.max_record_bytes,
            instance=instance,
            **({} if aliases is None else {
                "aliases": aliases, "topics": remote_aware_regex(topic_prefix or self.worker_topic_prefix())}),
        )
        return make_replicator(spec or s.replicator, source, target, workdir, options)

    def store_uri(self, run_dir: Path) -> str | None:
        """The run store's URI of ``run_dir`` (``STORE/session-ID/TEST-DIR/run-N``: the test's
        temporary directory names it), None without ``--kafka-mirror-run-store``."""
        store = self.settings.run_store
        if store is None:
            return None
        from .processes.store import join_uri

        return join_uri(store, f"session-{self.session_id[:12]}", run_dir.parent.name, run_dir.name)

    def get_spark(self, large: bool = False) -> Any:
        """This process's SparkSession for verification (:class:`~.verify.spark.ProcessSpark`:
        local, the run's shared Spark Connect server, or a remote one).  ``large``: to verify a
        large capture, which a local driver started with the C1 compiler is restarted for
        (never while the spark engine's tasks use the session)."""
        return self.spark.get(self.share, large=large and self.engine is None)

    def prestart_spark(self) -> None:
        """Start :meth:`get_spark`'s session in the background (a run that will be verified began)."""
        self.spark.prestart(self.share)

    def stop_spark(self) -> None:
        """Stop the SparkSession :meth:`get_spark` started (one it found running is left to its owner),
        after the spark engine's stages still running (cancelled)."""
        if self.engine is not None:
            self.engine.close()
        self.spark.stop()

    def report_path(self, nodeid: str, index: int) -> Path:
        name = slug(nodeid.replace("::", "."), 150)
        suffix = f"-{index}" if index else ""
        return self.settings.report_dir / f"{name}{suffix}.json"

    def report_files(self, *paths: Path | str) -> list[Path]:
        """Before writing to the report directory, and with what was written: see
        :func:`~.rundir.note_report_files`."""
        return note_report_files(self.settings.report_dir, self.session_id, [Path(p) for p in paths])

    def unverified_runs(self, nodeids: Iterable[str]) -> list[tuple[str, Path]]:
        """(nodeid, run directory) of the runs of ``nodeids`` that were not verified."""
        wanted = set(nodeids)
        return [(n, d) for n, d in self.runs if n in wanted and d not in self.verified]
