"""The driver's launch records (kafka_mirror.engine.driver_launch): what names a record, what is
kept of a driver started through spark-submit, and a record that does not start."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafka_mirror.engine.driver_launch import (
    RECORD_SUFFIX,
    DriverLaunch,
    pyspark_module,
    submit_args,
)


@pytest.fixture
def conf_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "spark-conf"
    directory.mkdir()
    monkeypatch.setenv("SPARK_CONF_DIR", str(directory))
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    return directory


def test_pyspark_s_arguments_for_a_conf(conf_dir: Path) -> None:
    assert submit_args({"spark.master": "local[2]", "spark.app.name": "a b"}) == [
        "--conf", "spark.master=local[2]", "--conf", "spark.app.name=a b", "pyspark-shell"]


def test_a_record_is_named_by_every_input_but_the_volatile_values(
        tmp_path: Path, conf_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = submit_args({"spark.driver.defaultJavaOptions": "-XX:DumpLoadedClassList=/d/1.list"})
    key = DriverLaunch(tmp_path, volatile=["/d/1.list"]).key(args)
    other_start = submit_args({"spark.driver.defaultJavaOptions":
                               "-XX:DumpLoadedClassList=/d/2.list"})
    assert DriverLaunch(tmp_path, volatile=["/d/2.list"]).key(other_start) == key
    launch = DriverLaunch(tmp_path, volatile=["/d/1.list"])
    assert launch.key([*args[:-1], "--conf", "spark.master=local[1]", "pyspark-shell"]) != key
    with monkeypatch.context() as changed:  # the test command sets it for its own JVMs
        changed.setenv("SPARK_SUBMIT_OPTS", "-Dx=1")
        assert launch.key(args) != key
    monkeypatch.setenv("UNRELATED_TO_SPARK", "1")  # e.g. systemd's INVOCATION_ID
    assert launch.key(args) == key
    (conf_dir / "spark-defaults.conf").write_text("spark.driver.memory 2g\n")
    assert launch.key(args) != key


def test_spark_env_sh_or_a_running_gateway_means_spark_submit_every_time(
        tmp_path: Path, conf_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    launch = DriverLaunch(tmp_path)
    assert launch.usable()
    (conf_dir / "spark-env.sh").write_text("SPARK_LOCAL_IP=$(hostname -i)\n")
    assert not launch.usable()
    assert launch.start(submit_args({})) is None
    (conf_dir / "spark-env.sh").unlink()
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")
    assert not launch.usable()


def fake_driver(bin_dir: Path) -> subprocess.Popen[bytes]:
    """A process whose executable is called ``java``, started as spark-class leaves the driver:
    with variables the scripts set (and bash's own) and one they removed."""
    java = bin_dir / "java"
    bin_dir.mkdir()
    shutil.copy(shutil.which("sh") or "/bin/sh", java)
    env = {k: v for k, v in os.environ.items() if k != "SPARK_GONE"}
    env |= {"SPARK_ENV_LOADED": "1", "SPARK_SCALA_VERSION": "2.13", "PWD": "/somewhere"}
    proc = subprocess.Popen([str(java), "-c", "sleep 600; :",
                             "-XX:DumpLoadedClassList=/d/7.list"], env=env)
    deadline = time.monotonic() + 10
    # until exec is done: the executable is java and the new program's arguments are in place
    while Path(os.readlink(f"/proc/{proc.pid}/exe")).name != "java" or \
            not Path(f"/proc/{proc.pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline, "the fake driver did not start"
        time.sleep(0.01)
    return proc


def test_the_command_and_environment_spark_submit_gave_the_driver_are_kept(
        tmp_path: Path, conf_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_GONE", "x")
    directory = tmp_path / "launch"
    launch = DriverLaunch(directory, volatile=["/d/7.list"])
    args = submit_args({"spark.master": "local[2]"})
    assert launch.start(args) is None  # no record: the start goes through spark-submit
    with fake_driver(tmp_path / "bin") as driver:
        try:
            launch.record(driver.pid)
            path = directory / f"{launch.key(args)}{RECORD_SUFFIX}"
            assert path.exists()
            # a record only after a start that found none
            path.unlink()
            launch.record(driver.pid)
            assert not path.exists()
        finally:
            driver.kill()
    launch.start(args)
    with fake_driver(tmp_path / "bin2") as driver:
        try:
            launch.record(driver.pid)
        finally:
            driver.kill()
    (path,) = directory.glob(f"*{RECORD_SUFFIX}")
    assert path.name == f"{launch.key(args)}{RECORD_SUFFIX}"
    assert path.stat().st_mode & 0o777 == 0o600
    record = json.loads(path.read_text())
    assert record["command"] == [str(tmp_path / "bin2" / "java"), "-c", "sleep 600; :",
                                 "-XX:DumpLoadedClassList=<volatile 0>"]
    # bash's own variables are not the scripts' settings
    assert record["env"] == {"SPARK_ENV_LOADED": "1", "SPARK_SCALA_VERSION": "2.13"}
    assert "SPARK_GONE" in record["unset"]


def test_a_process_that_is_not_a_jvm_is_not_kept(tmp_path: Path, conf_dir: Path) -> None:
    launch = DriverLaunch(tmp_path / "launch")
    assert launch.start(submit_args({})) is None
    with subprocess.Popen(["sleep", "600"]) as proc:
        launch.record(proc.pid)
        proc.kill()
    assert not (tmp_path / "launch").exists()


@pytest.mark.parametrize("java", ["exits", "not executable"])
def test_a_kept_command_that_does_not_start_is_deleted(tmp_path: Path, conf_dir: Path,
                                                       java: str) -> None:
    directory = tmp_path / "launch"
    directory.mkdir()
    launch = DriverLaunch(directory)
    args = submit_args({"spark.master": "local[2]"})
    path = directory / f"{launch.key(args)}{RECORD_SUFFIX}"
    command = shutil.which("false") or "/bin/false"
    if java == "not executable":
        command = str(tmp_path / "java")
        Path(command).write_text("")
    path.write_text(json.dumps({"command": [command], "env": {}, "unset": []}))
    assert launch.start(args) is None
    assert not path.exists()
    assert "PYSPARK_GATEWAY_PORT" not in os.environ
    path.write_text("{torn")
    assert launch.start(args) is None


def test_a_kept_command_starts_before_pyspark_is_imported(tmp_path: Path, conf_dir: Path) -> None:
    """The driver's JVM runs while PySpark is imported (about 0.1 s of a start): naming the
    record and starting its command import no part of PySpark. In a process of its own, where
    nothing imported PySpark yet."""
    directory = tmp_path / "launch"
    program = f"""
import sys
from pathlib import Path
from kafka_mirror.engine.driver_launch import RECORD_SUFFIX, DriverLaunch, submit_args
launch = DriverLaunch(Path({str(directory)!r}))
args = submit_args({{"spark.master": "local[2]"}})
path = Path({str(directory)!r}) / f"{{launch.key(args)}}{{RECORD_SUFFIX}}"
path.parent.mkdir()
path.write_text('{{"command": ["/bin/sh", "-c", "sleep 0.5"], "env": {{}}, "unset": []}}')
started = launch.begin(args)
assert started is not None and started.proc.poll() is None, "the kept command did not start"
assert not any(m == "pyspark" or m.startswith("pyspark.") for m in sys.modules), "imported"
assert started.join() is None  # it exits without a gateway: the record goes
assert not path.exists()
print("ok")
"""
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, SPARK_CONF_DIR=str(conf_dir)))
    assert run.stdout.strip() == "ok", run.stderr[-2000:]


def test_pyspark_s_own_small_modules_are_the_package_s_once_it_is_imported() -> None:
    import pyspark
    import pyspark.find_spark_home

    assert pyspark_module("version").__version__ == pyspark.__version__
    assert pyspark_module("find_spark_home") is pyspark.find_spark_home
