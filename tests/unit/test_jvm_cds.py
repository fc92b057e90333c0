"""Class-data sharing archives of the instrument JVMs (``processes.jvm_cds``): one writer per
archive, a dead claimant's claim taken over, an archive published only when its JVM
exited by itself, and the option that turns it all off."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_kafka_mirror.processes import jvm_cds


@pytest.fixture
def jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(jvm_cds.ENV, raising=False)
    libs = tmp_path / "libs"
    libs.mkdir()
    (libs / "a.jar").write_bytes(b"a")
    return libs


def test_the_first_jvm_writes_the_archive_and_the_next_ones_start_from_it(jars: Path) -> None:
    first = jvm_cds.archive_for("kind", sys.executable, [jars])
    assert first.writes and first.options[0].startswith("-XX:ArchiveClassesAtExit=") and jvm_cds.QUIET in first.options
    assert jvm_cds.archive_for("kind", sys.executable, [jars]).options == ()  # claimed: one writer at a time
    assert first.dump is not None
    first.dump.write_bytes(b"archive")  # what the JVM writes at its exit
    first.settle(143)  # SIGTERM, handled by the JVM: its exit wrote the archive whole
    later = jvm_cds.archive_for("kind", sys.executable, [jars])
    assert later.options == (f"-XX:SharedArchiveFile={first.final}", jvm_cds.QUIET) and not later.writes
    assert sorted(p.name for p in jvm_cds.archive_dir().iterdir()) == [first.final.name]  # type: ignore[union-attr]


def test_a_jvm_killed_publishes_nothing_and_gives_the_claim_up(jars: Path) -> None:
    use = jvm_cds.archive_for("kind", sys.executable, [jars])
    assert use.dump is not None
    use.dump.write_bytes(b"half an archive")  # SIGKILL in the middle of writing
    use.settle(-9)
    assert list(jvm_cds.archive_dir().iterdir()) == []
    assert jvm_cds.archive_for("kind", sys.executable, [jars]).writes  # the next one claims again


def test_a_dead_claimant_s_claim_is_taken_over(jars: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    use = jvm_cds.archive_for("kind", sys.executable, [jars])
    assert use.claim is not None
    use.claim.write_text(dead)  # as a process that died while its JVM ran left it
    assert jvm_cds.archive_for("kind", sys.executable, [jars]).writes


def test_a_claim_held_too_long_is_taken_over(jars: Path) -> None:
    import os

    use = jvm_cds.archive_for("kind", sys.executable, [jars])
    assert use.claim is not None
    use.claim.write_text("1")  # another process's, alive (init), holding it ...
    assert not jvm_cds.archive_for("kind", sys.executable, [jars]).writes
    old = use.claim.stat().st_mtime - jvm_cds.CLAIM_S - 1
    os.utime(use.claim, (old, old))  # ... for a whole session: its JVM writes only when the session ends
    second = jvm_cds.archive_for("kind", sys.executable, [jars])
    assert second.writes and second.dump != use.dump


def test_another_class_path_or_kind_is_another_archive(jars: Path, tmp_path: Path) -> None:
    a = jvm_cds.archive_for("kind", sys.executable, [jars])
    (jars / "b.jar").write_bytes(b"b")
    b = jvm_cds.archive_for("kind", sys.executable, [jars])
    c = jvm_cds.archive_for("other", sys.executable, [jars])
    assert a.writes and b.writes and c.writes and len({a.final, b.final, c.final}) == 3


def test_off_means_no_option_and_nothing_written(jars: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(jvm_cds.ENV, "0")
    assert jvm_cds.archive_for("kind", sys.executable, [jars]) == jvm_cds.ArchiveUse()
    assert not jvm_cds.archive_dir().exists()


def test_a_path_says_where_they_are_kept(jars: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(jvm_cds.ENV, str(tmp_path / "elsewhere"))  # what the plugin's own tests give their runs
    use = jvm_cds.archive_for("kind", sys.executable, [jars])
    assert use.writes and use.final is not None and use.final.parent == tmp_path / "elsewhere"


def test_a_prepared_archive_is_used_and_never_written_on_the_way(jars: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark's driver (verify/connect.py): no archive, no option and no claim; once
    ``write_anew`` published one (``kafka-mirror spark prepare``), every launch uses it; the
    switch turns it off; one writer at a time."""
    assert jvm_cds.use_only("driver", sys.executable, [jars]) == ()
    assert not jvm_cds.archive_dir().exists() or not list(jvm_cds.archive_dir().iterdir())
    use = jvm_cds.write_anew("driver", sys.executable, [jars])
    assert use.writes and use.options[0].startswith("-XX:ArchiveClassesAtExit=")
    assert not jvm_cds.write_anew("driver", sys.executable, [jars]).writes  # claimed
    assert use.dump is not None and use.final is not None
    use.dump.write_bytes(b"archive")
    use.settle(0)
    assert jvm_cds.use_only("driver", sys.executable, [jars]) == (f"-XX:SharedArchiveFile={use.final}", jvm_cds.QUIET)
    again = jvm_cds.write_anew("driver", sys.executable, [jars])  # written anew: replaces it once published
    assert again.writes and again.final == use.final
    monkeypatch.setenv(jvm_cds.ENV, "0")
    assert jvm_cds.use_only("driver", sys.executable, [jars]) == ()
    assert not jvm_cds.write_anew("driver", sys.executable, [jars]).writes


def test_the_spark_driver_options_name_the_prepared_archive(jars: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_kafka_mirror.verify import connect

    monkeypatch.setattr(connect, "_spark_home", lambda: jars.parent)
    (jars.parent / "jars").mkdir()
    monkeypatch.delenv(connect.JAVA_OPTS_ENV, raising=False)
    assert "SharedArchiveFile" not in connect.driver_java_options()
    use = jvm_cds.write_anew(connect.SPARK_ARCHIVE, connect.spark_java(), [jars.parent / "jars"])
    assert use.dump is not None
    use.dump.write_bytes(b"archive")
    use.settle(0)
    assert f"-XX:SharedArchiveFile={use.final} {jvm_cds.QUIET}" in connect.driver_java_options()
    # options of the user's own that name an archive (or write one) are the only ones
    monkeypatch.setenv(connect.JAVA_OPTS_ENV, "-XX:ArchiveClassesAtExit=/tmp/x.jsa")
    assert connect.driver_java_options().count("Archive") == 1
