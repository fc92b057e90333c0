"""pytest entry point (``pytest11: kafka_mirror``): options, ini keys, marker, fixtures, summary.

This module is imported by every pytest run on a machine where the plugin is installed,
including ``pytest --help`` and unrelated projects, so it imports nothing heavy: Kafka
clients, pyarrow and pyspark are imported inside the fixtures that need them.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from .config import LIST, OPTIONS, Settings, SettingsError, resolve_settings
from .facades import MirrorFailover, MirrorProducerFactory, MirrorTopics, MirrorVerifier
from .report.storage import VERIFICATION
from .report.summary import RESULTS_ATTR, SPOOL_KEY
from .results import ResultsPlugin
from .session import KafkaMirrorSession, worker_id

if TYPE_CHECKING:
    from .clusters import Cluster
    from .env import MirrorEnv
    from .faults.schedule import MirrorFaults
    from .provisioning import TopicPool
    from .replicators import Replicator
    from .report.storage import TestResult

__all__ = ["SESSION_KEY"]

log = logging.getLogger("pytest_kafka_mirror")

SESSION_KEY = pytest.StashKey[KafkaMirrorSession]()
MARKER = "kafka_mirror"
#: Keyword arguments accepted by @pytest.mark.kafka_mirror(...)
MARKER_KWARGS = {"drain_timeout", "settle", "topic_timeout", "private", "replicator_properties", "release",
                 "leave_out"}
#: the marker's ``release=``: what a private environment's replicator starts as
RELEASES = ("current", "previous")


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspec

    pluginmanager.add_hookspecs(hookspec)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kafka-mirror", "test Kafka cross-cluster mirroring (pytest-kafka-mirror)")
    for opt in OPTIONS:
        # default=None (not given): the ini key, then the env var, then the default apply.
        group.addoption(opt.flag, **opt.addoption_kwargs())
        parser.addini(opt.ini, help=f"{opt.help} (see {opt.flag})", type=opt.ini_type,  # type: ignore[arg-type]
                      default=[] if opt.kind == LIST else "")


def _session(config: pytest.Config) -> KafkaMirrorSession:
    return config.stash[SESSION_KEY]


def _fail(message: str) -> NoReturn:
    """``pytest.fail(message, pytrace=False)``, without the exception being handled.

    Called in an ``except`` block, ``pytest.fail`` chains the handled exception as context
    and pytest prints both ("During handling of the above exception, another exception
    occurred"): the same error twice, once as a traceback.  ``message`` already names it.
    """
    __tracebackhide__ = True
    raise pytest.fail.Exception(message, pytrace=False) from None


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(drain_timeout=SECONDS, settle=SECONDS, topic_timeout=SECONDS, private=BOOL, "
        "replicator_properties={KEY: VALUE}, release='current'|'previous', leave_out={CHECK: REASON}): per-test "
        "overrides of pytest-kafka-mirror settings; private=True gives the test its own clusters, links and "
        "replicator (implied by the mirror_faults fixture); replicator_properties gives the test its own replicator "
        "with those settings; release='previous' gives it a private one of --kafka-mirror-upgrade-from's release "
        "(the in-place upgrade scenarios: mirror_env.switch_replicator); leave_out names checks not to run on "
        "purpose (checkpoints, synced-offsets, heartbeats, offset-syncs, group-sync, config-sync; a list, or a "
        "dict with the reasons): reported as not checked.",
    )
    from .provisioning import MARKER_HELP

    config.addinivalue_line("markers", MARKER_HELP)
    _configure_xdist_controller(config)
    cli = {opt.dest: config.getoption(opt.dest, None) for opt in OPTIONS}
    try:
        settings = resolve_settings(cli, lambda key: config.getini(key) or None, rootdir=Path(config.rootpath),
                                    inipath=config.inipath)
    except SettingsError as exc:
        raise pytest.UsageError(f"pytest-kafka-mirror: {exc}") from None
    workerinput = getattr(config, "workerinput", None)
    # One id for every process of the run (xdist's testrunuid): see rundir.note_report_files.
    run_uid = (workerinput or {}).get("testrunuid") or getattr(config.option, "testrunuid", None)
    session = config.stash[SESSION_KEY] = KafkaMirrorSession(settings, session_id=run_uid)
    if workerinput is not None:
        # An xdist worker: the controller collects results and serves metrics.  The run's
        # share directory also holds the URL of the Spark Connect server the workers share
        # (verify/connect.py; the controller stops it with the shared clusters).
        from .clusters.shared import worker_share_dir

        session.share = worker_share_dir(workerinput)
        if workerinput.get(SPOOL_KEY):
            from .report.metrics import MetricsSpool

            session.metrics_spool = MetricsSpool(workerinput[SPOOL_KEY], worker_id())
        from .report.progress import SPOOL_KEY as PROGRESS_KEY

        if workerinput.get(PROGRESS_KEY):
            from .report.progress import ProgressSpool

            session.progress_spool = ProgressSpool(workerinput[PROGRESS_KEY], worker_id())
    elif not config.getoption("help", False):
        reporting = ResultsPlugin(config, session)
        reporting.start()  # baseline and metrics errors fail here, before any cluster starts
        config.pluginmanager.register(reporting, "kafka-mirror-reporting")
        if not config.getoption("collectonly", False):
            _start_progress(config, session)
            _install_releases(settings)


def _start_progress(config: pytest.Config, session: KafkaMirrorSession) -> None:
    """The live progress display (report/progress.py), on a duplicate of the terminal's
    descriptor: pytest's capture redirects descriptor 1 while a test runs."""
    import os
    import sys

    if session.settings.progress == "off":
        return
    try:
        stream = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1, encoding="utf-8", errors="replace")
    except (AttributeError, OSError, ValueError):  # no descriptor (an in-process pytester run)
        return
    from .report.progress import ProgressReporting, ProgressSpool

    progress = ProgressReporting(config, session.settings.progress)
    if progress.start(stream) is None:
        return
    config.pluginmanager.register(progress, "kafka-mirror-progress")
    if not _is_xdist_controller(config):  # this process runs the tests itself
        session.progress_spool = ProgressSpool(progress.spool_dir, "master")


