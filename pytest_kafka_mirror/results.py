"""The session's results on the xdist controller (or the only process): summary table,
stored run, comparison, HTML page, Prometheus exporter.

Workers verify; ``plugin.pytest_runtest_makereport`` attaches each verification's
figures to the test's report, which xdist sends to the controller.  :class:`ResultsPlugin`,
registered only where no ``workerinput`` exists, collects them in ``pytest_runtest_logreport`` and does
everything that must happen once per session in ``pytest_sessionfinish`` and
``pytest_terminal_summary``.

A regression found by the comparison fails the session through ``session.exitstatus``
(pytest returns it), not by raising from a hook: every summary, the saved run and the
plots are still written.

An interrupted session (Ctrl-C) is summarised too: what was verified before the interrupt
(including the verifications of the test it cut short, which never got a test report),
where the reports are, and the run directories of the tests it cut short, which
``kafka-mirror verify RUN_DIR`` can still verify.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .config import Settings
from .report.compare import Comparison, compare_runs
from .report.storage import (
    VERIFICATION,
    FileStorage,
    StorageError,
    TestResult,
    autosave_name,
    build_run,
    count_results,
    get_commit_info,
    load_run,
    run_label,
)
from .report.summary import RESULTS_ATTR, SESSION_FILE, SPOOL_KEY, render_summary, summary_tables

if TYPE_CHECKING:
    from .session import KafkaMirrorSession

__all__ = ["ResultsPlugin"]


def _origin(settings: Settings, name: str) -> str:
    origin = settings.sources.get(name, "default")
    return f"--kafka-mirror-{name}" if origin == "default" else origin


class ResultsPlugin:
    """Registered as a plugin on the controller; see the module docstring."""

    def __init__(self, config: pytest.Config, session: KafkaMirrorSession) -> None:
        self.config = config
        self.session = session
        self.settings: Settings = session.settings
        self.results: dict[str, TestResult] = {}
        self.storage = FileStorage(self.settings.storage)
        self.baseline: dict[str, Any] | None = None
        self.baseline_path: Path | None = None
        self.comparison: Comparison | None = None
        self.saved: Path | None = None
        self.save_skipped: str | None = None
        self.session_file: Path | None = None
        self.index: Path | None = None
        self.exitstatus: int = 0
        self.metrics: Any = None  # metrics.MetricsService
        self.metrics_error: str | None = None
        self.spool_dir: Path | None = None
        #: tests started and not finished (on any worker): those an interrupt cuts short
        self.running: dict[str, None] = {}
        self.interrupted: list[str] = []
        #: (nodeid, run directory) of the cut-short tests' unverified runs (this process's only)
        self.unverified: list[tuple[str, Path]] = []

    # -- start: everything that can be wrong with the options fails here, before any cluster

    def start(self) -> None:
        s = self.settings
        if s.compare_fail and s.compare is None:
            raise pytest.UsageError(
                f"{_origin(s, 'compare-fail')} needs a run to compare with: add --kafka-mirror-compare "
                "(the newest stored run) or --kafka-mirror-compare=RUN"
            )
        if s.compare is not None:
            try:
                self.baseline_path = self.storage.resolve(s.compare)
                self.baseline = load_run(self.baseline_path)
            except StorageError as exc:
                raise pytest.UsageError(f"{_origin(s, 'compare')}={s.compare}: {exc}") from None
        if s.metrics_enabled:
            self._start_metrics()

    def _start_metrics(self) -> None:
        from .report.metrics import MetricsService, MetricsSpool

        s = self.settings
        self.spool_dir = Path(tempfile.mkdtemp(prefix="kafka-mirror-metrics-"))
        try:
            self.metrics = MetricsService(self.spool_dir, listen=s.metrics_port, pushgateway=s.pushgateway)
        except ImportError:
            self._remove_spool()
            raise pytest.UsageError(
                "pytest-kafka-mirror: Prometheus metrics need prometheus-client: "
                "pip install 'pytest-kafka-mirror[metrics]'"
            ) from None
        try:
            self.metrics.serve()
        except OSError as exc:
            self._remove_spool()
            raise pytest.UsageError(
                f"{_origin(s, 'metrics-port')} {s.metrics_port}: cannot serve metrics there ({exc.strerror or exc}); "
                "choose another port, or 0 for a free one"
            ) from None
        try:
            self.metrics.start_pushing()
        except Exception as exc:
            self.metrics.stop()
            self._remove_spool()
            raise pytest.UsageError(
                f"{_origin(s, 'pushgateway')} {s.pushgateway}: the first push failed ({exc}); "
                "is the push gateway running at that address?"
            ) from None
        # This process runs the tests itself when xdist is off: it writes a spool too.
        self.session.metrics_spool = MetricsSpool(self.spool_dir, "master")

    def _remove_spool(self) -> None:
        if self.spool_dir is not None:
            shutil.rmtree(self.spool_dir, ignore_errors=True)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist: tell each worker where to write its metrics spool."""
        if self.spool_dir is not None:
            node.workerinput[SPOOL_KEY] = str(self.spool_dir)

    def header(self) -> str:
        """The report-header line of saving, comparing and metrics ("" when none is on)."""
        s = self.settings
        parts = []
        if s.save or s.autosave:
            parts.append(f"save={s.save or 'auto'}")
        if self.baseline_path is not None:
            parts.append(f"compare={self.baseline_path}")
        if s.compare_fail:
            parts.append("compare-fail=" + ",".join(map(str, s.compare_fail)))
        if self.metrics is not None and self.metrics.url:
            parts.append(f"metrics={self.metrics.url}")
        if s.pushgateway:
            parts.append(f"pushgateway={s.pushgateway}")
        return f"kafka-mirror: storage={self.storage} " + " ".join(parts) if parts else ""

    # -- during the session -------------------------------------------------------------------

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.running[nodeid] = None

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        self.running.pop(nodeid, None)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for data in getattr(report, RESULTS_ATTR, None) or []:
            result = TestResult.from_dict(data)
            self.results[result.key] = result

    def sorted_results(self) -> list[TestResult]:
        """By node id, verifications before failover checks: workers finish in any order,
        the summary and the stored run do not."""
        return sorted(self.results.values(), key=lambda r: (r.nodeid, r.kind != VERIFICATION, r.index))

    # -- the end ------------------------------------------------------------------------------

    def _take_unreported(self) -> None:
        """Verifications of this process that no test report carried: a test cut short by
        Ctrl-C gets no report, but what it verified before is in the report directory."""
        for result in self.session.results:
            if result.key not in self.results:
                result.outcome = "interrupted"
                self.results[result.key] = result

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        s = self.settings
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            self.interrupted = list(self.running)
            self.unverified = self.session.unverified_runs(self.interrupted)
        self._take_unreported()
        results = self.sorted_results()
        metadata: dict[str, Any] = {}
        self.config.hook.pytest_kafka_mirror_run_metadata(config=self.config, metadata=metadata)
        run = build_run(results, settings=s.stored(), metadata=metadata, commit_info=get_commit_info(self.config.rootpath))
        if results:
            self.session_file = s.report_dir / SESSION_FILE
            from .rundir import write_json_atomic

            self.session.report_files()
            write_json_atomic(self.session_file, run)
            self.session.report_files(self.session_file)
        if (s.save or s.autosave) and results:
            if exitstatus == pytest.ExitCode.INTERRUPTED:
                self.save_skipped = "the session was interrupted: a partial run is not saved as a baseline"
            else:
                name = s.save or autosave_name(run["commit_info"])
                try:
                    self.saved = self.storage.save(run, name)
                except OSError as exc:
                    # Asked to keep a baseline and could not: the session must not look green.
                    self.save_skipped = f"cannot write {self.storage}: {exc}"
                    if session.exitstatus == pytest.ExitCode.OK:
                        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.baseline is not None and self.baseline_path is not None:
            self.comparison = compare_runs(
                self.baseline, run, s.compare_fail,
                baseline_label=run_label(self.baseline, self.baseline_path.stem),
                current_label=run_label(run, self.saved.stem if self.saved else "this session"),
            )
            if self.comparison.failed and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if results:
            from .report.plots import write_index

            first, *more = summary_tables(results)
            self.index = write_index(
                s.report_dir, first.rows, first.columns, [vars(r) for r in first.results],
                comparison=self.comparison.render() if self.comparison else None,
                more=[(t.title, t.rows, t.columns, [vars(r) for r in t.results]) for t in more],
            )
            self.session.report_files(self.index)
        if self.metrics is not None:
            self.metrics_error = self.metrics.finish()
        self.exitstatus = int(session.exitstatus)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        self._terminal_summary(terminalreporter)
        for note in self.session.closing_notes:
            terminalreporter.write_line(f"kafka-mirror: {note}")

    def _terminal_summary(self, terminalreporter: Any) -> None:
        tr = terminalreporter
        results = self.sorted_results()
        interrupted = self.exitstatus == pytest.ExitCode.INTERRUPTED
        if not results and self.comparison is None and self.metrics is None and not interrupted:
            return
        title = count_results(r.kind for r in results) if results else ""
        if interrupted:
            title = f"interrupted after {title or 'no verified run'}"
        tr.write_sep("=", f"kafka-mirror: {title}" if title else "kafka-mirror")
        for sep, text in render_summary(results):
            if sep:
                tr.write_sep(sep, text)
            else:
                tr.write_line(text)
        if self.comparison is not None:
            tr.write_sep("-", "kafka-mirror comparison")
            for line in self.comparison.render().splitlines():
                regression = self.comparison.failed and ("FAILED" in line or line.startswith("  "))
                tr.write_line(line, red=regression, bold=regression)
        if self.index is not None:
            tr.write_line(f"reports: {self.settings.report_dir} (plots: {self.index})")
        elif interrupted:
            written = self._written_here()
            what = f"{written} file{'s' if written != 1 else ''}" if written else "none"
            tr.write_line(f"reports: {what} written in this session ({self.settings.report_dir})")
        if self.saved is not None:
            tr.write_line(f"saved: {self.saved}")
        if self.save_skipped:
            tr.write_line(f"not saved: {self.save_skipped}", red=True)
        if self.metrics is not None:
            where = [w for w in (self.metrics.url, self.settings.pushgateway and f"pushed to {self.settings.pushgateway}") if w]
            tr.write_line(f"metrics: {', '.join(where)}")
            if self.metrics_error or self.metrics.push_errors:
                tr.write_line(
                    f"metrics: {self.metrics.push_errors} push(es) failed, last: {self.metrics.last_push_error}",
                    red=True,
                )
        if interrupted:
            self._cut_short(tr)
        else:
            self._next_command(tr, results)

    def _cut_short(self, tr: Any) -> None:
        """Name the tests the interrupt cut short, and where their unverified runs are."""
        dirs: dict[str, list[Path]] = {}
        for nodeid, run_dir in self.unverified:
            dirs.setdefault(nodeid, []).append(run_dir)
        produced = [d for _, d in self.unverified if any(Path(d).glob("manifest-*.json"))]
        for nodeid in self.interrupted:
            tr.write_line(f"interrupted: {nodeid}", yellow=True)
            for run_dir in dirs.get(nodeid, []):
                # no manifest: interrupted before its producer started (readiness), nothing to verify
                why = "" if run_dir in produced else ", nothing produced before the interrupt"
                tr.write_line(f"  run directory (not verified{why}): {run_dir}")
        if produced:  # a directory kafka-mirror verify accepts: the producers' manifests are there
            tr.write_line(f"next: kafka-mirror verify {produced[-1]}")
        elif self.interrupted and getattr(self.config.option, "dist", "no") != "no":
            # The workers' runs: this process knows their tests, not their directories.
            tr.write_line(f"  run directories (not verified): under {self._basetemp()}")

    def _written_here(self) -> int:
        """How many files this session's processes wrote to the report directory (the
        workers' reports of an interrupted test reach the list, not this process)."""
        from .rundir import WRITTEN_LIST

        try:
            lines = (self.settings.report_dir / WRITTEN_LIST).read_text().splitlines()
        except OSError:
            return 0
        return len(lines) - 1 if lines[:1] == [f"session {self.session.session_id}"] else 0

    def _basetemp(self) -> str:
        factory = getattr(self.config, "_tmp_path_factory", None)
        try:
            return str(factory.getbasetemp()) if factory is not None else "pytest's --basetemp"
        except OSError:
            return "pytest's --basetemp"

    def _next_command(self, tr: Any, results: list[TestResult]) -> None:
        """End a failed session with the command to type next."""
        if self.exitstatus == 0:
            return
        if self.comparison is not None and self.comparison.failed:
            n = len(self.comparison.regressions)
            tr.write_line(
                f"kafka-mirror: {n} regression{'s' if n != 1 else ''} against {self.baseline_path}: the session fails",
                red=True, bold=True,
            )
            current = self.saved or self.session_file
            if current is not None:
                tr.write_line(f"next: kafka-mirror compare {self.baseline_path} {current}")
            return
        # (show prints verifier reports; a failover check's report is JSON beside them)
        failed = [r for r in results if r.outcome == "failed" and r.report_path and r.kind == VERIFICATION]
        if failed:
            tr.write_line(f"next: kafka-mirror show {failed[0].report_path}" + (
                f"   (plots: {self.index})" if self.index else ""))

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.metrics is not None:
            self.metrics.stop()
            self.metrics = None
        self._remove_spool()
