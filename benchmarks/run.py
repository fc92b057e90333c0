"""``python -m benchmarks``: every figure of docs/performance.md, each with a
reference measured in the same run on the same broker, written as JSON for the next run.

    python -m benchmarks              the full run (10M-record verification included: ~8 min on 2 cores)
    python -m benchmarks --quick      smaller counts (a few minutes)
    python -m benchmarks --sections producer,throttle   only some sections
    python -m benchmarks --smoke      tiny counts: checks the command works (the test suite runs it)

Results go to ``STORAGE/<machine id>/NNNN_<commit>_<utcstamp>.json`` (``--storage``,
default ``.kafka-mirror/benchmarks``), the layout of stored test runs (``storage.py``);
each run prints its figures next to those of the previous run of the same mode on this
machine.  The load average before and after each section is recorded: other work on the
machine changes the figures, the ratios much less (reference and figure share the load).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmarks._common import MODES, Figure, loadavg

SECTIONS = ("producer", "throttle", "capture", "memory", "pipeline", "verify", "floor", "overhead")
DOC_KIND = "kafka-mirror-benchmarks"
DOC_VERSION = 1


def _section(name: str) -> Callable[..., list[Figure]]:
    if name == "producer":
        from benchmarks.bench_producer import rates

        return rates
    if name == "throttle":
        from benchmarks.bench_producer import throttle

        return throttle
    if name == "capture":
        from benchmarks.bench_capture import rates as capture_rates

        return capture_rates
    if name == "memory":
        from benchmarks.bench_capture import memory

        return memory
    if name == "pipeline":
        from benchmarks.bench_pipeline import run as pipeline

        return pipeline
    if name == "verify":
        from benchmarks.bench_verify import run as verify

        return verify
    if name == "overhead":
        from benchmarks.bench_overhead import run as overhead

        return overhead
    from benchmarks.bench_floor import run as floor

    return floor


def _sections(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in SECTIONS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown sections {unknown or text!r}; accepted: {', '.join(SECTIONS)}")
    return names


def _records(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(float(x)) for x in text.split(","))
    except ValueError:
        values = ()
    if not values or min(values) < 1000:
        raise argparse.ArgumentTypeError(f"{text!r}: give record counts >= 1000, e.g. 1e6,1e7")
    return values


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        text = f"{value:,.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.3f}"
    return f"{text} {unit}".strip()


def render(figures: list[Figure], previous: dict[str, Any] | None) -> str:
    rows = [("figure", "value", "reference", "ratio", "previous", "change")]
    for f in figures:
        before = (previous or {}).get(f.key, {}).get("value")
        change = f"{(f.value - before) / before * 100:+.1f}%" if before and f.value is not None else ""
        ref = f"{_fmt(f.reference_value, f.unit)} ({f.reference})" if f.reference_value is not None else f.reference
        ratio = f"{f.ratio:.2f}" if f.ratio is not None else ""
        rows.append((f.key, _fmt(f.value, f.unit), ref, ratio, _fmt(before, f.unit) if before is not None else "",
                     change))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def _previous(storage: Any, mode: str) -> tuple[Path | None, dict[str, Any] | None]:
    for path in reversed(storage.runs()):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if doc.get("kind") == DOC_KIND and doc.get("mode") == mode:
            return path, doc.get("figures", {})
    return None, None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="smaller counts (a few minutes)")
    size.add_argument("--smoke", action="store_true", help="tiny counts: the command works, the figures mean nothing")
    ap.add_argument("--sections", type=_sections, default=list(SECTIONS), metavar="NAME[,...]",
                    help=f"which sections ({', '.join(SECTIONS)}). Default: all")
    ap.add_argument("--verify-records", type=_records, default=None, metavar="N[,N...]",
                    help="record counts of the verify section (default: 1e6,1e7 full, 1e6 quick)")
    ap.add_argument("--storage", default=".kafka-mirror/benchmarks", metavar="DIR",
                    help="where results are stored, per machine. Default: %(default)r")
    ap.add_argument("--json", metavar="PATH", help="also write the results here")
    ap.add_argument("--workdir", metavar="DIR", help="run directories and broker files (default: a temp dir)")
    args = ap.parse_args(argv)

    from dataclasses import replace

    from pytest_kafka_mirror.report.storage import (
        FileStorage,
        _library_versions,
        autosave_name,
        get_commit_info,
        get_machine_info,
    )

    mode_name = "smoke" if args.smoke else "quick" if args.quick else "full"
    mode = MODES[mode_name]
    if args.verify_records:
        mode = replace(mode, verify_records=args.verify_records)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="kafka-mirror-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    storage = FileStorage(args.storage)
    prev_path, previous = _previous(storage, mode_name)

    def log(text: str) -> None:
        print(f"  {text}", flush=True)

    print(f"kafka-mirror benchmarks ({mode_name}): {', '.join(args.sections)}; load average {loadavg()}; "
          f"work dir {work}", flush=True)
    figures: list[Figure] = []
    load: dict[str, Any] = {}
    started = time.monotonic()
    for name in args.sections:
        before = loadavg()
        t0 = time.monotonic()
        print(f"[{name}]", flush=True)
        figures += _section(name)(mode, work, log)
        load[name] = {"before": before, "after": loadavg(), "seconds": round(time.monotonic() - t0, 1)}
    commit = get_commit_info(Path(__file__).resolve().parent)
    doc = {
        "kind": DOC_KIND,
        "version": DOC_VERSION,
        "datetime": datetime.now(timezone.utc).isoformat(),
        "mode": mode_name,
        "sections": args.sections,
        "machine_info": get_machine_info(),
        "commit_info": commit,
        "plugin": _library_versions(),
        "load": load,
        "seconds": round(time.monotonic() - started, 1),
        "figures": {f.key: f.to_dict() for f in figures},
    }
    path = storage.save(doc, autosave_name(commit))
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1))
    print()
    print(render(figures, previous))
    print(f"\nsaved: {path}" + (f" (compared with {prev_path})" if prev_path else ""))
    disagree = [f.key for f in figures if f.note.startswith("the numpy figures disagree")]
    if disagree:
        print(f"the reference implementation disagrees with the verifier on {', '.join(disagree)}: see above",
              file=sys.stderr)
        return 1
    return 0
