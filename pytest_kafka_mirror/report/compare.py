"""Figures of a verified run, regression checks, and the comparison of two sessions.

A *figure* is one number of a verified run, named after the report:

* the report totals (``lost``, ``unseen``, ``duplicated``, ``reordered``, ``phantom``, ...)
  and ``missing`` = ``lost + unseen`` (acknowledged records that never arrived, whether or
  not a later record of their lane did: gate on ``missing`` to catch tail loss too);
* the latency figures ``latency_min``, ``latency_mean``, ``latency_p50``, ``latency_p90``,
  ``latency_p99``, ``latency_p999``, ``latency_max`` (milliseconds);
* ``rate``: the achieved messages/s per topic over the produce window;
* ``discovery_s``: the replicator's discovery time, the longest over the run's topics
  (topic created -> a warm-up record of every partition on the target; seconds);
* the capacity figures of the report's ``capacity`` (``verify/_capacity.py``, all topics):
  ``copy_rate`` / ``copy_rate_mb`` (records/s, MB/s while the replicator had a backlog) and
  ``max_sustainable_rate`` (the highest sustained step of a stepped rate profile), better
  when higher; ``backlog_max`` and ``caught_up_s``, better when lower; ``offered_rate``
  (what the producers offered), shown, never gated.  A figure the report gives only as a
  lower bound (the producer or the capture set the pace) is never failed by a check: the
  comparison says so in its row.

A failover check (``mirror_failover``) is a result of its own (key ``NODEID#failover``, see
``storage.py``) with the figures of its ``FailoverReport``: ``failover_skipped``,
``failover_rereads_max``, ``failover_beyond_end_max``, ``failover_rewinds``,
``failover_untranslated``, ``failover_untranslatable``, ``failover_coarser_than_syncs``,
``checkpoint_records_behind_max``, ``checkpoint_seconds_behind_max``,
``checkpoint_delay_max_s``, ``heartbeat_lag_ms``, ``heartbeat_max_gap_ms``.  Each figure
belongs to one kind of result (:attr:`Figure.kind`), so a check only ever compares a
verified run with a verified run and a failover check with a failover check.

A regression check (``--kafka-mirror-compare-fail``) says how much worse a figure may get
than in the compared run: ``FIGURE:N%`` relative to the baseline value, ``FIGURE:N`` in the
figure's unit.  Worse means higher for counts, latencies and durations, lower for the rates.
Checks are parsed while the command line is parsed, so a typo fails before any cluster starts:

>>> check = parse_compare_fail("latency_p99:10%")
>>> check.worsening(baseline=20.0, current=23.0)
15.0
>>> check.fails(baseline=20.0, current=23.0)
True
>>> parse_compare_fail("missing:0").fails(baseline=0, current=0)
False

This module is plain Python (no pytest, no Spark): the plugin and ``kafka-mirror compare``
share it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..verify.report import TOTAL_FIELDS, format_table
from .storage import FAILOVER, KINDS, VERIFICATION, count_results, kind_of

if TYPE_CHECKING:
    from ..verify.failover import FailoverReport
    from ..verify.report import MirrorReport

__all__ = [
    "FAILOVER_SUMMARY_COLUMNS",
    "SCENARIO_FIGURES",
    "MEASURED_LEGEND",
    "PARTIAL_LEGEND",
    "FIGURES",
    "SUMMARY_COLUMNS",
    "Comparison",
    "Figure",
    "RegressionCheck",
    "CAPACITY_FIGURES",
    "achieved_rate",
    "capacity_values",
    "compare_runs",
    "failover_figures",
    "failover_summary_row",
    "figure_names",
    "figures",
    "format_figure",
    "lower_bounds",
    "parse_compare_fail",
    "summary_row",
]


@dataclass(frozen=True)
class Figure:
    """What a figure measures, its unit, and which direction is a regression."""

    name: str
    unit: str  # "records" | "lanes" | "ms" | "msg/s" | "s" | "offsets" | "checkpoints" | "translations"
    higher_is_worse: bool
    gateable: bool
    help: str
    kind: str = VERIFICATION  # the kind of result that has it (storage.KINDS)


def _count(name: str, help: str, unit: str = "records") -> Figure:
    return Figure(name, unit, higher_is_worse=True, gateable=True, help=help)


def _size(name: str, help: str) -> Figure:
    # How big the run was, not how well it went: shown and stored, never gated.
    return Figure(name, "records", higher_is_worse=False, gateable=False, help=help)


def _latency(name: str, help: str) -> Figure:
    return Figure(f"latency_{name}", "ms", higher_is_worse=True, gateable=True, help=help)


def _better_higher(name: str, unit: str, help: str, *, gateable: bool = True) -> Figure:
    # A rate: worse when lower (gateable=False: what the run offered, shown, never gated).
    return Figure(name, unit, higher_is_worse=False, gateable=gateable, help=help)


def _duration(name: str, help: str) -> Figure:
    return Figure(name, "s", higher_is_worse=True, gateable=True, help=help)


def _scenario(name: str, unit: str, help: str, *, gateable: bool = True) -> Figure:
    # Measured by the scenario itself (MirrorRun.record_figure): a time or count that is
    # worse when higher; a bound (gateable=False) is shown and stored, never gated.
    return Figure(name, unit, higher_is_worse=True, gateable=gateable, help=help)


def _failover(name: str, unit: str, help: str) -> Figure:
    # Every failover figure is worse when higher: records lost or re-read, staleness, lag.
    return Figure(name, unit, higher_is_worse=True, gateable=True, help=help, kind=FAILOVER)


def _checked(name: str, unit: str, help: str) -> Figure:
    # What a failover check checked: a gated run that checked less than its baseline fails
    # (CHECKED: whatever the regression checks say), so that a replicator that stopped
    # checkpointing cannot pass by leaving nothing to compare.
    return Figure(name, unit, higher_is_worse=False, gateable=True, help=help, kind=FAILOVER)


FIGURES: dict[str, Figure] = {
    f.name: f
    for f in (
        _size("expected", "records the source acknowledged"),
        _size("received", "identified records that arrived, copies included"),
        _size("distinct", "distinct identified records that arrived"),
        _count("missing", "lost + unseen: acknowledged records that never arrived"),
        _count("lost", "never arrived although a later record of the lane did"),
        _count("unseen", "never arrived and nothing later of the lane did (tail loss)"),
        _count("duplicated", "extra copies"),
        _count("reordered", "first copies that arrived behind a higher sequence of their lane"),
        _count("phantom", "arrived but never acknowledged"),
        _count("aborted_arrived", "of phantom: records of transactions the source aborted"),
        _count("latest_missing", "lanes (keys) of compacted topics whose latest acknowledged record never arrived",
               unit="lanes"),
        _size("compacted_away", "older records of compacted topics' keys that did not arrive (not lost)"),
        _count("corrupted", "bad payload checksum"),
        _count("headers_lost", "arrived without their metadata headers"),
        _count("metadata_damaged", "arrived with some metadata headers or the key missing or altered"),
        _count("foreign", "records on the target topics that are not ours"),
        _count("lane_split", "lanes that arrived in more than one target partition", unit="lanes"),
        _latency("min", "smallest latency"),
        _latency("mean", "mean latency"),
        _latency("p50", "median latency (nearest rank)"),
        _latency("p90", "90th percentile latency"),
        _latency("p99", "99th percentile latency"),
        _latency("p999", "99.9th percentile latency"),
        _latency("max", "largest latency"),
        _better_higher("rate", "msg/s", "achieved messages/s per topic over the produce window"),
        _duration("discovery_s", "topic created -> a warm-up record of every partition on the target (longest topic)"),
        _better_higher("copy_rate", "records/s", "records/s the replicator copied while it had a backlog (all topics)"),
        _better_higher("copy_rate_mb", "MB/s", "MB/s (of the producers' message size) copied while it had a backlog"),
        _better_higher("max_sustainable_rate", "records/s", "highest step of a stepped rate profile with p99 under "
                       "the SLO and no growing backlog"),
        _count("backlog_max", "most records acknowledged on the source and not yet arrived"),
        _duration("caught_up_s", "last acknowledged record produced -> the last one arrived (the backlog back to zero)"),
        _better_higher("offered_rate", "records/s", "records/s the producers offered (achieved, all topics)",
                       gateable=False),
        _scenario("upgrade_resume_s", "s", "in-place upgrade / rollback: the old replicator stopped -> the new one "
                  "copied again"),
        _scenario("upgrade_duplicates_bound", "records", "copies the switch may repeat: what was produced "
                  "in one offset-commit interval", gateable=False),
        _scenario("rolling_upgrade_s", "s", "rolling upgrade of a Connect cluster: its first worker stopped -> "
                  "the last new worker running every task"),
        _scenario("rolling_upgrade_step_max_s", "s", "rolling upgrade: the longest step, a worker stopped -> its "
                  "successor running every task"),
        _scenario("partition_growth_s", "s", "source topic grew -> the remote topic grew and a record of every "
                  "new partition was copied"),
        _scenario("config_sync_s", "s", "topic config set on the source -> seen on the remote topic"),
        _scenario("config_default_s", "s", "topic config deleted on the source -> the remote topic back at the "
                  "target cluster's default (use.defaults.from=target)"),
        _scenario("config_reset_s", "s", "topic config altered on the remote topic -> reset to the source's "
                  "default (use.defaults.from=source)"),
        _scenario("multi_node_resume_s", "s", "one node of a several-node MM2 SIGKILLed -> every source task "
                  "copies again on the survivors"),
        _scenario("multi_node_duplicates_bound", "records", "copies a node's SIGKILL may repeat: what was produced "
                  "in one offset-commit interval", gateable=False),
        _scenario("sigkill_duplicates_bound", "records", "copies a replicator's SIGKILL and start may repeat: what "
                  "was produced in one offset-commit interval", gateable=False),
        _scenario("group_sync_s", "s", "group committed on the source -> its idle target group moved to the "
                  "translated offsets"),
        _scenario("offset_syncs_per_1000", "syncs", "offset syncs the replicator wrote per 1000 records it copied "
                  "(offset.lag.max=0 wants one per record)", gateable=False),
        _scenario("compacted_before_copy", "records", "records of a compacted topic the source's log cleaner "
                  "removed before the replicator copied them (the backlog it read had offset gaps)", gateable=False),
        Figure("long_link_defaults_copy_rate", "msg/s", higher_is_worse=False, gateable=True,
               help="the long-link capacity scenario: MM2's copy rate with its defaults over the delayed link "
                    "(the run's own copy_rate: with its clients tuned)"),
        Figure("tasks_max_1_copy_rate", "msg/s", higher_is_worse=False, gateable=True,
               help="the tasks.max capacity scenario: MM2's copy rate with tasks.max=1 (the run's own copy_rate: "
                    "tasks.max=4)"),
        _failover("failover_skipped", "records", "records a group had not consumed that it never reads after "
                  "failing over (at failover, or at any checkpoint of the run)"),
        _failover("failover_rereads_max", "records", "most records one group re-reads on one partition after "
                  "failing over"),
        _failover("failover_beyond_end_max", "offsets", "furthest a translation points past the end of the "
                  "target log"),
        _failover("failover_rewinds", "checkpoints", "checkpoints that went back while their group did not"),
        _failover("failover_untranslated", "translations", "group partitions holding records without a "
                  "translation (the consumer falls back to auto.offset.reset)"),
        _failover("failover_untranslatable", "translations", "of those, the ones MM2's offset-sync store could "
                  "not translate (by design, e.g. after an upstream rewind)"),
        _failover("failover_coarser_than_syncs", "translations", "translations worse than the offset syncs the "
                  "replicator wrote allow"),
        _failover("checkpoint_records_behind_max", "offsets", "source offsets the latest checkpoint is behind its "
                  "group's last commit at failover (largest)"),
        _failover("checkpoint_seconds_behind_max", "s", "seconds the latest checkpoint is behind its group's last "
                  "commit at failover (largest)"),
        _failover("checkpoint_delay_max_s", "s", "longest wait from a commit to the first checkpoint reflecting it"),
        _failover("heartbeat_lag_ms", "ms", "age of the newest replicated heartbeat at failover"),
        _failover("heartbeat_max_gap_ms", "ms", "longest gap between two replicated heartbeats"),
        _checked("failover_groups_checked", "groups", "witness groups whose translated offsets were checked"),
        _checked("failover_translations_checked", "translations", "group partitions checked, each way of "
                 "translating (checkpoint, synced offset) counted"),
        _checked("failover_heartbeats_checked", "topics", "replicated heartbeats topics judged (1: heartbeats "
                 "arrived and were checked)"),
    )
}
GATEABLE = tuple(name for name, f in FIGURES.items() if f.gateable)
#: What a check checked: whenever a comparison gates (any regression check), fewer than the
#: baseline is a regression of its own.
CHECKED = ("failover_groups_checked", "failover_translations_checked", "failover_heartbeats_checked")
#: Figures the comparison shows for a result when no check names any of its kind's.
DEFAULT_SHOWN = {
    VERIFICATION: ("missing", "duplicated", "reordered", "latency_p50", "latency_p99", "latency_p999", "rate"),
    FAILOVER: ("failover_skipped", "failover_rereads_max", "failover_untranslated", "checkpoint_delay_max_s"),
}


#: The figures a scenario measures itself (``MirrorRun.record_figure``), not the verifier.
SCENARIO_FIGURES = ("upgrade_resume_s", "upgrade_duplicates_bound", "rolling_upgrade_s", "rolling_upgrade_step_max_s",
                    "partition_growth_s", "config_sync_s",
                    "config_default_s", "config_reset_s", "group_sync_s", "offset_syncs_per_1000", "compacted_before_copy",
                    "multi_node_resume_s", "multi_node_duplicates_bound", "sigkill_duplicates_bound",
                    "long_link_defaults_copy_rate", "tasks_max_1_copy_rate")


def figure_names(kind: str) -> tuple[str, ...]:
    """The figures of one kind of result, in :data:`FIGURES` order."""
    return tuple(name for name, f in FIGURES.items() if f.kind == kind)

Value = int | float | None


def achieved_rate(producers: Sequence[Mapping[str, Any]]) -> float | None:
    """Messages/s per topic: records sent by every producer / topics / produce window.

    The window runs from the first producer's start to the last one's end of producing
    (flushing excluded), so producers that ran one after the other are not added up as
    if they had run at once.
    """
    spans = [
        (p["started_us"], p["started_us"] + p["produce_seconds"] * 1e6)
        for p in producers
        if p.get("started_us") is not None and p.get("produce_seconds") is not None
    ]
    topics = {t for p in producers for t in p.get("topics", [])}
    if not spans or not topics:
        return None
    seconds = (max(b for _, b in spans) - min(a for a, _ in spans)) / 1e6
    if seconds <= 0:
        return None
    return round(sum(int(p.get("sent", 0)) for p in producers) / len(topics) / seconds, 3)


def figures(report: MirrorReport) -> dict[str, Value]:
    """Every figure of a verified run's ``report``, in :data:`FIGURES` order."""
    values: dict[str, Value] = {name: getattr(report, name) for name in TOTAL_FIELDS}
    values["missing"] = report.lost + report.unseen
    for name in ("min", "mean", "p50", "p90", "p99", "p999", "max"):
        values[f"latency_{name}"] = getattr(report.latency, f"{name}_ms")
    values["rate"] = achieved_rate(report.producers)
    values["discovery_s"] = report.discovery_s
    values.update(capacity_values(report.capacity))
    for name, entry in report.scenario.items():
        values[name] = entry.get("value")
    return {name: values.get(name) for name in figure_names(VERIFICATION)}


