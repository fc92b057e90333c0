"""Client properties of a cluster: parsing, options, registry, masking, Java names."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_kafka_mirror import _clientconf
from pytest_kafka_mirror._clientconf import (
    MASK,
    ClientProperties,
    is_secret,
    masked,
    parse_properties_text,
    read_properties_file,
    redact,
)
from pytest_kafka_mirror._kafkalog import with_logger
from pytest_kafka_mirror._warnings import PytestKafkaMirrorWarning
from pytest_kafka_mirror.clusters.bootstrap import BootstrapCluster
from pytest_kafka_mirror.clusters.kafka_dist import KafkaRelease
from pytest_kafka_mirror.clusters.kafka_home import SecurityFiles, render_server_properties, storage_format_argv
from pytest_kafka_mirror.config import OPTIONS_BY_NAME, SettingsError, resolve_settings
from pytest_kafka_mirror.replicators._java_client import java_client_properties, warn_untranslated
from pytest_kafka_mirror.replicators.mm1 import render_mm1
from pytest_kafka_mirror.replicators.mm2 import MirrorMaker2, parse_properties, render_mm2_properties
from tests.fakes import unstarted_cluster

SOURCE_CONFIG = OPTIONS_BY_NAME["source-config"]
SOURCE_SET = OPTIONS_BY_NAME["source-config-set"]
TARGET_SET = OPTIONS_BY_NAME["target-config-set"]
PASSWORD = "s3cr3t-Passw0rd"
SECURED = {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "alice",
           "sasl.password": PASSWORD}


@pytest.fixture(autouse=True)
def _own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own registry: the addresses registered here must not reach the other
    tests' child processes through the environment."""
    monkeypatch.setattr(_clientconf, "_registry", {})
    monkeypatch.setattr(_clientconf, "_loaded", True)
    monkeypatch.setattr(_clientconf, "_private_dir", None)
    monkeypatch.setenv(_clientconf.ENV, "")  # restored (unset) after the test, whatever _export sets


def _resolve(cli: dict[str, Any] | None = None, ini: dict[str, Any] | None = None, env: dict[str, str] | None = None):
    return resolve_settings(cli or {}, lambda k: (ini or {}).get(k), env or {}, rootdir=Path("/r"))


# ----------------------------------------------------------------------------- parsing
def test_properties_text_separators_comments_continuations_escapes() -> None:
    text = ("# a comment\n! another\n\nsecurity.protocol=SASL_SSL\nsasl.mechanisms : SCRAM-SHA-512\n"
            "sasl.username alice\nsasl.password = a=b:c \\\n   continued\nclient.id=x\\u0041\\\\y\n")
    props = parse_properties_text(text, "f.properties")
    assert dict(props) == {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "alice",
                           "sasl.password": "a=b:c continued", "client.id": "xA\\y"}


def test_a_malformed_line_is_named_by_number_never_by_its_text() -> None:
    with pytest.raises(ValueError, match=r"^f.properties line 3 is not KEY=VALUE$"):
        parse_properties_text("a=1\n# c\nhunter2\n", "f.properties")
    with pytest.raises(ValueError, match=r"line 1: 'sasl/password' is not a property name"):
        parse_properties_text("sasl/password=x\n", "f.properties")


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no such file"):
        read_properties_file(tmp_path / "missing.properties")


# ----------------------------------------------------------------------------- options
def test_file_then_inline_settings_per_cluster(tmp_path: Path) -> None:
    f = tmp_path / "source.properties"
    f.write_text("security.protocol=SASL_SSL\nsasl.mechanisms=SCRAM-SHA-512\nsasl.username=alice\nsasl.password=old\n")
    s = _resolve({SOURCE_CONFIG.dest: SOURCE_CONFIG.parse(str(f)),
                  SOURCE_SET.dest: [SOURCE_SET.parse(f"sasl.password={PASSWORD}")]},
                 env={"KAFKA_MIRROR_TARGET_CONFIG_SET": "security.protocol=SSL\nclient.id=t"})
    assert dict(s.source_client) == {**SECURED}
    assert dict(s.target_client) == {"security.protocol": "SSL", "client.id": "t"}
    assert PASSWORD not in repr(s) and PASSWORD not in str(s.source_client)
    assert s.sources["source-config"] == "--kafka-mirror-source-config"


