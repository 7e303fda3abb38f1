"""Shared pytest fixtures: two real local Kafka clusters (``source`` and ``destination``), a
Spark session in the test's process (per module).

They are started once per test session from the jars built by
``mvn -q -f jvm/pom.xml package -DskipTests`` and stopped (by PID) at the end of the session.
Tests using them should carry ``@pytest.mark.kafka``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mirror_process import running

from kafka_mirror_testing import kafka_class_data
from kafka_mirror_testing.localcluster import LocalKafkaCluster
from kafka_mirror_testing.quick_jvms import use_quick_start_jvms

BROKER_HEAP = "512m"

# every broker, Kafka tool, stock MM2 and test mirror's Spark driver of this suite: C1 only
use_quick_start_jvms()


def pytest_configure(config: pytest.Config) -> None:
    """The class data archive of Kafka's class path, named in the environment of this process
    before its test workers start (they inherit it); the test command has usually built it."""
    if not hasattr(config, "workerinput"):
        kafka_class_data.prime()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``xdist_group`` marks keep their tests on one worker again (``--dist loadgroup``):
    pytest-xdist 3.8 names the group in ``item._nodeid``, which pytest 9 no longer reads (its
    node ids are ``item._id``), so the groups were silently ignored and, for one, the 3-node fault
    suite ran on every worker at once. The same suffix, set where pytest 9 reads it."""
    if not getattr(config.option, "loadgroup", False):
        return
    from _pytest.nodeid import coerce_node_id

    for item in items:
        names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                        for mark in item.iter_markers("xdist_group")})
        if names and "@" not in item.nodeid.rsplit("]", 1)[-1]:
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(names)}")  # type: ignore[attr-defined]


def kafka_admin(cluster: LocalKafkaCluster) -> Any:
    """A confluent-kafka AdminClient for ``cluster``."""
    return cluster.admin()


@pytest.fixture(scope="session")
def kafka_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kafka")


@pytest.fixture(scope="session")
def kafka_clusters(kafka_workdir: Path) -> Iterator[dict[str, LocalKafkaCluster]]:
    """Both clusters, started in parallel (each start is mostly JVM warm-up)."""
    clusters = {
        name: LocalKafkaCluster(name, kafka_workdir, heap=BROKER_HEAP)
        for name in ("source", "destination")
    }
    with running(list(clusters.values())):
        yield clusters


@pytest.fixture(scope="session")
def source_cluster(kafka_clusters: dict[str, LocalKafkaCluster]) -> LocalKafkaCluster:
    return kafka_clusters["source"]


@pytest.fixture(scope="session")
def destination_cluster(kafka_clusters: dict[str, LocalKafkaCluster]) -> LocalKafkaCluster:
    return kafka_clusters["destination"]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A session in this process; PySpark's hook into py4j's calls (which turns Java exceptions
    into its own, for every gateway of the process) is taken back afterwards, so later tests
    in this worker that call a JVM of their own see py4j's errors."""
    import py4j.java_gateway

    from kafka_mirror.engine.session import build_session, connector_jars, spark_conf

    unhooked = py4j.java_gateway.get_return_value
    session = build_session(spark_conf({"spark.master": "local[1]"}, {}, connector_jars(None)))
    try:
        yield session
    finally:
        session.stop()
        py4j.java_gateway.get_return_value = unhooked


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test (the clusters are shared by the whole session)."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60].strip("-")
    return f"{base}-{uuid.uuid4().hex[:8]}"
