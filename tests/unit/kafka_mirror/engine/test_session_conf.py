"""The Spark session's conf (``spark_conf``): where a local-mode driver binds."""

from __future__ import annotations

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
