"""Shared helpers for the plugin's own tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Set in the environment of every pytester subprocess so its descendants can be found.
TAG_ENV = "KAFKA_MIRROR_TEST_TAG"


def processes_tagged(tag: str) -> list[str]:
    """Command lines of live processes whose environment carries ``TAG_ENV=tag``."""
    found = []
    needle = f"{TAG_ENV}={tag}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                state = (entry / "stat").read_text().split(")")[-1].split()[0]
                if state != "Z":
                    found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return found


@pytest.fixture
def tagged_env(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    """A unique tag exported to subprocesses; use processes_tagged(tag) to find leftovers."""
    tag = f"{os.getpid()}-{request.node.name}"[:80]
    monkeypatch.setenv(TAG_ENV, tag)
    return tag


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
