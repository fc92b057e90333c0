from __future__ import annotations

import pytest

__all__ = ["PytestKafkaMirrorWarning"]


class PytestKafkaMirrorWarning(pytest.PytestWarning):
    """Base of every warning pytest-kafka-mirror emits (filter or error on it)."""
