"""pytest imports every installed plugin, even for ``pytest --help`` in unrelated projects:
the entry point must not drag in the JVM bridge, Kafka clients or Docker."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pyspark", "py4j", "confluent_kafka", "pyarrow", "docker", "testcontainers", "prometheus_client")


def test_plugin_and_package_import_nothing_heavy() -> None:
    code = (
        "import sys, pytest_kafka_mirror, pytest_kafka_mirror.plugin, pytest_kafka_mirror.verify;"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""