#: The capacity figures, and where in the report's ``capacity`` each is.
CAPACITY_FIGURES = ("copy_rate", "copy_rate_mb", "max_sustainable_rate", "backlog_max", "caught_up_s", "offered_rate")


def capacity_values(capacity: Mapping[str, Any]) -> dict[str, Value]:
    """The capacity figures of a report's ``capacity`` (all topics; None where absent)."""
    every = capacity.get("all") or {}
    values: dict[str, Value] = {name: every.get(name) for name in CAPACITY_FIGURES if name != "max_sustainable_rate"}
    values["max_sustainable_rate"] = capacity.get("max_sustainable_rate")
    return values


def lower_bounds(report: Mapping[str, Any] | None) -> dict[str, str]:
    """The capacity figures a result's report (``MirrorReport.to_dict()``) gives only as
    lower bounds, or not at all, with why: a gate never fails them."""
    capacity = (report or {}).get("capacity") or {}
    out = {}
    every = capacity.get("all") or {}
    if every.get("lower_bound") and every.get("copy_rate") is not None:
        out["copy_rate"] = out["copy_rate_mb"] = str(every.get("why") or "a lower bound")
    if capacity.get("max_sustainable_lower_bound") and capacity.get("max_sustainable_rate") is not None:
        out["max_sustainable_rate"] = str(capacity.get("max_sustainable_why") or "a lower bound")
    # not measured, with why (no backlog: the replicator kept up; no stepped profile): no
    # value is not a regression of a capacity
    if capacity and every.get("copy_rate") is None:
        out["copy_rate"] = out["copy_rate_mb"] = str(every.get("why") or "not measured")
    if capacity and capacity.get("max_sustainable_rate") is None:
        out["max_sustainable_rate"] = str(capacity.get("max_sustainable_why") or "not measured")
    return out


