"""Hooks pytest-kafka-mirror offers to ``conftest.py`` files and plugins.

Registered by ``plugin.pytest_addhooks``; implement them in a ``conftest.py`` like any
pytest hook.
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["pytest_kafka_mirror_run_metadata"]


@pytest.hookspec
def pytest_kafka_mirror_run_metadata(config: pytest.Config, metadata: dict[str, Any]) -> None:
    """Add entries to the ``metadata`` of the session's stored run.

    Called once per session, on the xdist controller (or the only process), before the
    run is saved (``--kafka-mirror-save`` / ``--kafka-mirror-autosave``), compared, and
    written to ``REPORT_DIR/session.json``.  Values must be JSON-serialisable.  Use it to
    record what the figures depend on and the plugin cannot know, such as the version of
    the replicator under test, so that a comparison shows what changed::

        # conftest.py
        import os

        def pytest_kafka_mirror_run_metadata(config, metadata):
            metadata["replicator_version"] = os.environ.get("MM2_VERSION", "unknown")
            metadata["ci_job"] = os.environ.get("CI_JOB_ID")

    .. versionadded:: 0.1.0
    """
