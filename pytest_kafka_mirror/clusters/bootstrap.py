"""``bootstrap:HOST:PORT[,HOST:PORT…]``: an existing cluster, no lifecycle control."""

from __future__ import annotations

from .base import Capabilities, ClusterError, KafkaAdminMixin

__all__ = ["BootstrapCluster"]


class BootstrapCluster(KafkaAdminMixin):
    """A cluster someone else runs.  ``start()`` only checks it answers."""

    def __init__(self, name: str, servers: str, *, connect_timeout: float = 10.0) -> None:
        self.name = name
        self.spec = f"bootstrap:{servers}"
        self._servers = servers
        self.connect_timeout = connect_timeout

    @property
    def bootstrap_servers(self) -> str:
        return self._servers

    def start(self) -> None:
        try:
            self.ping(timeout=self.connect_timeout)
        except ClusterError as exc:
            raise ClusterError(
                f"{exc}. Hint: check the address given to --kafka-mirror-{self.name.split('_')[0]} "
                "(bootstrap:HOST:PORT) and that the cluster is up."
            ) from None

    def stop(self) -> None:
        self._admin = None

    def capabilities(self) -> Capabilities:
        return Capabilities(lifecycle=False)

    def describe(self) -> str:
        return f"{self.name}: existing cluster at {self._servers}"