def failover_figures(report: FailoverReport) -> dict[str, Value]:
    """Every figure of a failover check's ``report``, in :data:`FIGURES` order (None where
    it could not be measured, e.g. the offset-sync figures when the syncs were not read)."""
    values = report.figures()
    return {name: values.get(name) for name in figure_names(FAILOVER)}


def format_figure(name: str, value: Value) -> str:
    """``12.5 ms``, ``480.2 msg/s``, ``3``; ``n/a`` for no value."""
    if value is None:
        return "n/a"
    unit = FIGURES[name].unit if name in FIGURES else ""
    if unit == "ms":
        return f"{value:.3f}".rstrip("0").rstrip(".") + " ms"
    if unit == "msg/s":
        return f"{value:.1f} msg/s"
    if unit == "records/s":
        return f"{value:,.0f} records/s"
    if unit == "MB/s":
        return f"{value:.3g} MB/s"
    if unit == "s":
        return f"{value:.2f} s"
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _change(name: str, baseline: Value, current: Value) -> list[str]:
    """``["+3 ms", "+15.0%"]``: the difference, and relative to the baseline when it is not 0."""
    if baseline is None or current is None:
        return ["n/a"]
    delta = current - baseline
    parts = [("-" if delta < 0 else "+") + format_figure(name, abs(delta))]
    if baseline:
        parts.append(f"{delta / abs(baseline) * 100:+.1f}%")
    return parts


