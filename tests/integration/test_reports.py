"""Results across sessions as a user meets them: xdist aggregation, stored runs, a regression
failing the session, plots, JUnit properties, and Prometheus over real HTTP (pytester runs
in a subprocess, real brokers, mirror, capture and Spark)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_kafka_mirror.config import OPTIONS_BY_NAME
from pytest_kafka_mirror.report.plots import PLOT_KINDS
from pytest_kafka_mirror.report.storage import FileStorage, get_machine_id, load_run
from tests.conftest import processes_tagged
from tests.golden import assert_golden
from tests.promtools import free_port, pushgateway, scrape, value
from tests.stored import sample_report

pytestmark = pytest.mark.integration

SAVE = OPTIONS_BY_NAME["save"].flag
AUTOSAVE = OPTIONS_BY_NAME["autosave"].flag
COMPARE = OPTIONS_BY_NAME["compare"].flag
COMPARE_FAIL = OPTIONS_BY_NAME["compare-fail"].flag
METRICS_PORT = OPTIONS_BY_NAME["metrics-port"].flag
PUSHGATEWAY = OPTIONS_BY_NAME["pushgateway"].flag
REPORTING_OPTIONS = ("save", "autosave", "compare", "compare-fail", "storage", "metrics-port", "pushgateway")

# test_live scrapes the session's exporter from inside the test: while the capture still
# runs (producer counts, arrivals as they come) and after verification.  test_recorded takes
# in a report verified elsewhere (no second Spark JVM): both workers' results must reach
# the controller's one summary, one stored run and one JUnit file.
XDIST_SCENARIO = textwrap.dedent(
    """
    import os, time, urllib.request
    from prometheus_client.parser import text_string_to_metric_families
    from pytest_kafka_mirror.processes.managed import wait_until
    from pytest_kafka_mirror.verify import MirrorReport

    def scrape():
        url = "http://127.0.0.1:%s/metrics" % os.environ["KM_METRICS_PORT"]
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        return {(s.name, frozenset(s.labels.items())): s.value
                for f in text_string_to_metric_families(text) for s in f.samples}

    def sample(samples, name, **labels):
        hits = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls]
        return hits[0] if len(hits) == 1 else None

    def test_live(request, mirror_topics, mirror_producer, mirror_verifier):
        topics = mirror_topics(2, partitions=2)
        run = mirror_producer(topics, rate=400, count=300, message_size=128)
        live = scrape()
        for t in topics:
            assert sample(live, "kafka_mirror_records_sent_total", topic=t) == 300
            assert sample(live, "kafka_mirror_records_acked_total", topic=t) == 300
        # Arrivals are counted live by the capture process (about once a second).
        wait_until(lambda: all(sample(scrape(), "kafka_mirror_records_arrived_total", topic=t) == 300 for t in topics),
                   60, "every arrival in the live metrics", interval=0.2, on_timeout=lambda: f"; they say:\\n{scrape()}")
        assert run.capture_status is None  # still capturing: these were live figures

        report = mirror_verifier(run)
        after = scrape()
        assert sample(after, "kafka_mirror_arrival_latency_seconds_count", test=request.node.nodeid) == 600
        assert sample(after, "kafka_mirror_report_missing", test=request.node.nodeid) == 0
        assert sample(after, "kafka_mirror_report_expected", test=request.node.nodeid) == 600
        report.assert_ok(p99_ms=10000)

    def test_recorded(mirror_verifier):
        mirror_verifier.record(MirrorReport.load(os.environ["KM_REPORT"]))
    """
)


def test_xdist_results_reach_the_controller_once(pytester: pytest.Pytester, tagged_env: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_steady=XDIST_SCENARIO)
    port = free_port()
    monkeypatch.setenv("KM_METRICS_PORT", str(port))
    monkeypatch.setenv("KM_REPORT", _report_file(tmp_path, "recorded", duplicated=3))
    result = pytester.runpytest_subprocess(
        "-n", "2", "-p", "no:cacheprovider", AUTOSAVE, f"{METRICS_PORT}={port}", "--junitxml=junit.xml",
    )
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    # One summary, one table, from the controller.
    assert out.count("kafka-mirror: 2 verified runs") == 1
    result.stdout.fnmatch_lines([
        "*kafka-mirror: 2 verified runs*",
        "    test * records  missing  dup  reordered  p50 * p99 * p99.9 * offered * copy * discovery",
        "    test_steady.py::test_live * 600 * 0 * 0 * 0 *",  # sorted by node id, whoever finished first
        "    test_steady.py::test_recorded * 200 * 0 * 3 * 0 * 10 ms * 20 ms * 30 ms * 500 * n/a *",
        "reports: *",
        "saved: *0001_*.json",
        f"metrics: http://127.0.0.1:{port}/metrics",
    ])

    # One stored run, holding both workers' results keyed by node id.
    storage = FileStorage(pytester.path / ".kafka-mirror")
    runs = storage.runs()
    assert len(runs) == 1
    results = load_run(runs[0])["results"]
    assert sorted(results) == ["test_steady.py::test_live", "test_steady.py::test_recorded"]
    live, recorded = results["test_steady.py::test_live"], results["test_steady.py::test_recorded"]
    assert (live["figures"]["expected"], live["figures"]["missing"], live["figures"]["duplicated"]) == (600, 0, 0)
    assert live["figures"]["rate"] > 0 and live["figures"]["latency_p99"] is not None
    assert (recorded["figures"]["expected"], recorded["figures"]["duplicated"]) == (200, 3)
    topics = {lane["topic"] for lane in live["report"]["lanes"]}
    assert all(re.match(r"km-gw\d-", t) for t in topics), topics  # verified on a worker, not the controller
    timeline = live["report"]["timeline"]
    assert sum(e["sent"] for e in timeline) == 600 and sum(e["received"] for e in timeline) == 600
    for res in results.values():
        assert res["outcome"] == "passed"
        for path in [res["report_path"], *res["plots"].values()]:
            assert Path(path).is_file(), path

    # The HTML page links every plot; JUnit XML carries the figures as properties.
    index = (pytester.path / ".kafka-mirror" / "reports" / "index.html").read_text()
    assert index.count("<img src=") == 2 * len(PLOT_KINDS)  # two runs, no stepped profile
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    props = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")} for c in cases}
    assert (props["test_live"]["kafka_mirror.expected"], props["test_live"]["kafka_mirror.missing"]) == ("600", "0")
    assert float(props["test_live"]["kafka_mirror.latency_p99"]) > 0
    assert (props["test_recorded"]["kafka_mirror.duplicated"], props["test_recorded"]["kafka_mirror.rate"]) == ("3", "500.0")
    assert processes_tagged(tagged_env) == []


# Reports verified elsewhere (here: stated by the outer test) go through the same results
# path as mirror_verifier(run): what is tested below is the comparison, the exit status, the
# saved runs and the push, not the measurement (test_xdist_... measures for real).
RECORDED_SCENARIO = textwrap.dedent(
    """
    import os
    from pytest_kafka_mirror.verify import MirrorReport

    def test_mirror(mirror_verifier):
        report = mirror_verifier.record(MirrorReport.load(os.environ["KM_REPORT"]))
        report.assert_no_loss()
    """
)
RECORDED_NODE = "test_recorded.py::test_mirror"


def _report_file(directory: Path, name: str, **figures: int) -> str:
    path = directory / f"{name}.json"
    sample_report(expected=200, **figures).write(path)
    return str(path)


def test_a_regression_fails_the_session_and_names_the_next_command(pytester: pytest.Pytester, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_recorded=RECORDED_SCENARIO)
    storage = FileStorage(pytester.path / ".kafka-mirror", get_machine_id())
    monkeypatch.setenv("KM_REPORT", _report_file(tmp_path, "good", foreign=0))
    first = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"{SAVE}=base")
    first.assert_outcomes(passed=1)
    assert first.ret == pytest.ExitCode.OK
    baseline = storage.machine_dir / "0001_base.json"
    assert load_run(baseline)["results"][RECORDED_NODE]["figures"]["foreign"] == 0

    monkeypatch.setenv("KM_REPORT", _report_file(tmp_path, "worse", foreign=2))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", COMPARE, f"{COMPARE_FAIL}=foreign:0", f"{COMPARE_FAIL}=missing:0", f"{SAVE}=candidate",
    )
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the test passed; the regression fails the session
    saved = storage.machine_dir / "0002_candidate.json"
    result.stdout.fnmatch_lines([
        "*kafka-mirror: 1 verified run*",
        "*kafka-mirror comparison*",
        "baseline: 0001_base (*)",
        f"*{RECORDED_NODE} * foreign * 0 * 2 * +2 * foreign:0 FAILED",
        "* missing * 0 * 0 * +0 * missing:0 ok",
        "1 regression:",
        f"  {RECORDED_NODE}: foreign 2 vs 0 in the baseline (+2), more than foreign:0 allows (at most +0)",
        f"saved: {saved}",
        f"kafka-mirror: 1 regression against {baseline}: the session fails",
        f"next: kafka-mirror compare {baseline} {saved}",
    ])
    assert load_run(saved)["results"][RECORDED_NODE]["figures"]["foreign"] == 2  # saved despite the regression

    # The next command, as printed: the same comparison, no cluster, same exit status.
    cli = subprocess.run([sys.executable, "-m", "pytest_kafka_mirror.cli", "compare", str(baseline), str(saved),
                          "--compare-fail", "foreign:0"], capture_output=True, text=True, timeout=60, check=False)
    assert cli.returncode == 1, cli.stderr
    assert f"{RECORDED_NODE}: foreign 2 vs 0 in the baseline (+2), more than foreign:0 allows (at most +0)" in cli.stdout

    # Within the threshold, the same comparison passes.
    ok = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"{COMPARE}=base", f"{COMPARE_FAIL}=foreign:5")
    assert ok.ret == pytest.ExitCode.OK
    ok.stdout.fnmatch_lines(["no regression: foreign:5 held for 1 verified run"])


def test_a_failed_test_ends_with_the_command_to_see_its_report(pytester: pytest.Pytester, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_recorded=RECORDED_SCENARIO)
    monkeypatch.setenv("KAFKA_MIRROR_AUTOSAVE", "true")  # from the environment, as a CI job would set it
    monkeypatch.setenv("KM_REPORT", _report_file(tmp_path, "lossy", lost=3))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    reports = pytester.path / ".kafka-mirror" / "reports"
    result.stdout.fnmatch_lines([
        f"*{RECORDED_NODE} * 200 * 3 *",
        "saved: *0001_*.json",
        f"next: kafka-mirror show {reports / 'test_recorded.py.test_mirror.json'}   (plots: {reports / 'index.html'})",
    ])
    stored = load_run(FileStorage(pytester.path / ".kafka-mirror").runs()[0])
    assert stored["results"][RECORDED_NODE]["outcome"] == "failed"


def test_the_push_gateway_gets_the_session_metrics(pytester: pytest.Pytester, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_recorded=RECORDED_SCENARIO)
    monkeypatch.setenv("KM_REPORT", _report_file(tmp_path, "dup", duplicated=4))
    with pushgateway(tmp_path) as url:
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"{PUSHGATEWAY}={url}")
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines([f"metrics: pushed to {url}"])
        samples = scrape(url + "/metrics")
    # The final push, after the last verification, carries the report's figures.
    assert value(samples, "kafka_mirror_report_duplicated", job="kafka_mirror", test=RECORDED_NODE) == 4
    assert value(samples, "kafka_mirror_report_missing", job="kafka_mirror", test=RECORDED_NODE) == 0
    assert value(samples, "kafka_mirror_report_expected", job="kafka_mirror", test=RECORDED_NODE) == 200
    assert value(samples, "kafka_mirror_report_latency_seconds", job="kafka_mirror", test=RECORDED_NODE,
                 figure="p99") == pytest.approx(0.02)


@pytest.mark.parametrize(
    "args,message",
    [
        ([f"{COMPARE_FAIL}=latency_p99:ten%"], "*--kafka-mirror-compare-fail*'latency_p99:ten%' is not a regression check*"),
        ([f"{COMPARE_FAIL}=missing:0"], "*--kafka-mirror-compare-fail needs a run to compare with: add --kafka-mirror-compare*"),
        ([COMPARE], "*--kafka-mirror-compare=latest: no stored run in */.kafka-mirror/* to compare with; save one first*"),
        ([f"{COMPARE}=0007"], "*--kafka-mirror-compare=0007: no stored run matches '0007'*"),
        ([f"{METRICS_PORT}=http"], "*--kafka-mirror-metrics-port*'http' is not a port*"),
        ([f"{PUSHGATEWAY}=127.0.0.1:1"], "*--kafka-mirror-pushgateway http://127.0.0.1:1: the first push failed*"),
    ],
)
def test_reporting_options_fail_before_anything_starts(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    pytester.makepyfile("def test_x(): pass")
    t0 = time.monotonic()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert time.monotonic() - t0 < 30


def test_a_busy_metrics_port_is_a_usage_error(pytester: pytest.Pytester) -> None:
    import socket

    pytester.makepyfile("def test_x(): pass")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"{METRICS_PORT}={port}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        f"*--kafka-mirror-metrics-port 127.0.0.1:{port}: cannot serve metrics there*choose another port, or 0 for a free one"
    ])


def test_golden_help_of_the_reporting_options(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    result = pytester.runpytest_subprocess("--help")
    lines = result.stdout.str().splitlines()
    blocks = []
    for name in REPORTING_OPTIONS:
        flag = OPTIONS_BY_NAME[name].flag
        start = next(i for i, line in enumerate(lines) if line.strip().startswith(flag))
        end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith(" " * 10))
        blocks += lines[start:end]
    assert_golden("help_reporting.txt", "\n".join(blocks) + "\n")


def test_a_save_that_fails_fails_the_session(pytester: pytest.Pytester, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_recorded=RECORDED_SCENARIO)
    monkeypatch.setenv("KM_REPORT", _report_file(tmp_path, "good"))
    (pytester.path / "not-a-dir").write_text("")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"{SAVE}=base", "--kafka-mirror-storage=not-a-dir")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["not saved: cannot write */not-a-dir/*: *"])


# A failover check without any verification (as scenarios/test_failover.py's low-throughput
# case), on the embedded default: the reference mirror's checkpoints and synced offsets.
FAILOVER_SCENARIO = textwrap.dedent(
    """
    import pytest
    from pytest_kafka_mirror import witness

    @pytest.mark.kafka_mirror(replicator_properties={"sync.group.offsets.enabled": "true"})
    def test_low_throughput(mirror_topics, mirror_producer, mirror_failover):
        (topic,) = mirror_topics(1, partitions=2)
        run = mirror_producer(topic, rate=10, count=20, witnesses=[witness("end")])
        mirror_failover(run).assert_ok()
    """
)
FAILOVER_NODE = "test_fo.py::test_low_throughput"


def test_a_failover_check_is_stored_and_gated_like_a_verification(pytester: pytest.Pytester, tagged_env: str) -> None:
    pytester.makepyfile(test_fo=FAILOVER_SCENARIO)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider", f"{SAVE}=base")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "*kafka-mirror: 1 failover check*",
        "    test * groups/translations  skipped  rereads max  untranslated  beyond end  rewinds  checkpoint delay*",
        f"    {FAILOVER_NODE}#failover * 1 / 4 * 0 * 0 * 0 * 0 * 0 * * s *",
        "saved: *0001_base.json",
    ])
    storage = FileStorage(pytester.path / ".kafka-mirror")
    baseline = storage.resolve("base")
    stored = load_run(baseline)["results"]
    assert list(stored) == [f"{FAILOVER_NODE}#failover"]
    check = stored[f"{FAILOVER_NODE}#failover"]
    assert (check["kind"], check["outcome"], check["figures"]["failover_skipped"]) == ("failover", "passed", 0)
    assert {e["via"] for e in check["report"]["entries"]} == {"checkpoint", "synced"}
    assert re.match(r"km(-d[0-9a-f]{6})?-gw\d-", check["report"]["entries"][0]["topic"])  # checked on a worker

    # The stored check is a baseline: the same figures gate the next session (a typo fails at once).
    typo = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"{COMPARE}=base",
                                         f"{COMPARE_FAIL}=failover_reread:0")
    assert typo.ret == pytest.ExitCode.USAGE_ERROR
    typo.stderr.fnmatch_lines(["*'failover_reread' is not a figure; accepted figures: *failover_rereads_max*"])
    cli = subprocess.run([sys.executable, "-m", "pytest_kafka_mirror.cli", "compare", str(baseline), str(baseline),
                          "--compare-fail", "failover_skipped:0", "--compare-fail", "failover_rereads_max:0"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "no regression: failover_skipped:0, failover_rereads_max:0 held for 1 failover check" in cli.stdout
    assert processes_tagged(tagged_env) == []
