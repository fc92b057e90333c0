"""Plots of verified runs as small self-contained SVG files, and one HTML page per session.

Per verified run, next to its JSON report in the report directory::

    <test>.latency.svg     p50 / p99 latency per second of produce time, fault markers
    <test>.histogram.svg   latency histogram (the report's buckets)
    <test>.rate.svg        records sent per second against records arrived per second
    <test>.capacity.svg    offered (sent) and arrived per second, the copy rate over its backlog
                           window, and the backlog (records acknowledged, not yet arrived)
    <test>.steps.svg       a stepped rate profile only: the copy rate against the offered rate per
                           step (the throughput curve), with the line where they are equal
    <test>.steps_latency.svg  a stepped rate profile only: p50 / p99 per step against its offered rate

and ``index.html`` linking them all, with the session's summary table and comparison.

SVG is written by hand: a few kinds of chart do not justify a plotting library (and its
font cache and backend set-up) in every CI job, and the files are a few kB, readable in
any browser and embeddable in the HTML page as they are.
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .storage import count_results, kind_of

if TYPE_CHECKING:
    from ..verify.report import MirrorReport

__all__ = ["PLOT_KINDS", "STEP_PLOT_KINDS", "bar_chart", "line_chart", "write_index", "write_plots"]

PLOT_KINDS = ("latency", "histogram", "rate", "capacity")
#: written only for a run of a stepped rate profile
STEP_PLOT_KINDS = ("steps", "steps_latency")

WIDTH, HEIGHT = 760, 320
LEFT, RIGHT, TOP, BOTTOM = 72, 24, 58, 60
FONT = "font-family='DejaVu Sans, Helvetica, Arial, sans-serif'"
COLORS = {"p50": "#1f77b4", "p99": "#d62728", "sent": "#1f77b4", "arrived": "#2ca02c", "bar": "#4c72b0",
          "copy": "#ff7f0e", "backlog": "#7f7f7f", "equal": "#bbbbbb",
          "marker": "#9467bd", "grid": "#e5e5e5", "axis": "#333333"}

Point = tuple[float, float | None]


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _short(text: str, limit: int = 96) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1):]


def nice_ticks(lo: float, hi: float, target: int = 6, min_step: float = 0.0) -> list[float]:
    """Round tick values covering ``lo..hi`` (steps of 1, 2, 2.5 or 5 times a power of ten,
    at least ``min_step``: whole seconds on a time axis)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        hi = lo + 1.0
    raw = max((hi - lo) / max(target, 1), min_step)
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if raw <= m * magnitude)
    first = math.floor(lo / step + 1e-9)
    last = math.ceil(hi / step - 1e-9)
    return [round(i * step, 10) for i in range(first, last + 1)]


