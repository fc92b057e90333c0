"""Benchmarks of pytest-kafka-mirror's own pipeline: ``python -m benchmarks`` (see
docs/performance.md).  Not part of the test suite: they measure, they never assert speed."""
