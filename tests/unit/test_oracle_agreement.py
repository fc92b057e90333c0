"""The Spark job and the pure-Python oracle agree exactly on generated histories.

Hypothesis generates histories with injected anomalies (``tests/histories.py``).  A Spark
verification costs ~0.5-1 s however small the run (its cost is in the number of actions,
not in the rows), so the histories are verified in batches: all of a batch go into one
run directory, each under its own topic and producer names, which is verified once by
Spark and once by the oracle (``pytest_kafka_mirror.verify.oracle``).  Each history's part
of the two reports is then compared: lanes (every figure and missing range), examples
(complete: the caps are lifted) and per-topic latency; then the batch as a whole (totals,
overall latency, the examples' global order), and once more with small caps, where the
truncation must agree too.

On a disagreement the smallest failing history is verified alone, then shrunk: each round
writes *every* one-step reduction of it (tests.histories.reductions) into one run
directory, verifies them with one Spark job, and keeps the smallest that still disagrees.
Hypothesis's own shrinker would run one Spark job per candidate, hundreds of them.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings

from pytest_kafka_mirror.verify import MirrorReport, job, verify_run
from pytest_kafka_mirror.verify.oracle import oracle_report
from tests.histories import History, histories, reductions, size, write_histories
from tests.synthetic import SyntheticRun, assert_same_report

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Generated histories per batch; 3 batches: 1560 cases in all.
CASES = 520
#: Shrinking stops after this many rounds (one Spark job each).
SHRINK_ROUNDS = 40
#: Verify with every example and range kept, so that each history's part is complete.
UNCAPPED: dict[str, Any] = {"examples": 10**6, "max_ranges": 10**6}

BATCHES = {  # name: (hypothesis seed, with a source log, settings of a large capture)
    "plain": (1, False, False),
    "reconciled": (2, True, False),
    # A large capture's settings (code generation, whole-stage and per expression; more
    # shuffle partitions; gaps and latency values in a second round of queries): the same
    # answers whatever way Spark evaluates the job.
    "large-settings": (3, False, True),
}


def _generate(n: int, batch_seed: int) -> list[History]:
    """``n`` histories from Hypothesis, deterministic under ``batch_seed``."""
    out: list[History] = []

    @seed(batch_seed)
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(histories())
    def collect(case: History) -> None:
        out.append(case)

    collect()
    return out


def _view(report: MirrorReport, prefix: str) -> dict[str, Any]:
    """The part of a report that belongs to the history written under ``prefix``."""

    def mine(row: dict[str, Any]) -> bool:
        return str(row.get("topic") or row["target_topic"].removeprefix("src.")).startswith(prefix)

    examples = {kind: [r for r in rows if mine(r)] for kind, rows in report.examples.items()}
    return {
        "lanes": {(s.topic, s.producer_id, s.lane): s.to_dict() for s in report.lanes if s.topic.startswith(prefix)},
        "examples": {kind: rows for kind, rows in examples.items() if rows},
        "latency": {t: s.to_dict() for t, s in report.latency_by_topic.items() if t.startswith(prefix)},
    }


class _Batches:
    """Writes and verifies batches of histories in fresh directories under ``root``."""

    def __init__(self, spark: SparkSession, root: Path, source_log: bool) -> None:
        self.spark, self.root, self.source_log = spark, root, source_log
        self.count = itertools.count()

    def verify(self, cases: list[History]) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], MirrorReport,
                                                      MirrorReport]:
        """Per history (Spark view, oracle view), and the two whole reports."""
        run = SyntheticRun(self.root / f"batch-{next(self.count)}")
        prefixes = write_histories(run, cases, source_log=self.source_log)
        run.write(segments=3)
        got = verify_run(run.run_dir, spark=self.spark, write_report=False, **UNCAPPED)
        want = oracle_report(run.run_dir, **UNCAPPED)
        return [(_view(got, p), _view(want, p)) for p in prefixes], got, want

    def shrink(self, case: History) -> History:
        """The smallest reduction of ``case`` that still disagrees, one Spark job per round."""
        for _ in range(SHRINK_ROUNDS):
            candidates = reductions(case)
            if not candidates:
                break
            views, _, _ = self.verify(candidates)
            failing = [c for c, (g, w) in zip(candidates, views, strict=True) if g != w]
            if not failing:
                break
            case = min(failing, key=size)
        return case


def _same(got: dict[str, Any], want: dict[str, Any], case: History) -> None:
    __tracebackhide__ = True
    assert sorted(got["lanes"]) == sorted(want["lanes"]), case
    for key, lane in want["lanes"].items():
        assert got["lanes"][key] == lane, f"lane {key} of {case!r}"
    assert sorted(got["examples"]) == sorted(want["examples"]), case
    for kind, rows in want["examples"].items():
        assert got["examples"][kind] == rows, f"examples ({kind}) of {case!r}"
    assert got["latency"] == want["latency"], case


@pytest.mark.parametrize("batch", list(BATCHES))
def test_spark_and_oracle_agree_on_generated_histories(spark: SparkSession, tmp_path: Path, batch: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    batch_seed, source_log, large = BATCHES[batch]
    if large:
        monkeypatch.setattr(job, "_SMALL_CAPTURE_ROWS", 0)
        monkeypatch.setattr(job, "_ONE_ROUND_ROWS", 0)
    cases = _generate(CASES, batch_seed)
    assert len(cases) == CASES
    batches = _Batches(spark, tmp_path, source_log)
    views, got, want = batches.verify(cases)

    failing = [c for c, (g, w) in zip(cases, views, strict=True) if g != w]
    if failing:
        first = min(failing, key=size)
        ((g, w),), _, _ = batches.verify([first])
        if g == w:
            pytest.fail(f"{len(failing)} histories disagreed in a batch but the smallest agrees alone: "
                        f"histories see each other's records (names not isolated?):\n{first!r}")
        minimal = batches.shrink(first)
        ((g, w),), _, _ = batches.verify([minimal])
        print(f"{len(failing)} of {len(cases)} histories disagree; shrunk from size {size(first)} to {size(minimal)}")
        _same(g, w, minimal)

    # The batch as a whole: totals, overall latency, examples in their global order.
    assert_same_report(got, want)
    if source_log:
        # Once more with small caps: the truncated examples and ranges agree as well.
        caps: dict[str, Any] = {"examples": 7, "max_ranges": 2}
        report = verify_run(got.run_dir, spark=spark, write_report=False, **caps)
        assert_same_report(report, oracle_report(got.run_dir, **caps))
        assert max(len(rows) for rows in report.examples.values()) == 7
        assert any(s.missing_range_count > len(s.missing_ranges) == 2 for s in report.lanes)
        assert any(s.source_missing_range_count > len(s.source_missing_ranges) for s in report.lanes)


def test_shrinking_finds_a_minimal_history() -> None:
    """The reductions reach a one-lane, one-arrival history from any history (no Spark)."""
    case = _generate(30, 7)[-1]
    while (smaller := [c for c in reductions(case) if c.arrivals and c.lanes]) and size(case) > 0:
        case = min(smaller, key=size)
    assert len(case.lanes) == 1 and len(case.arrivals) == 1
    assert all(size(c) < size(case) for c in reductions(case))
