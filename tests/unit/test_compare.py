"""Regression checks and the comparison of two sessions: exact semantics and a golden rendering."""

from __future__ import annotations

import math

import pytest

from pytest_kafka_mirror.report.compare import (
    CHECKED,
    DEFAULT_SHOWN,
    FIGURES,
    GATEABLE,
    RegressionCheck,
    achieved_rate,
    compare_runs,
    failover_figures,
    figure_names,
    figures,
    format_figure,
    parse_compare_fail,
)
from pytest_kafka_mirror.report.storage import FAILOVER, VERIFICATION
from tests.golden import assert_golden
from tests.stored import sample_failover_report, sample_failover_result, sample_report, sample_result, sample_run

A = "tests/test_mirror.py::test_steady[headers]"
B = "tests/test_mirror.py::test_steady[body]"


@pytest.mark.parametrize(
    "text,figure,threshold,relative",
    [
        ("latency_p99:10%", "latency_p99", 10.0, True),
        ("missing:0", "missing", 0.0, False),
        ("rate:2.5%", "rate", 2.5, True),
        ("latency_max:1e3", "latency_max", 1000.0, False),
        (" duplicated:5 ", "duplicated", 5.0, False),
        ("failover_rereads_max:10%", "failover_rereads_max", 10.0, True),
        ("failover_skipped:0", "failover_skipped", 0.0, False),
        ("checkpoint_delay_max_s:2.5", "checkpoint_delay_max_s", 2.5, False),
        ("heartbeat_lag_ms:500", "heartbeat_lag_ms", 500.0, False),
    ],
)
def test_parse_compare_fail(text: str, figure: str, threshold: float, relative: bool) -> None:
    check = parse_compare_fail(text)
    assert (check.figure, check.threshold, check.relative) == (figure, threshold, relative)
    assert str(check) == text.strip().replace("1e3", "1000")