def _format_change(name: str, baseline: Value, current: Value) -> str:
    first, *rest = _change(name, baseline, current)
    return first + "".join(f" ({r})" for r in rest)


@dataclass(frozen=True)
class RegressionCheck:
    """``FIGURE:N%`` (``relative``) or ``FIGURE:N``: how much worse FIGURE may get."""

    figure: str
    threshold: float
    relative: bool

    def __str__(self) -> str:
        return f"{self.figure}:{self.threshold:g}{'%' if self.relative else ''}"

    def worsening(self, baseline: float, current: float) -> float:
        """How much worse ``current`` is than ``baseline``: percent of the baseline when
        relative, else in the figure's unit.  Negative when it got better; infinite when a
        baseline of 0 got worse by a relative measure."""
        delta = current - baseline if FIGURES[self.figure].higher_is_worse else baseline - current
        if not self.relative:
            return float(delta)
        if baseline == 0:
            return 0.0 if delta <= 0 else math.inf
        return float(delta) / abs(baseline) * 100.0

    def fails(self, baseline: Value, current: Value) -> bool:
        """True when ``current`` regressed beyond the threshold.

        A run without the figure (no record arrived: no latency, no rate) fails against a
        baseline that had it; without a baseline value there is nothing to regress from.
        """
        if baseline is None:
            return False
        if current is None:
            return True
        return self.worsening(baseline, current) > self.threshold


