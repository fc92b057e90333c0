"""Docker engine access shared by the container backends (clusters and MirrorMaker 2).

Containers are started through testcontainers-python, with three deliberate deviations
from its defaults, each measured on a machine without registry access:

* **host networking only** (``network="host"``): brokers advertise ``127.0.0.1:PORT`` and
  every client (producer, replicator, capture) reaches them there, with no port mapping.
  testcontainers' port wait strategy needs a mapping, so readiness is a TCP connect to
  127.0.0.1 followed by a metadata request, done by the caller;
* **Ryuk disabled**: its image comes from a registry.  Our own belt and braces instead:
  every container carries :data:`LABEL_RUN` (the run id) and :data:`LABEL_OWNER` (host,
  boot id and pid of the Python process that started it); live containers are removed at
  exit and on SIGTERM (:mod:`._process` cleanup hooks), and :func:`reap_orphans` removes
  the containers of owners that died without cleaning up (SIGKILL);
* **images are never removed by id**: testcontainers' image cleanup does, which deletes
  every other tag of the same image.  :func:`remove_image` removes one tag.

``docker`` and ``testcontainers`` are imported inside functions: the pytest entry point
must stay cheap (tests/unit/test_import_cost.py).
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import managed as _process
from .managed import tcp_reachable, wait_until

if TYPE_CHECKING:
    import docker

__all__ = [
    "DEFAULT_TANSU_IMAGE",
    "LABEL_OWNER",
    "LABEL_ROLE",
    "LABEL_RUN",
    "PULL_ENV",
    "RUN_ID_ENV",
    "DockerUnavailable",
    "ManagedContainer",
    "build_tansu_image",
    "containers",
    "docker_client",
    "engine_status",
    "ensure_image",
    "image_present",
    "reap_orphans",
    "remove_containers",
    "remove_image",
    "run_id",
]

LABEL_RUN = "io.kafka-mirror.run"
LABEL_OWNER = "io.kafka-mirror.owner"
LABEL_ROLE = "io.kafka-mirror.role"
#: Set it to group the containers of one CI job (or one test) under a known id.
RUN_ID_ENV = "KAFKA_MIRROR_RUN_ID"
#: ``0`` forbids pulling missing images (tests and air-gapped CI: no registry traffic at all).
PULL_ENV = "KAFKA_MIRROR_DOCKER_PULL"
#: The local image ``kafka-mirror image build`` makes: FROM scratch + the static tansu binary.
DEFAULT_TANSU_IMAGE = "kafka-mirror/tansu:local"
#: Images built here instead of pulled: tag -> builder(tag) returning the image id.  The
#: layers above register theirs (``clusters/container.py``: the local Tansu image).
LOCAL_BUILDERS: dict[str, Callable[[str], str]] = {}

_run_id: str | None = None
_live: dict[str, ManagedContainer] = {}
_lock = threading.Lock()


class DockerUnavailable(RuntimeError):
    """No Docker engine answers, or the Docker SDK is not installed."""


def run_id() -> str:
    """The id every container of this run is labelled with.

    ``$KAFKA_MIRROR_RUN_ID`` when set; else xdist's ``PYTEST_XDIST_TESTRUNUID`` (shared by
    the workers of one run); else one id per Python process.
    """
    global _run_id
    explicit = os.environ.get(RUN_ID_ENV) or os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if explicit:
        return explicit
    if _run_id is None:
        _run_id = uuid.uuid4().hex[:12]
    return _run_id


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown-boot"


def _owner() -> str:
    return f"{socket.gethostname()}/{_boot_id()}/{os.getpid()}"


def docker_client(timeout: float = 10.0) -> docker.DockerClient:
    """A Docker SDK client for the engine of ``$DOCKER_HOST`` (default: the local socket)."""
    try:
        import docker
    except ImportError:
        raise DockerUnavailable(
            "the container backends need the Docker SDK and testcontainers: pip install 'pytest-kafka-mirror[containers]'"
        ) from None
    try:
        client = docker.from_env(timeout=int(timeout))
        client.ping()
    except Exception as exc:
        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise DockerUnavailable(
            f"no Docker engine answers at {where} ({type(exc).__name__}: {exc}). Hint: start one, e.g. as root "
            "`dockerd --bridge=none --iptables=false --ip-masq=false &` (host networking is all the plugin needs)"
        ) from None
    return client


def engine_status() -> tuple[bool, str]:
    """``(True, "Docker 20.10.24")`` or ``(False, reason)``: for ``pytest.skip`` and headers."""
    try:
        client = docker_client(timeout=5)
    except DockerUnavailable as exc:
        return False, str(exc)
    try:
        return True, f"Docker {client.version().get('Version', '?')}"
    finally:
        client.close()


def image_present(image: str) -> bool:
    import docker.errors

    client = docker_client()
    try:
        client.images.get(image)
        return True
    except docker.errors.ImageNotFound:
        return False
    finally:
        client.close()


def ensure_image(image: str, *, pull: bool | None = None) -> None:
    """Make sure ``image`` is present: the local tansu image is built, others pulled
    (unless ``pull=False`` or ``$KAFKA_MIRROR_DOCKER_PULL=0``).

    Raises DockerUnavailable with the command to run when neither works (no registry).
    """
    if pull is None:
        pull = os.environ.get(PULL_ENV, "1") != "0"
    if image_present(image):
        return
    build = LOCAL_BUILDERS.get(image)
    if build is not None:
        build(image)
        return
    if pull:
        client = docker_client(timeout=300)
        try:
            client.images.pull(image)
            return
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
        finally:
            client.close()
    else:
        reason = f"pulling is off: {PULL_ENV}=0"
    raise DockerUnavailable(
        f"image {image!r} is not present on the Docker engine and could not be pulled ({reason}). "
        f"Hint: `docker pull {image}` where a registry is reachable, or use the local Tansu image "
        f"(`kafka-mirror image build` makes {DEFAULT_TANSU_IMAGE})"
    )


def build_tansu_image(tag: str, *, binary: str | os.PathLike[str]) -> str:
    """Build ``FROM scratch`` + the static tansu ``binary`` as ``tag``; return the image id.

    No registry is needed.  Building again with an unchanged binary is a cache hit (about
    a second).  The embedded backend's binary is found by
    :func:`pytest_kafka_mirror.clusters.container.build_local_tansu`.
    """
    src = Path(binary)
    client = docker_client(timeout=300)
    try:
        with tempfile.TemporaryDirectory(prefix="kafka-mirror-image-") as ctx:
            target = Path(ctx) / "tansu"
            try:
                os.link(src, target)  # no 40 MB copy when on the same filesystem
            except OSError:
                shutil.copy2(src, target)
            (Path(ctx) / "Dockerfile").write_text(
                "# pytest-kafka-mirror: the embedded Tansu broker as a container image\n"
                "FROM scratch\n"
                "COPY tansu /tansu\n"
                'ENTRYPOINT ["/tansu"]\n'
                'CMD ["broker"]\n'
            )
            image, _logs = client.images.build(
                path=ctx, tag=tag, rm=True, labels={"io.kafka-mirror.image": "tansu", "io.kafka-mirror.binary": src.name}
            )
        return str(image.id)
    finally:
        client.close()


def remove_image(tag: str) -> None:
    """Remove the tag ``tag`` only (other tags of the same image stay)."""
    import docker.errors

    client = docker_client()
    try:
        client.images.remove(tag, noprune=False)
    except docker.errors.ImageNotFound:
        pass
    finally:
        client.close()


def containers(run: str | None = None, *, all_runs: bool = False) -> list[dict[str, Any]]:
    """Containers the plugin started (any state): ``{id, name, status, run, owner, role}``.

    ``run`` defaults to this run's id; ``all_runs`` lists every run's.
    """
    client = docker_client()
    try:
        label = LABEL_RUN if all_runs else f"{LABEL_RUN}={run or run_id()}"
        out = []
        # ignore_removed: a container removed between the listing and its inspection (the
        # container backend's retry after a taken port, another process's teardown) is gone,
        # not an error.
        for c in client.containers.list(all=True, filters={"label": label}, ignore_removed=True):
            labels = c.labels or {}
            out.append({
                "id": c.id, "name": c.name, "status": c.status, "run": labels.get(LABEL_RUN, ""),
                "owner": labels.get(LABEL_OWNER, ""), "role": labels.get(LABEL_ROLE, ""),
            })
        return out
    finally:
        client.close()


def remove_containers(run: str | None = None, *, all_runs: bool = False) -> list[str]:
    """Force-remove the plugin's containers of ``run`` (default this run); return their names."""
    client = docker_client()
    names = []
    try:
        for info in containers(run, all_runs=all_runs):
            try:
                client.containers.get(info["id"]).remove(force=True)
                names.append(info["name"])
            except Exception:
                pass
    finally:
        client.close()
    return names


