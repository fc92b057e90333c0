"""``mm2-connect:VERSION,strimzi=FILE``: a Strimzi ``KafkaMirrorMaker2`` resource run as
written on a Connect cluster of the real release, between two ``kafka:VERSION,security=sasl_ssl``
clusters (the resource's TLS and SCRAM users become the session's): the steady state and
the failover pass on docs/examples/strimzi-mirror-maker-2-tls.yaml, and the same resource
with a setting that leaves the tests' groups out of the checkpoints fails the failover
scenario naming that setting and its line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kafka import KAFKA_VERSION, release_or_skip

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "strimzi-mirror-maker-2-tls.yaml"
SECURED = f"kafka:{KAFKA_VERSION},security=sasl_ssl"


def _scenarios(resource: Path, tmp_path: Path, *tests: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", *tests, "-p", "no:cacheprovider", "-p", "no:randomly", "-rfEs",
         f"--kafka-mirror-source={SECURED}", f"--kafka-mirror-target={SECURED}",
         f"--kafka-mirror-replicator=mm2-connect:{KAFKA_VERSION},strimzi={resource}",
         "--kafka-mirror-report-dir", str(tmp_path / "reports"), "--kafka-mirror-progress=off"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500, check=False)


@pytest.mark.nightly  # CI runs the failover on the resource below, and these scenarios on mm2-connect
def test_the_tls_example_resource_passes_the_steady_state_and_the_failover(tmp_path: Path, tagged_env: str) -> None:
    from tests.conftest import processes_tagged

    release_or_skip(KAFKA_VERSION, need="mm2")
    done = _scenarios(EXAMPLE, tmp_path, "scenarios/test_steady_state.py",
                      "scenarios/test_failover.py::test_failover_after_steady_state")
    out = done.stdout
    assert done.returncode == 0, f"{out[-8000:]}\n{done.stderr[-3000:]}"
    assert "3 passed" in out.strip().splitlines()[-1], out[-3000:]
    # the header says what runs and what the plugin changed in the resource
    assert f"kafka-mirror: replicator your KafkaMirrorMaker2 resource {EXAMPLE}: " in out, out[:3000]
    assert "kafka-mirror: replicator changed by the plugin: line 20 dc-b.bootstrap.servers: replaced by " \
           "target.bootstrap.servers (the session's target cluster)" in out, out[:3000]
    assert processes_tagged(tagged_env) == []


def test_a_setting_that_breaks_checkpointing_fails_the_failover_naming_it(tmp_path: Path) -> None:
    release_or_skip(KAFKA_VERSION, need="mm2")
    text = EXAMPLE.read_text()
    # every group left out of the checkpoints (MM2 4.3 refuses emit.checkpoints.enabled=false on a
    # checkpoint connector at its creation: that one fails before any test)
    broken = text.replace('    groupsPattern: ".*"\n', '    groupsPattern: ".*"\n    groupsExcludePattern: ".*"\n')
    assert broken != text
    resource = tmp_path / "broken.yaml"
    resource.write_text(broken)
    done = _scenarios(resource, tmp_path, "scenarios/test_failover.py::test_failover_after_steady_state")
    out = done.stdout
    assert done.returncode == 1, f"{out[-8000:]}\n{done.stderr[-3000:]}"
    assert "1 failed" in out.strip().splitlines()[-1], out[-3000:]
    assert f"source->target.groups.exclude=.* (your KafkaMirrorMaker2 resource ({resource}))" in out, out[-8000:]
