"""The Spark session's conf (``spark_conf``): where a local-mode driver binds, and where the
connector jars go."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafka_mirror.engine.session import spark_conf


def test_a_local_driver_stays_on_loopback_by_default() -> None:
    conf = spark_conf({}, {"spark.master": "local[1]"}, [])
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"


def test_a_local_driver_given_its_address_binds_there() -> None:
    # a host's address given (as the collection's mirror_spark_driver_host does): bound to
    # loopback, the driver would refuse its own executor's download of the connector jars
    conf = spark_conf({}, {"spark.master": "local[1]", "spark.driver.host": "10.77.0.31"}, [])
    assert conf["spark.driver.host"] == "10.77.0.31"
    assert "spark.driver.bindAddress" not in conf


def test_an_explicit_bind_address_is_kept() -> None:
    conf = spark_conf({"spark.driver.bindAddress": "0.0.0.0"},
                      {"spark.master": "local[1]", "spark.driver.host": "10.77.0.31"}, [])
    assert (conf["spark.driver.host"], conf["spark.driver.bindAddress"]) == ("10.77.0.31",
                                                                             "0.0.0.0")


def test_a_cluster_driver_gets_no_loopback_address() -> None:
    conf = spark_conf({}, {"spark.master": "spark://10.77.0.31:7077"}, [])
    assert "spark.driver.host" not in conf and "spark.driver.bindAddress" not in conf


JARS = [Path("/opt/lib/kafka-clients.jar"), Path("/opt/lib/spark-sql-kafka.jar")]


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[4,3]"])
def test_local_mode_puts_the_jars_on_the_driver_class_path(master: str) -> None:
    # the tasks run in the driver's JVM: its class path (which class data sharing maps) holds
    # them, and no executor copies them
    conf = spark_conf({}, {"spark.master": master}, JARS)
    assert conf["spark.driver.extraClassPath"] == os.pathsep.join(str(j) for j in JARS)
    assert "spark.jars" not in conf


def test_the_users_own_class_path_and_jars_are_kept_in_local_mode() -> None:
    conf = spark_conf({"spark.driver.extraClassPath": "/site/policy.jar",
                       "spark.jars": "/site/udf.jar"}, {"spark.master": "local[2]"}, JARS)
    assert conf["spark.driver.extraClassPath"].split(os.pathsep) == [
        *(str(j) for j in JARS), "/site/policy.jar"]
    assert conf["spark.jars"] == "/site/udf.jar"


@pytest.mark.parametrize("master", ["spark://10.77.0.31:7077", "local-cluster[1,1,1024]",
                                    "yarn", "k8s://https://10.77.0.1:6443"])
def test_executors_of_their_own_get_the_jars_through_spark(master: str) -> None:
    conf = spark_conf({"spark.jars": "/site/udf.jar"}, {"spark.master": master}, JARS)
    assert conf["spark.jars"].split(",") == [*(str(j) for j in JARS), "/site/udf.jar"]
    assert "spark.driver.extraClassPath" not in conf


def test_the_driver_logs_with_kafka_mirrors_log4j_config_unless_the_user_names_one() -> None:
    from kafka_mirror.engine.session import JIT_OPTIONS, LOG4J_CONFIG

    jit = " ".join(JIT_OPTIONS)
    option = f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}"
    assert LOG4J_CONFIG.is_file()
    text = LOG4J_CONFIG.read_text(encoding="utf-8")
    assert "rootLogger.level = warn" in text
    assert "logger.nativecode.name = org.apache.hadoop.util.NativeCodeLoader" in text
    assert spark_conf({}, {}, [])["spark.driver.defaultJavaOptions"] == f"{jit} {option}"
    kept = spark_conf({"spark.driver.defaultJavaOptions": "-Xss4m"}, {}, [])
    assert kept["spark.driver.defaultJavaOptions"] == f"{jit} -Xss4m {option}"
    for key in ("spark.driver.defaultJavaOptions", "spark.driver.extraJavaOptions"):
        for own in ("-Dlog4j2.configurationFile=file:/etc/kafka-mirror/log4j2.properties",
                    "-Xss4m -Dlog4j.configurationFile=/etc/log4j2.xml",
                    "-Dlog4j.configuration=file:/etc/log4j.properties"):
            got = spark_conf({key: own}, {}, [])
            assert got[key] == (own if key == "spark.driver.extraJavaOptions" else f"{jit} {own}")
            assert option not in " ".join(got.values())
    # another log4j property is no configuration of the user's
    lookups = spark_conf({"spark.driver.extraJavaOptions": "-Dlog4j2.formatMsgNoLookups=true"},
                         {}, [])
    assert lookups["spark.driver.defaultJavaOptions"] == f"{jit} {option}"


def test_the_driver_s_c2_compiles_later_unless_the_user_says_otherwise() -> None:
    from kafka_mirror.engine.session import JIT_OPTIONS

    # ten times JDK 17's thresholds (5000 invocations, 40000 loop iterations)
    assert "-XX:Tier4InvocationThreshold=50000" in JIT_OPTIONS
    assert "-XX:Tier4BackEdgeThreshold=400000" in JIT_OPTIONS
    options = spark_conf({"spark.driver.defaultJavaOptions": "-XX:Tier4InvocationThreshold=5000"},
                         {}, [])["spark.driver.defaultJavaOptions"].split()
    # HotSpot takes a flag's last value: the user's, after kafka-mirror's
    assert options.index("-XX:Tier4InvocationThreshold=5000") > options.index(
        "-XX:Tier4InvocationThreshold=50000")
    # Spark puts spark.driver.extraJavaOptions after the default options: left as given
    extra = spark_conf({"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}, {}, [])
    assert extra["spark.driver.extraJavaOptions"] == "-XX:TieredStopAtLevel=1"
    # local mode: the tasks run in the driver's JVM, there is no executor of its own
    assert "spark.executor.defaultJavaOptions" not in extra


@pytest.mark.parametrize("master", ["spark://10.77.0.1:7077", "yarn", "local-cluster[2,1,1024]"])
def test_executors_of_their_own_get_the_same_c2_thresholds(master: str) -> None:
    from kafka_mirror.engine.session import JIT_OPTIONS

    conf = spark_conf({"spark.executor.defaultJavaOptions": "-XX:+UseZGC"},
                      {"spark.master": master}, [])
    assert conf["spark.executor.defaultJavaOptions"].split() == [*JIT_OPTIONS, "-XX:+UseZGC"]
    assert conf["spark.driver.defaultJavaOptions"].split()[:len(JIT_OPTIONS)] == list(JIT_OPTIONS)


def test_adaptive_execution_is_off_unless_the_user_turns_it_on() -> None:
    # Spark turns it off for streaming queries anyway, warning at every start while it is on
    assert spark_conf({}, {}, [])["spark.sql.adaptive.enabled"] == "false"
    assert spark_conf({"spark.sql.adaptive.enabled": "true"}, {},
                      [])["spark.sql.adaptive.enabled"] == "true"


def test_session_extensions_on_the_class_path_are_left_out_unless_asked_for() -> None:
    key = "spark.sql.extensions.test.loadFromCp"
    assert spark_conf({}, {}, [])[key] == "false"
    assert spark_conf({key: "true"}, {}, [])[key] == "true"
