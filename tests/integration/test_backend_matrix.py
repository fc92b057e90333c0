"""The steady-state scenario (scenarios/test_steady_state.py, shortened, headers format)
on every backend this machine can run, through the plugin as a user runs it (a pytester
subprocess with the backend options).  A backend that cannot run here is skipped with
the reason.

One pytester session costs ~30-70 s here (a cold Spark), so cases combine backends: the
Docker case also runs the command-template replicator.  The embedded default
(tansu + reference) runs in tests/integration/test_plugin.py.

Each case also checks that nothing it started is left: no process carrying the test's
tag, no container labelled with its run id.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import TAG_ENV, containers_labelled, processes_tagged, require_docker

pytestmark = pytest.mark.integration

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "test_steady_state.py"
KAFKA_IMAGE = os.environ.get("KAFKA_MIRROR_TEST_KAFKA_IMAGE", "apache/kafka:3.9.1")
REDPANDA_IMAGE = os.environ.get("KAFKA_MIRROR_TEST_REDPANDA_IMAGE", "redpandadata/redpanda:v24.2.4")
REFERENCE_TEMPLATE = (
    f"exec {shlex.quote(sys.executable)} -m pytest_kafka_mirror.replicators.reference "
    "--source {source} --target {target} --topics {topics}"
)


def short_scenario() -> str:
    """The shipped steady-state scenario with a shorter load (its own assertions unchanged)."""
    text = SCENARIO.read_text()
    text, n_rate = re.subn(r"(?m)^RATE = \d+", "RATE = 200", text)
    text, n_dur = re.subn(r"(?m)^DURATION = \d+", "DURATION = 2", text)
    assert n_rate == n_dur == 1, "scenarios/test_steady_state.py no longer defines RATE / DURATION"
    return text


def _image_or_skip(image: str) -> None:
    require_docker()
    from pytest_kafka_mirror.processes.docker import image_present

    if not image_present(image):
        pytest.skip(f"image {image} is not present on the Docker engine (no registry here; `docker pull {image}` "
                    "where one is reachable)")


@dataclass
class Case:
    """How to get the options of one backend combination (skips when unavailable)."""

    id: str
    options: Callable[[pytest.FixtureRequest, Path], list[str]]


def _container_tansu_command(request: pytest.FixtureRequest, tmp: Path) -> list[str]:
    image = request.getfixturevalue("tansu_image")
    return [f"--kafka-mirror-source=container:{image}", f"--kafka-mirror-target=container:{image}",
            f"--kafka-mirror-replicator=command:{REFERENCE_TEMPLATE}"]


def _bootstrap_external(request: pytest.FixtureRequest, tmp: Path) -> list[str]:
    """Two brokers and a mirror the plugin does not own: bootstrap: clusters, external: replicator."""
    from pytest_kafka_mirror.clusters.tansu import TansuCluster
    from pytest_kafka_mirror.replicators import NamingPolicy
    from pytest_kafka_mirror.replicators.reference import ReferenceReplicator

    src, dst = TansuCluster("ext-source", tmp), TansuCluster("ext-target", tmp)
    tag = os.environ.pop(TAG_ENV, None)  # ours, not the plugin's: keep them out of the leftover check
    try:
        src.start()
        request.addfinalizer(src.stop)
        dst.start()
        request.addfinalizer(dst.stop)
        mirror = ReferenceReplicator(src.bootstrap_servers, dst.bootstrap_servers, tmp / "mirror", topics="^km-",
                                     naming=NamingPolicy("dc1."))
        mirror.start()
        request.addfinalizer(mirror.stop)
    finally:
        if tag is not None:
            os.environ[TAG_ENV] = tag
    return [f"--kafka-mirror-source=bootstrap:{src.bootstrap_servers}",
            f"--kafka-mirror-target=bootstrap:{dst.bootstrap_servers}", "--kafka-mirror-replicator=external:prefix:dc1."]


def _kafka_home_mm2(request: pytest.FixtureRequest, tmp: Path) -> list[str]:
    """The real release behind bare ``kafka-home`` and ``mm2`` specs, through --kafka-mirror-kafka-home."""
    home = request.getfixturevalue("kafka_release").home
    return [f"--kafka-mirror-kafka-home={home}", "--kafka-mirror-source=kafka-home", "--kafka-mirror-target=kafka-home",
            "--kafka-mirror-replicator=mm2"]


def _container_kafka(request: pytest.FixtureRequest, tmp: Path) -> list[str]:
    _image_or_skip(KAFKA_IMAGE)
    return [f"--kafka-mirror-source=container:{KAFKA_IMAGE}", f"--kafka-mirror-target=container:{KAFKA_IMAGE}"]


def _container_redpanda(request: pytest.FixtureRequest, tmp: Path) -> list[str]:
    _image_or_skip(REDPANDA_IMAGE)
    return [f"--kafka-mirror-source=container:{REDPANDA_IMAGE}", f"--kafka-mirror-target=container:{REDPANDA_IMAGE}"]


def _mm2_container(request: pytest.FixtureRequest, tmp: Path) -> list[str]:
    _image_or_skip(KAFKA_IMAGE)
    return [f"--kafka-mirror-replicator=mm2:container:{KAFKA_IMAGE}"]


CASES = [
    Case("container-tansu+command", _container_tansu_command),
    Case("bootstrap+external", _bootstrap_external),
    Case("kafka-home+mm2", _kafka_home_mm2),
    Case("container-apache-kafka+reference", _container_kafka),
    Case("container-redpanda+reference", _container_redpanda),
    Case("tansu+mm2-container", _mm2_container),
]


@pytest.fixture
def run_tag(tagged_env: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("KAFKA_MIRROR_RUN_ID", re.sub(r"[^A-Za-z0-9_.-]", "_", tagged_env))
    yield os.environ["KAFKA_MIRROR_RUN_ID"]


#: nightly: a whole session on the real release, 47 s alone and 130 s in CI's loaded test step, for
#: what the real-Kafka step runs on every commit through ``kafka:`` / ``mm2:`` specs (the same
#: KafkaCluster and MirrorMaker 2); the bare specs' resolution through --kafka-mirror-kafka-home
#: is a unit test (tests/unit/test_backend_config.py)
NIGHTLY = {"kafka-home+mm2"}


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=[pytest.mark.nightly] if c.id in NIGHTLY else [])
                                  for c in CASES])
def test_steady_state_on_backend(case: Case, pytester: pytest.Pytester, request: pytest.FixtureRequest,
                                 tmp_path: Path, tagged_env: str, run_tag: str) -> None:
    options = case.options(request, tmp_path)
    pytester.makepyfile(test_steady_state=short_scenario())
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", "-k", "headers", "--durations=5", *options)
    out = result.stdout.str()
    assert result.ret == 0, f"{case.id}: {' '.join(options)}\n{out[-6000:]}\n{result.stderr.str()[-3000:]}"
    result.assert_outcomes(passed=1, deselected=1)
    # the session's summary table: test, records (acknowledged), missing (lost + unseen), ...
    result.stdout.fnmatch_lines(["*kafka-mirror: 1 verified run*", "*test_steady_state?headers?  800 * 0 *"])
    [report] = [p for p in (pytester.path / ".kafka-mirror" / "reports").glob("*.json") if p.name != "session.json"]
    data = json.loads(report.read_text())
    assert (data["expected"], data["lost"], data["unseen"]) == (800, 0, 0)
    assert processes_tagged(tagged_env) == []
    if any("container" in o for o in options):
        assert containers_labelled(run_tag) == []
