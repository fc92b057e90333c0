"""``kafka-mirror`` argument errors: fast, before Spark starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_kafka_mirror.cli import main
from tests.synthetic import SyntheticRun


def test_allow_source_loss_needs_a_source_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = SyntheticRun(tmp_path)
    run.lane("orders", pid="p1", lane=0, acked=range(10)).deliver(range(10))
    run.write()
    assert main(["verify", str(tmp_path), "--allow-source-loss"]) == 2
    err = capsys.readouterr().err
    assert "--allow-source-loss needs the source log" in err and "capture_source=True" in err
