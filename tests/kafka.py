"""Apache Kafka releases for the plugin's own tests.

* :func:`release_or_skip` resolves a real release from Maven Central into the plugin's
  cache (``kafka-mirror kafka install``), once per machine: the ``kafka-home:``,
  ``kafka:``, ``mm2:`` and ``mm1:`` tests run the real broker, MirrorMaker 2 and the
  legacy MirrorMaker.  Without Maven or a reachable registry they skip with the reason,
  or fail when ``KAFKA_MIRROR_REQUIRE_KAFKA=1`` (CI).
* :func:`fake_release` makes a directory that *looks* like a release (``libs/`` with
  empty jars of the right names) for the tests of spec parsing and rendering, which never
  start a process.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_kafka_mirror.clusters.kafka_dist import KafkaInstallError, KafkaRelease, cache_dir, release

__all__ = ["KAFKA_VERSION", "MM1_VERSION", "REQUIRE_KAFKA_ENV", "fake_release", "release_or_skip"]

#: the release the tests run (CI's current one); KAFKA_MIRROR_TEST_KAFKA picks another
KAFKA_VERSION = os.environ.get("KAFKA_MIRROR_TEST_KAFKA", "4.3.1")
#: the last release with the legacy MirrorMaker (kafka.tools.MirrorMaker)
MM1_VERSION = os.environ.get("KAFKA_MIRROR_TEST_MM1", "3.9.1")
#: CI sets it (see .ci/run): the real-Kafka tests then fail instead of skipping
REQUIRE_KAFKA_ENV = "KAFKA_MIRROR_REQUIRE_KAFKA"


def release_or_skip(version: str = KAFKA_VERSION, need: str = "broker") -> KafkaRelease:
    """The cached release ``version`` (installed with Maven on first use)."""
    try:
        return release(version, cache_dir(), need=need)
    except KafkaInstallError as exc:
        if os.environ.get(REQUIRE_KAFKA_ENV) == "1":
            pytest.fail(f"{REQUIRE_KAFKA_ENV}=1 but {exc}", pytrace=False)
        pytest.skip(str(exc))


def fake_release(root: str | os.PathLike[str], version: str = "3.9.0", *, mm2: bool = True) -> Path:
    """A directory with the jar names of Apache Kafka ``version`` (empty files): enough to
    parse specs and render configurations, nothing to run."""
    libs = Path(root) / f"kafka-{version}" / "libs"
    libs.mkdir(parents=True, exist_ok=True)
    names = [f"kafka_2.13-{version}.jar", f"kafka-clients-{version}.jar"]
    if mm2:
        names += [f"connect-runtime-{version}.jar", f"connect-mirror-{version}.jar",
                  f"connect-mirror-client-{version}.jar"]
    for name in names:
        (libs / name).write_bytes(b"")
    return libs.parent
