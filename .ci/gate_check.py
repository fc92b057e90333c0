"""CI's check of the upgrade gate on a release pair whose offset translation differs.

``python .ci/gate_check.py GATE_DIR GATE_EXIT FIGURE...``: passes (exit 0) when the gate
failed (exit 1) for exactly the expected reason: the candidate session's tests all passed
(GATE_DIR/junit.xml), both sessions were stored (GATE_DIR/storage), and comparing them
with the gate's checks finds regressions of the named FIGUREs and of nothing else.  It
prints what the gate reported, for the CI log.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from pytest_kafka_mirror.report.compare import compare_runs, parse_compare_fail
from pytest_kafka_mirror.report.storage import FileStorage, load_run

CHECKS = ("missing:0", "failover_skipped:0", "failover_beyond_end_max:0", "failover_rewinds:0",
          "failover_rereads_max:0")


def main(gate_dir: Path, gate_rc: int, expected: set[str]) -> int:
    problems = []
    if gate_rc != 1:
        problems.append(f"the gate exited {gate_rc}, not 1 (a failed gate)")
    suite = ET.parse(gate_dir / "junit.xml").getroot()
    failed = []
    for case in suite.iter("testcase"):
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            # the failure's own first lines: CI's log excerpt must say why, not only which
            said = " | ".join((bad.get("message") or "").strip().splitlines()[:4])
            failed.append(f"{case.get('classname')}::{case.get('name')} ({said[:600]})")
    if failed:
        problems.append(f"tests failed on the candidate: {'; '.join(failed)}")
    runs = FileStorage(gate_dir / "storage").runs()
    if len(runs) != 2:
        problems.append(f"expected the baseline and the candidate stored, found {[p.name for p in runs]}")
    else:
        comparison = compare_runs(load_run(runs[0]), load_run(runs[1]), [parse_compare_fail(c) for c in CHECKS],
                                  baseline_label=runs[0].stem, current_label=runs[1].stem)
        print(comparison.render())
        # a regression message is "TEST KEY: FIGURE ..." (report/compare.py)
        figures = {message.split(": ", 1)[1].split(" ", 1)[0] for message in comparison.regressions}
        if not figures:
            problems.append("the gate found no regression")
        elif not figures <= expected:
            problems.append(f"regressions of {sorted(figures - expected)} besides {sorted(expected)}")
    for p in problems:
        print(f"ci: gate check: {p}", file=sys.stderr)
    if not problems:
        print(f"ci: gate check: the gate failed for the expected reason only ({', '.join(sorted(expected))})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), int(sys.argv[2]), set(sys.argv[3:])))
