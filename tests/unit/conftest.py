"""Fixtures of the unit tests: one local SparkSession shared by the whole test session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


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