def _install_releases(settings: Settings) -> None:
    """Resolve the Apache Kafka releases the specs name (``kafka:V``, ``mm2:V``, ``mm1:V``)
    into the cache before anything starts (and before xdist workers, which then find them
    there): a registry that cannot be reached is one usage error naming the setting."""
    import sys

    from .clusters import kafka_spec_parts
    from .clusters.kafka_dist import KafkaInstallError, cache_dir, release

    wanted = [(role, kafka_spec_parts(spec)[0], "broker")
              for role, spec in (("source", settings.source), ("target", settings.target)) if spec.kind == "kafka"]
    for role, rep in (("replicator", settings.replicator), ("upgrade_from", settings.upgrade_from)):
        if rep is not None and rep.kind in ("mm2", "mm2-connect", "mm1") and rep.release_arg[:1].isdigit():
            wanted.append((role, rep.release_arg, "mm1" if rep.kind == "mm1" else "mm2"))
    for role, version, need in wanted:
        try:
            release(version, cache_dir(settings.kafka_cache or None), need=need,
                    log=lambda text: print(f"pytest-kafka-mirror: {text}", file=sys.stderr, flush=True))
        except KafkaInstallError as exc:
            name = role.replace("_", "-")
            origin = settings.sources.get(name, f"--kafka-mirror-{name}")
            spec = getattr(settings, role)
            raise pytest.UsageError(f"pytest-kafka-mirror: {origin} {spec}: {exc}") from None


def _is_xdist_controller(config: pytest.Config) -> bool:
    """True in the controller process of an xdist run (``-n N``), which runs no tests."""
    # xdist sets dist = "load" for -n N in pytest_cmdline_main, before any configure hook.
    return (
        not hasattr(config, "workerinput")
        and getattr(config.option, "dist", "no") != "no"
        and not config.getoption("collectonly", False)
    )


def _configure_xdist_controller(config: pytest.Config) -> None:
    """Fix the run id the workers will get, so the controller knows their share directory."""
    if not _is_xdist_controller(config):
        return
    import uuid

    if not getattr(config.option, "testrunuid", None):
        config.option.testrunuid = uuid.uuid4().hex


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    s = config.stash.get(SESSION_KEY, None)
    if s is None:
        return None
    st = s.settings
    if not st.non_default() and config.getoption("verbose") <= 0:
        return None
    spark = s.spark.describe(_is_xdist_controller(config))
    # naming only when given: unset, each replicator names topics its own way (MM2 by its
    # replication policy, external:POLICY by its spec), which "naming=identity" would belie
    naming = f" naming={st.naming}" if st.sources.get("naming", "default") != "default" else ""
    lines = [
        (f"kafka-mirror: source={st.source} target={st.target} replicator={st.replicator}{naming} "
         f"spark={spark} reports={st.report_dir}")
    ]
    for role, props in (("source", st.source_client), ("target", st.target_client)):
        if props:
            from ._clientconf import masked

            shown = ", ".join(f"{k}={v}" for k, v in masked(props).items())
            lines.append(f"kafka-mirror: {role} client properties: {shown}")
    if st.replicator.properties_file is not None or st.replicator.strimzi_file is not None:
        lines += [f"kafka-mirror: replicator {line}" for line in _user_properties_header(st)]
    reporting = config.pluginmanager.get_plugin("kafka-mirror-reporting")
    if isinstance(reporting, ResultsPlugin) and reporting.header():
        lines.append(reporting.header())
    return lines


