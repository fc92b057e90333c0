"""The plugin as a user meets it: pytester runs in a subprocess, like a real pytest run."""

from __future__ import annotations

import json
import textwrap
import time

import pytest

from pytest_kafka_mirror.config import OPTIONS
from tests.conftest import processes_tagged
from tests.docs import marked_block

pytestmark = pytest.mark.integration

SCENARIO = textwrap.dedent(
    """
    import pytest

    @pytest.mark.parametrize("fmt", ["headers", "body"])
    def test_steady(mirror_topics, mirror_producer, mirror_verifier, fmt):
        topics = mirror_topics(2, partitions=3)
        run = mirror_producer(topics, rate=400, count=600, format=fmt, message_size=128)
        report = mirror_verifier(run)
        assert report.totals["expected"] == 1200
        report.assert_ok(p99_ms=5000)
    """
)


def test_help_lists_every_option_in_one_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--help")
    result.stdout.fnmatch_lines(["*test Kafka cross-cluster mirroring (pytest-kafka-mirror)*"])
    text = result.stdout.str()
    for opt in OPTIONS:
        assert opt.flag in text, opt.flag
        assert opt.ini in text, opt.ini


@pytest.mark.parametrize(
    "args,message",
    [
        (["--kafka-mirror-drain-timeout=-1"], "*--kafka-mirror-drain-timeout*'-1' must be a positive number*"),
        (["--kafka-mirror-source=kafka:9092"], "*--kafka-mirror-source*'kafka:9092': '9092' is not an Apache Kafka release "
         "version*(for a running cluster at a host and port: bootstrap:HOST:PORT); accepted: tansu*"),
        (["--kafka-mirror-target=bootstrap:nohost"], "*'nohost' is not HOST:PORT*"),
        (["--kafka-mirror-naming=suffix:x"], "*unknown topic naming policy 'suffix:x'*"),
        (["--kafka-mirror-spark-master=nowhere"], "*'nowhere' is not a Spark master URL*"),
    ],
)
def test_malformed_options_fail_at_parse_time(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    pytester.makepyfile("def test_x(): pass")
    t0 = time.monotonic()
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert time.monotonic() - t0 < 30


def test_malformed_ini_value_names_the_ini_key(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nkafka_mirror_message_size = big\n")
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini key kafka_mirror_message_size: 'big' is not a whole number*"])


def test_unreachable_bootstrap_server_is_one_error_naming_the_address(pytester: pytest.Pytester, tagged_env: str) -> None:
    pytester.makepyfile(SCENARIO)
    t0 = time.monotonic()
    result = pytester.runpytest_subprocess("--kafka-mirror-source=bootstrap:127.0.0.1:1", "-p", "no:cacheprovider")
    elapsed = time.monotonic() - t0
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*kafka-mirror source cluster (bootstrap:127.0.0.1:1): source: no answer from bootstrap servers 127.0.0.1:1*"])
    assert "Traceback" not in result.stdout.str()
    assert elapsed < 60
    assert processes_tagged(tagged_env) == []


def test_unreachable_bootstrap_honours_the_startup_timeout_and_prints_no_librdkafka_line(
    pytester: pytest.Pytester, tagged_env: str
) -> None:
    pytester.makepyfile(SCENARIO)
    result = pytester.runpytest_subprocess("--kafka-mirror-source=bootstrap:127.0.0.1:1",
                                           "--kafka-mirror-startup-timeout=2", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*source: no answer from bootstrap servers 127.0.0.1:1 within 2 s*"])
    output = result.stdout.str() + result.stderr.str()
    # librdkafka's own lines ("%3|...|FAIL|rdkafka#producer-1| ...") never reach stdout / stderr;
    # through logging, the refused connection is in the captured log of the error, once
    assert "|FAIL|" not in output and "%3|" not in output
    assert result.stdout.str().count("Connection refused") <= 2  # the error's own text, the captured log line
    assert processes_tagged(tagged_env) == []


@pytest.mark.parametrize(
    "args,ini,message",
    [
        (["--kafka-mirror-message-size=10"], "",
         "*--kafka-mirror-message-size: message size 10 B cannot hold a record of the headers format*at least 60*"),
        (["--kafka-mirror-format=body"], "[pytest]\nkafka_mirror_message_size = 45\n",
         "*ini key kafka_mirror_message_size: message size 45 B * body format (from --kafka-mirror-format)*"),
    ],
)
def test_message_size_below_the_format_fails_before_anything_starts(
    pytester: pytest.Pytester, tagged_env: str, args: list[str], ini: str, message: str
) -> None:
    if ini:
        pytester.makeini(ini)
    pytester.makepyfile(SCENARIO)
    t0 = time.monotonic()
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert time.monotonic() - t0 < 30
    assert processes_tagged(tagged_env) == []


def test_message_size_below_metadata_names_the_minimum(pytester: pytest.Pytester, tagged_env: str) -> None:
    pytester.makepyfile(
        """
        def test_small(mirror_topics, mirror_producer):
            mirror_producer(mirror_topics(1), rate=10, count=1, message_size=10)
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*ProducerError: message_size 10 B is below the headers format's metadata size * B*"])
    assert processes_tagged(tagged_env) == []


def test_unknown_marker_argument_is_rejected(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.kafka_mirror(drain_timout=3)
        def test_x(): pass
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(errors=1)
    assert ("unknown arguments ['drain_timout']; accepted keywords: drain_timeout, leave_out, private, release, "
            "replicator_properties, settle, topic_timeout") in result.stdout.str()
    assert "Traceback" not in result.stdout.str()


def test_a_check_left_out_by_a_typo_is_rejected_naming_the_checks(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.kafka_mirror(leave_out=["heartbeat"])
        def test_x(): pass
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(errors=1)
    assert ("@pytest.mark.kafka_mirror(leave_out=...): 'heartbeat' is not a check that can be left out; accepted: "
            "checkpoints | synced-offsets | heartbeats | offset-syncs | group-sync | config-sync") in result.stdout.str()
    result = pytester.runpytest_subprocess("--kafka-mirror-leave-out=checkpoint")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "'checkpoint' is not a check that can be left out" in result.stderr.str()
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_a_scenario_runs_as_a_user_would(pytester: pytest.Pytester, tagged_env: str) -> None:
    """A scenario file, and the README's scenario exactly as printed (``test_mirror.py``:
    it runs as written, and its marker spares it the undeclared-topics warning)."""
    pytester.makepyfile(SCENARIO, test_mirror=marked_block("README", "scenario"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*kafka-mirror: 3 verified runs*", "*test_steady?headers?  1200 *", "reports: *"])
    result.stdout.fnmatch_lines(["*test_mirror.py::test_steady_state * 5000 *"])
    assert "PytestKafkaMirrorWarning" not in result.stdout.str()
    reports = sorted(p for p in (pytester.path / ".kafka-mirror" / "reports").glob("*.json") if p.name != "session.json")
    assert len(reports) == 3
    data = json.loads(reports[0].read_text())
    assert data["expected"] == 1200 and data["lost"] == 0 and data["unseen"] == 0
    assert processes_tagged(tagged_env) == []


def test_a_release_the_marker_does_not_know_is_rejected(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.kafka_mirror(release="older")
        def test_x(): pass
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(errors=1)
    assert "@pytest.mark.kafka_mirror(release='older'): accepted: 'current', 'previous'" in result.stdout.str()
    assert "Traceback" not in result.stdout.str()
