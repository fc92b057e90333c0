"""Scenarios are ordinary tests; the fixtures come from the pytest-kafka-mirror plugin."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "upgrade_gate: the selection `kafka-mirror gate OLD NEW -- scenarios -m upgrade_gate` runs before a "
        "replicator upgrade (steady state, a restart, a failover): see docs/reports.md, the upgrade gate",
    )
    config.addinivalue_line(
        "markers",
        "nightly: slower variants (a control run, the rollback direction, one MM2 setting on a replicator of "
        "its own) that CI runs on real Kafka + MM2 in "
        "a nightly selection (`-m nightly`), not on every commit; the embedded default runs them always",
    )
