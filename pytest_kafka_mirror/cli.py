"""``kafka-mirror``: the pipeline's stages outside pytest.

    kafka-mirror verify RUN_DIR [--spark-master MASTER]   verify a captured run, print the report
    kafka-mirror show REPORT.json                          print a stored report
    kafka-mirror broker                                    run an embedded Tansu broker until Ctrl-C

``verify`` exits 1 when the run broke at-least-once delivery or lane order, so it can
gate a shell pipeline; ``--json`` writes the report where you want it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from .config import OPTIONS_BY_NAME

__all__ = ["main"]


def _cmd_verify(args: argparse.Namespace) -> int:
    from .rundir import REPORT_FILE, SOURCE_DIR, load_manifests
    from .verify import MirrorMismatchError, stop_spark, verify_run

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        print(f"kafka-mirror verify: {run_dir} is not a directory", file=sys.stderr)
        return 2
    if not load_manifests(run_dir):
        print(f"kafka-mirror verify: {run_dir} has no manifest-*.json: not a run directory", file=sys.stderr)
        return 2
    if args.allow_source_loss and not (run_dir / SOURCE_DIR).is_dir():
        print(f"kafka-mirror verify: --allow-source-loss needs the source log {run_dir / SOURCE_DIR}, and this run "
              f"has none (produce with capture_source=True)", file=sys.stderr)
        return 2
    try:
        report = verify_run(run_dir, master=args.spark_master, examples=args.examples)
    finally:
        stop_spark()
    out = Path(args.json) if args.json else run_dir / REPORT_FILE
    report.write(out)
    print(report.summary())
    print(f"report: {out}")
    try:
        report.assert_ok(allow_duplicates=args.allow_duplicates, max_reordered=args.max_reordered,
                         allow_source_loss=args.allow_source_loss)
    except MirrorMismatchError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    from .verify import MirrorReport

    report = MirrorReport.load(args.report)
    if args.raw:
        print(json.dumps(report.to_dict(), indent=1))
    else:
        print(report.summary())
    return 0


def _cmd_broker(args: argparse.Namespace) -> int:
    from .clusters.tansu import TansuCluster

    with TansuCluster("broker", tempfile.mkdtemp(prefix="kafka-mirror-broker-")) as cluster:
        print(f"tansu broker at {cluster.bootstrap_servers} (memory storage); Ctrl-C stops it", flush=True)
        try:
            while cluster.process is not None and cluster.process.running:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kafka-mirror", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify", help="verify a run directory (manifests + capture) with Spark")
    v.add_argument("run_dir")
    spark = OPTIONS_BY_NAME["spark-master"]
    v.add_argument("--spark-master", type=spark.argparse_type, default=spark.default, metavar=spark.metavar,
                   help=f"{spark.help} Default: %(default)r")
    v.add_argument("--examples", type=int, default=20, help="example rows per anomaly. Default: %(default)r")
    v.add_argument("--json", metavar="PATH", help="write the report here (default: RUN_DIR/report.json)")
    v.add_argument("--allow-duplicates", action="store_true", help="duplicates do not fail the run")
    v.add_argument("--max-reordered", type=int, default=0, help="reordered records tolerated. Default: %(default)r")
    v.add_argument("--allow-source-loss", action="store_true",
                   help="records the source cluster lost do not fail the run (needs a run with a source capture)")
    v.set_defaults(func=_cmd_verify)
    s = sub.add_parser("show", help="print a stored report")
    s.add_argument("report")
    s.add_argument("--raw", action="store_true", help="print the whole JSON")
    s.set_defaults(func=_cmd_show)
    b = sub.add_parser("broker", help="run an embedded Tansu broker on a free loopback port")
    b.set_defaults(func=_cmd_broker)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
