"""The regression catalogue: a real MirrorMaker 2 broken on purpose, one setting at a time.

An upgrade or a config change can switch off what a scenario covers.  Each case runs the
scenario that covers a feature, unchanged (copied from ``scenarios/``), on ``kafka:``
clusters through ``mm2:`` with one setting that breaks the feature
(``--kafka-mirror-replicator-properties``, as a user's or an upgrade's configuration would),
and expects the scenario to fail with a message that names the cause: the setting in
effect and where it came from, or what MM2 says of its tasks.  A gate that passes such a
run, or fails it with a symptom only, is what this catalogue exists to catch.

The checkpoints case (an MM2 that stops checkpointing: the worst miss a gate can have) runs
on every commit; the others are ``nightly`` (``python -m pytest tests -m nightly``): each
is a whole pytest session that starts two Kafka brokers, an MM2 and a Spark JVM (2-8
minutes on a loaded 2-core machine), which CI's time budget cannot hold for all of them.  docs/scenarios.md's table of features says which
setting catches each feature (its "caught when broken by" column), from these runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.kafka import KAFKA_VERSION

pytestmark = pytest.mark.integration

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
#: where a property given on the command line comes from, as the failure quotes it
GIVEN = re.escape("(--kafka-mirror-replicator-properties)")


@dataclass(frozen=True)
class Breakage:
    """One setting that breaks one feature, the scenario that covers it, and the cause its
    failure must name (a regex over pytest's output)."""

    feature: str
    setting: str  # KEY=VALUE, given as the user's replicator property
    scenario: str  # FILE::TEST of scenarios/
    cause: str
    nightly: bool = True

    @property
    def id(self) -> str:
        return self.setting.split("=", 1)[0].replace("source->target.", "flow.")


CATALOGUE = [
    Breakage("offset translation, failover", "emit.checkpoints.enabled=false",
             "test_failover.py::test_failover_after_steady_state",
             r"nothing to fail over with \(checkpoints\): emit\.checkpoints\.enabled=false " + GIVEN
             + r": the replicator writes no checkpoints\n.*falls back to auto\.offset\.reset", nightly=False),
    Breakage("offset translation, failover", "emit.heartbeats.enabled=false",
             "test_failover.py::test_failover_after_steady_state",
             r"no replicated heartbeats to check: emit\.heartbeats\.enabled=false " + GIVEN),
    Breakage("offset translation, failover", "emit.offset-syncs.enabled=false",
             "test_failover.py::test_failover_after_steady_state",
             r"nothing to fail over with \(checkpoints\): emit\.offset-syncs\.enabled=false " + GIVEN
             + r": MirrorMaker 2 runs no checkpoint connector without offset syncs"),
    Breakage("offset translation, failover", "source->target.groups.exclude=.*",
             "test_failover.py::test_failover_after_steady_state",
             r"no translation: .*\n.*why: the group filter leaves out the witness groups .*source->target\.groups"
             r"\.exclude=\.\* " + GIVEN),
    Breakage("group offset sync", "source->target.sync.group.offsets.enabled=false",
             "test_group_sync.py::test_group_sync_moves_idle_groups_only",
             r"group offset sync: nothing to check: source->target\.sync\.group\.offsets\.enabled=false " + GIVEN),
    Breakage("group offset sync", "sync.group.offsets.interval.seconds=600",
             "test_group_sync.py::test_group_sync_moves_idle_groups_only",
             r"was not synced to the target in 60 s: .*sync\.group\.offsets\.interval\.seconds=600 " + GIVEN),
    Breakage("topic config sync", "sync.topic.configs.enabled=false", "test_config_sync.py::test_topic_config_sync",
             r"topic config sync: nothing to check: sync\.topic\.configs\.enabled=false " + GIVEN),
    Breakage("topic config sync", r"config.properties.exclude=retention\.ms",
             "test_config_sync.py::test_topic_config_sync",
             r"did not reach .* config\.properties\.exclude=retention\\\.ms " + GIVEN),
    Breakage("new topics, partition growth", "refresh.topics.interval.seconds=300",
             "test_topology.py::test_new_topic_discovered_mid_run",
             r"never appeared on the target: the replicator looks for new topics every "
             r"refresh\.topics\.interval\.seconds=300 " + GIVEN),
    Breakage("delivery, order, latency", "source->target.topics.exclude=.*",
             "test_steady_state.py::test_steady_state",
             r"Hint: the replicator's topic filter does not take .*source->target\.topics\.exclude=\.\* " + GIVEN),
    Breakage("delivery, order, latency", "target.producer.max.request.size=100000",
             "test_message_shapes.py::test_large_messages_1mb",
             r"FAILED.*RecordTooLargeException"),
    Breakage("transactions on the source", "source.consumer.isolation.level=read_committed",
             "test_transactions.py::test_source_transactions[default]",
             r"source\.consumer\.isolation\.level=read_committed " + GIVEN),
    Breakage("metadata damage", "header.converter=org.apache.kafka.connect.storage.SimpleHeaderConverter",
             "test_steady_state.py::test_steady_state",
             r"metadata damaged: [\s\S]*the replicator's settings behind it .*header\.converter="
             r"org\.apache\.kafka\.connect\.storage\.SimpleHeaderConverter " + GIVEN),
    Breakage("compacted topics", r"config.properties.exclude=cleanup\.policy",
             "test_compacted.py::test_compacted_topic",
             r"cleanup\.policy=.* config\.properties\.exclude=cleanup\\\.policy " + GIVEN),
]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=[pytest.mark.nightly] if c.nightly else [])
                                  for c in CATALOGUE])
def test_a_mirrormaker_broken_through_its_settings_fails_the_scenario_naming_the_cause(
        case: Breakage, pytester: pytest.Pytester, tagged_env: str, kafka_release: object) -> None:
    from tests.conftest import processes_tagged

    file, test = case.scenario.split("::", 1)
    pytester.makeconftest((SCENARIOS / "conftest.py").read_text())
    pytester.makepyfile(**{Path(file).stem: (SCENARIOS / file).read_text()})
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"{file}::{test}", "--kafka-mirror-progress=off",
        f"--kafka-mirror-source=kafka:{KAFKA_VERSION}", f"--kafka-mirror-target=kafka:{KAFKA_VERSION}",
        f"--kafka-mirror-replicator=mm2:{KAFKA_VERSION}", f"--kafka-mirror-replicator-properties={case.setting}")
    outcomes = result.parseoutcomes()
    output = result.stdout.str()
    said = "\n".join(line for line in output.splitlines() if line.startswith("E ") and "] INFO " not in line)
    assert outcomes.get("failed", 0) + outcomes.get("errors", outcomes.get("error", 0)) >= 1, (
        f"{case.scenario} passed with {case.setting}: the gate does not catch it\n{output[-3000:]}")
    assert re.search(case.cause, output), (
        f"the failure does not name the cause /{case.cause}/; it says:\n{said[:8000] or output[-6000:]}")
    assert processes_tagged(tagged_env) == []