def test_relative_files_become_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_kafka_mirror.clusters._tls import make_tls_files

    make_tls_files(tmp_path)  # librdkafka reads the CA file while checking the properties
    monkeypatch.chdir(tmp_path)  # children and MirrorMaker run elsewhere: the path must not depend on it
    s = _resolve(ini={"kafka_mirror_source_config_set": ["security.protocol=SSL", "ssl.ca.location=ca.pem"]})
    assert s.source_client["ssl.ca.location"] == str(tmp_path / "ca.pem")


def test_no_client_properties_by_default() -> None:
    s = _resolve()
    assert dict(s.source_client) == {} and dict(s.target_client) == {}


def test_an_unknown_librdkafka_key_names_the_option_and_the_key() -> None:
    with pytest.raises(SettingsError, match=r"^--kafka-mirror-target-config-set: 'sasl.mechanism.typo' is not a "
                                            r"librdkafka client property"):
        _resolve({TARGET_SET.dest: [TARGET_SET.parse("sasl.mechanism.typo=PLAIN")]})
    with pytest.raises(SettingsError, match=r"librdkafka refuses these properties: Java TrustStores are not supported"):
        _resolve({TARGET_SET.dest: [TARGET_SET.parse("ssl.truststore.location=/x.jks")]})
    with pytest.raises(SettingsError, match=r"librdkafka refuses these properties: Java JAAS configuration is not "
                                            r"supported") as e:
        _resolve({TARGET_SET.dest: [TARGET_SET.parse(f"sasl.jaas.config=x required password=\"{PASSWORD}\";")]})
    assert PASSWORD not in str(e.value)


def test_a_refused_value_names_the_property_without_echoing_values() -> None:
    with pytest.raises(SettingsError, match=r"ini key kafka_mirror_source_config_set: librdkafka refuses .*security.protocol") as e:
        _resolve(ini={"kafka_mirror_source_config_set": ["security.protocol=SASL_NOPE", f"sasl.password={PASSWORD}"]})
    assert PASSWORD not in str(e.value)


def test_a_missing_file_or_a_bad_setting_names_its_source(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"^env KAFKA_MIRROR_SOURCE_CONFIG: '.*missing.properties': no such file"):
        _resolve(env={"KAFKA_MIRROR_SOURCE_CONFIG": str(tmp_path / "missing.properties")})
    with pytest.raises(SettingsError, match=r"^ini key kafka_mirror_target_config_set: a client property is KEY=VALUE"):
        _resolve(ini={"kafka_mirror_target_config_set": [PASSWORD]})
    with pytest.raises(ValueError, match="a client property is KEY=VALUE") as e:
        SOURCE_SET.parse(PASSWORD)  # the command line: argparse reports the flag with this text
    assert PASSWORD not in str(e.value)


# ----------------------------------------------------------------------------- masking
@pytest.mark.parametrize("key", ["sasl.password", "ssl.key.password", "ssl.keystore.password", "sasl.jaas.config",
                                 "sasl.oauthbearer.client.secret", "source.sasl.jaas.config", "ssl.keystore.key",
                                 "target.producer.ssl.truststore.password"])
def test_secret_keys(key: str) -> None:
    assert is_secret(key)
    assert masked({key: "v", "sasl.username": "alice"}) == {key: MASK, "sasl.username": "alice"}


@pytest.mark.parametrize("key", ["sasl.username", "security.protocol", "ssl.ca.location", "ssl.keystore.location"])
def test_not_secret(key: str) -> None:
    assert not is_secret(key)


def test_redact_masks_every_given_secret() -> None:
    assert redact(f"login failed for alice:{PASSWORD}.", [PASSWORD]) == f"login failed for alice:{MASK}."
    assert ClientProperties(SECURED).secrets() == [PASSWORD]