@pytest.mark.parametrize(
    "text,message",
    [
        ("latency_p99", r"'latency_p99' is not a regression check; accepted: FIGURE:N% .* \| FIGURE:N"),
        ("latency_p99:ten%", r"is not a regression check"),
        ("latency_p99:-5", r"is not a regression check"),
        ("p99:10%", r"'p99' is not a figure; accepted figures: missing, lost, unseen, duplicated"),
        ("expected:0", r"'expected' is a size of the run, not a figure that can regress"),
        ("failover_reread_max:0", r"'failover_reread_max' is not a figure; accepted figures: .*, failover_skipped, "
                                  r"failover_rereads_max, .*, heartbeat_max_gap_ms, failover_groups_checked, "
                                  r"failover_translations_checked, failover_heartbeats_checked$"),
    ],
)
def test_parse_compare_fail_rejects_with_the_accepted_forms(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_compare_fail(text)


def test_relative_and_absolute_checks() -> None:
    rel = RegressionCheck("latency_p99", 10.0, relative=True)
    assert rel.worsening(20.0, 22.0) == pytest.approx(10.0)
    assert not rel.fails(20.0, 22.0)  # exactly the threshold is allowed
    assert rel.fails(20.0, 22.1)
    assert not rel.fails(20.0, 5.0)  # better is never a regression
    absolute = RegressionCheck("missing", 0.0, relative=False)
    assert not absolute.fails(3, 3)
    assert absolute.fails(3, 4)
    assert absolute.worsening(3, 4) == 1.0


def test_a_relative_check_on_a_zero_baseline_fails_on_any_increase() -> None:
    check = RegressionCheck("duplicated", 50.0, relative=True)
    assert check.worsening(0, 1) == math.inf and check.fails(0, 1)
    assert not check.fails(0, 0)


def test_rate_regresses_downwards() -> None:
    check = RegressionCheck("rate", 10.0, relative=True)
    assert check.fails(500.0, 440.0)  # 12% slower
    assert not check.fails(500.0, 460.0)
    assert not check.fails(500.0, 900.0)


def test_missing_values() -> None:
    check = RegressionCheck("latency_p99", 10.0, relative=True)
    assert check.fails(20.0, None)  # nothing arrived now, something did before: never a pass
    assert not check.fails(None, 20.0)  # nothing to regress from
    assert not check.fails(None, None)


def test_figures_of_a_report() -> None:
    f = figures(sample_report(lost=3, unseen=4, duplicated=2, p50=10.0, p99=20.0, rate=400.0))
    assert list(f) == list(figure_names(VERIFICATION))
    assert (f["missing"], f["lost"], f["unseen"], f["duplicated"]) == (7, 3, 4, 2)
    assert (f["latency_p50"], f["latency_p99"], f["rate"]) == (10.0, 20.0, 400.0)
    assert figures(sample_report(p50=None, rate=None))["latency_p99"] is None


def test_figures_of_a_failover_check() -> None:
    f = failover_figures(sample_failover_report(rereads=7, skipped=2, untranslatable=1, delay_s=3.25))
    assert list(f) == list(figure_names(FAILOVER))
    assert f == {"failover_skipped": 2, "failover_rereads_max": 7, "failover_beyond_end_max": 0, "failover_rewinds": 0,
                 "failover_untranslated": 1, "failover_untranslatable": 1, "failover_coarser_than_syncs": 0,
                 "checkpoint_records_behind_max": 100, "checkpoint_seconds_behind_max": 0.0,
                 "checkpoint_delay_max_s": 3.25, "heartbeat_lag_ms": 850, "heartbeat_max_gap_ms": 1000,
                 "failover_groups_checked": 1, "failover_translations_checked": 4, "failover_heartbeats_checked": 1}


def test_every_figure_is_of_one_kind_and_every_failover_figure_is_gated_upwards() -> None:
    assert set(figure_names(VERIFICATION)) | set(figure_names(FAILOVER)) == set(FIGURES)
    assert not set(figure_names(VERIFICATION)) & set(figure_names(FAILOVER))
    for name in figure_names(FAILOVER):
        # worse when higher, but what a check checked: worse when lower (and a gate always holds it)
        assert FIGURES[name].gateable and FIGURES[name].higher_is_worse is (name not in CHECKED) and name in GATEABLE
    for kind, shown in DEFAULT_SHOWN.items():
        assert set(shown) <= set(figure_names(kind))
    # every figure a failover report gives is a figure of the comparison
    assert set(sample_failover_report().figures()) == set(figure_names(FAILOVER))


def test_achieved_rate_of_producers_one_after_the_other() -> None:
    first = {"topics": ["a", "b"], "started_us": 0, "produce_seconds": 2.0, "sent": 2000}
    second = {"topics": ["a", "b"], "started_us": 3_000_000, "produce_seconds": 1.0, "sent": 1000}
    # 3000 records on 2 topics over the 4 s from the first start to the last end
    assert achieved_rate([first, second]) == 375.0
    assert achieved_rate([]) is None


def test_format_figure() -> None:
    assert format_figure("latency_p99", 12.5) == "12.5 ms"
    assert format_figure("rate", 480.25) == "480.2 msg/s"
    assert format_figure("missing", 3) == "3"
    assert format_figure("missing", None) == "n/a"
    assert format_figure("checkpoint_delay_max_s", 1.5) == "1.50 s"
    assert format_figure("heartbeat_lag_ms", 850) == "850 ms"
    assert format_figure("failover_rereads_max", 297) == "297"


def _runs() -> tuple[dict, dict]:
    baseline = sample_run(
        sample_result(A, sample_report(p50=10.0, p99=20.0, rate=500.0), fmt="headers"),
        sample_result(B, sample_report(p50=11.0, p99=21.0, rate=500.0), fmt="body"),
        sample_result("tests/test_mirror.py::test_gone", sample_report()),
    )
    current = sample_run(
        sample_result(A, sample_report(p50=10.5, p99=23.0, rate=480.0, lost=2), fmt="headers"),
        sample_result(B, sample_report(p50=11.0, p99=21.5, rate=500.0), fmt="body"),
        sample_result("tests/test_mirror.py::test_new", sample_report()),
        commit="fedcba9876543210fedcba9876543210fedcba98", dirty=True,
    )
    return baseline, current


def test_comparison_names_the_test_the_figure_both_values_and_the_check() -> None:
    baseline, current = _runs()
    checks = [parse_compare_fail("latency_p99:10%"), parse_compare_fail("missing:0"), parse_compare_fail("rate:5%")]
    comparison = compare_runs(baseline, current, checks, baseline_label="0001_base")
    assert comparison.failed
    assert comparison.regressions == [
        f"{A}: latency_p99 23 ms vs 20 ms in the baseline (+3 ms, +15.0%), more than latency_p99:10% allows (at most +10%)",
        f"{A}: missing 2 vs 0 in the baseline (+2), more than missing:0 allows (at most +0)",
    ]
    assert comparison.only_baseline == ["tests/test_mirror.py::test_gone"]
    assert comparison.only_current == ["tests/test_mirror.py::test_new"]


def test_golden_comparison_rendering() -> None:
    baseline, current = _runs()
    checks = [parse_compare_fail("latency_p99:10%"), parse_compare_fail("missing:0"), parse_compare_fail("rate:5%")]
    comparison = compare_runs(baseline, current, checks,
                              baseline_label="0001_base (2025-03-14 09:26:53 UTC, commit 0123456789ab)",
                              current_label="this session (2025-03-14 09:26:53 UTC, commit fedcba987654, uncommitted changes)")
    shown = compare_runs(baseline, current, baseline_label="0001_base")
    assert_golden("comparison.txt", comparison.render() + "\n\n" + shown.render() + "\n")


def test_no_regression_says_what_held() -> None:
    baseline, current = _runs()
    comparison = compare_runs(baseline, current, [parse_compare_fail("latency_p50:10%")])
    assert not comparison.failed
    assert comparison.render().endswith("no regression: latency_p50:10% held for 2 verified runs")


def test_a_gate_that_compared_nothing_fails() -> None:
    baseline = sample_run(sample_result("tests/old.py::test_a", sample_report()))
    current = sample_run(sample_result("tests/new.py::test_a", sample_report()))
    comparison = compare_runs(baseline, current, [parse_compare_fail("missing:0")], baseline_label="0001_base")
    assert comparison.failed
    assert comparison.regressions == [
        "nothing compared: none of the 1 verified runs of this session is in 0001_base, so missing:0 gated nothing"
    ]
    # Without checks a comparison is informational only.
    assert not compare_runs(baseline, current).failed


# -- failover checks: results of their own, compared with their own kind only ---------------------

FO = "scenarios/test_failover.py::test_after_restart[sigterm]"


def _failover_runs() -> tuple[dict, dict]:
    """A test that verifies and fails over (twice), and one that only fails over; MM2's newer
    translation re-reads more after the restart."""
    baseline = sample_run(
        sample_result(FO, sample_report()),
        sample_failover_result(FO, sample_failover_report(rereads=40)),
        sample_failover_result(FO, sample_failover_report(rereads=10), index=1),
        sample_failover_result("scenarios/test_failover.py::test_low_throughput_partition", sample_failover_report()),
    )
    current = sample_run(
        sample_result(FO, sample_report()),
        sample_failover_result(FO, sample_failover_report(rereads=297, delay_s=2.0)),
        sample_failover_result(FO, sample_failover_report(rereads=10), index=1),
        sample_failover_result("scenarios/test_failover.py::test_low_throughput_partition", sample_failover_report()),
    )
    return baseline, current


def test_a_failover_rereads_regression_names_the_figure_and_the_check() -> None:
    baseline, current = _failover_runs()
    assert list(current["results"]) == [FO, f"{FO}#failover", f"{FO}#failover#1",
                                        "scenarios/test_failover.py::test_low_throughput_partition#failover"]
    checks = [parse_compare_fail("failover_rereads_max:10%"), parse_compare_fail("failover_skipped:0"),
              parse_compare_fail("missing:0")]
    comparison = compare_runs(baseline, current, checks, baseline_label="0001_mm2-3.4")
    assert comparison.failed
    assert comparison.regressions == [
        f"{FO}#failover: failover_rereads_max 297 vs 40 in the baseline (+257, +642.5%), more than "
        "failover_rereads_max:10% allows (at most +10%)",
    ]
    # A verified run shows (and is checked on) verification figures only, a failover check failover figures only.
    figures_of: dict[str, list[str]] = {}
    key = ""
    for row in comparison.rows:
        key = row["test"] or key
        figures_of.setdefault(key, []).append(row["figure"])
    assert figures_of == {
        FO: ["missing"],
        f"{FO}#failover": ["failover_rereads_max", "failover_skipped"],
        f"{FO}#failover#1": ["failover_rereads_max", "failover_skipped"],
        "scenarios/test_failover.py::test_low_throughput_partition#failover": ["failover_rereads_max",
                                                                               "failover_skipped"],
    }
    held = compare_runs(baseline, current, [parse_compare_fail("failover_skipped:0")])
    assert held.render().endswith("no regression: failover_skipped:0 held for 1 verified run and 3 failover checks")


def test_golden_failover_comparison_rendering() -> None:
    baseline, current = _failover_runs()
    gated = compare_runs(baseline, current, [parse_compare_fail("failover_rereads_max:10%")],
                         baseline_label="0001_mm2-3.4", current_label="0002_mm2-3.5")
    shown = compare_runs(baseline, current, baseline_label="0001_mm2-3.4", current_label="0002_mm2-3.5")
    assert_golden("comparison_failover.txt", gated.render() + "\n\n" + shown.render() + "\n")


def test_a_failover_figure_not_measured_now_is_a_regression() -> None:
    baseline = sample_run(sample_failover_result(FO, sample_failover_report()))
    current = sample_run(sample_failover_result(FO, sample_failover_report(heartbeat_lag_ms=None)))
    comparison = compare_runs(baseline, current, [parse_compare_fail("heartbeat_lag_ms:50%")])
    assert comparison.regressions == [
        f"{FO}#failover: heartbeat_lag_ms has no value in this run (not measured: see the report's not_run) vs "
        "850 ms in the baseline; heartbeat_lag_ms:50% allows no such regression"
    ]


def test_a_gated_run_that_checked_less_than_its_baseline_fails_whatever_the_checks() -> None:
    # MM2 stopped checkpointing: no translation checked now, 4 (one group, 2 partitions, both ways) before
    baseline = sample_run(sample_failover_result(FO, sample_failover_report()))
    nothing = sample_failover_report()
    nothing.entries, nothing.not_run = [], {"checkpoints": "emit.checkpoints.enabled=false (--opt)"}
    current = sample_run(sample_failover_result(FO, nothing))
    comparison = compare_runs(baseline, current, [parse_compare_fail("missing:0")])
    assert comparison.regressions == [
        f"{FO}#failover: checked 0 groups vs 1 in the baseline (failover_groups_checked: witness groups whose "
        "translated offsets were checked): a gated run that checks less than its baseline fails (its failover "
        "report's not_run says why)",
        f"{FO}#failover: checked 0 translations vs 4 in the baseline (failover_translations_checked: group partitions "
        "checked, each way of translating (checkpoint, synced offset) counted): a gated run that checks less than "
        "its baseline fails (its failover report's not_run says why)",
    ]
    assert "checked less: FAILED" in comparison.render()
    # shown, not gated: a comparison without checks fails nothing
    assert not compare_runs(baseline, current).failed
    # the same run checked again: nothing less
    assert not compare_runs(baseline, baseline, [parse_compare_fail("missing:0")]).failed


def test_a_failover_gate_that_compared_no_failover_check_fails() -> None:
    # The verified run is compared; the failover check was renamed: its gate compared nothing.
    baseline = sample_run(sample_result(FO, sample_report()),
                          sample_failover_result("scenarios/old.py::test_fo", sample_failover_report()))
    current = sample_run(sample_result(FO, sample_report()), sample_failover_result(FO, sample_failover_report()))
    checks = [parse_compare_fail("missing:0"), parse_compare_fail("failover_skipped:0")]
    comparison = compare_runs(baseline, current, checks, baseline_label="0001_base")
    assert comparison.regressions == [
        "nothing compared: none of the 1 failover checks of this session is in 0001_base, so failover_skipped:0 "
        "gated nothing"
    ]
    # A session without failover checks has nothing for a failover gate to miss.
    assert not compare_runs(baseline, sample_run(sample_result(FO, sample_report())), checks).failed


# -- figures a scenario measured itself (MirrorRun.record_figure) -------------------------


def _with_scenario(report, **values):
    report.scenario = {name: {"value": v, "note": f"how {name} was measured"} for name, v in values.items()}
    return report


def test_scenario_figures_are_figures_of_the_verification_and_shown_where_measured() -> None:
    upgraded = "scenarios/test_upgrade.py::test_in_place_upgrade_mid_stream[upgrade]"
    base = sample_run(sample_result(upgraded, _with_scenario(sample_report(), upgrade_resume_s=4.0)),
                      sample_result(A, sample_report()))
    cur = sample_run(sample_result(upgraded, _with_scenario(sample_report(), upgrade_resume_s=9.5)),
                     sample_result(A, sample_report()))
    assert figures(_with_scenario(sample_report(), upgrade_resume_s=4.0))["upgrade_resume_s"] == 4.0
    comparison = compare_runs(base, cur)
    shown = [(r["test"], r["figure"], r["baseline"], r["now"]) for r in comparison.rows if r["figure"] == "upgrade_resume_s"]
    assert shown == [("", "upgrade_resume_s", "4.00 s", "9.50 s")]
    # gated: only the test that measured it has a row, and it regressed by 137.5 %
    gated = compare_runs(base, cur, [parse_compare_fail("upgrade_resume_s:50%")])
    assert [r["test"] for r in gated.rows] == [upgraded]
    assert gated.failed and "upgrade_resume_s" in gated.regressions[0] and upgraded in gated.regressions[0]


def test_a_bound_a_scenario_measured_is_not_gateable() -> None:
    assert not FIGURES["upgrade_duplicates_bound"].gateable
    with pytest.raises(ValueError, match="is a size of the run"):
        parse_compare_fail("upgrade_duplicates_bound:0")


def test_a_run_keeps_the_figures_its_scenario_measured(tmp_path) -> None:
    from pytest_kafka_mirror.run import MirrorRun
    from pytest_kafka_mirror.rundir import load_scenario_figures

    run = MirrorRun(tmp_path, "127.0.0.1:1", "127.0.0.1:2", {"t": "source.t"}, partitions={"t": 1})
    run.record_figure("config_sync_s", 2.34567, "retention.ms on source.t")
    run.record_figure("upgrade_duplicates_bound", 1500.0)
    run.record_figure("partition_growth_s", None, "the remote topic never grew")
    assert load_scenario_figures(tmp_path) == {
        "config_sync_s": {"value": 2.346, "note": "retention.ms on source.t"},
        "upgrade_duplicates_bound": {"value": 1500, "note": ""},
        "partition_growth_s": {"value": None, "note": "the remote topic never grew"},
    }
    with pytest.raises(ValueError, match="'latency_p99' is not a scenario figure; known: upgrade_resume_s"):
        run.record_figure("latency_p99", 3.0)


def test_a_figure_recorded_after_the_verification_is_refused(tmp_path) -> None:
    from pytest_kafka_mirror.run import MirrorRun

    run = MirrorRun(tmp_path, "127.0.0.1:1", "127.0.0.1:2", {"t": "source.t"}, partitions={"t": 1})
    run.report = sample_report()  # what verify() sets
    with pytest.raises(RuntimeError, match=r"record_figure\('group_sync_s'\) after the run was verified"):
        run.record_figure("group_sync_s", 1.0)


# -- capacity: rates that regress downwards, lower bounds never failed -------------------------

CAP = "scenarios/test_capacity.py::test_capacity_drain"


def _capacity_runs(now: float | None, *, lower_bound: bool = False) -> tuple[dict, dict]:
    baseline = sample_run(sample_result(CAP, sample_report(copy_rate=10_000.0)))
    current = sample_run(sample_result(CAP, sample_report(copy_rate=now, copy_lower_bound=lower_bound)))
    return baseline, current


def test_capacity_figures_of_a_report() -> None:
    f = figures(sample_report(copy_rate=17_600.0))
    assert (f["copy_rate"], f["copy_rate_mb"], f["offered_rate"]) == (17_600.0, 17_600.0 * 200 / 1e6, 500.0)
    assert f["backlog_max"] == 500 and f["caught_up_s"] == 0.05 and f["max_sustainable_rate"] is None
    assert not FIGURES["copy_rate"].higher_is_worse and not FIGURES["max_sustainable_rate"].higher_is_worse
    assert FIGURES["backlog_max"].higher_is_worse and FIGURES["caught_up_s"].higher_is_worse
    with pytest.raises(ValueError, match="'offered_rate' is a size of the run"):
        parse_compare_fail("offered_rate:10%")
    assert format_figure("copy_rate", 17_600.4) == "17,600 records/s"


def test_a_copy_rate_drop_beyond_the_tolerance_fails_naming_the_figure_and_the_scenario() -> None:
    from pytest_kafka_mirror.cli.gate import DEFAULT_CHECKS

    checks = [parse_compare_fail(c) for c in DEFAULT_CHECKS]
    assert {"copy_rate:20%", "max_sustainable_rate:20%"} <= set(DEFAULT_CHECKS)
    comparison = compare_runs(*_capacity_runs(6_000.0), checks)
    assert comparison.regressions == [
        f"{CAP}: copy_rate 6,000 records/s vs 10,000 records/s in the baseline (-4,000 records/s, -40.0%), more than "
        "copy_rate:20% allows (at most -20%)"]
    assert not compare_runs(*_capacity_runs(8_500.0), checks).failed  # -15 %: within the tolerance
    assert not compare_runs(*_capacity_runs(12_000.0), checks).failed  # faster: better


def test_a_lower_bound_never_fails_the_gate_and_the_comparison_says_so() -> None:
    checks = [parse_compare_fail("copy_rate:20%")]
    comparison = compare_runs(*_capacity_runs(6_000.0, lower_bound=True), checks)
    assert not comparison.failed
    row = next(r for r in comparison.rows if r["figure"] == "copy_rate")
    assert row["now"] == ">=6,000 records/s" and row["check"] == "copy_rate:20% not failed: a lower bound"
    assert comparison.notes == [f"{CAP}: copy_rate 6,000 records/s is only a lower bound (a producer was behind its "
                                "offered rate), so copy_rate:20% does not fail it"]
    assert "not gated (lower bounds):" in comparison.render()
    # a copy rate the candidate did not measure (it kept up: no backlog) is no regression either
    absent = compare_runs(*_capacity_runs(None), checks)
    assert not absent.failed and absent.notes == [
        f"{CAP}: copy_rate was not measured in this run (no backlog), so copy_rate:20% does not fail it"]
    # shown without checks where either run has it
    assert [r["figure"] for r in compare_runs(*_capacity_runs(6_000.0)).rows][-1] == "copy_rate"
