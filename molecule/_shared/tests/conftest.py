"""Helpers shared by the Molecule verifiers (testinfra runs them with pytest)."""

import contextlib
import os
import subprocess
import sys
import threading
import time
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))   # molecule/_shared: releases.py

BRIDGE_IP = os.environ.get("MOL_BRIDGE_IP", "10.77.0.1")
SOURCE = f"{BRIDGE_IP}:19092"
DESTINATION = f"{BRIDGE_IP}:19192"


def _read_mirrored(topic, sent, group, timeout, copies=None, **conf):
    """Consume ``topic`` on the destination until every key of ``sent`` arrived (or timeout).

    Returns {key: partition} of the records seen whose key is in ``sent``. With ``copies`` (a dict),
    every copy of each is counted there, the topic read to its end.
    """
    from confluent_kafka import Consumer, KafkaError

    consumer = Consumer({"bootstrap.servers": DESTINATION, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "enable.partition.eof": copies is not None, **conf})
    consumer.subscribe([topic])
    got, at_end = {}, set()
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            if len(got) == len(sent) and (copies is None or at_end >= {p.partition for p in consumer.assignment()}):
                break
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                continue
            at_end.discard(msg.partition())
            if msg.key() in sent:
                got[msg.key()] = msg.partition()
                if copies is not None:
                    copies[msg.key()] = copies.get(msg.key(), 0) + 1
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


def _site(*args, timeout=1500):
    """kafka.mirror.site (the scenarios' converge playbook) on the scenario's hosts, with ``args``."""
    inventory = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
    playbook = os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "_shared", "converge.yml")
    began = time.monotonic()
    run = subprocess.run(["ansible-playbook", "-i", inventory, playbook, "-e", "kafka_mirror_restart_pause=3", *args],
                         capture_output=True, text=True, timeout=timeout, check=False)
    print(f"site {' '.join(args)}: {time.monotonic() - began:.0f} s")   # where the test's time goes (-s)
    return run


@pytest.fixture
def site():
    return _site