# ----------------------------------------------------------------------------- the registry
def test_every_client_of_a_registered_cluster_gets_its_properties() -> None:
    _clientconf.register("127.0.0.1:1,127.0.0.1:2", SECURED)
    config = with_logger({"bootstrap.servers": "127.0.0.1:2", "sasl.username": "bob"})
    assert config["sasl.password"] == PASSWORD and config["security.protocol"] == "SASL_SSL"
    assert config["sasl.username"] == "bob"  # the client's own keys win
    assert "security.protocol" not in with_logger({"bootstrap.servers": "127.0.0.1:3"})
    assert redact(f"x {PASSWORD} y") == f"x {MASK} y"  # every registered secret


def test_child_processes_find_the_registry_in_a_private_file() -> None:
    _clientconf.register("127.0.0.1:4", SECURED)
    path = Path(os.environ[_clientconf.ENV])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    code = ("import json; from pytest_kafka_mirror._kafkalog import with_logger; "
            "c = with_logger({'bootstrap.servers': '127.0.0.1:4'}); c.pop('logger'); print(json.dumps(c))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(out.stdout) == {"bootstrap.servers": "127.0.0.1:4", **SECURED}


# ----------------------------------------------------------------------------- Java names
def test_scram_and_a_pem_truststore_in_java_names(tmp_path: Path) -> None:
    java, left = java_client_properties({**SECURED, "sasl.password": 'p"w\\x', "ssl.ca.location": "/ca.pem",
                                         "security.protocol": "sasl_ssl", "client.id": "c"})
    assert java == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "client.id": "c",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
                            'password="p\\"w\\\\x";',
        "ssl.truststore.location": "/ca.pem", "ssl.truststore.type": "PEM"}
    assert left == []


def test_plain_a_pem_keystore_and_no_verification(tmp_path: Path) -> None:
    (tmp_path / "c.pem").write_text("-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----\n")
    (tmp_path / "k.pem").write_text("-----BEGIN PRIVATE KEY-----\nBBB\n-----END PRIVATE KEY-----\n")
    java, left = java_client_properties({"sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p",
                                         "ssl.certificate.location": str(tmp_path / "c.pem"),
                                         "ssl.key.location": str(tmp_path / "k.pem"),
                                         "enable.ssl.certificate.verification": "false",
                                         "queue.buffering.max.ms": "5", "sasl.oauthbearer.client.id": "x"})
    assert java["sasl.jaas.config"].startswith("org.apache.kafka.common.security.plain.PlainLoginModule required")
    assert java["ssl.keystore.type"] == "PEM" and "BBB" in java["ssl.keystore.key"]
    assert java["ssl.keystore.certificate.chain"].startswith("-----BEGIN CERTIFICATE-----")
    assert java["ssl.endpoint.identification.algorithm"] == ""
    assert sorted(left) == ["queue.buffering.max.ms", "sasl.oauthbearer.client.id"]


def test_a_user_without_a_mechanism_is_left_untranslated() -> None:
    java, left = java_client_properties({"sasl.username": "u", "sasl.password": PASSWORD})
    assert java == {} and left == ["sasl.username", "sasl.password"]  # GSSAPI (librdkafka's default) has no user


def test_mm2_renders_each_clusters_properties_under_its_alias() -> None:
    props = render_mm2_properties(source_bootstrap="a:1", target_bootstrap="b:2", topics="km-.*", source_alias="east",
                                  target_alias="west", source_client={**SECURED, "ssl.ca.location": "/ca.pem"},
                                  target_client={"security.protocol": "SSL"},
                                  overrides=[("west.security.protocol", "SASL_SSL")])
    assert props["east.security.protocol"] == "SASL_SSL" and props["east.sasl.mechanism"] == "SCRAM-SHA-512"
    assert PASSWORD in props["east.sasl.jaas.config"] and props["east.ssl.truststore.type"] == "PEM"
    assert props["west.security.protocol"] == "SASL_SSL"  # --kafka-mirror-replicator-properties wins
    assert not any(k.startswith(("east.sasl.password", "east.sasl.username")) for k in props)


