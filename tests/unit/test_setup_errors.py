"""A fixture that cannot set up says so once: its message, no traceback, no chained
"During handling of the above exception" copy of the same error (pytester runs in
process; the failing start is patched in, no broker starts)."""

from __future__ import annotations

import pytest

from pytest_kafka_mirror.clusters import ClusterError
from pytest_kafka_mirror.replicators import ReplicatorError
from pytest_kafka_mirror.session import KafkaMirrorSession

WHY = "no answer from bootstrap servers 127.0.0.1:1 within 3 s"


class _Unstartable:
    def start(self) -> None:
        raise ClusterError(WHY)

    def stop(self) -> None:
        pass


def _check_once(result: pytest.RunResult, fixture_message: str) -> None:
    out = result.stdout.str()
    result.assert_outcomes(errors=1)
    assert fixture_message in out
    assert out.count(WHY) == 1, out  # -rN: no short summary repeating it
    assert "During handling of the above exception" not in out, out
    assert "Traceback" not in out, out


def test_a_cluster_that_cannot_start_is_one_error(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(KafkaMirrorSession, "make_cluster", lambda self, role, workdir: _Unstartable())
    pytester.makepyfile("def test_needs_clusters(source_cluster, target_cluster): pass")
    result = pytester.runpytest("-rN", "-p", "no:cacheprovider", "-p", "no:benchmark")
    _check_once(result, f"kafka-mirror source cluster (tansu): {WHY}")


def test_a_private_environment_that_cannot_start_is_one_error(pytester: pytest.Pytester,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_kafka_mirror.env

    def refuse(*args: object, **kwargs: object) -> None:
        raise ReplicatorError(WHY)

    monkeypatch.setattr(pytest_kafka_mirror.env, "build_private_env", refuse)
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.kafka_mirror(private=True)
        def test_private(mirror_env): pass
        """
    )
    result = pytester.runpytest("-rN", "-p", "no:cacheprovider", "-p", "no:benchmark")
    _check_once(result, f"kafka-mirror private environment: {WHY}")


def test_a_malformed_marker_argument_is_one_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.kafka_mirror(replicator_properties=42)
        def test_props(mirror_env): pass
        """
    )
    result = pytester.runpytest("-rN", "-p", "no:cacheprovider", "-p", "no:benchmark")
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert out.count("must be a dict or KEY=VALUE lines") == 1, out
    assert "During handling of the above exception" not in out, out
