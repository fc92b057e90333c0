"""``pytest -n 2``: workers share one pair of clusters, each runs its own replicator, and
nothing outlives the run, not even when a worker crashes."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.conftest import processes_tagged

pytestmark = pytest.mark.integration

SHARED = textwrap.dedent(
    """
    import json, os, pytest

    @pytest.mark.parametrize("i", range(4))
    def test_mirror(mirror_topics, mirror_producer, mirror_verifier, mirror_env, i):
        topics = mirror_topics(1, partitions=2)
        assert topics[0].startswith(f"km-{os.environ['PYTEST_XDIST_WORKER']}-")
        run = mirror_producer(topics, rate=500, count=200)
        mirror_verifier(run).assert_ok()
        with open(os.environ["ENDPOINTS_LOG"], "a") as f:
            f.write(json.dumps([os.environ["PYTEST_XDIST_WORKER"], mirror_env.source.bootstrap_servers,
                                mirror_env.target.bootstrap_servers, mirror_env.replicator.describe()]) + "\\n")
    """
)


def test_two_workers_share_clusters_and_run_their_own_replicators(
    pytester: pytest.Pytester, tagged_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = pytester.path / "endpoints.jsonl"
    monkeypatch.setenv("ENDPOINTS_LOG", str(log))
    pytester.makepyfile(SHARED)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    workers = {r[0] for r in rows}
    assert workers == {"gw0", "gw1"}, rows  # both workers ran tests ...
    assert len({(r[1], r[2]) for r in rows}) == 1, rows  # ... against the same clusters
    assert len({r[3] for r in rows}) == 2, rows  # ... each with its own replicator
    assert processes_tagged(tagged_env) == []


CRASH = textwrap.dedent(
    """
    import os, signal
    from pathlib import Path

    from pytest_kafka_mirror.processes.managed import wait_until

    PID = Path(__file__).with_name("crashed.pid")

    def test_crash(source_cluster, target_cluster):
        # written whole, then renamed: the survivor never reads a file still empty
        PID.with_suffix(".tmp").write_text(str(os.getpid()))
        PID.with_suffix(".tmp").rename(PID)
        os.kill(os.getpid(), signal.SIGKILL)  # the worker dies holding the shared clusters

    def _dead(pid):
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
        except FileNotFoundError:
            return True

    def test_survivor(source_cluster, target_cluster):
        # the clusters must outlive the worker that died holding them: after its death
        wait_until(lambda: PID.exists() and _dead(int(PID.read_text())), 60, "the other worker's death")
        assert source_cluster.ping() >= 1
    """
)


def test_a_crashed_worker_leaves_no_process_behind(pytester: pytest.Pytester, tagged_env: str) -> None:
    pytester.makepyfile(CRASH)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*crashed*"])
    result.assert_outcomes(passed=1, failed=1)
    assert processes_tagged(tagged_env) == []


def test_clusters_per_worker_when_asked(
    pytester: pytest.Pytester, tagged_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(
        """
        import os

        def test_a(source_cluster):
            open(os.environ["ENDPOINTS_LOG"] + "." + os.environ["PYTEST_XDIST_WORKER"], "w").write(
                source_cluster.bootstrap_servers)

        test_b = test_a
        """
    )
    monkeypatch.setenv("ENDPOINTS_LOG", str(pytester.path / "ep"))
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider", "--kafka-mirror-share", "worker")
    result.assert_outcomes(passed=2)
    addresses = {p.read_text() for p in pytester.path.glob("ep.gw*")}
    assert len(addresses) == 2
    assert processes_tagged(tagged_env) == []