_EXPR = re.compile(r"^(?P<figure>[a-z0-9_]+):(?P<n>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)(?P<pct>%)?$")


def parse_compare_fail(text: str) -> RegressionCheck:
    """Parse ``FIGURE:N%`` or ``FIGURE:N``; ValueError names the accepted forms and figures."""
    m = _EXPR.match(text.strip())
    if m is None:
        raise ValueError(
            f"{text!r} is not a regression check; accepted: FIGURE:N% (worse by more than N percent of the "
            f"baseline) | FIGURE:N (worse by more than N), e.g. latency_p99:10% or missing:0"
        )
    name = m["figure"]
    if name not in FIGURES or not FIGURES[name].gateable:
        what = "is a size of the run, not a figure that can regress" if name in FIGURES else "is not a figure"
        raise ValueError(f"{text!r}: {name!r} {what}; accepted figures: {', '.join(GATEABLE)}")
    return RegressionCheck(name, float(m["n"]), relative=m["pct"] is not None)


#: Columns of the session's summary table (terminal and HTML), and what they mean.
SUMMARY_COLUMNS = ("test", "records", "missing", "dup", "reordered", "p50", "p99", "p99.9", "offered", "copy",
                   "discovery")
SUMMARY_LEGEND = (
    "records: acknowledged by the source; missing: lost + unseen (never arrived); dup: extra copies; "
    "p50/p99/p99.9: latency; offered: records/s the producers offered (achieved, all topics); copy: records/s "
    "the replicator copied while it had a backlog (>=: a lower bound, the producer or the capture set the pace; "
    "n/a: it never had a backlog); discovery: topic created -> every partition copied (longest topic)"
)
#: Columns of the session's table of failover checks, and what they mean.
FAILOVER_SUMMARY_COLUMNS = ("test", "groups/translations", "skipped", "rereads max", "untranslated", "beyond end",
                            "rewinds", "checkpoint delay", "heartbeat lag", "not checked")
