"""librdkafka's messages go through Python logging, at their level, naming the client: none is
written past the logging set-up (librdkafka's own ``%3|...|FAIL|...`` lines on stderr). A broker
connection that failed (facility FAIL, librdkafka's level 3) is a WARNING, as Kafka's Java
clients log it: a broker restart is no error of the mirror's."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror.kafka.clients import control_producer_config

# nothing listens on port 1 of the loopback: every connection attempt fails at once
CONFIG = """clusters = A, B
A.bootstrap.servers = 127.0.0.1:1
B.bootstrap.servers = 127.0.0.1:1
A.reconnect.backoff.ms = 50
A->B.enabled = true
"""


def _failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "kafka_mirror.librdkafka"
            and "Connection refused" in r.getMessage()]


def test_a_producers_connection_failures_are_logged_as_warnings_naming_the_client(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str],
) -> None:
    cluster = mm2_from_text(CONFIG).clusters["A"]
    producer = Producer(control_producer_config(cluster))
    caplog.set_level(logging.DEBUG, "kafka_mirror.librdkafka")
    deadline = time.monotonic() + 20
    while not _failures(caplog) and time.monotonic() < deadline:
        producer.poll(0.2)
    (first, *_) = _failures(caplog)
    assert first.levelno == logging.WARNING  # librdkafka's level 3 (LOG_ERR), facility FAIL
    assert first.getMessage().startswith("cluster 'A' producer: FAIL [rdkafka#producer-")
    assert "%3|" not in capfd.readouterr().err


def test_an_admin_clients_messages_are_served_at_its_next_call(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str],
) -> None:
    """An AdminClient serves its log queue only in poll(): ClusterAdmin's client serves it
    before every call."""
    caplog.set_level(logging.DEBUG, "kafka_mirror.librdkafka")
    admin = ClusterAdmin(mm2_from_text(CONFIG).clusters["A"])
    assert not isinstance(admin.client, AdminClient)  # the serving wrapper
    deadline = time.monotonic() + 20
    while not _failures(caplog) and time.monotonic() < deadline:
        time.sleep(0.2)
        admin.client.list_topics  # noqa: B018 (an attribute read serves the queue)
    (first, *_) = _failures(caplog)
    assert first.getMessage().startswith("cluster 'A' admin: FAIL [rdkafka#producer-")
    assert "%3|" not in capfd.readouterr().err


def test_other_messages_keep_their_level(caplog: pytest.LogCaptureFixture) -> None:
    from kafka_mirror.kafka.librdkafka import with_client_log

    caplog.set_level(logging.DEBUG, "kafka_mirror.librdkafka")
    logger = with_client_log({}, "cluster 'A' admin")["logger"]
    logger.log(logging.ERROR, "%s [%s] %s", "SSL", "rdkafka#producer-1", "handshake failed")
    logger.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#producer-1", "Connection refused")
    logger.log(logging.CRITICAL, "%s [%s] %s", "FAIL", "rdkafka#producer-1", "refused")
    logger.log(logging.INFO, "%s [%s] %s", "FAIL", "rdkafka#producer-1", "closed")
    logger.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#producer-1",
               "SASL authentication error: Authentication failed during authentication")
    logger.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#producer-1",
               "SSL handshake failed: certificate verify failed")
    seen = [r for r in caplog.records if r.name == "kafka_mirror.librdkafka"]
    assert [r.levelno for r in seen] == [logging.ERROR, logging.WARNING, logging.WARNING,
                                         logging.INFO, logging.ERROR, logging.ERROR]
    assert seen[0].getMessage() == "cluster 'A' admin: SSL [rdkafka#producer-1] handshake failed"


def test_a_producer_id_retried_while_a_coordinator_loads_is_no_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A cluster started a moment before answers a producer's first InitProducerId with
    COORDINATOR_LOAD_IN_PROGRESS, which librdkafka retries by itself (seen in every demo run)."""
    from kafka_mirror.kafka.librdkafka import with_client_log

    caplog.set_level(logging.DEBUG, "kafka_mirror.librdkafka")
    logger = with_client_log({}, "cluster 'B' producer")["logger"]
    for text in ("Failed to acquire transactional PID from broker TxnCoordinator/1: Broker: "
                 "Coordinator load in progress: retrying",
                 "Failed to acquire idempotence PID from broker 127.0.0.1:9092/1: Broker: "
                 "Coordinator load in progress: retrying",
                 # not retried, or another cause: librdkafka's level stays
                 "Failed to acquire transactional PID from broker TxnCoordinator/1: Broker: "
                 "Coordinator load in progress",
                 "Failed to acquire idempotence PID from broker 127.0.0.1:9092/1: Broker: "
                 "Cluster authorization failed: retrying"):
        logger.log(logging.WARNING, "%s [%s] %s", "GETPID", "rdkafka#producer-5", text)
    logger.log(logging.WARNING, "%s [%s] %s", "REQERR", "rdkafka#producer-5",
               "Coordinator load in progress: retrying")
    seen = [r for r in caplog.records if r.name == "kafka_mirror.librdkafka"]
    assert [r.levelno for r in seen] == [logging.INFO, logging.INFO, logging.WARNING,
                                         logging.WARNING, logging.WARNING]
    assert seen[0].getMessage().startswith("cluster 'B' producer: GETPID [rdkafka#producer-5] ")
