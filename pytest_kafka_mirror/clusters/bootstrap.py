"""``bootstrap:HOST:PORT[,HOST:PORT…]``: an existing cluster, no lifecycle control."""

from __future__ import annotations

from .base import Capabilities, ClusterAuthError, ClusterError, KafkaAdminMixin

__all__ = ["BootstrapCluster"]


class BootstrapCluster(KafkaAdminMixin):
    """A cluster someone else runs.  ``start()`` only checks it answers."""

    def __init__(self, name: str, servers: str, *, connect_timeout: float = 10.0, given_by: str | None = None) -> None:
        self.name = name
        self.spec = f"bootstrap:{servers}"
        self._servers = servers
        #: how long ``start()`` waits for an answer (--kafka-mirror-startup-timeout when given)
        self.connect_timeout = connect_timeout
        #: where the address came from, for the hint of a failed start
        self.given_by = given_by or f"--kafka-mirror-{name.split('_')[0]} (bootstrap:HOST:PORT)"
        #: the topics this process created here (the session deletes them at its end unless
        #: --kafka-mirror-keep-topics): see provisioning.delete_session_topics
        self.created_topics: list[str] = []

    @property
    def bootstrap_servers(self) -> str:
        return self._servers

    def start(self) -> None:
        try:
            self.ping(timeout=self.connect_timeout)
        except ClusterAuthError:
            raise  # it answered: its message names the client properties to check, not the address
        except ClusterError as exc:
            raise ClusterError(
                f"{exc}. Hint: check the address given to {self.given_by} and that the cluster is up."
            ) from None

    def stop(self) -> None:
        self._admin = None

    def capabilities(self) -> Capabilities:
        return Capabilities(lifecycle=False, reasons={
            "lifecycle": f"it is yours ({self.given_by}): the plugin does not stop, restart or pause a bootstrap: cluster"})

    def describe(self) -> str:
        return f"{self.name}: existing cluster at {self._servers}"