FAILOVER_SUMMARY_LEGEND = (
    "skipped: records a group had not consumed and never reads after failing over; rereads max: most records "
    "one group re-reads on one partition; untranslated: group partitions without a translation (in "
    "parentheses: those MM2's offset syncs could not translate); beyond end: furthest translation past the "
    "end of the log; rewinds: checkpoints that went back; checkpoint delay: longest commit -> first "
    "checkpoint; heartbeat lag: newest replicated heartbeat's age at failover; not checked: parts left out on "
    "purpose, and (FAILED) parts the replicator gave nothing to check"
)


#: The summary's extra column when a scenario measured figures of its own.
MEASURED_LEGEND = "measured: figures the scenario measured itself (report.json's 'scenario' says how)"
#: Marks the latency cells of a run with missing records, whose figures are of the records
#: that arrived only; the legend's line for it, shown when a row has one.
PARTIAL_MARK = "*"
PARTIAL_LEGEND = (f"{PARTIAL_MARK}: partial latency, of the records that arrived only (records - missing); the "
                  "missing ones have none")
#: The summary's latency columns, and their figures.
_LATENCY_COLUMNS = {"p50": "latency_p50", "p99": "latency_p99", "p99.9": "latency_p999"}


def summary_row(key: str, values: Mapping[str, Value], report: Mapping[str, Any] | None = None) -> dict[str, str]:
    """One row of the summary table from a result's figures; ``measured`` lists the
    figures its scenario measured itself (from its ``report.json`` dict); ``partial`` is
    :data:`PARTIAL_MARK` when records are missing: its latency cells carry the mark."""
    names = {"records": "expected", "missing": "missing", "dup": "duplicated", "reordered": "reordered",
             **_LATENCY_COLUMNS, "discovery": "discovery_s"}
    measured = ", ".join(f"{name} {format_figure(name, values.get(name))}"
                         for name in (report or {}).get("scenario") or {})
    lower = lower_bounds(report)
    rates = {column: "n/a" if values.get(name) is None else
             (">=" if name in lower else "") + f"{values[name]:,.0f}"
             for column, name in (("offered", "offered_rate"), ("copy", "copy_rate"))}
    row = {"test": key, **{column: format_figure(name, values.get(name)) for column, name in names.items()},
           **rates, "measured": measured, "partial": PARTIAL_MARK if values.get("missing") else ""}
    for column, name in _LATENCY_COLUMNS.items():
        if values.get(name) is not None:
            row[column] += row["partial"]
    return row


def failover_summary_row(key: str, values: Mapping[str, Value], report: Mapping[str, Any]) -> dict[str, str]:
    """One row of the table of failover checks from a result's figures and its report
    (``FailoverReport.to_dict()``, for the groups and translations it checked)."""
    entries = report.get("entries") or []
    untranslated = format_figure("failover_untranslated", values.get("failover_untranslated"))
    if values.get("failover_untranslatable"):
        untranslated += f" ({format_figure('failover_untranslatable', values['failover_untranslatable'])})"
    names = {"skipped": "failover_skipped", "rereads max": "failover_rereads_max",
             "beyond end": "failover_beyond_end_max", "rewinds": "failover_rewinds",
             "checkpoint delay": "checkpoint_delay_max_s", "heartbeat lag": "heartbeat_lag_ms"}
    checked = f"{len({e.get('group') for e in entries})} / {len(entries)}" if entries else "none (FAILED)"
    not_checked = [f"{part} (FAILED)" for part in report.get("not_run") or {}] + list(report.get("left_out") or {})
    return {"test": key, "groups/translations": checked, "untranslated": untranslated,
            **{column: format_figure(name, values.get(name)) for column, name in names.items()},
            "not checked": ", ".join(not_checked)}


