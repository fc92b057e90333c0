"""A Ctrl-C during a verification stays a Ctrl-C: the cleanups that run while it is raised
(the session settings restored, the job's views dropped) cannot put their own error in its
place (after a KeyboardInterrupt inside a py4j call the next call can fail with "Answer
from Java side is empty": a cut-short session then ended as a failed test)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_kafka_mirror.verify.job import _job_conf


class _Conf:
    def __init__(self, broken: bool) -> None:
        self.values: dict[str, str] = {"spark.master": "local[2]"}
        self.broken = broken

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        if self.broken and key in self.values:  # restoring a setting: the gateway is gone
            raise ConnectionError("Answer from Java side is empty")
        self.values[key] = value

    def unset(self, key: str) -> None:
        if self.broken:
            raise ConnectionError("Answer from Java side is empty")
        self.values.pop(key, None)


class _Spark:
    def __init__(self, broken: bool) -> None:
        self.conf = _Conf(broken)


def test_an_interrupt_is_raised_not_the_cleanup_s_error() -> None:
    spark = _Spark(broken=True)
    with pytest.raises(KeyboardInterrupt), _job_conf(spark, 1000):  # type: ignore[arg-type]
        raise KeyboardInterrupt


def test_without_an_error_a_failed_restore_is_raised() -> None:
    spark = _Spark(broken=True)
    with pytest.raises(ConnectionError, match="empty"), _job_conf(spark, 1000):  # type: ignore[arg-type]
        pass


def test_the_settings_are_restored_after_an_error() -> None:
    spark = _Spark(broken=False)
    with pytest.raises(ValueError), _job_conf(spark, 1000):  # type: ignore[arg-type]
        assert spark.conf.values["spark.sql.adaptive.enabled"] == "false"
        raise ValueError("the job failed")
    assert spark.conf.values == {"spark.master": "local[2]"}
