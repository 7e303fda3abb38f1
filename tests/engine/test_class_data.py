"""Class data sharing for the Spark driver's JVM (kafka_mirror.engine.class_data): a run writes
its class list, an archive is built from it, and the next start maps the classes from it, a JVM
with a class file hook (JFR started with it, a Java agent that transforms classes) included."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from kafka_mirror.engine.class_data import (
    ARCHIVE,
    ARCHIVE_INFO,
    JAVA_OPTIONS_KEY,
    ClassData,
    archived_classes,
)
from kafka_mirror.jvm_artifacts import java_executable
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


def test_the_archive_is_built_from_complete_lines_without_generated_species() -> None:
    listed = ("java/lang/Object id: 0\n"
              "@lambda-form-invoker [SPECIES_RESOLVE] "
              "java.lang.invoke.BoundMethodHandle$Species_LL\n"
              "java/lang/invoke/BoundMethodHandle$Species_LL\n"
              "@lambda-form-invoker [LF_RESOLVE] java.lang.invoke.Invokers$Holder invoker L3_L\n"
              "org/apache/spark/Spark")
    assert archived_classes(listed) == (
        "java/lang/Object id: 0\n"
        "java/lang/invoke/BoundMethodHandle$Species_LL\n"
        "@lambda-form-invoker [LF_RESOLVE] java.lang.invoke.Invokers$Holder invoker L3_L\n")


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
    given = {"spark.driver.extraJavaOptions": sys.argv[3]} if len(sys.argv) > 3 else {}
    conf = data.spark_conf(spark_conf({"spark.master": "local[2]", "spark.driver.memory": "512m",
                                       **given}, {}, connector_jars(None)))
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


def _start(directory: Path, step: str, *java_options: str) -> dict[str, object]:
    """One start in a session of its own (the archive's builder, a JVM at the lowest CPU
    priority, goes with it on a timeout), the driver given ``java_options``."""
    return run_json_script(START, str(directory), step, *java_options, timeout=600)


AGENT = """
package kafkamirror.test;
import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;
import java.security.ProtectionDomain;
/** Sees every class the JVM loads and changes none, as a tracing agent's hook does. */
public final class SeeingAgent {
  public static void premain(String args, Instrumentation instrumentation) {
    instrumentation.addTransformer(new ClassFileTransformer() {
      @Override
      public byte[] transform(ClassLoader loader, String name, Class<?> redefined,
          ProtectionDomain domain, byte[] bytes) {
        return null;
      }
    });
  }
}
"""


def _agent_jar(directory: Path) -> Path:
    """A Java agent that hooks every class load (compiled with the JDK the mirror runs on)."""
    bin_dir = Path(java_executable()).resolve().parent
    source = directory / "src" / "kafkamirror" / "test" / "SeeingAgent.java"
    source.parent.mkdir(parents=True)
    source.write_text(AGENT, encoding="utf-8")
    classes = directory / "classes"
    subprocess.run([str(bin_dir / "javac"), "-d", str(classes), str(source)], check=True)
    manifest = directory / "manifest.txt"
    manifest.write_text("Premain-Class: kafkamirror.test.SeeingAgent\n", encoding="utf-8")
    jar = directory / "seeing-agent.jar"
    subprocess.run([str(bin_dir / "jar"), "cfm", str(jar), str(manifest), "-C", str(classes),
                    "."], check=True)
    return jar


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
    # a JVM that hands every class it loads to a hook maps it too (Java 17 crashed on the
    # method handle species an archive held: SIGSEGV in check_shared_class_file_load_hook)
    hooked = _start(directory, "none", f"-javaagent:{_agent_jar(tmp_path / 'agent')}")
    assert hooked["used_archive"] is True and hooked["sharing"] is True
    print(f"session + first job: {first['seconds']} s without the archive, "
          f"{second['seconds']} s with it")