def _user_properties_header(st: Settings) -> list[str]:
    """What the plugin does to your mm2.properties (``mm2:...,properties=FILE``), as far as
    the settings tell before the clusters exist; never raises (a header is no place to fail)."""
    from .clusters.container import image_flavour
    from .replicators.mm2 import preview_user_properties, topics_regex

    def tansu(spec: Any) -> bool:
        try:
            return bool(spec.kind == "tansu" or (spec.kind == "container" and image_flavour(spec.arg) == "tansu"))
        except ValueError:
            return False

    try:
        strimzi = st.replicator.strimzi_file
        return preview_user_properties(str(strimzi or st.replicator.properties_file),
                                       topics=topics_regex(st.topic_prefix), source_is_tansu=tansu(st.source),
                                       target_is_tansu=tansu(st.target), source_client=st.source_client,
                                       target_client=st.target_client, strimzi=strimzi is not None)
    except Exception as exc:  # the file changed since the settings were read: the replicator's start says it again
        return [str(exc)]


def pytest_runtest_setup(item: pytest.Item) -> None:
    from .provisioning import declarations

    try:
        declarations(item)
    except ValueError as exc:
        _fail(str(exc))
    for mark in item.iter_markers(MARKER):
        unknown = set(mark.kwargs) - MARKER_KWARGS
        if unknown or mark.args:
            pytest.fail(
                f"@pytest.mark.{MARKER} got unknown arguments {sorted(unknown) or list(mark.args)}; "
                f"accepted keywords: {', '.join(sorted(MARKER_KWARGS))}",
                pytrace=False,
            )
        if "leave_out" in mark.kwargs:
            try:
                _leave_out_marked(mark.kwargs["leave_out"])
            except (TypeError, ValueError) as exc:
                _fail(f"@pytest.mark.{MARKER}(leave_out=...): {exc}")
        if mark.kwargs.get("release", "current") not in RELEASES:
            pytest.fail(f"@pytest.mark.{MARKER}(release={mark.kwargs['release']!r}): accepted: "
                        f"{', '.join(map(repr, RELEASES))}", pytrace=False)


def pytest_collection_finish(session: pytest.Session) -> None:
    s = session.config.stash.get(SESSION_KEY, None)
    if s is not None:
        from .provisioning import largest_record

        s.max_record_bytes = largest_record(session.items, s.settings.message_size)


def _marker_overrides(request: pytest.FixtureRequest) -> dict[str, Any]:
    return _marker_kwargs(request.node)


def _marker_kwargs(node: pytest.Item | Any) -> dict[str, Any]:
    """The ``kafka_mirror`` marker's keywords of ``node``; the closest marker wins."""
    out: dict[str, Any] = {}
    for mark in reversed(list(node.iter_markers(MARKER))):
        out.update(mark.kwargs)
    return out


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="session")
def kafka_mirror_settings(pytestconfig: pytest.Config) -> Settings:
    """The effective pytest-kafka-mirror settings (options > ini > env > defaults)."""
    return _session(pytestconfig).settings


def _start_cluster(request: pytest.FixtureRequest, role: str, tmp_path_factory: pytest.TempPathFactory) -> Generator[Cluster, None, None]:
    from .clusters import ClusterError
    from .clusters.shared import SharedCluster

    session = _session(request.config)
    share = session.share if session.settings.share == "run" else None
    workdir = tmp_path_factory.mktemp(f"kafka-mirror-{role}")

    def start() -> Cluster:
        c = session.make_cluster(role, workdir)
        try:
            c.start()
        except BaseException:
            c.stop()
            raise
        return c

    cluster: Cluster | None = None
    try:
        try:
            cluster = SharedCluster(role, share.get_or_start(role, start)) if share else start()
        except ClusterError as exc:
            spec = session.settings.source if role == "source" else session.settings.target
            _fail(f"kafka-mirror {role} cluster ({spec}): {exc}")
        yield cluster
    finally:
        if cluster is not None:
            cluster.stop()


@pytest.fixture(scope="session")
def source_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Generator[Cluster, None, None]:
    """The source cluster (``--kafka-mirror-source``), started once per session and stopped at its end."""
    yield from _start_cluster(request, "source", tmp_path_factory)


@pytest.fixture(scope="session")
def target_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Generator[Cluster, None, None]:
    """The target cluster (``--kafka-mirror-target``), started once per session and stopped at its end."""
    yield from _start_cluster(request, "target", tmp_path_factory)


