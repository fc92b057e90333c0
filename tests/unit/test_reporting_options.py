"""The options of stored runs, comparison and metrics: flags, repeatable and optional values
through the one option model, from the command line, the ini file and the environment."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pytest_kafka_mirror.config import (
    FLAG,
    LATEST,
    LIST,
    OPTIONAL_VALUE,
    OPTIONS_BY_NAME,
    SettingsError,
    resolve_settings,
)
from pytest_kafka_mirror.report.compare import RegressionCheck
from pytest_kafka_mirror.report.metrics import ListenAddress

SAVE = OPTIONS_BY_NAME["save"]
AUTOSAVE = OPTIONS_BY_NAME["autosave"]
COMPARE = OPTIONS_BY_NAME["compare"]
COMPARE_FAIL = OPTIONS_BY_NAME["compare-fail"]
STORAGE = OPTIONS_BY_NAME["storage"]
METRICS_PORT = OPTIONS_BY_NAME["metrics-port"]
PUSHGATEWAY = OPTIONS_BY_NAME["pushgateway"]


def _resolve(cli: dict | None = None, ini: dict | None = None, env: dict | None = None):
    return resolve_settings(cli or {}, lambda k: (ini or {}).get(k), env or {}, rootdir=Path("/r"))


def _parse(*argv: str) -> argparse.Namespace:
    """The options as pytest's parser builds them (addoption_kwargs), on a plain argparse parser."""
    ap = argparse.ArgumentParser()
    for opt in (SAVE, AUTOSAVE, COMPARE, COMPARE_FAIL, METRICS_PORT):
        kwargs = opt.addoption_kwargs()
        ap.add_argument(opt.flag, **kwargs)
    ap.add_argument("paths", nargs="*")
    return ap.parse_args(argv)


def test_kinds() -> None:
    assert (AUTOSAVE.kind, COMPARE.kind, COMPARE_FAIL.kind) == (FLAG, OPTIONAL_VALUE, LIST)


def test_defaults_are_off() -> None:
    s = _resolve()
    assert (s.save, s.autosave, s.compare, s.compare_fail) == (None, False, None, ())
    assert s.storage == Path("/r/.kafka-mirror")
    assert s.metrics_port is None and s.pushgateway is None and not s.metrics_enabled


def test_command_line_forms() -> None:
    ns = _parse("--kafka-mirror-autosave", "--kafka-mirror-compare", "--kafka-mirror-compare-fail=missing:0",
                "--kafka-mirror-compare-fail", "latency_p99:10%", "tests/")
    assert ns.kafka_mirror_autosave is True
    assert ns.kafka_mirror_compare == LATEST
    assert ns.kafka_mirror_compare_fail == [RegressionCheck("missing", 0.0, False), RegressionCheck("latency_p99", 10.0, True)]
    assert ns.paths == ["tests/"]
    assert _parse("--kafka-mirror-compare=0003").kafka_mirror_compare == "0003"
    s = _resolve(vars(_parse("--kafka-mirror-compare-fail=missing:0", "--kafka-mirror-metrics-port=9464")))
    assert s.compare_fail == (RegressionCheck("missing", 0.0, False),)
    assert s.metrics_port == ListenAddress("127.0.0.1", 9464) and s.metrics_enabled
    assert s.sources["compare-fail"] == "--kafka-mirror-compare-fail"


def test_a_flag_not_given_falls_through_to_ini_and_env() -> None:
    ns = _parse()
    assert ns.kafka_mirror_autosave is None
    s = _resolve(vars(ns), env={"KAFKA_MIRROR_AUTOSAVE": "yes"})
    assert s.autosave is True and s.sources["autosave"] == "env KAFKA_MIRROR_AUTOSAVE"
    assert _resolve(ini={"kafka_mirror_autosave": "false"}, env={"KAFKA_MIRROR_AUTOSAVE": "1"}).autosave is False


def test_repeatable_values_from_ini_lines_and_env_words() -> None:
    ini = {"kafka_mirror_compare_fail": ["missing:0", "latency_p99:10%"]}  # linelist
    assert [str(c) for c in _resolve(ini=ini).compare_fail] == ["missing:0", "latency_p99:10%"]
    env = {"KAFKA_MIRROR_COMPARE_FAIL": "duplicated:0, rate:5%"}
    assert [str(c) for c in _resolve(env=env).compare_fail] == ["duplicated:0", "rate:5%"]
    # The command line replaces, it does not add to, the ini values.
    cli = {"kafka_mirror_compare_fail": [RegressionCheck("reordered", 0.0, False)]}
    assert [str(c) for c in _resolve(cli, ini=ini).compare_fail] == ["reordered:0"]


def test_storage_is_under_rootdir_and_accepts_file_urls() -> None:
    assert _resolve(env={"KAFKA_MIRROR_STORAGE": "file://results"}).storage == Path("/r/results")
    assert _resolve(env={"KAFKA_MIRROR_STORAGE": "/abs/runs"}).storage == Path("/abs/runs")


@pytest.mark.parametrize(
    "env,message",
    [
        ({"KAFKA_MIRROR_COMPARE_FAIL": "missing:0 lost"}, r"env KAFKA_MIRROR_COMPARE_FAIL: 'lost' is not a regression check"),
        ({"KAFKA_MIRROR_AUTOSAVE": "sometimes"}, r"env KAFKA_MIRROR_AUTOSAVE: 'sometimes' is not a boolean"),
        ({"KAFKA_MIRROR_SAVE": "a/b"}, r"env KAFKA_MIRROR_SAVE: 'a/b' cannot name a stored run"),
        ({"KAFKA_MIRROR_SAVE": "latest"}, r"'latest' cannot name a stored run"),
        ({"KAFKA_MIRROR_STORAGE": "elasticsearch+http://x"}, r"only file storage is supported"),
        ({"KAFKA_MIRROR_METRICS_PORT": "http"}, r"env KAFKA_MIRROR_METRICS_PORT: 'http' is not a port"),
        ({"KAFKA_MIRROR_PUSHGATEWAY": "ftp://x:1"}, r"'ftp://x:1' is not a push gateway URL"),
    ],
)
def test_bad_values_name_their_source(env: dict, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        _resolve(env=env)


def test_help_text_escapes_percent_signs() -> None:
    # argparse %-formats help; "latency_p99:10%" must survive it.
    ap = argparse.ArgumentParser()
    ap.add_argument(COMPARE_FAIL.flag, **COMPARE_FAIL.addoption_kwargs())
    assert "latency_p99:10% or missing:0" in ap.format_help()
