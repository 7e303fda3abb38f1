"""The Spark driver started from the command spark-submit's scripts built at an earlier start
(kafka_mirror.engine.driver_launch), with a real PySpark and JVM: the first start goes through
spark-submit and keeps the command, the next one runs it itself, with this start's own values."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from kafka_mirror.engine.driver_launch import RECORD_SUFFIX
from kafka_mirror_testing.python_runs import run_json_script

# One driver JVM per process: each start is a Python process of its own, as the mirror is.
START = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    from pyspark import SparkContext
    from kafka_mirror.engine.driver_launch import DriverLaunch
    from kafka_mirror.engine.session import build_session, connector_jars, spark_conf
    own = f"start-{os.getpid()}"  # changes at every start, as the class list's name does
    conf = spark_conf({"spark.master": "local[2]", "spark.driver.memory": "512m",
                       "spark.kafkamirror.test.start": own}, {}, connector_jars(None))
    spark = build_session(conf, DriverLaunch(Path(sys.argv[1]), volatile=[own]))
    rows = spark.range(0, 100, 1, 2).selectExpr("id * 2 AS x").groupBy().sum("x").collect()
    proc = SparkContext._gateway.proc
    system = spark.sparkContext._jvm.java.lang.System
    print(json.dumps({"launched": proc.args[0], "sum": rows[0][0],
                      "property": system.getProperty("spark.kafkamirror.test.start"),
                      "own": own, "memory": spark.sparkContext._jvm.java.lang.Runtime
                      .getRuntime().maxMemory()}))
    spark.stop()
""")


def _start(directory: Path) -> dict[str, object]:
    return run_json_script(START, str(directory), timeout=300)


@pytest.mark.spark
def test_a_restart_runs_the_command_spark_submit_built_for_the_same_settings(
        tmp_path: Path) -> None:
    directory = tmp_path / "launch"
    first = _start(directory)
    assert Path(str(first["launched"])).name == "spark-submit"
    (record,) = directory.glob(f"*{RECORD_SUFFIX}")
    kept = json.loads(record.read_text())
    assert Path(kept["command"][0]).name == "java"
    assert first["own"] not in record.read_text()  # the volatile value is a placeholder

    second = _start(directory)
    # the JVM itself, not spark-submit, with this start's own value where the first one had its
    assert Path(str(second["launched"])).name == "java"
    assert second["property"] == second["own"] != first["own"]
    assert second["sum"] == first["sum"] == 9900
    assert second["memory"] == first["memory"]  # -Xmx512m from spark.driver.memory, as built

    # a record whose command no longer starts is dropped, and the start goes through
    # spark-submit (which keeps a new one)
    kept["command"][0] = str(tmp_path / "gone" / "java")
    record.write_text(json.dumps(kept))
    third = _start(directory)
    assert Path(str(third["launched"])).name == "spark-submit"
    assert Path(json.loads(record.read_text())["command"][0]).name == "java"
