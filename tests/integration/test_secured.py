"""Secured clusters for real (as Kafka's MirrorConnectorsIntegrationSSLTest does with TLS):
two ``kafka:VERSION,security=sasl_ssl`` clusters (SCRAM-SHA-512 over TLS with a generated CA),
MirrorMaker 2 between them, every client of the plugin on their client properties, no
password in any log or report; a wrong password fails the session start in one line."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from pytest_kafka_mirror.clusters.kafka_dist import cache_dir
from tests.kafka import KAFKA_VERSION

pytestmark = pytest.mark.integration

SECURED = f"kafka:{KAFKA_VERSION},security=sasl_ssl"


#: the release cache, read at import: pytester's runs get another HOME, where a copy of the release costs 7-10 s
CACHE = f"--kafka-mirror-kafka-cache={cache_dir()}"

SCENARIO = """
import pytest


@pytest.mark.kafka_mirror_topics(2, partitions=2)
def test_steady_state(source_cluster, target_cluster, mirror_topics, mirror_producer, mirror_verifier):
    for cluster in (source_cluster, target_cluster):
        props = cluster.client_properties
        assert props["security.protocol"] == "SASL_SSL" and props["sasl.mechanisms"] == "SCRAM-SHA-512"
        # the test learns the generated passwords, to look for them afterwards
        with open({secrets!r}, "a") as f:
            f.write(props["sasl.password"] + "\\n")
    topics = mirror_topics(2, partitions=2)
    mirror_verifier(mirror_producer(topics, rate=200, duration=3)).assert_ok()
"""

WRONG = """
def test_never_runs(mirror_topics, mirror_producer):
    open({ran!r}, "w").write("produced")
    mirror_producer(mirror_topics(1), rate=None, count=10)
