"""Helpers shared by the Molecule verifiers (testinfra runs them with pytest)."""

import contextlib
import os
import threading
import time
import uuid

import pytest

BRIDGE_IP = os.environ.get("MOL_BRIDGE_IP", "10.77.0.1")
SOURCE = f"{BRIDGE_IP}:19092"
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


@contextlib.contextmanager
def _producing(topic, pause=0.01, partitions=3):
    """Produce keyed records into ``topic`` on the source, round-robin over ``partitions``, from a
    thread, for as long as the block runs (2 s before it and after it included); yields the
    {key: partition} of every record sent, complete once the block is left (all delivered)."""
    from confluent_kafka import Producer

    marker = uuid.uuid4().hex
    sent, stop, failures = {}, threading.Event(), []

    def produce():
        # idempotent: a retried produce request never writes a record twice on the source
        producer = Producer({"bootstrap.servers": SOURCE, "linger.ms": 5, "enable.idempotence": True})
        i = 0
        while not stop.is_set():
            key = f"{marker}-{i}".encode()
            producer.produce(topic, key=key, value=b"r%d" % i, partition=i % partitions)
            sent[key] = i % partitions
            i += 1
            producer.poll(0)
            time.sleep(pause)
        if producer.flush(30) != 0:
            failures.append("records not delivered to the source")

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        time.sleep(2)
        yield sent
        time.sleep(2)
    finally:
        stop.set()
        thread.join()
    assert not failures, failures


@pytest.fixture
def producing():
    return _producing


def _inventory_host(name):
    """Another host of the scenario's inventory (testinfra, with sudo)."""
    import testinfra

    return testinfra.get_host(f"ansible://{name}", ansible_inventory=os.environ["MOLECULE_INVENTORY_FILE"],
                              sudo=True)


@pytest.fixture
def inventory_host():
    return _inventory_host