def test_mm2_writes_its_secrets_to_a_0600_file_and_warns_of_untranslated_keys(tmp_path: Path) -> None:
    source = unstarted_cluster("127.0.0.1:1", replication_factor=1,
                             client_properties={**SECURED, "queue.buffering.max.ms": "5"})
    target = unstarted_cluster("127.0.0.1:2", replication_factor=1, name="target")
    with pytest.warns(PytestKafkaMirrorWarning, match=r"source cluster's client properties queue.buffering.max.ms "
                                                      r"have no Java client equivalent") as record:
        rep = MirrorMaker2(source, target, tmp_path, topic_prefix="km-gw0",  # type: ignore[arg-type]
                           release=KafkaRelease(Path("/nowhere"), (4, 3, 1)))
    assert all("5" not in str(w.message).split("equivalent")[0] for w in record)
    path = rep.render()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert PASSWORD in parse_properties(path.read_text())["source.sasl.jaas.config"]
    plain = MirrorMaker2(target, target, tmp_path / "plain", topic_prefix="km-gw0",  # type: ignore[arg-type]
                         release=KafkaRelease(Path("/nowhere"), (4, 3, 1)))
    assert stat.S_IMODE(plain.render().stat().st_mode) == 0o644  # no secret: readable by a container's user


def test_warn_untranslated_is_silent_without_properties() -> None:
    assert warn_untranslated("MirrorMaker 2", {"source": unstarted_cluster("127.0.0.1:1")}) == []


def test_mm1_gives_the_consumer_and_producer_their_clusters_properties() -> None:
    consumer, producer, _ = render_mm1(source_bootstrap="a:1", target_bootstrap="b:2", group_id="g",
                                       source_client=SECURED, target_client={"security.protocol": "SSL"})
    assert consumer["security.protocol"] == "SASL_SSL" and PASSWORD in consumer["sasl.jaas.config"]
    assert producer["security.protocol"] == "SSL" and "sasl.jaas.config" not in producer


# ----------------------------------------------------------------------------- the sasl_ssl backend
def test_sasl_ssl_server_properties_and_scram_user(tmp_path: Path) -> None:
    sec = SecurityFiles(tmp_path)
    text = render_server_properties(node_id=1, port=41001, controller_port=41002, log_dir=tmp_path, version=(4, 3, 1),
                                    link=(41005, 41006), security=sec)
    props = parse_properties(text)
    assert props["listeners"] == (f"CLIENT://127.0.0.1:41001,CONTROLLER://127.0.0.1:41002,"
                                  f"INTERNAL://127.0.0.1:{sec.internal_port},LINK://127.0.0.1:41006")
    assert props["listener.security.protocol.map"] == ("CONTROLLER:PLAINTEXT,CLIENT:SASL_SSL,INTERNAL:PLAINTEXT,"
                                                       "LINK:SASL_SSL")
    assert props["inter.broker.listener.name"] == "INTERNAL"
    assert props["ssl.keystore.type"] == "PEM" and Path(props["ssl.keystore.location"]).is_file()
    for listener in ("client", "link"):
        assert "ScramLoginModule" in props[f"listener.name.{listener}.scram-sha-512.sasl.jaas.config"]
    assert sec.password not in text
    assert stat.S_IMODE(Path(props["ssl.keystore.location"]).stat().st_mode) == 0o600
    argv = storage_format_argv("ID", "p", (4, 3, 1), scram=(sec.user, sec.password))
    assert argv[argv.index("--add-scram") + 1] == f"SCRAM-SHA-512=[name=kafka-mirror,password={sec.password}]"
    client = sec.client_properties()
    assert client["security.protocol"] == "SASL_SSL" and client["ssl.ca.location"] == str(sec.tls.ca)


# ----------------------------------------------------------------------------- the stages outside pytest
def test_the_stages_take_a_client_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from pytest_kafka_mirror.cli.stages import _register_client_config, add_stage_commands

    parser = argparse.ArgumentParser()
    add_stage_commands(parser.add_subparsers())
    f = tmp_path / "c.properties"
    f.write_text("security.protocol=SASL_SSL\nsasl.mechanisms=PLAIN\nsasl.username=u\n")
    args = parser.parse_args(["capture", "--bootstrap", "127.0.0.1:7", "--run-dir", str(tmp_path), "--topics", "t",
                              "--client-config", str(f), "--client-config-set", f"sasl.password={PASSWORD}"])
    assert _register_client_config(args, "capture")
    assert with_logger({"bootstrap.servers": "127.0.0.1:7"})["sasl.password"] == PASSWORD
    bad = parser.parse_args(["capture", "--bootstrap", "127.0.0.1:8", "--run-dir", str(tmp_path), "--topics", "t",
                             "--client-config-set", "sasl.mechanism.typo=x"])
    assert not _register_client_config(bad, "capture")
    assert "kafka-mirror capture: --client-config / --client-config-set: 'sasl.mechanism.typo' is not a librdkafka" \
        in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args(["produce", "--bootstrap", "b:1", "--run-dir", "d", "--topics", "t", "--rate", "1",
                           "--client-config", str(tmp_path / "missing")])
    assert "no such file" in capsys.readouterr().err


