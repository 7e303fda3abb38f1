"""Helpers shared by the Molecule verifiers (testinfra runs them with pytest)."""

import os
import time

import pytest

BRIDGE_IP = os.environ.get("MOL_BRIDGE_IP", "10.77.0.1")
DESTINATION = f"{BRIDGE_IP}:19192"


def _read_mirrored(topic, sent, group, timeout, **conf):
    """Consume ``topic`` on the destination until every key of ``sent`` arrived (or timeout).

    Returns {key: partition} of the records seen whose key is in ``sent``.
    """
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": DESTINATION, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **conf})
    consumer.subscribe([topic])
    got = {}
    deadline = time.time() + timeout
    try:
        while time.time() < deadline and len(got) < len(sent):
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            if msg.key() in sent:
                got[msg.key()] = msg.partition()
    finally:
        consumer.close()
    return got


@pytest.fixture
def read_mirrored():
    return _read_mirrored
