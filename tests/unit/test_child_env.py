"""The plugin's child processes import this package from where the test process did."""

from __future__ import annotations

import os
import site
import sys

import pytest

import pytest_kafka_mirror
from pytest_kafka_mirror.processes import managed
from pytest_kafka_mirror.processes.managed import ManagedProcess, child_env

_FIND = "import importlib.util as u; print(u.find_spec('pytest_kafka_mirror').origin)"


@pytest.mark.skipif(
    managed.child_env({}) == {}, reason="this package is installed in site-packages: children find it there"
)
def test_a_child_in_its_own_directory_imports_the_checkout(tmp_path):
    # -S: no site-packages, so no editable-install finder: only PYTHONPATH can lead the child
    # to the checkout, as for a child of a checkout beside an older installed copy.
    proc = ManagedProcess(
        "probe", [sys.executable, "-S", "-c", _FIND], tmp_path / "probe.log",
        env={**os.environ, "PYTHONPATH": ""}, cwd=tmp_path,
    ).start()
    assert proc.proc is not None and proc.proc.wait(timeout=30) == 0
    assert (tmp_path / "probe.log").read_text().strip() == pytest_kafka_mirror.__file__


def test_the_package_root_goes_first_and_once(monkeypatch):
    monkeypatch.setattr(managed, "_PACKAGE_ROOT", "/checkout")
    assert child_env({"PYTHONPATH": "/a:/checkout:/b", "X": "1"}) == {"PYTHONPATH": "/checkout:/a:/b", "X": "1"}
    assert child_env({})["PYTHONPATH"] == "/checkout"
    monkeypatch.setenv("KAFKA_MIRROR_PROBE", "kept")
    assert child_env(None)["KAFKA_MIRROR_PROBE"] == "kept"


def test_an_installed_package_leaves_the_environment_alone(monkeypatch):
    monkeypatch.setattr(managed, "_PACKAGE_ROOT", os.path.realpath(site.getsitepackages()[0]))
    env = {"PYTHONPATH": "/a"}
    assert child_env(env) is env
    assert child_env(None) is None


TRAP = """
import signal, sys, time
from pathlib import Path
out = Path(sys.argv[1])
def on(signum, frame):
    out.write_text(signal.Signals(signum).name)
    sys.exit(0)
signal.signal(signal.SIGINT, on)
signal.signal(signal.SIGTERM, on)
out.with_suffix(".up").touch()
while True:
    time.sleep(0.05)
"""


@pytest.mark.parametrize("stop_signal", ["SIGINT", "SIGTERM"])
def test_a_process_is_stopped_with_its_own_signal_also_through_the_supervisor_of_a_detached_one(
        tmp_path, stop_signal):
    """Tansu exits at once on SIGINT and waits for its clients on SIGTERM: a process's stop
    signal is its own, whether the plugin stops it or the supervisor of a detached one
    (a broker xdist workers share) does when it is told to stop."""
    import signal as signals

    from pytest_kafka_mirror.processes.cleanup import stop_registered
    from pytest_kafka_mirror.processes.managed import detached, wait_until

    sig = signals.Signals[stop_signal]
    script = tmp_path / "trap.py"
    script.write_text(TRAP)
    here = ManagedProcess("here", [sys.executable, str(script), str(tmp_path / "here.txt")], tmp_path / "here.log",
                          stop_signal=sig).start()
    wait_until(lambda: (tmp_path / "here.up").exists(), 10, "the trap to start")
    here.stop(timeout=5)
    assert (tmp_path / "here.txt").read_text() == stop_signal
    registry = tmp_path / "registry"
    with detached(os.getpid(), registry):
        ManagedProcess("shared", [sys.executable, str(script), str(tmp_path / "shared.txt")], tmp_path / "shared.log",
                       stop_signal=sig).start()
    wait_until(lambda: (tmp_path / "shared.up").exists(), 10, "the supervised trap to start")
    stop_registered(registry, timeout=10)
    wait_until(lambda: (tmp_path / "shared.txt").exists(), 10, "the supervised trap to be stopped")
    assert (tmp_path / "shared.txt").read_text() == stop_signal