def test_an_authentication_failure_is_one_line_naming_the_cluster_and_its_options() -> None:

    third = BootstrapCluster("third", "127.0.0.1:9")
    assert third.auth_failure() is None
    _clientconf.register("127.0.0.1:10", SECURED)
    third._auth_error = (f"sasl_ssl://127.0.0.1:9/bootstrap: SASL authentication error: Authentication failed\n"
                         f"for {PASSWORD} (after 312ms in state AUTH_REQ)")
    # nothing known of its properties: each named as librdkafka takes it unset, and the options that set them
    assert third.auth_failure() == (
        f"third: authentication failed at 127.0.0.1:9: SASL authentication error: Authentication failed for {MASK}. "
        "Hint: check the third cluster's SASL client properties: sasl.mechanisms not set: GSSAPI, sasl.username not "
        "set, sasl.password not set, security.protocol not set: PLAINTEXT (given with --kafka-mirror-target-config, "
        "--kafka-mirror-target-config-set)")


class _Err:
    """What librdkafka hands ``error_cb``."""

    def __init__(self, code: int, text: str) -> None:
        self._code, self._text = code, text

    def code(self) -> int:
        return self._code

    def str(self) -> str:
        return self._text


#: librdkafka 2.x's own texts, as its error_cb gave them (measured: a TLS listener of
#: tests' CA, a plaintext one, a Kafka 4.3.1 SASL_SSL listener with a wrong password)
_CERT = ("ssl://127.0.0.1:9/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: "
         "broker certificate could not be verified, verify that ssl.ca.location is correctly configured or root CA "
         "certificates are installed (install ca-certificates package) (after 1ms in state SSL_HANDSHAKE)")
_CERT_TRANSPORT = ("ssl://127.0.0.1:9/bootstrap: error:0A000086:SSL routines::certificate verify failed (after 1ms in "
                   "state SSL_HANDSHAKE)")
_TO_PLAINTEXT = ("ssl://127.0.0.1:9/bootstrap: SSL handshake failed: Disconnected: connection reset by peer: connecting "
                 "to a PLAINTEXT broker listener? (after 0ms in state SSL_HANDSHAKE)")
_SASL = ("sasl_ssl://127.0.0.1:9/bootstrap: SASL authentication error: Authentication failed during authentication due "
         "to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 302ms in state AUTH_REQ)")
_REFUSED = "127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: Connection refused (after 0ms in state CONNECT)"


@pytest.mark.parametrize("code,text,kind", [
    ("_AUTHENTICATION", _SASL, "sasl"), ("_SSL", _CERT, "tls"), ("_TRANSPORT", _CERT_TRANSPORT, "tls"),
    ("_TRANSPORT", _TO_PLAINTEXT, "protocol"),
    ("_TRANSPORT", "127.0.0.1:9/bootstrap: Disconnected while requesting ApiVersion: might be caused by incorrect "
                   "security.protocol configuration (connecting to a SSL listener?) or broker version is < 0.10 (see "
                   "api.version.request) (after 3ms in state APIVERSION_QUERY)", "protocol"),
    # no TLS to a SASL_SSL listener of Kafka 4.3.1: librdkafka 2.x says nothing to error_cb but this
    ("_ALL_BROKERS_DOWN", "0/1 brokers are down", None),
    ("_TRANSPORT", _REFUSED, None), ("_ALL_BROKERS_DOWN", "1/1 brokers are down", None),
])
def test_the_kind_of_a_client_failure(code: str, text: str, kind: str | None) -> None:
    from confluent_kafka import KafkaError

    from pytest_kafka_mirror.clusters._auth import failure_kind

    assert failure_kind(getattr(KafkaError, code), text) == kind