"""


def _text_files(root: Path) -> list[Path]:
    """Every log, report and configuration file of a run, not the brokers' data (the
    Connect configs MM2 stores on the target are broker data, like any topic)."""
    return [p for p in root.rglob("*") if p.is_file() and "data" not in p.relative_to(root).parts
            and p.suffix in (".log", ".json", ".txt", ".properties", ".xml", ".html", ".svg", ".prom", "")]


def test_mm2_between_sasl_ssl_clusters_and_no_password_shown(pytester: pytest.Pytester, tmp_path: Path,
                                                             tagged_env: str, kafka_release: object) -> None:
    from tests.conftest import processes_tagged

    secrets = tmp_path / "secrets.txt"
    pytester.makepyfile(SCENARIO.replace("{secrets!r}", repr(str(secrets))))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", CACHE, f"--kafka-mirror-source={SECURED}", f"--kafka-mirror-target={SECURED}",
        f"--kafka-mirror-replicator=mm2:{KAFKA_VERSION}", "--kafka-mirror-drain-timeout=15", "-v", "-rA",
        "--log-level=DEBUG")
    result.assert_outcomes(passed=1)
    passwords = [line for line in secrets.read_text().splitlines() if line]
    assert len(set(passwords)) == 2  # one generated password per cluster
    shown = result.stdout.str() + result.stderr.str()
    files = _text_files(pytester.path)
    names = [p.name for p in files]
    # what is searched: MM2's configuration and log, the brokers' logs, the reports
    assert "mm2.properties" in names and "mm2-0.log" in names and "kafka.log" in names, names
    assert any(p.suffix == ".json" and "reports" in p.parts for p in files), names
    for password in passwords:
        assert password not in shown
        leaks = [p for p in files if password in p.read_text(errors="replace") and p.name != "mm2.properties"]
        assert leaks == [], leaks
    # MM2's own configuration holds them, readable by this user only
    (mm2,) = [p for p in files if p.name == "mm2.properties"]
    assert stat.S_IMODE(mm2.stat().st_mode) == 0o600 and all(pw in mm2.read_text() for pw in passwords)
    assert processes_tagged(tagged_env) == []


def test_a_wrong_password_is_one_line_naming_the_cluster_before_anything_is_produced(
        pytester: pytest.Pytester, tmp_path: Path, tagged_env: str, kafka_release: object) -> None:
    from tests.conftest import processes_tagged

    ran = tmp_path / "ran"
    pytester.makepyfile(WRONG.replace("{ran!r}", repr(str(ran))))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", CACHE, f"--kafka-mirror-source={SECURED}", f"--kafka-mirror-target={SECURED}",
        "--kafka-mirror-source-config-set=sasl.password=not-the-password", "--kafka-mirror-replicator=reference")
    result.assert_outcomes(errors=1)
    # pytest's own short summary repeats the error, in full where CI is set (it truncates it on a terminal)
    summary = next(i for i, line in enumerate(result.stdout.lines) if "short test summary info" in line)
    lines = [line for line in result.stdout.lines[:summary] if "authentication failed" in line]
    assert len(lines) == 1, result.stdout.str()
    assert lines[0].startswith(f"kafka-mirror source cluster ({SECURED}): source: authentication failed at "
                               "127.0.0.1:"), lines
    assert "SASL authentication error" in lines[0] and "SCRAM-SHA-512" in lines[0]
    # the hint: the SASL properties and where each came from, not the address (which answered)
    assert ("Hint: check the source cluster's SASL client properties: sasl.mechanisms=SCRAM-SHA-512, "
            f"sasl.username=kafka-mirror, security.protocol=SASL_SSL (from {SECURED}, which generated them); "
            "sasl.password=****** (from --kafka-mirror-source-config-set)") in lines[0], lines[0]
    assert "address" not in lines[0] and "cluster is up" not in lines[0]
    assert "not-the-password" not in result.stdout.str() + result.stderr.str()
    assert "Traceback" not in result.stdout.str() and not ran.exists()
    assert processes_tagged(tagged_env) == []


def test_your_secured_cluster_with_a_wrong_password_is_told_what_to_check(
        pytester: pytest.Pytester, tmp_path: Path, tagged_env: str, kafka_release: object) -> None:
    """A secured cluster someone else runs (``bootstrap:``), its client properties in a file
    the ini file names: a wrong password is one line whose hint names the SASL properties,
    the file and the option each came from, never the address."""
    from pytest_kafka_mirror.clusters import make_cluster
    from tests.conftest import processes_tagged

    cluster = make_cluster("source", SECURED, tmp_path / "theirs")
    try:
        cluster.start()
        props = dict(cluster.client_properties)
        (pytester.path / "primary-client.properties").write_text(
            "".join(f"{k}={v}\n" for k, v in props.items() if k != "sasl.password"))
        pytester.makeini(f"[pytest]\nkafka_mirror_source = bootstrap:{cluster.bootstrap_servers}\n"
                         "kafka_mirror_source_config = primary-client.properties\n")
        pytester.makepyfile(WRONG.replace("{ran!r}", repr(str(tmp_path / "ran"))))
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--kafka-mirror-replicator=reference",
                                               "--kafka-mirror-source-config-set=sasl.password=not-the-password")
        result.assert_outcomes(errors=1)
        summary = next(i for i, line in enumerate(result.stdout.lines) if "short test summary info" in line)
        lines = [line for line in result.stdout.lines[:summary] if "authentication failed" in line]
        assert len(lines) == 1, result.stdout.str()
        in_file = f"{pytester.path / 'primary-client.properties'} via ini key kafka_mirror_source_config"
        assert (f"source: authentication failed at {cluster.bootstrap_servers}: SASL authentication error: "
                in lines[0]), lines
        assert ("Hint: check the source cluster's SASL client properties: sasl.mechanisms=SCRAM-SHA-512, "
                f"sasl.username=kafka-mirror, security.protocol=SASL_SSL (from {in_file}); sasl.password=****** "
                "(from --kafka-mirror-source-config-set)") in lines[0], lines[0]
        assert "check the address" not in result.stdout.str() and "cluster is up" not in result.stdout.str()
        assert "not-the-password" not in result.stdout.str() + result.stderr.str()
    finally:
        cluster.stop()
    assert processes_tagged(tagged_env) == []
