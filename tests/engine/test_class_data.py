"""Class data sharing for the Spark driver's JVM (kafka_mirror.engine.class_data): a run writes
its class list, an archive is built from it, and the next start maps the classes from it."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from kafka_mirror.engine.class_data import (
    ARCHIVE,
    ARCHIVE_INFO,
    JAVA_OPTIONS_KEY,
    ClassData,
)
from kafka_mirror_testing.python_runs import run_json_script


def test_first_run_writes_a_class_list_and_later_runs_map_the_archive(tmp_path: Path) -> None:
    data = ClassData(tmp_path / "cds")
    conf = data.spark_conf({"spark.master": "local[2]"})
    assert conf[JAVA_OPTIONS_KEY] == f"-XX:DumpLoadedClassList={data.class_list}"
    assert data.active and not data.used_archive
    assert data.class_list.name == f"{os.getpid()}.classlist"
    (tmp_path / "cds" / ARCHIVE).write_bytes(b"archive")
    again = ClassData(tmp_path / "cds")
    options = again.spark_conf({JAVA_OPTIONS_KEY: "-Dadmin=1"})[JAVA_OPTIONS_KEY].split()
    assert options == ["-Dadmin=1", f"-XX:SharedArchiveFile={tmp_path / 'cds' / ARCHIVE}",
                       "-Xshare:auto", f"-XX:DumpLoadedClassList={again.class_list}"]
    assert again.used_archive


@pytest.mark.parametrize("key", [JAVA_OPTIONS_KEY, "spark.driver.extraJavaOptions"])
def test_the_users_own_class_data_options_win(tmp_path: Path, key: str) -> None:
    data = ClassData(tmp_path / "cds")
    conf = {key: "-Xshare:off"}
    assert data.spark_conf(conf) == conf
    assert not data.active and not (tmp_path / "cds").exists()


def test_files_of_processes_that_are_gone_are_removed(tmp_path: Path) -> None:
    directory = tmp_path / "cds"
    directory.mkdir()
    gone = 4_194_304 + 17  # above Linux's pid_max
    stale = [f"{gone}.classlist", f"{gone}.dump", f"{gone}.dump.log",
             f"{ARCHIVE}.{gone}.partial", f"{ARCHIVE_INFO}.{gone}.partial"]
    kept = [ARCHIVE, ARCHIVE_INFO, f"{os.getppid()}.classlist"]
    for name in stale + kept:
        (directory / name).write_text("x")
    ClassData(directory).spark_conf({})
    assert sorted(p.name for p in directory.iterdir()) == sorted(kept)


# One driver JVM per process: each start is a Python process of its own, as the mirror is.
START = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from kafka_mirror.engine.class_data import ClassData, RunningJvm
    # the archive is built at this test's own priority: at the lowest (a mirror's), beside the
    # other pytest worker's JVMs, the build waited minutes for the CPU (the test took 295 s in CI)
    os.setpriority = lambda *args: None
    from kafka_mirror.engine.session import build_session, connector_jars, spark_conf
    data = ClassData(Path(sys.argv[1]))
    conf = data.spark_conf(spark_conf({"spark.master": "local[2]", "spark.driver.memory": "512m"},
                                      {}, connector_jars(None)))
    began = time.monotonic()
    spark = build_session(conf)
    spark.range(0, 100, 1, 2).selectExpr("id * 2 AS x").groupBy().sum("x").collect()
    seconds = time.monotonic() - began
    jvm = RunningJvm.of(spark)
    built = data.dump(jvm) if sys.argv[2] == "dump" else None
    data.started(spark)
    print(json.dumps({"used_archive": data.used_archive, "sharing": jvm.sharing,
                      "dump_scheduled": data._thread is not None, "built": built,
                      "seconds": round(seconds, 1)}))
    data.stop()
    spark.stop()
""")


def _start(directory: Path, step: str) -> dict[str, object]:
    """One start in a session of its own (the archive's builder, a JVM at the lowest CPU
    priority, goes with it on a timeout)."""
    return run_json_script(START, str(directory), step, timeout=600)


# the benchmark's smoke run builds an archive of its own at the lowest CPU priority: not both at
# once (in one run on 2 cores, side by side, neither build ended within 10 minutes)
@pytest.mark.spark
@pytest.mark.xdist_group("class-data")
def test_a_restart_maps_the_classes_the_last_run_loaded(tmp_path: Path) -> None:
    directory = tmp_path / "class-data"
    first = _start(directory, "dump")
    assert first["built"] is True
    assert first["used_archive"] is False and first["dump_scheduled"] is True
    assert (directory / ARCHIVE).stat().st_size > 10_000_000
    second = _start(directory, "none")
    # the archive was given, the JVM mapped it, and nothing needs building
    assert second["used_archive"] is True and second["sharing"] is True
    assert second["dump_scheduled"] is False
    # every process's own files are gone when it stops
    assert sorted(p.name for p in directory.iterdir()) == [ARCHIVE, ARCHIVE_INFO]
    print(f"session + first job: {first['seconds']} s without the archive, "
          f"{second['seconds']} s with it")