def _secured(kind_props: dict[str, str], origins: dict[str, str]) -> BootstrapCluster:
    cluster = BootstrapCluster("source", "127.0.0.1:9")
    cluster.set_client_properties(kind_props, origins)
    return cluster


FILE = "/home/u/primary-client.properties via ini key kafka_mirror_source_config"


@pytest.mark.parametrize("errors,line", [
    # a wrong password: the SASL properties, each with where it came from, the secret masked
    ([("_TRANSPORT", _REFUSED), ("_AUTHENTICATION", _SASL)],
     "source: authentication failed at 127.0.0.1:9: SASL authentication error: Authentication failed during "
     "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512. Hint: check the source cluster's "
     f"SASL client properties: sasl.mechanisms=SCRAM-SHA-512, sasl.username=alice, security.protocol=SASL_SSL (from "
     f"{FILE}); sasl.password={MASK} (from --kafka-mirror-source-config-set)"),
    # a broker certificate the CA did not sign: the TLS properties; librdkafka's detailed error kept over its short one
    ([("_TRANSPORT", _CERT_TRANSPORT), ("_SSL", _CERT), ("_TRANSPORT", _CERT_TRANSPORT)],
     "source: TLS handshake failed at 127.0.0.1:9: SSL handshake failed: error:0A000086:SSL routines::certificate "
     "verify failed: broker certificate could not be verified, verify that ssl.ca.location is correctly configured "
     "or root CA certificates are installed (install ca-certificates package). Hint: check the source cluster's TLS "
     "client properties: ssl.ca.location=/etc/other-ca.pem (from env KAFKA_MIRROR_SOURCE_CONFIG_SET); "
     f"security.protocol=SASL_SSL (from {FILE}); ssl.ca.location must hold the CA that signed the broker's "
     "certificate"),
    # TLS to a plaintext listener: security.protocol
    ([("_TRANSPORT", _TO_PLAINTEXT)],
     "source: 127.0.0.1:9 closed the connection before answering: SSL handshake failed: Disconnected: connection "
     "reset by peer: connecting to a PLAINTEXT broker listener? Hint: check the source cluster's security client "
     f"properties: security.protocol=SASL_SSL (from {FILE})"),
])
def test_each_kind_of_failure_names_its_properties_and_where_they_came_from(errors: list[tuple[str, str]],
                                                                          line: str) -> None:
    from confluent_kafka import KafkaError

    cluster = _secured({**SECURED, "sasl.mechanisms": "SCRAM-SHA-512", "ssl.ca.location": "/etc/other-ca.pem"},
                       {**dict.fromkeys(SECURED, FILE), "sasl.password": "--kafka-mirror-source-config-set",
                        "ssl.ca.location": "env KAFKA_MIRROR_SOURCE_CONFIG_SET"})
    for code, text in errors:
        cluster._on_error(_Err(getattr(KafkaError, code), text))
    assert cluster.auth_failure() == line
    assert PASSWORD not in line and "address" not in line and "is up" not in line
    # librdkafka's guess of a wrong protocol words the message, but never ends a start-up early
    assert (cluster.auth_failure(definite=True) is None) == (errors[-1][1] == _TO_PLAINTEXT)


def test_the_origins_of_each_client_property(tmp_path: Path) -> None:
    f = tmp_path / "primary-client.properties"
    f.write_text("security.protocol=SASL_SSL\nsasl.mechanisms=SCRAM-SHA-512\nsasl.username=alice\nsasl.password=old\n")
    s = _resolve({SOURCE_SET.dest: [SOURCE_SET.parse(f"sasl.password={PASSWORD}")]},
                 ini={"kafka_mirror_source_config": str(f)}, env={"KAFKA_MIRROR_TARGET_CONFIG_SET": "client.id=t"})
    in_file = f"{f} via ini key kafka_mirror_source_config"
    assert s.source_client_origins == {"security.protocol": in_file, "sasl.mechanisms": in_file,
                                       "sasl.username": in_file, "sasl.password": "--kafka-mirror-source-config-set"}
    assert s.target_client_origins == {"client.id": "env KAFKA_MIRROR_TARGET_CONFIG_SET"}


