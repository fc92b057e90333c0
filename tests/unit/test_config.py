from __future__ import annotations

from pathlib import Path

import pytest

from pytest_kafka_mirror.clusters import ClusterSpec, parse_cluster_spec
from pytest_kafka_mirror.config import OPTIONS_BY_NAME, SettingsError, min_message_size, resolve_settings
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
        ({"kafka_mirror_source": "kafak"}, {}, r"ini key kafka_mirror_source: unknown cluster spec 'kafak'; accepted: tansu"),
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


# -- the message size against the format: checked before anything starts --------------------


@pytest.mark.parametrize(
    "cli,ini,env,message",
    [
        ({"kafka_mirror_message_size": 10}, {}, {},
         r"^--kafka-mirror-message-size: message size 10 B cannot hold a record of the headers format: .* takes 60 B; "
         r"give a message size of at least 60 or the body format"),
        ({"kafka_mirror_format": "body"}, {"kafka_mirror_message_size": "45"}, {},
         r"^ini key kafka_mirror_message_size: message size 45 B cannot hold a record of the body format "
         r"\(from --kafka-mirror-format\): .* takes 46 B; give a message size of at least 46$"),
        ({}, {"kafka_mirror_format": "headers"}, {"KAFKA_MIRROR_MESSAGE_SIZE": "59"},
         r"^env KAFKA_MIRROR_MESSAGE_SIZE: message size 59 B .* headers format \(from ini key kafka_mirror_format\)"),
    ],
)
def test_message_size_below_the_format_metadata_names_the_option(cli: dict, ini: dict, env: dict, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        _resolve(cli, ini, env)


def test_message_size_at_the_format_minimum_is_accepted() -> None:
    from pytest_kafka_mirror.produce.producer import new_producer_id
    from pytest_kafka_mirror.produce.records import RecordEncoder

    for fmt in ("headers", "body"):
        need = min_message_size(fmt)
        assert _resolve({"kafka_mirror_format": fmt, "kafka_mirror_message_size": need}).message_size == need
        # the minimum is what a generated producer id needs: records of that size can be encoded
        assert RecordEncoder(fmt, new_producer_id(), need, lanes=10).size(9, 123) == need
        with pytest.raises(ValueError, match="below the metadata size"):
            RecordEncoder(fmt, new_producer_id(), need - 1, lanes=1)


# -- Spark Connect: --kafka-mirror-spark-remote, checked before anything starts --------------

REMOTE = OPTIONS_BY_NAME["spark-remote"]


@pytest.mark.parametrize("text", ["sc://127.0.0.1:15002", "sc://localhost", "sc://spark.example:443/;use_ssl=true",
                                  "sc://[::1]:15002", " sc://h:1/ ", "sc://h:1/;token=abc;user_id=me"])
def test_spark_connect_urls_are_accepted(text: str) -> None:
    assert REMOTE.argparse_type(text) == text.strip()


@pytest.mark.parametrize("text", ["http://127.0.0.1:15002", "127.0.0.1:15002", "sc://", "sc://h:port", "sc://h:0",
                                  "sc://h:70000", "sc://h:1/path", "sc://h:1;x", "spark://h:7077"])
def test_malformed_spark_connect_urls_name_the_accepted_form(text: str) -> None:
    import argparse

    with pytest.raises(argparse.ArgumentTypeError, match=r"accepted: sc://HOST\[:PORT\]"):
        REMOTE.argparse_type(text)


def test_a_bad_spark_connect_url_from_ini_or_env_names_its_source() -> None:
    with pytest.raises(SettingsError, match=r"^env KAFKA_MIRROR_SPARK_REMOTE: 'local\[2\]' is not a Spark Connect URL"):
        _resolve(env={"KAFKA_MIRROR_SPARK_REMOTE": "local[2]"})
    with pytest.raises(SettingsError, match=r"^ini key kafka_mirror_spark_remote: 'sc://h:x' is not a Spark Connect"):
        _resolve(ini={"kafka_mirror_spark_remote": "sc://h:x"})


def test_a_spark_connect_url_given_as_master_points_at_the_remote_option() -> None:
    import argparse

    with pytest.raises(argparse.ArgumentTypeError, match="give it as --kafka-mirror-spark-remote sc://h:1"):
        OPTIONS_BY_NAME["spark-master"].argparse_type("sc://h:1")


def test_spark_remote_is_read_like_every_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pytest_kafka_mirror.verify.connect.client_missing", lambda: [])
    assert _resolve().spark_remote is None
    s = _resolve({}, {"kafka_mirror_spark_remote": "sc://a:1"}, {"KAFKA_MIRROR_SPARK_REMOTE": "sc://b:2"})
    assert (s.spark_remote, s.sources["spark-remote"]) == ("sc://a:1", "ini key kafka_mirror_spark_remote")
    s = _resolve({"kafka_mirror_spark_remote": "sc://c:3"}, {}, {"KAFKA_MIRROR_SPARK_REMOTE": "sc://b:2"})
    assert (s.spark_remote, s.sources["spark-remote"]) == ("sc://c:3", "--kafka-mirror-spark-remote")
    assert s.spark_master == "local[2]"  # unused then, but still the default


@pytest.mark.parametrize("master_from", [{"cli": {"kafka_mirror_spark_master": "local[4]"}},
                                         {"env": {"KAFKA_MIRROR_SPARK_MASTER": "local[4]"}}])
def test_spark_remote_and_an_explicit_master_exclude_each_other(master_from: dict,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pytest_kafka_mirror.verify.connect.client_missing", lambda: [])
    cli = {"kafka_mirror_spark_remote": "sc://h:1", **master_from.get("cli", {})}
    message = (r"^--kafka-mirror-spark-remote \(sc://h:1\) and (--kafka-mirror-spark-master|env "
               r"KAFKA_MIRROR_SPARK_MASTER) \(local\[4\]\) exclude each other: .*give only one of "
               r"--kafka-mirror-spark-remote and --kafka-mirror-spark-master")
    with pytest.raises(SettingsError, match=message):
        _resolve(cli, {}, master_from.get("env", {}))


def test_spark_remote_without_the_connect_client_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pytest_kafka_mirror.verify.connect.client_missing", lambda: ["grpcio", "pandas"])
    with pytest.raises(SettingsError, match=r"^env KAFKA_MIRROR_SPARK_REMOTE: .* grpcio, pandas is not installed: "
                                            r"pip install 'pyspark\[connect\]'"):
        _resolve(env={"KAFKA_MIRROR_SPARK_REMOTE": "sc://h:1"})