# -- comparing two sessions ------------------------------------------------------------------


@dataclass
class Comparison:
    """This session (or a stored run) against a baseline stored run."""

    baseline_label: str
    current_label: str
    checks: tuple[RegressionCheck, ...]
    #: table rows: test, figure, baseline, now, change, check
    rows: list[dict[str, str]] = field(default_factory=list)
    #: one message per regression: the test, the figure, both values and the check
    regressions: list[str] = field(default_factory=list)
    #: one message per check a lower bound kept from failing (the figure, why it is one)
    notes: list[str] = field(default_factory=list)
    compared: list[str] = field(default_factory=list)  # result keys in both runs
    compared_kinds: list[str] = field(default_factory=list)  # the kind of each compared result
    only_baseline: list[str] = field(default_factory=list)
    only_current: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.regressions)

    def render(self) -> str:
        lines = [f"baseline: {self.baseline_label}", f"now:      {self.current_label}"]
        if self.rows:
            columns = ("test", "figure", "baseline", "now", "change", "check")
            lines.append(format_table(self.rows, columns, limit=len(self.rows)))
        if self.only_baseline:
            lines.append(f"not in this run ({len(self.only_baseline)}): " + ", ".join(self.only_baseline))
        if self.only_current:
            lines.append(f"no baseline ({len(self.only_current)}): " + ", ".join(self.only_current))
        if self.notes:
            lines.append("not gated (lower bounds):")
            lines += [f"  {message}" for message in self.notes]
        if self.regressions:
            n = len(self.regressions)
            lines.append(f"{n} regression{'s' if n != 1 else ''}:")
            lines += [f"  {message}" for message in self.regressions]
        elif self.checks:
            lines.append(f"no regression: {', '.join(map(str, self.checks))} held for "
                         f"{count_results(self.compared_kinds)}")
        return "\n".join(lines)


def compare_runs(
    baseline: Mapping[str, Any],
    current: Mapping[str, Any],
    checks: Sequence[RegressionCheck] = (),
    *,
    baseline_label: str = "baseline",
    current_label: str = "this session",
) -> Comparison:
    """Compare the ``results`` of two stored-run documents (see ``storage.py``).

    A result is compared with the result of the same key, so of the same kind: verified
    runs show and are checked on verification figures, failover checks on failover figures.
    """
    base_results: Mapping[str, Any] = baseline.get("results", {})
    cur_results: Mapping[str, Any] = current.get("results", {})
    comparison = Comparison(baseline_label, current_label, tuple(checks))
    comparison.compared = [key for key in cur_results if key in base_results]
    comparison.compared_kinds = [kind_of(cur_results[key]) for key in comparison.compared]
    comparison.only_baseline = [key for key in base_results if key not in cur_results]
    comparison.only_current = [key for key in cur_results if key not in base_results]
    for key, kind in zip(comparison.compared, comparison.compared_kinds, strict=True):
        base_figures, cur_figures = base_results[key].get("figures", {}), cur_results[key].get("figures", {})
        _compare_result(comparison, key, base_figures, cur_figures,
                        [c for c in checks if FIGURES[c.figure].kind == kind], DEFAULT_SHOWN[kind],
                        (lower_bounds(base_results[key].get("report")), lower_bounds(cur_results[key].get("report"))))
        if checks:
            _checked_less(comparison, key, base_figures, cur_figures)
    for kind in KINDS:
        _gated_nothing(comparison, kind, [kind_of(r) for r in cur_results.values()].count(kind))
    return comparison


#: Capacity figures shown for a result whose checks name none, when either run has them.
_CAPACITY_SHOWN = ("copy_rate", "max_sustainable_rate")