def _tick_label(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


class _Canvas:
    """Plot area in pixels, with data ranges mapped onto it."""

    def __init__(self, title: str, x_label: str, y_label: str) -> None:
        self.parts: list[str] = [
            (f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{HEIGHT}' "
             f"viewBox='0 0 {WIDTH} {HEIGHT}' {FONT} font-size='12'>"),
            f"<rect width='{WIDTH}' height='{HEIGHT}' fill='white'/>",
            f"<text x='{WIDTH / 2}' y='22' text-anchor='middle' font-size='14' font-weight='bold'>{_esc(_short(title))}</text>",
            f"<text x='{LEFT + (WIDTH - LEFT - RIGHT) / 2}' y='{HEIGHT - 10}' text-anchor='middle'>{_esc(x_label)}</text>",
            (f"<text transform='translate(16,{TOP + (HEIGHT - TOP - BOTTOM) / 2}) rotate(-90)' "
             f"text-anchor='middle'>{_esc(y_label)}</text>"),
        ]
        self.x0, self.x1 = LEFT, WIDTH - RIGHT
        self.y0, self.y1 = HEIGHT - BOTTOM, TOP  # y0 is the bottom (pixels grow downwards)
        self.xmin, self.xmax, self.ymin, self.ymax = 0.0, 1.0, 0.0, 1.0

    def ranges(self, xmin: float, xmax: float, ymin: float, ymax: float) -> None:
        self.xmin, self.xmax = xmin, xmax if xmax > xmin else xmin + 1.0
        self.ymin, self.ymax = ymin, ymax if ymax > ymin else ymin + 1.0

    def px(self, x: float) -> float:
        return round(self.x0 + (x - self.xmin) / (self.xmax - self.xmin) * (self.x1 - self.x0), 2)

    def py(self, y: float) -> float:
        return round(self.y0 - (y - self.ymin) / (self.ymax - self.ymin) * (self.y0 - self.y1), 2)

    def add(self, element: str) -> None:
        self.parts.append(element)

    def y_axis(self, ticks: Sequence[float]) -> None:
        for t in ticks:
            y = self.py(t)
            self.add(f"<line x1='{self.x0}' y1='{y}' x2='{self.x1}' y2='{y}' stroke='{COLORS['grid']}'/>")
            self.add(f"<text x='{self.x0 - 6}' y='{y + 4}' text-anchor='end'>{_tick_label(t)}</text>")
        self.add(f"<line x1='{self.x0}' y1='{self.y0}' x2='{self.x0}' y2='{self.y1}' stroke='{COLORS['axis']}'/>")
        self.add(f"<line x1='{self.x0}' y1='{self.y0}' x2='{self.x1}' y2='{self.y0}' stroke='{COLORS['axis']}'/>")

    def x_ticks(self, ticks: Sequence[float]) -> None:
        for t in ticks:
            x = self.px(t)
            self.add(f"<line x1='{x}' y1='{self.y0}' x2='{x}' y2='{self.y0 + 5}' stroke='{COLORS['axis']}'/>")
            self.add(f"<text x='{x}' y='{self.y0 + 18}' text-anchor='middle'>{_tick_label(t)}</text>")

    def legend(self, entries: Sequence[tuple[str, str]]) -> None:
        """One row above the plot area, right-aligned: it never hides a line."""
        y = self.y1 - 12
        x = self.x1
        for label, color in reversed(entries):
            x -= 7 * len(label) + 8
            self.add(f"<text x='{x}' y='{y + 4}'>{_esc(label)}</text>")
            x -= 28
            self.add(f"<line x1='{x}' y1='{y}' x2='{x + 22}' y2='{y}' stroke='{color}' stroke-width='2.5'/>")
            x -= 14

    def message(self, text: str) -> None:
        cx, cy = (self.x0 + self.x1) / 2, (self.y0 + self.y1) / 2
        self.add(f"<text x='{cx}' y='{cy}' text-anchor='middle' fill='#777777'>{_esc(text)}</text>")

    def svg(self) -> str:
        return "\n".join([*self.parts, "</svg>"]) + "\n"


def line_chart(
    title: str,
    x_label: str,
    y_label: str,
    series: Sequence[tuple[str, str, Sequence[Point]]],
    *,
    markers: Sequence[tuple[float, str]] = (),
    empty: str = "no data",
) -> str:
    """Lines of ``(label, color, [(x, y or None)])``; None breaks a line.  ``markers`` are
    vertical dashed lines at x with a label (fault injections)."""
    c = _Canvas(title, x_label, y_label)
    xs = [x for _, _, pts in series for x, _ in pts] + [x for x, _ in markers]
    ys = [y for _, _, pts in series for _, y in pts if y is not None]
    if not ys:
        c.ranges(0, 1, 0, 1)
        c.y_axis([])
        c.message(empty)
        return c.svg()
    y_ticks = nice_ticks(0.0, max(ys) * 1.05 if max(ys) > 0 else 1.0)
    x_ticks = nice_ticks(min(xs), max(xs), target=8, min_step=1.0)
    c.ranges(x_ticks[0], x_ticks[-1], y_ticks[0], y_ticks[-1])
    c.y_axis(y_ticks)
    c.x_ticks(x_ticks)
    for x, label in markers:
        px = c.px(x)
        c.add(f"<line x1='{px}' y1='{c.y0}' x2='{px}' y2='{c.y1}' stroke='{COLORS['marker']}' "
              f"stroke-dasharray='5,4' stroke-width='1.5'/>")
        c.add(f"<text transform='translate({px + 4},{c.y1 + 4}) rotate(90)' fill='{COLORS['marker']}' "
              f"font-size='11'>{_esc(_short(label, 40))}</text>")
    for _label, color, pts in series:
        segment: list[str] = []
        segments = []
        for x, y in pts:
            if y is None:
                if segment:
                    segments.append(segment)
                segment = []
            else:
                segment.append(f"{c.px(x)},{c.py(y)}")
        if segment:
            segments.append(segment)
        for seg in segments:
            c.add(f"<polyline fill='none' stroke='{color}' stroke-width='2' points='{' '.join(seg)}'/>")
        if len(pts) <= 120:  # dots where there are few points (a 1-second run is one point)
            for seg in segments:
                for point in seg:
                    cx, cy = point.split(",")
                    c.add(f"<circle cx='{cx}' cy='{cy}' r='2.5' fill='{color}'/>")
    c.legend([(label, color) for label, color, _ in series])
    return c.svg()


def bar_chart(title: str, x_label: str, y_label: str, labels: Sequence[str], values: Sequence[int],
              *, empty: str = "no data") -> str:
    """One bar per label, its count written above it."""
    c = _Canvas(title, x_label, y_label)
    if not values or not any(values):
        c.ranges(0, 1, 0, 1)
        c.y_axis([])
        c.message(empty)
        return c.svg()
    y_ticks = nice_ticks(0.0, max(values) * 1.1)
    c.ranges(0, len(values), y_ticks[0], y_ticks[-1])
    c.y_axis(y_ticks)
    slot = (c.x1 - c.x0) / len(values)
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        x = c.px(i) + slot * 0.12
        top = c.py(value)
        c.add(f"<rect x='{round(x, 2)}' y='{top}' width='{round(slot * 0.76, 2)}' height='{round(c.y0 - top, 2)}' "
              f"fill='{COLORS['bar']}'/>")
        cx = round(c.px(i) + slot / 2, 2)
        # Labels alternate between two rows: wide ones ("≤200ms") would run into each other.
        c.add(f"<text x='{cx}' y='{c.y0 + 14 + 12 * (i % 2)}' text-anchor='middle' font-size='10'>{_esc(label)}</text>")
        if value:
            c.add(f"<text x='{cx}' y='{top - 4}' text-anchor='middle' font-size='10'>{value}</text>")
    return c.svg()


# -- a verified run's plots -------------------------------------------------------------------


def _timeline_points(report: MirrorReport) -> tuple[int, list[dict[str, Any]], list[tuple[float, str]]]:
    """The timeline's start second, its entries, and the markers relative to the start."""
    timeline = report.timeline
    start = int(timeline[0]["t"]) if timeline else 0
    markers = [(float(m["time"]) - start, str(m.get("label", ""))) for m in report.markers if "time" in m]
    return start, timeline, markers


def _mid(entry: Mapping[str, Any], start: int) -> float:
    # A second's figures are drawn at its middle, so that a marker at 1.5 s falls beside
    # the second [1, 2) it happened in.
    return float(entry["t"]) - start + 0.5


def latency_svg(report: MirrorReport, title: str) -> str:
    start, timeline, markers = _timeline_points(report)
    series = [
        (f"{name} per second", COLORS[name], [(_mid(e, start), e[f"{name}_ms"]) for e in timeline])
        for name in ("p50", "p99")
    ]
    return line_chart(f"latency: {title}", "seconds since the first record (produce time)", "latency (ms)",
                      series, markers=markers, empty="no record arrived")


def rate_svg(report: MirrorReport, title: str) -> str:
    start, timeline, markers = _timeline_points(report)
    series = [
        ("sent", COLORS["sent"], [(_mid(e, start), float(e["sent"])) for e in timeline]),
        ("arrived", COLORS["arrived"], [(_mid(e, start), float(e["arrived"])) for e in timeline]),
    ]
    return line_chart(f"rate: {title}", "seconds since the first record", "records per second", series,
                      markers=markers, empty="no records sent")


def capacity_svg(report: MirrorReport, title: str) -> str:
    """Offered and arrived per second, the copy rate across its backlog window, the backlog."""
    start, timeline, markers = _timeline_points(report)
    backlog, waiting = [], 0
    for e in timeline:  # records produced up to the end of the second that arrived after it
        waiting += int(e["received"]) - int(e["arrived"])
        backlog.append((float(e["t"]) - start + 1.0, float(max(waiting, 0))))
    every = (report.capacity or {}).get("all") or {}
    series = [
        ("offered (sent/s)", COLORS["sent"], [(_mid(e, start), float(e["sent"])) for e in timeline]),
        ("arrived/s", COLORS["arrived"], [(_mid(e, start), float(e["arrived"])) for e in timeline]),
        ("backlog (records)", COLORS["backlog"], backlog),
    ]
    if every.get("copy_rate") is not None and every.get("window"):
        t0, t1 = every["window"]
        bound = ">=" if every.get("lower_bound") else ""
        series.append((f"copy rate {bound}{every['copy_rate']:,.0f}/s", COLORS["copy"],
                       [(float(t0) - start, every["copy_rate"]), (float(t1) - start, every["copy_rate"])]))
    return line_chart(f"capacity: {title}", "seconds since the first record", "records/s (backlog: records)", series,
                      markers=markers, empty="no records sent")


def steps_svg(report: MirrorReport, title: str) -> str:
    """The copy rate against the offered rate, one point per step (the throughput curve)."""
    steps = (report.capacity or {}).get("steps") or []
    offered = [float(s["offered_rate"]) for s in steps]
    series = [
        ("copy rate", COLORS["copy"], [(o, s["copy_rate"]) for o, s in zip(offered, steps, strict=True)]),
        ("copy = offered", COLORS["equal"], [(0.0, 0.0), (max(offered, default=1.0), max(offered, default=1.0))]),
    ]
    best = (report.capacity or {}).get("max_sustainable_rate")
    marks = [(float(best), f"max sustainable {best:,.0f}/s")] if best is not None else []
    return line_chart(f"throughput per step: {title}", "offered records/s (all topics)", "copied records/s", series,
                      markers=marks, empty="no steps")


def steps_latency_svg(report: MirrorReport, title: str) -> str:
    """p50 / p99 of each step against its offered rate."""
    steps = (report.capacity or {}).get("steps") or []
    series = [(f"{name} per step", COLORS[name], [(float(s["offered_rate"]), s[f"{name}_ms"]) for s in steps])
              for name in ("p50", "p99")]
    slo = (report.capacity or {}).get("slo_p99_ms")
    if slo is not None and steps:
        series.append((f"p99 SLO {slo:g} ms", COLORS["marker"],
                       [(float(steps[0]["offered_rate"]), float(slo)), (float(steps[-1]["offered_rate"]), float(slo))]))
    return line_chart(f"latency per step: {title}", "offered records/s (all topics)", "latency (ms)", series,
                      empty="no steps")


def _duration(ms: float) -> str:
    return f"{_tick_label(ms / 1000)}s" if ms >= 1000 else f"{_tick_label(ms)}ms"


def histogram_svg(report: MirrorReport, title: str) -> str:
    bounds = report.histogram_bounds_ms
    labels = [f"≤{_duration(b)}" for b in bounds] + ([f">{_duration(bounds[-1])}"] if bounds else [])
    counts = list(report.latency.histogram)
    return bar_chart(f"latency histogram: {title}", "latency (upper bound of each bucket)", "records",
                     labels[: len(counts)], counts, empty="no record arrived")


def write_plots(report: MirrorReport, directory: str | os.PathLike[str], stem: str, title: str) -> dict[str, str]:
    """Write the SVGs of ``report`` as ``directory/stem.KIND.svg`` (:data:`PLOT_KINDS`, and
    :data:`STEP_PLOT_KINDS` for a stepped rate profile); returns kind -> path."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    out = {}
    kinds = [("latency", latency_svg), ("histogram", histogram_svg), ("rate", rate_svg), ("capacity", capacity_svg)]
    if (report.capacity or {}).get("steps"):
        kinds += [("steps", steps_svg), ("steps_latency", steps_latency_svg)]
    for kind, render in kinds:
        path = d / f"{stem}.{kind}.svg"
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(render(report, title))
        os.replace(tmp, path)
        out[kind] = str(path)
    return out


# -- the session page -------------------------------------------------------------------------

_CSS = """
body { font-family: DejaVu Sans, Helvetica, Arial, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
tr.failed td:first-child { color: #b00020; font-weight: bold; }
pre { background: #f6f6f6; padding: 1em; overflow-x: auto; }
.plots img { max-width: 100%; border: 1px solid #ddd; margin: 0.3em 0; }
"""


def write_index(
    directory: str | os.PathLike[str],
    rows: Sequence[Mapping[str, str]],
    columns: Sequence[str],
    results: Sequence[Mapping[str, Any]],
    *,
    comparison: str | None = None,
    now: datetime | None = None,
    more: Sequence[tuple[str, Sequence[Mapping[str, str]], Sequence[str], Sequence[Mapping[str, Any]]]] = (),
) -> Path:
    """Write ``directory/index.html``: the summary table (``rows``), further tables
    (``more``: title, rows, columns, results; e.g. the failover checks), the comparison, and
    per result (``key``, ``outcome``, ``report_path``, ``plots``) links to its report and plots."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    when = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M:%S UTC")

    def rel(path: str | None) -> str:
        return _esc(os.path.relpath(path, d)) if path else ""

    tables = [("", rows, columns, results), *more]
    every = [r for *_, table_results in tables for r in table_results]
    out = [
        "<!DOCTYPE html>",
        "<html><head><meta charset='utf-8'><title>pytest-kafka-mirror</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>pytest-kafka-mirror: {_esc(count_results(kind_of(r) for r in every))}</h1>",
        f"<p>{when}</p>",
    ]
    first = 0
    for title, table_rows, table_columns, table_results in tables:
        if table_rows:
            out += [f"<h2>{_esc(title)}</h2>"] if title else []
            out += _index_table(table_rows, table_columns, table_results, first)
        first += len(table_results)
    if comparison:
        out += ["<h2>Comparison</h2>", f"<pre>{_esc(comparison)}</pre>"]
    for i, result in enumerate(every):
        out.append(f"<h2 id='r{i}'>{_esc(str(result.get('key')))} ({_esc(str(result.get('outcome')))})</h2>")
        if result.get("report_path"):
            out.append(f"<p><a href='{rel(result['report_path'])}'>report JSON</a></p>")
        out.append("<div class='plots'>")
        for kind in (*PLOT_KINDS, *STEP_PLOT_KINDS):
            path = (result.get("plots") or {}).get(kind)
            if path:
                out.append(f"<a href='{rel(path)}'><img src='{rel(path)}' alt='{kind}'></a>")
        out.append("</div>")
    out.append("</body></html>")
    path = d / "index.html"
    path.write_text("\n".join(out) + "\n")
    return path


def _index_table(rows: Sequence[Mapping[str, str]], columns: Sequence[str], results: Sequence[Mapping[str, Any]],
                 first: int) -> list[str]:
    """One summary table of the page; its first cells link to the results' sections
    (numbered from ``first``)."""
    out = ["<table><tr>" + "".join(f"<th>{_esc(c)}</th>" for c in columns) + "</tr>"]
    for i, (row, result) in enumerate(zip(rows, results, strict=True), start=first):
        cls = " class='failed'" if result.get("outcome") == "failed" else ""
        head, *rest = (_esc(row.get(c, "")) for c in columns)
        cells = [f"<td><a href='#r{i}'>{head}</a></td>", *(f"<td>{v}</td>" for v in rest)]
        out.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return out