@pytest.fixture(scope="session")
def replicator(
    request: pytest.FixtureRequest,
    source_cluster: Cluster,
    target_cluster: Cluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> Generator[Replicator, None, None]:
    """The replicator under test (``--kafka-mirror-replicator``), mirroring this worker's test topics."""
    from .replicators import ReplicatorError

    session = _session(request.config)
    try:
        rep = session.make_replicator(source_cluster, target_cluster, tmp_path_factory.mktemp("kafka-mirror-replicator"))
    except ReplicatorError as exc:
        _fail(f"kafka-mirror replicator ({session.settings.replicator}): {exc}")
    _warn_auto_create(session, source_cluster, target_cluster, rep)
    # the replicator's start and the session's readiness round (a minute for MM2) in the progress display
    starting = session.progress_spool.for_run(f"replicator {rep.spec}", f"start-{id(rep)}") \
        if session.progress_spool is not None else None
    try:
        pool = _provision(request, session, source_cluster, rep)
        try:
            if starting is not None:
                starting.on_phase("readiness", None, session.settings.startup_timeout)
            rep.start()
            if pool is not None:
                pool.await_ready(rep, target_cluster.bootstrap_servers, session.settings.startup_timeout)
                log.info("kafka-mirror: %s", pool.describe())
        except ReplicatorError as exc:
            _fail(f"kafka-mirror replicator ({rep.spec}): {exc}")
        finally:
            if starting is not None:
                starting.on_phase("done")
        yield rep
    finally:
        session.pool = None
        if rep.controllable:  # external: not ours to stop
            _stop_shared_replicator(session, rep)
        _delete_session_topics(session, source_cluster, target_cluster, rep)


def _stop_shared_replicator(session: KafkaMirrorSession, rep: Replicator) -> None:
    """At the session's end: SIGKILL when both clusters go with the session (nothing reads
    what a graceful stop saves; MirrorMaker 2 takes ~10 s for it), a graceful stop on a
    cluster that stays (``bootstrap:``: its flow ends cleanly before its topics are deleted)."""
    if "bootstrap" in (session.settings.source.kind, session.settings.target.kind):
        rep.stop()
    else:
        rep.kill()


def _warn_auto_create(session: KafkaMirrorSession, source: Cluster, target: Cluster, rep: Replicator) -> None:
    """Once, at the session's start: a ``bootstrap:`` cluster that auto-creates topics, with a
    replicator the plugin does not stop, gets back what the session deletes at its end
    (``provisioning.auto_create_warning``).  Nothing when the topics are kept anyway."""
    import warnings

    from ._warnings import PytestKafkaMirrorWarning
    from .provisioning import auto_create_warning

    s = session.settings
    if s.keep_topics or "bootstrap" not in (s.source.kind, s.target.kind):
        return
    try:
        text = auto_create_warning(source, target, rep, source_kind=s.source.kind, target_kind=s.target.kind)
    except Exception as exc:  # the clusters' own problem: the session's start reports it, not this warning
        log.info("kafka-mirror: could not read auto.create.topics.enable: %s", exc)
        return
    if text:
        warnings.warn(PytestKafkaMirrorWarning(f"kafka-mirror: {text}"), stacklevel=2)


def _delete_session_topics(session: KafkaMirrorSession, source: Cluster, target: Cluster,
                           rep: Replicator) -> None:
    """The session's topics and witness groups on ``bootstrap:`` clusters are deleted at its end, unless kept;
    the line saying so ends the terminal summary (an xdist worker's: its log only)."""
    from .provisioning import delete_session_topics

    s = session.settings
    if s.keep_topics or "bootstrap" not in (s.source.kind, s.target.kind):
        return
    try:
        said = delete_session_topics(source, target, rep, source_kind=s.source.kind, target_kind=s.target.kind,
                                     groups=session.created_groups)
    except Exception as exc:  # the clusters' own problem: never fail the session's teardown for it
        said = f"deleting the session's test topics failed: {exc}"
    if said:
        line = f"{said} (keep them with --kafka-mirror-keep-topics)"
        session.closing_notes.append(line)
        log.warning("kafka-mirror: %s", line)


def _shares_replicator(item: pytest.Item) -> bool:
    """Whether ``item`` creates topics on the session's shared replicator (not its own)."""
    fixtures = getattr(item, "fixturenames", ())
    if "mirror_topics" not in fixtures or "mirror_faults" in fixtures:
        return False
    kwargs = _marker_kwargs(item)
    return not kwargs.get("private") and kwargs.get("replicator_properties") is None and "release" not in kwargs


def _provision(request: pytest.FixtureRequest, session: KafkaMirrorSession, source: Cluster,
               rep: Replicator) -> TopicPool | None:
    """In session topic provisioning: create every declared topic of the session's tests
    that share this replicator, before it starts (``provisioning.py``)."""
    from .clusters import ClusterError
    from .facades import topic_names
    from .provisioning import TopicPool, declarations, resolve_mode

    if resolve_mode(session.settings.topic_provisioning, rep) != "session":
        return None
    prefix = session.settings.topic_prefix
    pool = TopicPool(source, lambda test, n, name: topic_names(prefix, test, n, name))
    try:
        wanted = [(item.nodeid, item.name, declarations(item))
                  for item in request.session.items if _shares_replicator(item)]
        created = pool.provision(wanted)
    except (ValueError, ClusterError) as exc:
        _fail(f"kafka-mirror topic provisioning: {exc}")
    log.info("kafka-mirror: provisioned %d topics for %d tests before starting %s", created,
             sum(1 for w in wanted if w[2]), rep.spec)
    session.pool = pool
    return pool


_DEDICATED_KEY = pytest.StashKey[tuple[str, tuple[tuple[str, str], ...]]]()


def _dedicated(request: pytest.FixtureRequest) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    """(topic prefix, properties) when the test's marker asks for its own replicator.

    Its topics get a prefix of their own (``PREFIX-dXXXXXX-…``) that the session's shared
    replicator (mirroring ``^PREFIX-WORKER-``) does not match, so only the dedicated one copies
    them; it is under ``PREFIX-`` still, the filter a replicator of yours is told to copy
    (docs/your-clusters.md).
    """
    node = request.node
    if _DEDICATED_KEY in node.stash:
        return node.stash[_DEDICATED_KEY]
    props = _marker_overrides(request).get("replicator_properties")
    if props is None:
        return None
    from .config import _properties

    try:
        if isinstance(props, dict):
            pairs = tuple((str(k), str(v)) for k, v in props.items())
        else:
            pairs = _properties("\n".join(props) if not isinstance(props, str) else props)
    except (TypeError, ValueError) as exc:
        _fail(f"@pytest.mark.{MARKER}(replicator_properties=...) must be a dict or KEY=VALUE lines: {exc}")
    node.stash[_DEDICATED_KEY] = (_own_prefix(_session(request.config).settings), pairs)
    return node.stash[_DEDICATED_KEY]


def _own_prefix(s: Settings) -> str:
    """A topic prefix of one test's own (``PREFIX-dXXXXXX``, see :func:`_dedicated`)."""
    import uuid

    return f"{s.topic_prefix}-d{uuid.uuid4().hex[:6]}"


def _bootstrap_limits(s: Settings) -> dict[str, str]:
    """What a private environment cannot have on clusters the plugin does not run
    (``bootstrap:``): a link in front of them (their brokers advertise their own addresses,
    so a client would go round it; a secured cluster's TLS ends at the broker).  Empty when
    the session runs its clusters; a private environment on yours gets a topic prefix of
    its own too, so the session's replicator does not copy its topics as well."""
    yours = [f"{role} ({spec})" for role, spec in (("source", s.source), ("target", s.target)) if spec.kind == "bootstrap"]
    if not yours:
        return {}
    from .env import link_limit

    return {"links": link_limit(f"the {' and the '.join(yours)} cluster is yours: its brokers advertise their own "
                                f"addresses, so the replicator would go round a link")}


def _wants_private(request: pytest.FixtureRequest) -> bool:
    kwargs = _marker_overrides(request)
    return "mirror_faults" in request.fixturenames or bool(kwargs.get("private")) or "release" in kwargs


@pytest.fixture
def mirror_env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Generator[MirrorEnv, None, None]:
    """The clusters and replicator this test runs against (:class:`~pytest_kafka_mirror.env.MirrorEnv`).

    Shared by default: the session's clusters and this worker's replicator.  Private
    when the test uses ``mirror_faults`` or is marked
    ``@pytest.mark.kafka_mirror(private=True)``: its own clusters, a faultable link to
    each, and its own replicator.  With ``replicator_properties=...`` alone: the shared
    clusters and a replicator of its own with those settings.  What the test owns is
    stopped when it ends.
    """
    from .clusters import ClusterError
    from .env import MirrorEnv, build_private_env
    from .faults.schedule import FaultError
    from .replicators import ReplicatorError

    session = _session(request.config)
    dedicated = _dedicated(request)
    if session.settings.replicator.kind == "external":
        yield from _external_env(request, session, dedicated)
        return
    if _wants_private(request):
        try:
            s = session.settings
            yours = _bootstrap_limits(s)
            env = build_private_env(session.make_cluster, session.make_replicator,
                                    {"current": s.replicator, "previous": s.upgrade_from or s.replicator},
                                    tmp_path_factory.mktemp("kafka-mirror-env"),
                                    extra_properties=dedicated[1] if dedicated else (),
                                    release=_marker_overrides(request).get("release", "current"),
                                    links=not yours, limits=yours,
                                    topic_prefix=(dedicated[0] if dedicated else _own_prefix(s)) if yours else None)
        except (ClusterError, ReplicatorError, FaultError) as exc:
            _fail(f"kafka-mirror private environment: {exc}")
    else:
        source = request.getfixturevalue("source_cluster")
        target = request.getfixturevalue("target_cluster")
        if dedicated is None:
            shared = request.getfixturevalue("replicator")
            _revive(session, shared)
            env = MirrorEnv(source, target, shared)
        else:  # its own replicator, for its own topic prefix (see _dedicated)
            try:
                own = session.make_replicator(source, target, request.getfixturevalue("tmp_path") / "replicator",
                                              topic_prefix=dedicated[0], extra_properties=dedicated[1])
            except ReplicatorError as exc:
                _fail(f"kafka-mirror replicator for this test ({session.settings.replicator}): {exc}")
            env = MirrorEnv(source, target, own, topic_prefix=dedicated[0])
            env.own_replicator(own)
            try:
                own.start()
            except ReplicatorError as exc:
                env.close()
                _fail(f"kafka-mirror replicator for this test ({own.spec}): {exc}")
    try:
        yield env
    finally:
        env.close()
    if not env.private and dedicated is None:
        _check_shared_replicator(request, session, env)


def _external_env(request: pytest.FixtureRequest, session: KafkaMirrorSession,
                  dedicated: tuple[str, tuple[tuple[str, str], ...]] | None) -> Generator[MirrorEnv, None, None]:
    """A test's environment when the replicator is yours (``external:``): the session's
    clusters and that replicator, whatever the test asks for.  What cannot be had there is
    a skip saying what the test needs (``env.external_env``); a test that stops, crashes or
    pauses the replicator holds it alone across xdist workers (``env.external_lock``), and
    finds it running again afterwards."""
    from .env import external_env, external_lock

    s = session.settings
    controls = _wants_private(request) or dedicated is not None
    why = external_env_needs(request, s, dedicated)
    if why:
        pytest.skip(why)
    with external_lock(session.share.path if session.share is not None else None, exclusive=controls):
        shared = request.getfixturevalue("replicator")
        _revive(session, shared)
        env = external_env(request.getfixturevalue("source_cluster"), request.getfixturevalue("target_cluster"),
                           shared, controls=controls)
        try:
            yield env
        finally:
            env.close()  # a test that stopped it starts it again (a failure is logged, and health says it)
        _check_shared_replicator(request, session, env)


def external_env_needs(request: pytest.FixtureRequest, s: Settings,
                       dedicated: tuple[str, tuple[tuple[str, str], ...]] | None) -> str:
    """What a test needs that an external replicator cannot give ('' when nothing)."""
    if dedicated is not None and dedicated[1]:
        props = ", ".join(f"{k}={v}" for k, v in dedicated[1])
        return (f"this scenario needs a replicator of its own with {props}: {s.replicator} is yours, and the plugin "
                f"does not configure it (run it with a replicator the plugin starts from your release and "
                f"mm2.properties, mm2:KAFKA_HOME; docs/your-clusters.md)")
    release = _marker_overrides(request).get("release")
    if release == "previous" and s.upgrade_from is not None and s.upgrade_from != s.replicator:
        return (f"this scenario starts release {s.upgrade_from} (--kafka-mirror-upgrade-from) and switches to "
                f"{s.replicator}: the plugin cannot start another release of a replicator you run")
    return ""


def _revive(session: KafkaMirrorSession, rep: Replicator) -> None:
    """Restart the shared replicator when an earlier test left it broken (see
    :func:`_check_shared_replicator`), so that test cannot fail this one."""
    from .replicators import ReplicatorError

    if session.broken_replicator is None:
        return
    culprit, problem, restart_error = session.broken_replicator
    if restart_error:
        _fail(f"kafka-mirror: the shared replicator ({rep.spec}) could not be restarted after {culprit} left it "
              f"broken ({problem}): {restart_error}")
    log.warning("kafka-mirror: restarting the shared replicator (%s): %s left it broken: %s", rep.spec, culprit, problem)
    try:
        recover = getattr(rep, "recover", None)
        if recover is not None:
            done = recover()  # a Connect cluster: its failed tasks restarted through REST
        else:
            rep.stop()
            rep.start()
            done = "stopped and started again"
        session.closing_notes.append(f"the shared replicator ({rep.spec}), which {culprit} left broken, was brought "
                                     f"back: {done}")
    except ReplicatorError as exc:
        session.broken_replicator = (culprit, problem, str(exc))
        _fail(f"kafka-mirror: the shared replicator ({rep.spec}) could not be restarted after {culprit} left it "
              f"broken ({problem}): {exc}")
    session.broken_replicator = None


def _check_shared_replicator(request: pytest.FixtureRequest, session: KafkaMirrorSession, env: MirrorEnv) -> None:
    """After a test on the shared replicator: is it still healthy?  When not (its process
    exited, a MirrorMaker 2 task FAILED), the test's teardown errors, naming what broke,
    the test's topics are deleted from the source (so a restarted replicator does not copy
    again what broke it, e.g. a record it cannot carry), and the replicator is restarted
    before the next test that needs it."""
    rep = env.replicator
    problem = rep.health()
    if not problem:
        return
    topics = sorted(getattr(request.node.funcargs.get("mirror_topics"), "created", {}) or ())
    deleted = ""
    if topics:
        try:
            env.source.admin().delete_topics(topics, operation_timeout=10)  # type: ignore[attr-defined]
            deleted = f"; its topics are deleted from the source ({', '.join(topics)})"
        except Exception as exc:
            deleted = f"; deleting its topics from the source failed: {exc}"
    session.broken_replicator = (request.node.nodeid, problem, "")
    _fail(f"kafka-mirror: this test left the shared replicator ({rep.spec}) broken: {problem}{deleted}; it is "
          f"restarted before the next test")


@pytest.fixture
def mirror_faults(mirror_env: MirrorEnv) -> Generator[MirrorFaults, None, None]:
    """Faults for this test's private environment: its replicator, brokers and links.

    ``mirror_faults.replicator``, ``.source``, ``.target``, ``.source_link``,
    ``.target_link`` are the things the fault verbs of :mod:`pytest_kafka_mirror.faults`
    act on; ``mirror_faults.require("add_partitions")`` skips the test with the reason
    when a cluster cannot.  Everything is healed and stopped when the test ends.
    """
    from .faults.schedule import MirrorFaults

    faults = MirrorFaults(mirror_env)
    try:
        yield faults
    finally:
        faults.close()


@pytest.fixture
def mirror_topics(request: pytest.FixtureRequest, mirror_env: MirrorEnv) -> MirrorTopics:
    """Factory: ``mirror_topics(n=1, partitions=3)`` creates uniquely named source topics."""
    session = _session(request.config)
    prefix = mirror_env.topic_prefix or session.settings.topic_prefix
    shared = not mirror_env.private and mirror_env.topic_prefix is None
    return MirrorTopics(mirror_env.source, prefix, request.node.name, pool=session.pool if shared else None,
                        nodeid=request.node.nodeid)


@pytest.fixture
def mirror_producer(
    request: pytest.FixtureRequest,
    mirror_env: MirrorEnv,
    mirror_topics: MirrorTopics,
    tmp_path: Path,
) -> Generator[MirrorProducerFactory, None, None]:
    """Factory: ``mirror_producer(topics, rate=MSG_PER_S, duration=S | count=N, format=, message_size=, faults=)``.

    Starts a capture of the target topics, produces (blocking) while applying the
    scheduled ``faults`` and returns the :class:`~pytest_kafka_mirror.run.MirrorRun` to
    hand to ``mirror_verifier``.
    """
    factory = MirrorProducerFactory(
        _session(request.config), mirror_env.source, mirror_env.target, mirror_env.replicator, tmp_path, mirror_topics,
        overrides=_marker_overrides(request), test_id=request.node.nodeid, env=mirror_env,
        verifies="mirror_verifier" in request.fixturenames,
    )
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
def mirror_verifier(request: pytest.FixtureRequest) -> MirrorVerifier:
    """``mirror_verifier(run)`` waits for the capture, runs the Spark verification and
    returns a :class:`~pytest_kafka_mirror.verify.MirrorReport` (also saved as JSON, with
    plots); ``mirror_verifier.record(report)`` takes in a report verified elsewhere."""
    verifier = MirrorVerifier(_session(request.config), request.node.nodeid, _params(request))
    request.node.stash[_VERIFIER_KEY] = verifier
    return verifier


@pytest.fixture
def mirror_failover(request: pytest.FixtureRequest, mirror_env: MirrorEnv) -> MirrorFailover:
    """``mirror_failover(run, wait=None, reset="latest")`` fails the run's witness groups
    (``mirror_producer(..., witnesses=[witness(...)])``) over to the target and returns a
    :class:`~pytest_kafka_mirror.verify.failover.FailoverReport`: skipped and
    re-read records, translations past the end of the log, rewinds, checkpoint staleness,
    heartbeat lag, with ``assert_ok()`` and one assertion per check.  Its figures become
    JUnit properties ``kafka_mirror.failover.FIGURE`` (``kafka_mirror.failover[N].FIGURE``
    for a test's further checks), and each check is a result of the test in the summary,
    the stored run and the comparison (``NODEID#failover``)."""
    node = request.node

    def properties(index: int, report: Any) -> None:
        prefix = "kafka_mirror.failover" + (f"[{index}]" if index else "")
        node.user_properties.extend((f"{prefix}.{k}", v) for k, v in report.figures().items() if v is not None)

    failover = MirrorFailover(_session(request.config), mirror_env.replicator, node.nodeid, on_report=properties,
                              params=_params(request), env=mirror_env, leave_out=mirror_leave_out(request))
    node.stash[_FAILOVER_KEY] = failover
    return failover


def _leave_out_marked(value: Any) -> dict[str, str]:
    """The marker's ``leave_out``: check names (a string, a list) or a dict check -> reason."""
    from .config import check_name

    if isinstance(value, str):
        value = [value]
    if isinstance(value, dict):
        return {check_name(k): str(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return {check_name(k): "left out by the test's marker" for k in value}
    raise TypeError(f"{value!r}: a check name, a list of them, or a dict check -> reason")


def mirror_leave_out(request: pytest.FixtureRequest) -> dict[str, str]:
    """The checks the test (marker ``leave_out``) and the user (``--kafka-mirror-leave-out``)
    leave out on purpose, each with the reason; the test's reason wins."""
    settings = _session(request.config).settings
    where = settings.sources.get("leave-out") or "--kafka-mirror-leave-out"
    out = {check: f"left out by {where}" for check in settings.leave_out}
    out.update(_leave_out_marked(_marker_overrides(request).get("leave_out", ())))
    return out


@pytest.fixture(name="mirror_leave_out")
def _mirror_leave_out(request: pytest.FixtureRequest) -> dict[str, str]:
    """The checks left out on purpose for this test: ``{check: reason}`` from the marker's
    ``leave_out`` and ``--kafka-mirror-leave-out`` (check names in ``config.CHECKS``).  A
    scenario whose check is in it skips with the reason; a failover check reports the part
    as not checked."""
    return mirror_leave_out(request)


def _params(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The test's parameters, as its results store them."""
    callspec = getattr(request.node, "callspec", None)
    return {k: _plain(v) for k, v in callspec.params.items()} if callspec is not None else {}


def _plain(value: Any) -> Any:
    """A test parameter as stored data: JSON scalars as they are, anything else as its repr."""
    return value if value is None or isinstance(value, (str, int, float, bool)) else repr(value)


_VERIFIER_KEY = pytest.StashKey[MirrorVerifier]()
_FAILOVER_KEY = pytest.StashKey[MirrorFailover]()
#: keys of the test's results already attached to a report of an earlier phase
_ATTACHED_KEY = pytest.StashKey[set[str]]()
_CALL_OUTCOME_KEY = pytest.StashKey[str]()


# ----------------------------------------------------------------------------- reporting
@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    verifier = item.stash.get(_VERIFIER_KEY, None)
    failover = item.stash.get(_FAILOVER_KEY, None)
    if report.when == "call":
        item.stash[_CALL_OUTCOME_KEY] = report.outcome
    _attach_results(item, report, [*(verifier.results if verifier else []), *(failover.results if failover else [])])
    if verifier is not None and report.when == "call" and report.failed:
        funcargs = getattr(item, "funcargs", {})
        env = funcargs.get("mirror_env")
        rep = env.replicator if env is not None else funcargs.get("replicator")
        if rep is not None:
            report.sections.append(("kafka-mirror replicator log (last 40 lines)", rep.logs(40)))
        if env is not None and env.private:
            report.sections.append(("kafka-mirror private environment", env.describe()))
    return report


def _attach_results(item: pytest.Item, report: pytest.TestReport, results: list[TestResult]) -> None:
    """Put the verifications and failover checks made since the last phase on this phase's report.

    xdist serialises a report's attributes to the controller, where ``results.py``
    collects them: that is how results of every worker reach one summary and one stored
    run.  A verification's figures also become JUnit XML properties (``kafka_mirror.FIGURE``,
    or ``kafka_mirror[N].FIGURE`` for a test's N-th further verification); junitxml reads
    them from the item, through the teardown report.  (A failover check's properties are
    added by the ``mirror_failover`` fixture as the check ends.)
    """
    if not results:
        return
    attached = item.stash.setdefault(_ATTACHED_KEY, set())
    new = [r for r in results if r.key not in attached]
    if not new:
        return
    outcome = item.stash.get(_CALL_OUTCOME_KEY, report.outcome)
    payload = []
    for result in new:
        result.outcome = outcome
        payload.append({"key": result.key, **result.to_dict()})
        attached.add(result.key)
        if result.kind != VERIFICATION:
            continue
        prefix = "kafka_mirror" + (f"[{result.index}]" if result.index else "")
        for name, value in result.figures.items():
            if value is not None:
                item.user_properties.append((f"{prefix}.{name}", value))
        for topic, d in sorted((result.report or {}).get("discovery", {}).items()):
            if d.get("discovery_s") is not None:
                item.user_properties.append((f"{prefix}.discovery_s.{topic}", d["discovery_s"]))
    setattr(report, RESULTS_ATTR, payload)


def pytest_sessionfinish(session: pytest.Session) -> None:
    s = session.config.stash.get(SESSION_KEY, None)
    try:
        if s is not None:
            s.stop_spark()  # bounded, also after Ctrl-C (verify/spark.py)
    finally:
        if _is_xdist_controller(session.config) and getattr(session.config.option, "testrunuid", None):
            # Clusters and the Spark Connect server the workers shared (clusters/shared.py,
            # verify/connect.py): the run is over, stop them.
            from .clusters.shared import controller_share_dir

            controller_share_dir(session.config.option.testrunuid).stop_all()
