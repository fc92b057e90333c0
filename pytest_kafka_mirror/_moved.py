"""Old module paths, from before the package was laid out by pipeline stage.

``import pytest_kafka_mirror.producer`` (or ``from pytest_kafka_mirror.records import
decode``) still works: the finder below loads the module's new home and registers the
same module object under the old name too, with a ``DeprecationWarning`` that names the
new path.  Only names that moved are listed; ``capture``, ``faults`` and ``cli`` became
packages that re-export what the modules did.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

__all__ = ["MOVED", "install"]

#: old module (under ``pytest_kafka_mirror.``) -> its new home
MOVED = {
    "_process": "processes.managed",
    "_docker": "processes.docker",
    "_supervise": "processes.supervise",
    "sharing": "clusters.shared",
    "records": "produce.records",
    "producer": "produce.producer",
    "producer_group": "produce.group",
    "_slip": "produce.slip",
    "_gaps": "capture.gaps",
    "witness": "capture.witness",
    "failover": "verify.failover",
    "mm2_records": "replicators.mm2_records",
    "_linkproxy": "faults.linkproxy",
    "_netem": "faults.netem",
    "reporting": "report.summary",
    "storage": "report.storage",
    "compare": "report.compare",
    "plots": "report.plots",
    "metrics": "report.metrics",
    "_cli_stages": "cli.stages",
}
_PKG = __name__.rpartition(".")[0]


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        prefix, _, old = fullname.rpartition(".")
        if prefix != _PKG or old not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = f"{_PKG}.{MOVED[spec.name.rpartition('.')[2]]}"
        warnings.warn(f"{spec.name} moved to {new}; import it from there", DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        pass  # the new module is already executed


def install() -> None:
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.append(_Alias())
