from __future__ import annotations

from pathlib import Path

import pytest

from pytest_kafka_mirror.clusters import ClusterSpec, parse_cluster_spec
from pytest_kafka_mirror.config import OPTIONS_BY_NAME, SettingsError, resolve_settings
from pytest_kafka_mirror.replicators import parse_naming


def _resolve(cli: dict | None = None, ini: dict | None = None, env: dict | None = None):
    return resolve_settings(cli or {}, lambda k: (ini or {}).get(k), env or {}, rootdir=Path("/r"))


def test_defaults() -> None:
    s = _resolve()
    assert s.source == ClusterSpec("tansu") and str(s.replicator) == "reference"
    assert s.report_dir == Path("/r/.kafka-mirror/reports")
    assert s.non_default() == {}


def test_precedence_cli_over_ini_over_env() -> None:
    env = {"KAFKA_MIRROR_DRAIN_TIMEOUT": "3", "KAFKA_MIRROR_SETTLE": "2"}
    ini = {"kafka_mirror_drain_timeout": "4"}
    s = _resolve({"kafka_mirror_drain_timeout": 5.0}, ini, env)
    assert s.drain_timeout == 5.0 and s.settle == 2.0
    assert s.sources["drain-timeout"] == "--kafka-mirror-drain-timeout"
    assert s.sources["settle"] == "env KAFKA_MIRROR_SETTLE"
    assert _resolve({}, ini, env).sources["drain-timeout"] == "ini key kafka_mirror_drain_timeout"


@pytest.mark.parametrize(
    "ini,env,message",
    [
        ({"kafka_mirror_source": "kafka"}, {}, r"ini key kafka_mirror_source: unknown cluster spec 'kafka'; accepted: tansu"),
        ({}, {"KAFKA_MIRROR_DRAIN_TIMEOUT": "-1"}, r"env KAFKA_MIRROR_DRAIN_TIMEOUT: '-1' must be a positive number"),
        ({}, {"KAFKA_MIRROR_FORMAT": "xml"}, r"env KAFKA_MIRROR_FORMAT: 'xml' is not a record format"),
        ({}, {"KAFKA_MIRROR_MESSAGE_SIZE": "1.5"}, r"'1.5' is not a whole number"),
    ],
)
def test_bad_values_name_their_source(ini: dict, env: dict, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        _resolve({}, ini, env)


@pytest.mark.parametrize(
    "text,ok",
    [
        ("tansu", True),
        ("bootstrap:127.0.0.1:9092", True),
        ("bootstrap:a:1,b.example:9093", True),
        ("bootstrap:", False),
        ("bootstrap:host", False),
        ("bootstrap:host:99999", False),
        ("tansu:extra", False),
        ("docker", False),
    ],
)
def test_cluster_specs(text: str, ok: bool) -> None:
    if ok:
        parse_cluster_spec(text)
    else:
        with pytest.raises(ValueError, match="accepted: tansu"):
            parse_cluster_spec(text)


def test_naming_policies() -> None:
    assert parse_naming("identity").target("t") == "t"
    assert parse_naming("prefix:source.").target("t") == "source.t"
    with pytest.raises(ValueError, match="accepted: identity"):
        parse_naming("prefix:")


def test_option_names_follow_the_convention() -> None:
    o = OPTIONS_BY_NAME["drain-timeout"]
    assert (o.flag, o.ini, o.env) == ("--kafka-mirror-drain-timeout", "kafka_mirror_drain_timeout", "KAFKA_MIRROR_DRAIN_TIMEOUT")