@pytest.fixture
def listener(tmp_path: Path) -> Any:
    """``listener(tls)``: the port of a local listener that accepts, does a TLS handshake
    with the certificate of a CA of its own (``tls``) or none, then closes."""
    import socket
    import ssl
    import threading

    from pytest_kafka_mirror.clusters._tls import make_tls_files

    files = make_tls_files(tmp_path / "broker")
    sockets: list[socket.socket] = []

    def start(tls: bool) -> int:
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        sockets.append(server)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(files.broker))

        def serve() -> None:
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                try:
                    if tls:
                        conn = context.wrap_socket(conn, server_side=True)
                    conn.recv(64)
                except (OSError, ssl.SSLError):
                    pass
                finally:
                    conn.close()

        threading.Thread(target=serve, daemon=True).start()
        return int(server.getsockname()[1])

    yield start
    for s in sockets:
        s.close()


def test_a_bootstrap_cluster_that_answers_but_refuses_the_client_is_not_told_to_check_its_address(
        tmp_path: Path, listener: Any) -> None:
    """Real librdkafka against real listeners (no Kafka needed: the failures come before any
    Kafka request): a CA that did not sign the broker's certificate, TLS to a plaintext
    listener, and nothing listening, which alone gets the address hint."""
    from pytest_kafka_mirror.clusters._tls import make_tls_files
    from pytest_kafka_mirror.clusters.base import ClusterAuthError, ClusterError

    other_ca = make_tls_files(tmp_path / "other").ca
    tls, plain = listener(True), listener(False)
    wrong_ca = BootstrapCluster("source", f"127.0.0.1:{tls}", connect_timeout=2)
    wrong_ca.set_client_properties({"security.protocol": "SSL", "ssl.ca.location": str(other_ca)},
                                   {"security.protocol": FILE, "ssl.ca.location": "--kafka-mirror-source-config-set"})
    with pytest.raises(ClusterAuthError) as e:
        wrong_ca.start()
    text = str(e.value)
    assert text.startswith(f"source: TLS handshake failed at 127.0.0.1:{tls}: SSL handshake failed: ") \
        and "certificate verify failed" in text, text
    assert (f"Hint: check the source cluster's TLS client properties: ssl.ca.location={other_ca} "
            f"(from --kafka-mirror-source-config-set); security.protocol=SSL (from {FILE})" in text), text
    assert "check the address" not in text and "\n" not in text
    to_plain = BootstrapCluster("source", f"127.0.0.1:{plain}", connect_timeout=2)
    to_plain.set_client_properties({"security.protocol": "SSL"}, {"security.protocol": FILE})
    with pytest.raises(ClusterAuthError, match=r"connecting to a PLAINTEXT broker listener\? Hint: check the source "
                                               r"cluster's security client properties: security.protocol=SSL \(from ") as e:
        to_plain.start()
    assert "check the address" not in str(e.value)
    with pytest.raises(ClusterError, match=r"no answer from bootstrap servers .* Hint: check the address given to "
                                           r"--kafka-mirror-source \(bootstrap:HOST:PORT\) and that the cluster is up"):
        BootstrapCluster("source", "127.0.0.1:1", connect_timeout=1).start()


def test_the_report_header_shows_the_properties_masked(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--co", "--kafka-mirror-source-config-set",
                                          "security.protocol=SASL_SSL", "--kafka-mirror-source-config-set",
                                          "sasl.mechanisms=PLAIN", "--kafka-mirror-source-config-set=sasl.username=alice",
                                          f"--kafka-mirror-source-config-set=sasl.password={PASSWORD}")
    header = (f"kafka-mirror: source client properties: security.protocol=SASL_SSL, sasl.mechanisms=PLAIN, "
              f"sasl.username=alice, sasl.password={MASK}")
    result.stdout.fnmatch_lines([header])
    assert PASSWORD not in result.stdout.str() and "target client properties" not in result.stdout.str()
