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
