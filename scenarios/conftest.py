"""Scenarios are ordinary tests; the fixtures come from the pytest-kafka-mirror plugin."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "upgrade_gate: the selection `kafka-mirror gate OLD NEW -- scenarios -m upgrade_gate` runs before a "
        "replicator upgrade (steady state, a restart, a failover): see the README's upgrade gate",
    )
