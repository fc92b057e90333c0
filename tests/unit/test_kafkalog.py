"""librdkafka's own log lines go to ``logging`` once (``_kafkalog``), never to stderr; the
bootstrap backend honours --kafka-mirror-startup-timeout.  No broker: an address nobody
listens on (port 1) is refused at once."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from pytest_kafka_mirror import _kafkalog
from pytest_kafka_mirror._kafkalog import LOGGER_NAME, KafkaLog, with_logger
from pytest_kafka_mirror.clusters import BackendOptions, ClusterError, make_cluster
from pytest_kafka_mirror.processes.managed import wait_until

UNREACHABLE = "127.0.0.1:1"
REFUSED = ("FAIL", "rdkafka#producer-1",
           "[thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: "
           "Connection refused (after 0ms in state CONNECT)")


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_same_message_of_a_client_is_logged_once_per_window(caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    log = KafkaLog(window=30, clock=clock)
    caplog.set_level(logging.INFO, LOGGER_NAME)
    fmt = "%s [%s] %s"  # what confluent-kafka calls the logger with
    for after in range(4):  # the same message but for the time since the state change
        log.log(logging.ERROR, fmt, REFUSED[0], REFUSED[1], REFUSED[2].replace("after 0ms", f"after {after}ms"))
    # librdkafka's own note on a repeat ("..., 1 identical error(s) suppressed)"): the same message
    assert REFUSED[2].endswith("in state CONNECT)")
    log.log(logging.ERROR, fmt, REFUSED[0], REFUSED[1],
            REFUSED[2].replace("in state CONNECT)", "in state CONNECT, 1 identical error(s) suppressed)"))
    log.log(logging.ERROR, fmt, REFUSED[0], "rdkafka#producer-2", REFUSED[2])  # another client: its own
    log.log(logging.WARNING, fmt, "REQTMOUT", REFUSED[1], "Timed out 1 in-flight requests")  # another message
    clock.now += 31
    log.log(logging.ERROR, fmt, *REFUSED)

    records = [r for r in caplog.records if r.name == LOGGER_NAME]
    assert [r.getMessage() for r in records] == [
        "rdkafka#producer-1 FAIL: " + REFUSED[2],
        "rdkafka#producer-2 FAIL: " + REFUSED[2],
        "rdkafka#producer-1 REQTMOUT: Timed out 1 in-flight requests",
        "rdkafka#producer-1 FAIL: " + REFUSED[2] + " (and 4 more like it in the last 30 s)",
    ]
    assert [r.levelno for r in records] == [logging.ERROR, logging.ERROR, logging.WARNING, logging.ERROR]


def test_with_logger_keeps_the_config_and_a_given_logger() -> None:
    conf = with_logger({"bootstrap.servers": UNREACHABLE})
    assert conf["bootstrap.servers"] == UNREACHABLE and conf["logger"] is _kafkalog.kafka_log()
    mine = logging.getLogger("mine")
    assert with_logger({"logger": mine})["logger"] is mine


def test_unreachable_bootstrap_logs_once_and_prints_nothing(capfd: pytest.CaptureFixture[str],
                                                            caplog: pytest.LogCaptureFixture,
                                                            tmp_path: Path) -> None:
    caplog.set_level(logging.INFO, LOGGER_NAME)
    refusals = ("Connection refused", UNREACHABLE)
    before = _kafkalog.kafka_log().repeats(*refusals)  # other clients of this process may have been refused too
    cluster = make_cluster("source", f"bootstrap:{UNREACHABLE}", tmp_path, BackendOptions(startup_timeout=1.5))
    with pytest.raises(ClusterError, match="no answer from bootstrap servers 127.0.0.1:1 within 1.5 s"):
        cluster.start()
    # librdkafka keeps reconnecting: nothing of that may reach stderr either.  Until a repeat of
    # the refusal was delivered (cluster.admin() serves what the client queued) and counted
    # instead of logged, the assertions below would prove nothing about the repeats.
    wait_until(lambda: cluster.admin() is not None and _kafkalog.kafka_log().repeats(*refusals) > before, 10,
               "a repeat of the refusal counted by the shared KafkaLog")
    cluster.stop()
    out, err = capfd.readouterr()
    assert "rdkafka" not in out + err and "Connection refused" not in out + err
    refused = [r for r in caplog.records if r.name == LOGGER_NAME and "Connection refused" in r.getMessage()]
    assert len(refused) == 1, [r.getMessage() for r in refused]
    assert "127.0.0.1:1" in refused[0].getMessage() and refused[0].levelno == logging.ERROR


@pytest.mark.parametrize("timeout", [1.0, 3.0])
def test_bootstrap_backend_honours_the_startup_timeout(tmp_path: Path, timeout: float) -> None:
    cluster = make_cluster("source", f"bootstrap:{UNREACHABLE}", tmp_path, BackendOptions(startup_timeout=timeout))
    t0 = time.monotonic()
    with pytest.raises(ClusterError) as e:
        cluster.start()
    elapsed = time.monotonic() - t0
    cluster.stop()
    assert f"within {timeout:g} s" in str(e.value) and "--kafka-mirror-source" in str(e.value)
    assert timeout - 0.2 < elapsed < timeout + 2


def test_bootstrap_backend_default_wait(tmp_path: Path) -> None:
    cluster = make_cluster("source", f"bootstrap:{UNREACHABLE}", tmp_path)
    assert cluster.connect_timeout == 10.0  # type: ignore[attr-defined]


def test_log_to_writes_a_child_process_log_file(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    logger = logging.getLogger(LOGGER_NAME)
    monkeypatch.setattr(logger, "handlers", [])
    monkeypatch.setattr(logger, "propagate", True)
    monkeypatch.setattr(logger, "level", logging.NOTSET)
    stream = io.StringIO()
    _kafkalog.log_to(stream, "capture")
    KafkaLog(clock=_Clock()).log(logging.ERROR, "%s [%s] %s", *REFUSED)
    line = stream.getvalue()
    assert line.endswith(f" capture: kafka: rdkafka#producer-1 FAIL: {REFUSED[2]}\n") and line.count("\n") == 1
    assert logger.propagate is False
