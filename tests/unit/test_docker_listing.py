"""The plugin's container listings survive a container removed while they run.

docker-py lists ids, then inspects each one; another process's teardown can remove a container
in between (CI saw it: the ctrl-c test's poll died on ``404 No such container``). These tests
run docker-py's own listing code against an engine API where that happens.
"""

from __future__ import annotations

import socket

import pytest

docker = pytest.importorskip("docker")

from pytest_kafka_mirror.processes import docker as backend


class VanishingApi:
    """Lists two containers of this run; the first is removed before it can be inspected."""

    def __init__(self, owner: str) -> None:
        labels = {backend.LABEL_RUN: "r1", backend.LABEL_OWNER: owner, backend.LABEL_ROLE: "broker"}
        self.listed = [{"Id": "gone"}, {"Id": "kept"}]
        self.kept = {"Id": "kept", "Name": "/kept", "State": {"Status": "running"}, "Config": {"Labels": labels}}
        self.removed: list[str] = []

    def containers(self, **kwargs):
        return self.listed

    def inspect_container(self, container_id):
        if container_id == "gone":
            raise docker.errors.NotFound("No such container: gone")
        return self.kept

    def remove_container(self, container_id, **kwargs):
        self.removed.append(container_id)

    def close(self):
        pass


@pytest.fixture
def engine(monkeypatch):
    """Point the backend at a docker-py client whose API is ``VanishingApi``."""
    def make(owner: str = "") -> VanishingApi:
        client = docker.DockerClient(base_url="unix:///nonexistent.sock", version="1.41")
        client.api = api = VanishingApi(owner)
        monkeypatch.setattr(backend, "docker_client", lambda *a, **k: client)
        return api
    return make


def test_a_container_removed_during_the_listing_is_left_out(engine):
    engine()
    assert [(c["name"], c["status"], c["role"]) for c in backend.containers("r1")] == [("kept", "running", "broker")]


def test_reaping_orphans_skips_a_container_removed_during_the_listing(engine):
    api = engine(owner=f"{socket.gethostname()}/another-boot/1")  # its owner died before a reboot
    assert backend.reap_orphans() == ["kept"]
    assert api.removed == ["kept"]
