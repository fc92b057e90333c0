"""Golden files: expected output kept in ``tests/golden/``, so any change to a stored format
or a rendering shows up as a diff in review.

After an intended change, regenerate them and review the diff::

    KAFKA_MIRROR_UPDATE_GOLDEN=1 python -m pytest tests -k golden
"""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE_ENV = "KAFKA_MIRROR_UPDATE_GOLDEN"


def assert_golden(name: str, actual: str) -> None:
    """``actual`` equals ``tests/golden/<name>`` (rewritten instead when UPDATE_ENV is set)."""
    __tracebackhide__ = True
    path = GOLDEN_DIR / name
    if os.environ.get(UPDATE_ENV):
        path.write_text(actual)
        return
    if not path.exists():
        raise AssertionError(f"no golden file {path}; create it with {UPDATE_ENV}=1 and review it")
    expected = path.read_text()
    assert actual == expected, f"{name} differs from its golden file (regenerate with {UPDATE_ENV}=1 if intended)"