def _compare_result(comparison: Comparison, key: str, base_figures: Mapping[str, Value],
                    cur_figures: Mapping[str, Value], checks: Sequence[RegressionCheck],
                    default_shown: Sequence[str],
                    lower: tuple[Mapping[str, str], Mapping[str, str]] = ({}, {})) -> None:
    """The rows and regressions of one result: the figures its ``checks`` name, or
    ``default_shown`` when none does.  ``lower``: the figures each run (baseline, this one)
    gives only as a lower bound, with why; a lower bound in this run never fails a check."""
    shown = list(dict.fromkeys(c.figure for c in checks)) or list(default_shown)
    if not checks:  # and the figures its scenario measured itself, and its capacity, in either run
        shown += [n for n in (*_CAPACITY_SHOWN, *SCENARIO_FIGURES)
                  if base_figures.get(n) is not None or cur_figures.get(n) is not None]
    # a figure only some scenarios measure: not a row for every other test
    shown = [n for n in shown if n not in SCENARIO_FIGURES or (base_figures.get(n), cur_figures.get(n)) != (None, None)]
    for i, name in enumerate(dict.fromkeys(shown)):
        b, c = base_figures.get(name), cur_figures.get(name)
        verdicts = []
        for check in (ch for ch in checks if ch.figure == name):
            failed = check.fails(b, c)
            if failed and name in lower[1]:
                absent = c is None
                verdicts.append(f"{check} not failed: {'not measured' if absent else 'a lower bound'}")
                comparison.notes.append(
                    f"{key}: {name} " + (f"was not measured in this run ({lower[1][name]})" if absent else
                                         f"{format_figure(name, c)} is only a lower bound ({lower[1][name]})")
                    + f", so {check} does not fail it")
                continue
            verdicts.append(f"{check} {'FAILED' if failed else 'ok'}")
            if failed:
                comparison.regressions.append(_regression_message(key, check, b, c))
        comparison.rows.append({
            "test": key if i == 0 else "",
            "figure": name,
            "baseline": (">=" if name in lower[0] and b is not None else "") + format_figure(name, b),
            "now": (">=" if name in lower[1] and c is not None else "") + format_figure(name, c),
            "change": _format_change(name, b, c),
            "check": ", ".join(verdicts),
        })


def _checked_less(comparison: Comparison, key: str, base_figures: Mapping[str, Value],
                  cur_figures: Mapping[str, Value]) -> None:
    """A gated result that checked less than its baseline (:data:`CHECKED`: groups,
    translations, heartbeats) is a regression, whatever the regression checks: a replicator
    that stopped checkpointing must not pass by leaving nothing to compare."""
    for name in CHECKED:
        b, c = base_figures.get(name), cur_figures.get(name)
        if b is None or (c if c is not None else 0) >= b:
            continue
        comparison.rows.append({"test": key, "figure": name, "baseline": format_figure(name, b),
                                "now": format_figure(name, c if c is not None else 0),
                                "change": _format_change(name, b, c if c is not None else 0),
                                "check": "checked less: FAILED"})
        comparison.regressions.append(
            f"{key}: checked {format_figure(name, c if c is not None else 0)} {FIGURES[name].unit} vs "
            f"{format_figure(name, b)} in the baseline ({name}: {FIGURES[name].help}): a gated run that checks less "
            "than its baseline fails (its failover report's not_run says why)")


def _gated_nothing(comparison: Comparison, kind: str, current: int) -> None:
    """A gate that compared nothing must not pass silently (renamed tests, another
    machine's run): the checks of ``kind`` fail when this run has ``current`` results of
    that kind and none of them is in the baseline."""
    checks = [c for c in comparison.checks if FIGURES[c.figure].kind == kind]
    if checks and current and kind not in comparison.compared_kinds:
        comparison.regressions.append(
            f"nothing compared: none of the {count_results([kind] * current, plural=True)} of "
            f"{comparison.current_label} is in {comparison.baseline_label}, so {', '.join(map(str, checks))} "
            "gated nothing"
        )


def _regression_message(key: str, check: RegressionCheck, baseline: Value, current: Value) -> str:
    name = check.figure
    if current is None:
        why = "no record arrived" if FIGURES[name].kind == VERIFICATION else "not measured: see the report's not_run"
        return (
            f"{key}: {name} has no value in this run ({why}) vs {format_figure(name, baseline)} "
            f"in the baseline; {check} allows no such regression"
        )
    assert baseline is not None  # fails() is False without a baseline value
    sign = "+" if FIGURES[name].higher_is_worse else "-"
    allowed = f"{sign}{check.threshold:g}%" if check.relative else sign + format_figure(name, check.threshold)
    return (
        f"{key}: {name} {format_figure(name, current)} vs {format_figure(name, baseline)} in the baseline "
        f"({', '.join(_change(name, baseline, current))}), more than {check} allows (at most {allowed})"
    )
