"""Verification: a Spark job over manifest + capture, and the MirrorReport it returns.

Importing this package does not import pyspark (the plugin imports it on every pytest
run); Spark starts on the first :func:`verify_run` or :func:`get_spark` call.
"""

from __future__ import annotations

from pytest_kafka_mirror.verify.job import DEFAULT_BOUNDS, verify_run
from pytest_kafka_mirror.verify.report import LaneStats, LatencyStats, MirrorMismatchError, MirrorReport, MissingRange
from pytest_kafka_mirror.verify.spark import SparkSessionConflictError, SparkStartError, get_spark, stop_spark

__all__ = [
    "DEFAULT_BOUNDS",
    "LaneStats",
    "LatencyStats",
    "MirrorMismatchError",
    "MirrorReport",
    "MissingRange",
    "SparkSessionConflictError",
    "SparkStartError",
    "get_spark",
    "stop_spark",
    "verify_run",
]
