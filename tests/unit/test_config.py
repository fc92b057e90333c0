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


# ----------------------------------------------------------------------------- relative paths
@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An ini file in ``proj/`` beside the files it names, pytest run from ``proj/tests/``
    (pytest finds the ini file of a parent directory), and ``elsewhere/`` for the command
    line's and the environment's files."""
    from tests.kafka import fake_release

    proj = tmp_path / "proj"
    (proj / "tests").mkdir(parents=True)
    (proj / "primary-client.properties").write_text("client.id=from-the-project\n")
    fake_release(proj / "dist", "3.9.0")
    (proj / "pytest.ini").write_text("[pytest]\n")
    monkeypatch.chdir(proj / "tests")
    return proj


def _from_ini(project: Path, ini: dict[str, object], env: dict[str, str] | None = None):
    return resolve_settings({}, lambda k: ini.get(k), env or {}, rootdir=Path("/r"), inipath=project / "pytest.ini")


def test_an_ini_key_s_relative_paths_are_read_from_the_ini_file_s_directory(project: Path) -> None:
    from pytest_kafka_mirror.clusters._tls import make_tls_files

    make_tls_files(project / "tls")  # librdkafka opens ssl.ca.location while it checks the properties
    home = project / "dist" / "kafka-3.9.0"
    s = _from_ini(project, {
        "kafka_mirror_source_config": "primary-client.properties",
        "kafka_mirror_target_config_set": ["security.protocol=SSL", "ssl.ca.location=tls/ca.pem"],
        "kafka_mirror_kafka_home": "dist/kafka-3.9.0", "kafka_mirror_kafka_cache": "cache",
        "kafka_mirror_source": "kafka-home:dist/kafka-3.9.0", "kafka_mirror_replicator": "mm2:dist/kafka-3.9.0",
        "kafka_mirror_report_dir": "out/reports", "kafka_mirror_storage": "file://runs",
        "kafka_mirror_compare": "runs/0001_base.json",
    })
    assert dict(s.source_client) == {"client.id": "from-the-project"}
    assert s.source_client_origins == {
        "client.id": f"{project / 'primary-client.properties'} via ini key kafka_mirror_source_config"}
    assert s.target_client["ssl.ca.location"] == str(project / "tls" / "ca.pem")
    assert s.kafka_home == str(home) and s.kafka_cache == str(project / "cache")
    assert s.source.arg == str(home) and s.replicator.arg == str(home)
    assert s.report_dir == project / "out" / "reports" and s.storage == project / "runs"
    assert s.compare == str(project / "runs" / "0001_base.json")
    # ... and nothing else moves: absolute paths, versions, names
    s = _from_ini(project, {"kafka_mirror_replicator": "mm2:4.3.1", "kafka_mirror_compare": "base",
                            "kafka_mirror_kafka_cache": str(project / "abs")})
    assert s.replicator.arg == "4.3.1" and s.compare == "base" and s.kafka_cache == str(project / "abs")


def test_without_an_ini_file_or_on_the_command_line_and_in_the_environment_from_the_current_directory(
        project: Path) -> None:
    here = Path.cwd()
    (here / "mine.properties").write_text("client.id=from-here\n")
    env = {"KAFKA_MIRROR_SOURCE_CONFIG": "mine.properties", "KAFKA_MIRROR_KAFKA_CACHE": "cache"}
    s = _from_ini(project, {}, env)
    assert dict(s.source_client) == {"client.id": "from-here"} and s.kafka_cache == str(here / "cache")
    opt = OPTIONS_BY_NAME["target-config"]
    s = resolve_settings({opt.dest: opt.argparse_type("mine.properties")}, lambda k: None, {},
                         inipath=project / "pytest.ini")  # as argparse parses it, in the current directory
    assert dict(s.target_client) == {"client.id": "from-here"}
    assert s.target_client_origins == {"client.id": f"{here / 'mine.properties'} via --kafka-mirror-target-config"}
    s = resolve_settings({}, lambda k: {"kafka_mirror_kafka_cache": "cache"}.get(k), {})  # no ini file: pytest -o
    assert s.kafka_cache == str(here / "cache")


@pytest.mark.parametrize("source", ["ini", "env", "cli"])
def test_a_missing_file_names_the_absolute_path_tried_and_where_the_value_came_from(project: Path,
                                                                                   source: str) -> None:
    import argparse

    opt = OPTIONS_BY_NAME["source-config"]
    if source == "cli":
        with pytest.raises(argparse.ArgumentTypeError) as e:  # argparse prefixes "argument --kafka-mirror-source-config"
            opt.argparse_type("missing.properties")
        assert str(e.value) == (f"{str(Path.cwd() / 'missing.properties')!r}: no such file ('missing.properties' "
                                "read from the current directory)")
        return
    with pytest.raises(SettingsError) as e:
        _from_ini(project, {"kafka_mirror_source_config": "missing.properties"} if source == "ini" else {},
                  {"KAFKA_MIRROR_SOURCE_CONFIG": "missing.properties"} if source == "env" else {})
    if source == "ini":
        assert str(e.value) == (f"ini key kafka_mirror_source_config (in {project / 'pytest.ini'}, whose relative "
                                f"paths are read from its directory): {str(project / 'missing.properties')!r}: no "
                                "such file")
    else:
        assert str(e.value) == (f"env KAFKA_MIRROR_SOURCE_CONFIG: {str(Path.cwd() / 'missing.properties')!r}: no such "
                                "file ('missing.properties' read from the current directory)")


def test_a_missing_kafka_home_of_the_ini_file_names_the_path_tried(project: Path) -> None:
    import re

    tried = re.escape(str(project / "nowhere"))
    with pytest.raises(SettingsError, match=r"^ini key kafka_mirror_source \(in .*pytest.ini, whose relative paths are "
                                            rf"read from its directory\): 'kafka-home:{tried}': '{tried}' is not a "
                                            r"directory"):
        _from_ini(project, {"kafka_mirror_source": "kafka-home:nowhere"})


def test_a_session_run_from_a_subdirectory_reads_the_ini_file_s_paths_from_its_directory(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest finds the ini file of a parent directory; the plugin gets its path (config.inipath)."""
    pytester.makeini("[pytest]\nkafka_mirror_source_config = primary-client.properties\n")
    (pytester.path / "primary-client.properties").write_text("client.id=from-the-project\n")
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    (pytester.path / "sub").mkdir()
    monkeypatch.chdir(pytester.path / "sub")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--co", str(pytester.path / "test_x.py"))
    result.stdout.fnmatch_lines(["kafka-mirror: source client properties: client.id=from-the-project"])
    assert result.ret == 0
