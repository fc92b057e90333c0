"""Shared helpers for the plugin's own tests."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from pytest_kafka_mirror.processes import jvm_cds
from pytest_kafka_mirror.processes.managed import child_env

# Import the Docker SDK before any test runs: pytester restores sys.modules after each of
# its tests, so an SDK first imported inside one (the matrix builds the image there) would
# be half unloaded afterwards ("You can only merge into CookieJar" from a re-imported
# http.cookiejar).
with contextlib.suppress(ImportError):
    import docker  # noqa: F401
    import testcontainers.core.container  # noqa: F401

# The tests never pull images: a pull is registry traffic, and this project's machines have
# none.  Inherited by pytester subprocesses.  Images come from `kafka-mirror image build`.
os.environ.setdefault("KAFKA_MIRROR_DOCKER_PULL", "0")
# The JVMs' class-data archives (processes/jvm_cds.py) stay in this machine's cache: a
# pytester run has a HOME of its own, where every run would write them anew at its exit.
os.environ.setdefault(jvm_cds.ENV, str(jvm_cds.archive_dir()))
# Every pytest or kafka-mirror process a test starts (pytester's subprocesses, the gate, the
# stages) runs this checkout, not an installed copy of another one (an editable install
# points at one checkout; a worktree or a clone beside it would test that one's code).
os.environ.update({"PYTHONPATH": child_env(None)["PYTHONPATH"]} if child_env(None) else {})
if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pytest_kafka_mirror.clusters.kafka_dist import KafkaRelease

def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``nightly`` tests run only when asked: ``-m nightly`` (any ``-m`` naming it) or
    ``KAFKA_MIRROR_NIGHTLY=1``; otherwise skipped, saying how to run them."""
    if "nightly" in (config.option.markexpr or "") or os.environ.get("KAFKA_MIRROR_NIGHTLY") == "1":
        return
    skip = pytest.mark.skip(reason="nightly (slow): python -m pytest tests -m nightly runs it")
    for item in items:
        if item.get_closest_marker("nightly") is not None:
            item.add_marker(skip)


#: Set in the environment of every pytester subprocess so its descendants can be found.
TAG_ENV = "KAFKA_MIRROR_TEST_TAG"


def processes_tagged(tag: str) -> list[str]:
    """Command lines of live processes whose environment carries ``TAG_ENV=tag``."""
    import psutil

    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(TAG_ENV) == tag and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(" ".join(proc.cmdline()))
        except psutil.Error:  # gone, or not ours to read
            continue
    return found


@pytest.fixture
def tagged_env(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    """A unique tag exported to subprocesses; use processes_tagged(tag) to find leftovers."""
    tag = f"{os.getpid()}-{request.node.name}"[:80]
    monkeypatch.setenv(TAG_ENV, tag)
    return tag


#: CI sets it (see .ci/run): the Docker tests then fail instead of skipping when no engine answers.
REQUIRE_DOCKER_ENV = "KAFKA_MIRROR_REQUIRE_DOCKER"


def require_docker() -> None:
    """Skip (or, with ``KAFKA_MIRROR_REQUIRE_DOCKER=1``, fail) unless a Docker engine answers."""
    pytest.importorskip("docker", reason="the Docker SDK is not installed (pip install 'pytest-kafka-mirror[containers]')")
    from pytest_kafka_mirror.processes.docker import engine_status

    ok, why = engine_status()
    if not ok:
        if os.environ.get(REQUIRE_DOCKER_ENV) == "1":
            pytest.fail(f"{REQUIRE_DOCKER_ENV}=1 but {why}", pytrace=False)
        pytest.skip(why)


@pytest.fixture(scope="session")
def tansu_image() -> str:
    """The local Tansu image, built the way users and CI build it (``kafka-mirror image build``)."""
    require_docker()
    from pytest_kafka_mirror.clusters.container import DEFAULT_TANSU_IMAGE  # registers its local build
    from pytest_kafka_mirror.processes.docker import ensure_image

    ensure_image(DEFAULT_TANSU_IMAGE)  # builds it when missing: FROM scratch + the static binary
    return DEFAULT_TANSU_IMAGE


def containers_labelled(run: str) -> list[str]:
    """Names of containers (any state) the plugin started under run id ``run``."""
    from pytest_kafka_mirror.processes.docker import containers

    return [c["name"] for c in containers(run)]
@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The process-wide local[2] SparkSession; a JVM start costs seconds, so it is shared."""
    pytest.importorskip("pyspark")
    from pytest_kafka_mirror.verify import get_spark, stop_spark

    session = get_spark("local[2]")
    try:
        yield session
    finally:
        stop_spark()


@pytest.fixture(scope="session")
def kafka_release() -> KafkaRelease:
    """The Apache Kafka release the tests run (tests/kafka.py: from the plugin's cache,
    resolved from Maven Central on first use), with its broker and MirrorMaker 2."""
    from tests.kafka import release_or_skip

    return release_or_skip(need="mm2")