def remove_named_containers(names: Sequence[str]) -> list[str]:
    """Force-remove the containers of ``names`` (gone ones are skipped); return those removed."""
    client = docker_client()
    removed = []
    try:
        for name in names:
            try:
                client.containers.get(name).remove(force=True)
                removed.append(name)
            except Exception:
                pass
    finally:
        client.close()
    return removed


def _owner_alive(owner: str) -> bool:
    try:
        host, boot, pid = owner.rsplit("/", 2)
    except ValueError:
        return True  # not ours to judge
    if host != socket.gethostname():
        return True  # another machine sharing the engine: leave its containers alone
    if boot != _boot_id():
        return False
    import psutil

    return pid.isdigit() and psutil.pid_exists(int(pid))


def reap_orphans() -> list[str]:
    """Remove containers whose owning process is gone (killed before its teardown ran)."""
    client = docker_client()
    removed = []
    try:
        for c in client.containers.list(all=True, filters={"label": LABEL_OWNER}, ignore_removed=True):
            owner = (c.labels or {}).get(LABEL_OWNER, "")
            if owner and not _owner_alive(owner):
                try:
                    c.remove(force=True)
                    removed.append(c.name)
                except Exception:
                    pass
    finally:
        client.close()
    return removed


class ManagedContainer:
    """A labelled host-network container with the lifecycle verbs of ManagedProcess.

    ``stop`` is SIGTERM then SIGKILL after ``timeout`` (``docker stop``), ``kill`` SIGKILL,
    ``pause`` / ``resume`` the cgroup freezer (``docker pause`` / ``unpause``), ``restart``
    keeps the container's filesystem (a Kafka log survives, Tansu's memory does not).
    The container is removed by ``stop`` / ``kill`` after its log was saved to ``log_path``.
    """

    def __init__(
        self,
        name: str,
        image: str,
        *,
        role: str,
        log_path: str | os.PathLike[str],
        command: Sequence[str] | None = None,
        env: dict[str, str] | None = None,
        volumes: Sequence[tuple[str, str, str]] = (),
        entrypoint: Sequence[str] | None = None,
    ) -> None:
        self.name = name
        self.image = image
        self.role = role
        self.log_path = Path(log_path)
        self.command = list(command) if command is not None else None
        self.env = dict(env or {})
        self.volumes = list(volumes)
        self.entrypoint = list(entrypoint) if entrypoint is not None else None
        self.container_name = f"kafka-mirror-{role}-{uuid.uuid4().hex[:8]}"
        self._tc: Any = None  # testcontainers DockerContainer
        self.paused = False
        self.exit_code: int | None = None

    @property
    def labels(self) -> dict[str, str]:
        owner = _owner()
        detach = _process._detach
        if detach is not None:
            # Shared by the xdist workers (sharing.py): owned by the controller, so the
            # reaper removes it only once the whole run is gone.
            owner = f"{socket.gethostname()}/{_boot_id()}/{detach[0]}"
        return {LABEL_RUN: run_id(), LABEL_OWNER: owner, LABEL_ROLE: self.role}

    def start(self) -> ManagedContainer:
        os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
        ensure_image(self.image)
        from testcontainers.core.container import DockerContainer

        kwargs: dict[str, Any] = {"network": "host", "labels": self.labels}
        if self.entrypoint is not None:
            kwargs["entrypoint"] = self.entrypoint
        # DockerContainer is annotated command: str, but passes a list through to the SDK as is
        tc = DockerContainer(self.image, command=self.command, env=self.env, name=self.container_name)  # type: ignore[arg-type]
        for host, path, mode in self.volumes:
            tc.with_volume_mapping(host, path, mode)
        tc.with_kwargs(**kwargs)
        try:
            tc.start()
        except Exception as exc:
            try:
                tc.stop()
            except Exception:
                pass
            raise DockerUnavailable(f"cannot start {self.name} from image {self.image!r}: {exc}") from exc
        self._tc = tc
        self.paused = False
        self.exit_code = None
        detach = _process._detach
        if detach is not None:
            # Outlives this process; the controller removes it (cleanup.stop_registered).
            with open(detach[1], "a") as reg:
                reg.write(f"container:{self.container_name}\n")
        else:
            with _lock:
                _live[self.container_name] = self
        return self

    def _container(self) -> Any:
        if self._tc is None:
            raise RuntimeError(f"{self.name} was never started")
        return self._tc.get_wrapped_container()

    @property
    def running(self) -> bool:
        if self._tc is None:
            return False
        try:
            c = self._container()
            c.reload()
            return c.status in ("running", "paused", "restarting")
        except Exception:
            return False

    @property
    def id(self) -> str | None:
        return None if self._tc is None else str(self._container().id)

    def logs(self) -> str:
        if self._tc is None:
            return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        try:
            return self._container().logs().decode(errors="replace")  # type: ignore[no-any-return]
        except Exception:
            return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.logs().splitlines()[-lines:])

    def describe_exit(self) -> str:
        try:
            c = self._container()
            c.reload()
            state = c.attrs.get("State", {})
            code = state.get("ExitCode")
            status = c.status
        except Exception:
            code, status = self.exit_code, "removed"
        tail = self.log_tail()
        return f"container {self.container_name} ({self.image}) is {status}, exit code {code}" + (
            f", last log lines:\n{tail}" if tail else ", log is empty"
        )

    def _save_log(self) -> None:
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self.log_path.write_text(self._container().logs().decode(errors="replace"))
        except Exception:
            pass

    def _remove(self) -> None:
        if self._tc is None:
            return
        self._save_log()
        try:
            c = self._container()
            c.reload()
            self.exit_code = c.attrs.get("State", {}).get("ExitCode")
            c.remove(force=True)
        except Exception:
            pass
        try:
            self._tc.get_docker_client().client.close()
        except Exception:
            pass
        self._tc = None
        with _lock:
            _live.pop(self.container_name, None)

    def stop(self, timeout: float = 10.0) -> int | None:
        """``docker stop``: SIGTERM, SIGKILL after ``timeout``; then remove.  Idempotent."""
        if self._tc is None:
            return self.exit_code
        try:
            if self.paused:
                self._container().unpause()
            self._container().stop(timeout=int(max(1, timeout)))
        except Exception:
            pass
        self._remove()
        return self.exit_code

    def kill(self) -> int | None:
        """SIGKILL and remove."""
        if self._tc is None:
            return self.exit_code
        try:
            self._container().kill()
        except Exception:
            pass
        self._remove()
        return self.exit_code

    def signal(self, sig: str) -> None:
        self._container().kill(signal=sig)

    def pause(self) -> None:
        self._container().pause()
        self.paused = True

    def resume(self) -> None:
        self._container().unpause()
        self.paused = False

    def restart(self, timeout: float = 10.0) -> None:
        """``docker restart``: same container, same command and ports, same filesystem."""
        if self.paused:
            self.resume()
        self._container().restart(timeout=int(max(1, timeout)))

    def __repr__(self) -> str:
        return f"<ManagedContainer {self.name} {self.container_name} image={self.image}>"


def live_containers() -> list[ManagedContainer]:
    with _lock:
        return list(_live.values())


def _remove_all() -> None:
    for c in live_containers():
        try:
            c.kill()
        except Exception:
            pass


_process.register_cleanup(_remove_all)


def wait_tcp(port: int, timeout: float, alive: Any, what: str) -> None:
    """Wait until 127.0.0.1:``port`` accepts a connection or ``alive()`` turns false."""

    def listening() -> bool:
        if tcp_reachable("127.0.0.1", port):
            return True
        if not alive():
            raise RuntimeError(f"{what} exited before listening on 127.0.0.1:{port}")
        return False

    wait_until(listening, timeout, f"{what} to listen on 127.0.0.1:{port}", interval=0.1)
