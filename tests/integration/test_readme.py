"""The README's failure example is real output.

The README shows a 10-line scenario (that it runs as written is checked by
``test_plugin.py::test_a_scenario_runs_as_a_user_would``) and the message it fails with
against a replicator that drops records: executed here, on the embedded default (Tansu and
the reference mirror), and the message compared word for word (after replacing what
differs between runs: paths, random topic suffixes, producer ids, ports, clock) with
``tests/golden/readme_failure.txt`` and with the README's block.
"""

from __future__ import annotations

import re

import pytest

from tests.docs import marked_block
from tests.golden import assert_golden

pytestmark = pytest.mark.integration

DROPS = "--kafka-mirror-replicator=reference:drop_seqs=0:100:119/2:600:624"


def _failure_message(stdout: str) -> str:
    """The MirrorMismatchError's text as pytest printed it, normalised."""
    lines = [ln[1:].strip("\n") for ln in stdout.splitlines() if ln.startswith("E ")]
    text = "\n".join(ln[7:] if ln.startswith("       ") else ln.lstrip() for ln in lines)
    text = text.split("MirrorMismatchError: ", 1)[1]
    text = text.split("\n  Hint:", 1)[0] + "\n  Hint:" + text.split("\n  Hint:", 1)[1].split("\n", 1)[0]
    text = re.sub(r"mirror mismatch in /\S+/(run-\d+):", r"mirror mismatch in /tmp/pytest-of-you/pytest-1/test_steady_state0/\1:", text)
    text = re.sub(r"(test_steady_state-)[0-9a-f]{6}(-\d)", r"\g<1>1a2b3c\2", text)
    text = re.sub(r"\bp[0-9a-f]{7}\b", "p1a2b3c4", text)
    text = re.sub(r"\b\d\d:\d\d:\d\d (reference-mirror)", r"12:00:00 \1", text)
    return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text) + "\n"


@pytest.fixture(autouse=True)
def _as_a_user_runs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not as an xdist worker's child: topic names carry ``master``, as in the README."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


def test_readme_failure_output_is_real(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mirror=marked_block("README", "scenario"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", DROPS, "--kafka-mirror-drain-timeout=8")  # > the mirror's 5 s status period
    result.assert_outcomes(failed=1)
    message = _failure_message(result.stdout.str())
    assert_golden("readme_failure.txt", message)
    assert marked_block("README", "failure-output") == message, \
        "README's failure example differs from tests/golden/readme_failure.txt: paste the golden file into it"
